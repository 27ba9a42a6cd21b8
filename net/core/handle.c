#include "net/core/handle.h"

#include <errno.h>
#include <netinet/in.h>
#include <string.h>
#include <sys/random.h>
#include <time.h>
#include <unistd.h>

#include "common/log.h"

/* ---- little-endian fields ------------------------------------------------ */

static void rail_put32(uint8_t *p, uint32_t v) {
  for (int i = 0; i < 4; i++)
    p[i] = (uint8_t)(v >> (8 * i));
}
static void rail_put64(uint8_t *p, uint64_t v) {
  for (int i = 0; i < 8; i++)
    p[i] = (uint8_t)(v >> (8 * i));
}
static uint32_t rail_get32(const uint8_t *p) {
  uint32_t v = 0;
  for (int i = 3; i >= 0; i--)
    v = (v << 8) | p[i];
  return v;
}
static uint64_t rail_get64(const uint8_t *p) {
  uint64_t v = 0;
  for (int i = 7; i >= 0; i--)
    v = (v << 8) | p[i];
  return v;
}

static void rail_fp_pack(const struct rail_topo_fp *fp, uint8_t *p) {
  p[0] = fp->version;
  p[1] = fp->ngpus;
  p[2] = fp->ngroups;
  p[3] = fp->nics_per_group;
  rail_put32(p + 4, fp->group_mbps);
  rail_put32(p + 8, fp->nic_mbps);
  rail_put32(p + 12, fp->hash);
}

static void rail_fp_unpack(const uint8_t *p, struct rail_topo_fp *fp) {
  fp->version = p[0];
  fp->ngpus = p[1];
  fp->ngroups = p[2];
  fp->nics_per_group = p[3];
  fp->group_mbps = rail_get32(p + 4);
  fp->nic_mbps = rail_get32(p + 8);
  fp->hash = rail_get32(p + 12);
}

/* ---- handle -------------------------------------------------------------------- */

#define RAIL_HANDLE_RAILS_OFF 32
#define RAIL_HANDLE_RAIL_BYTES 20
#define RAIL_HANDLE_STATE_OFF 112
#define RAIL_HANDLE_STATE_SALT 0x9e3779b97f4a7c15ull

_Static_assert(RAIL_HANDLE_RAILS_OFF + RAIL_NET_MAX_MEMBERS * RAIL_HANDLE_RAIL_BYTES <=
                   RAIL_HANDLE_STATE_OFF,
               "rail addresses overlap the connector state");
_Static_assert(RAIL_HANDLE_STATE_OFF + 16 == RAIL_NET_HANDLE_BYTES, "handle layout");

void rail_handle_pack(const struct rail_handle *h, void *buf) {
  uint8_t *p = buf;

  memset(p, 0, RAIL_NET_HANDLE_BYTES);
  rail_put32(p, RAIL_HANDLE_MAGIC);
  p[4] = h->version;
  p[5] = (uint8_t)h->nrails;
  p[6] = h->transport;
  rail_put64(p + 8, h->nonce);
  rail_fp_pack(&h->fp, p + 16);
  for (int r = 0; r < h->nrails && r < RAIL_NET_MAX_MEMBERS; r++) {
    uint8_t *e = p + RAIL_HANDLE_RAILS_OFF + r * RAIL_HANDLE_RAIL_BYTES;
    const struct sockaddr_storage *a = &h->rails[r];
    if (a->ss_family == AF_INET) {
      const struct sockaddr_in *in = (const struct sockaddr_in *)a;
      e[0] = 4;
      memcpy(e + 2, &in->sin_port, 2);
      memcpy(e + 4, &in->sin_addr, 4);
    } else if (a->ss_family == AF_INET6) {
      const struct sockaddr_in6 *in6 = (const struct sockaddr_in6 *)a;
      e[0] = 6;
      memcpy(e + 2, &in6->sin6_port, 2);
      memcpy(e + 4, &in6->sin6_addr, 16);
    }
  }
}

int rail_handle_unpack(const void *buf, struct rail_handle *h) {
  const uint8_t *p = buf;
  struct rail_handle out;

  memset(&out, 0, sizeof(out));
  if (rail_get32(p) != RAIL_HANDLE_MAGIC) return -EPROTO;
  if (p[4] != RAIL_HANDLE_VERSION) return -EPROTONOSUPPORT;
  out.version = p[4];
  out.nrails = p[5];
  out.transport = p[6];
  if (out.nrails < 1 || out.nrails > RAIL_NET_MAX_MEMBERS) return -EPROTO;
  out.nonce = rail_get64(p + 8);
  rail_fp_unpack(p + 16, &out.fp);
  for (int r = 0; r < out.nrails; r++) {
    const uint8_t *e = p + RAIL_HANDLE_RAILS_OFF + r * RAIL_HANDLE_RAIL_BYTES;
    if (e[0] == 4) {
      struct sockaddr_in *in = (struct sockaddr_in *)&out.rails[r];
      in->sin_family = AF_INET;
      memcpy(&in->sin_port, e + 2, 2);
      memcpy(&in->sin_addr, e + 4, 4);
    } else if (e[0] == 6) {
      struct sockaddr_in6 *in6 = (struct sockaddr_in6 *)&out.rails[r];
      in6->sin6_family = AF_INET6;
      memcpy(&in6->sin6_port, e + 2, 2);
      memcpy(&in6->sin6_addr, e + 4, 16);
    } else {
      return -EPROTO;
    }
  }
  out.conn_state = rail_handle_get_state(buf);
  *h = out;
  return 0;
}

uint64_t rail_handle_get_state(const void *buf) {
  const uint8_t *p = (const uint8_t *)buf + RAIL_HANDLE_STATE_OFF;
  uint64_t state = rail_get64(p), check = rail_get64(p + 8);

  /* The check binds the state to this handle's nonce, so a copy of the
   * handle that is not ours (or zeros) never looks like a live state. */
  if (state == 0 ||
      check != (state ^ rail_get64((const uint8_t *)buf + 8) ^ RAIL_HANDLE_STATE_SALT))
    return 0;
  return state;
}

void rail_handle_set_state(void *buf, uint64_t state) {
  uint8_t *p = (uint8_t *)buf + RAIL_HANDLE_STATE_OFF;
  uint64_t nonce = rail_get64((const uint8_t *)buf + 8);

  rail_put64(p, state);
  rail_put64(p + 8, state == 0 ? 0 : state ^ nonce ^ RAIL_HANDLE_STATE_SALT);
}

/* ---- hello ----------------------------------------------------------------------- */

void rail_hello_pack(const struct rail_hello *h, uint8_t out[RAIL_HELLO_BYTES]) {
  memset(out, 0, RAIL_HELLO_BYTES);
  rail_put32(out, RAIL_HANDLE_MAGIC);
  out[4] = RAIL_HANDLE_VERSION;
  out[5] = h->kind;
  out[6] = h->rail;
  out[7] = h->stream;
  rail_put64(out + 8, h->nonce);
  rail_put64(out + 16, h->conn_id);
  rail_fp_pack(&h->fp, out + 24);
  out[40] = h->nrails;
  out[41] = h->nstreams;
  out[42] = h->transport;
}

int rail_hello_unpack(const uint8_t in[RAIL_HELLO_BYTES], struct rail_hello *h) {
  struct rail_hello out;

  if (rail_get32(in) != RAIL_HANDLE_MAGIC || in[4] != RAIL_HANDLE_VERSION) return -EPROTO;
  memset(&out, 0, sizeof(out));
  out.kind = in[5];
  out.rail = in[6];
  out.stream = in[7];
  out.nonce = rail_get64(in + 8);
  out.conn_id = rail_get64(in + 16);
  rail_fp_unpack(in + 24, &out.fp);
  out.nrails = in[40];
  out.nstreams = in[41];
  out.transport = in[42];
  *h = out;
  return 0;
}

uint64_t rail_handle_random64(void) {
  uint64_t v = 0;
  ssize_t got = getrandom(&v, sizeof(v), GRND_NONBLOCK);

  if (got != (ssize_t)sizeof(v)) {
    /* Entropy not ready (early boot): the nonce only needs to be
     * unguessable by a stray client, not cryptographic. */
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    v ^= ((uint64_t)ts.tv_nsec << 32) ^ (uint64_t)ts.tv_sec ^ ((uint64_t)getpid() << 16) ^
         (uint64_t)(uintptr_t)&v;
    v *= RAIL_HANDLE_STATE_SALT;
  }
  return v != 0 ? v : 1;
}

/* ---- rail matching -------------------------------------------------------------- */

int rail_handle_route_src(const struct sockaddr_storage *peer, struct sockaddr_storage *src) {
  struct sockaddr_storage probe = *peer, name;
  socklen_t len = sizeof(name);
  int fd, rc = 0;

  /* connect() on a UDP socket sends nothing; it only asks the routing table,
   * which then tells the source address it would use. */
  if (probe.ss_family == AF_INET)
    ((struct sockaddr_in *)&probe)->sin_port = htons(9);
  else
    ((struct sockaddr_in6 *)&probe)->sin6_port = htons(9);
  fd = socket(peer->ss_family, SOCK_DGRAM | SOCK_CLOEXEC, 0);
  if (fd < 0) return -errno;
  if (connect(fd, (const struct sockaddr *)&probe, rail_ifaces_addr_len(&probe)) != 0 ||
      getsockname(fd, (struct sockaddr *)&name, &len) != 0)
    rc = -errno;
  close(fd);
  if (rc == 0) *src = name;
  return rc;
}

/* Among the candidate peer rails, the local rail's own index first, then the
 * least used one. */
static int rail_handle_pick(const int *cand, int ncand, int local_index, const int *used) {
  int best = -1;

  for (int k = 0; k < ncand; k++)
    if (cand[k] == local_index) return cand[k];
  for (int k = 0; k < ncand; k++)
    if (best < 0 || used[cand[k]] < used[best]) best = cand[k];
  return best;
}

int rail_handle_match_rails(const struct rail_iface *local, int nlocal,
                            const struct sockaddr_storage *peer, int npeer, rail_route_src_fn route,
                            int *peer_of, int *how) {
  int used[RAIL_NET_MAX_MEMBERS] = {0}, out_peer[RAIL_NET_MAX_MEMBERS],
      out_how[RAIL_NET_MAX_MEMBERS];

  if (nlocal < 1 || nlocal > RAIL_NET_MAX_MEMBERS || npeer < 1 || npeer > RAIL_NET_MAX_MEMBERS)
    return -EINVAL;
  if (route == NULL) route = rail_handle_route_src;
  for (int i = 0; i < nlocal; i++) {
    int cand[RAIL_NET_MAX_MEMBERS], ncand = 0, pick;
    struct sockaddr_storage src;

    for (int j = 0; j < npeer; j++)
      if (rail_ifaces_same_subnet(&local[i].addr, local[i].prefix_len, &peer[j])) cand[ncand++] = j;
    out_how[i] = RAIL_MATCH_SUBNET;
    if (ncand == 0) {
      for (int j = 0; j < npeer; j++)
        if (route(&peer[j], &src) == 0 && rail_ifaces_same_addr(&src, &local[i].addr))
          cand[ncand++] = j;
      out_how[i] = RAIL_MATCH_ROUTE;
    }
    if (ncand == 0) {
      for (int j = 0; j < npeer; j++)
        if (peer[j].ss_family == local[i].addr.ss_family && route(&peer[j], &src) == 0)
          cand[ncand++] = j;
      out_how[i] = RAIL_MATCH_FALLBACK;
    }
    if (ncand == 0) {
      /* Any family: an IPv6-only rail may still reach an IPv4 peer's other rail. */
      for (int j = 0; j < npeer; j++)
        if (route(&peer[j], &src) == 0) cand[ncand++] = j;
    }
    if (ncand == 0) return -ENETUNREACH;
    pick = rail_handle_pick(cand, ncand, i, used);
    used[pick]++;
    out_peer[i] = pick;
  }
  memcpy(peer_of, out_peer, sizeof(int) * (size_t)nlocal);
  memcpy(how, out_how, sizeof(int) * (size_t)nlocal);
  return 0;
}
