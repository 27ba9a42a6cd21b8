/* rtnetlink RTM_GETROUTE (route.h). */
#include "tools/doctor/route.h"

#include <errno.h>
#include <linux/netlink.h>
#include <linux/rtnetlink.h>
#include <netinet/in.h>
#include <stdint.h>
#include <string.h>
#include <sys/time.h>
#include <unistd.h>

struct route_req {
  struct nlmsghdr nh;
  struct rtmsg rt;
  char attrs[64];
};

static const void *route_addr_bytes(const struct sockaddr_storage *a, int *len) {
  if (a->ss_family == AF_INET) {
    *len = 4;
    return &((const struct sockaddr_in *)a)->sin_addr;
  }
  *len = 16;
  return &((const struct sockaddr_in6 *)a)->sin6_addr;
}

static void route_add_attr(struct route_req *r, int type, const void *data, int len) {
  struct rtattr *rta = (struct rtattr *)((char *)r + NLMSG_ALIGN(r->nh.nlmsg_len));

  rta->rta_type = (unsigned short)type;
  rta->rta_len = (unsigned short)RTA_LENGTH(len);
  memcpy(RTA_DATA(rta), data, (size_t)len);
  r->nh.nlmsg_len = NLMSG_ALIGN(r->nh.nlmsg_len) + RTA_ALIGN(rta->rta_len);
}

/* The answer to our request: the route, or the kernel's error. */
static int route_parse(const char *buf, ssize_t n, struct rail_route *out) {
  for (const struct nlmsghdr *nh = (const struct nlmsghdr *)buf; NLMSG_OK(nh, (size_t)n);
       nh = NLMSG_NEXT(nh, n)) {
    if (nh->nlmsg_type == NLMSG_ERROR) {
      const struct nlmsgerr *e = NLMSG_DATA(nh);
      return e->error < 0 ? e->error : -EPROTO;
    }
    if (nh->nlmsg_type == RTM_NEWROUTE) {
      const struct rtmsg *rt = NLMSG_DATA(nh);
      int len = (int)RTM_PAYLOAD(nh);
      memset(out, 0, sizeof(*out));
      out->type = rt->rtm_type;
      for (const struct rtattr *a = RTM_RTA(rt); RTA_OK(a, len); a = RTA_NEXT(a, len))
        if (a->rta_type == RTA_OIF && RTA_PAYLOAD(a) >= sizeof(int))
          if_indextoname((unsigned)*(const int *)RTA_DATA(a), out->oif);
      return 0;
    }
  }
  return -EPROTO;
}

int rail_route_get(const struct sockaddr_storage *dst, const struct sockaddr_storage *src,
                   struct rail_route *out) {
  struct route_req req;
  struct sockaddr_nl kernel = {.nl_family = AF_NETLINK};
  struct timeval tv = {.tv_sec = 2};
  char buf[8192];
  int fd, len, rc;
  const void *bytes;
  ssize_t n;

  memset(&req, 0, sizeof(req));
  req.nh.nlmsg_len = NLMSG_LENGTH(sizeof(struct rtmsg));
  req.nh.nlmsg_type = RTM_GETROUTE;
  req.nh.nlmsg_flags = NLM_F_REQUEST;
  req.nh.nlmsg_seq = 1;
  req.rt.rtm_family = (unsigned char)dst->ss_family;
  bytes = route_addr_bytes(dst, &len);
  req.rt.rtm_dst_len = (unsigned char)(len * 8);
  route_add_attr(&req, RTA_DST, bytes, len);
  if (src != NULL && src->ss_family == dst->ss_family) {
    bytes = route_addr_bytes(src, &len);
    req.rt.rtm_src_len = (unsigned char)(len * 8);
    route_add_attr(&req, RTA_SRC, bytes, len);
  }
  fd = socket(AF_NETLINK, SOCK_RAW | SOCK_CLOEXEC, NETLINK_ROUTE);
  if (fd < 0) return -errno;
  setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
  if (sendto(fd, &req, req.nh.nlmsg_len, 0, (struct sockaddr *)&kernel, sizeof(kernel)) < 0) {
    rc = -errno;
    goto close_fd;
  }
  n = recv(fd, buf, sizeof(buf), 0);
  rc = n < 0 ? -errno : route_parse(buf, n, out);
close_fd:
  close(fd);
  return rc;
}

const char *rail_route_type_name(int type) {
  switch (type) {
  case RTN_UNICAST:
    return "unicast";
  case RTN_LOCAL:
    return "local";
  case RTN_BLACKHOLE:
    return "blackhole";
  case RTN_UNREACHABLE:
    return "unreachable";
  case RTN_PROHIBIT:
    return "prohibit";
  default:
    return "other";
  }
}
