/* doctor's bootstrap check: the interface NCCL's own bootstrap will use on
 * this node. The plugin chooses its data interfaces itself, but NCCL still
 * opens its bootstrap and out-of-band sockets on the interface its own rules
 * pick (tools/doctor/bootif.h), and a wrong pick there is the classic hang at init:
 * the ranks never find each other, and no data interface is to blame. */
#include <errno.h>
#include <ifaddrs.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "net/core/ifaces.h"
#include "tools/doctor/bootif.h"
#include "tools/doctor/doctor.h"

struct rail_doctor_boot {
  int found;
  struct rail_bootif b;
  char env_ifname[128];
};

/* The node's interfaces as one line, for a finding that names them. */
static void boot_list_ifaces(const struct ifaddrs *ifs, char *out, size_t len) {
  size_t off = 0;

  out[0] = '\0';
  for (const struct ifaddrs *ifa = ifs; ifa != NULL && off < len; ifa = ifa->ifa_next) {
    if (ifa->ifa_addr == NULL || ifa->ifa_addr->sa_family != AF_INET ||
        !(ifa->ifa_flags & IFF_RUNNING))
      continue;
    off += (size_t)snprintf(out + off, len - off, "%s%s", off ? ", " : "", ifa->ifa_name);
  }
}

static void boot_report(struct rail_doctor *d, const struct ifaddrs *ifs,
                        const struct rail_bootif_env *env, int rc) {
  struct rail_doctor_boot *bt = d->boot;
  char addr[64], names[256];

  boot_list_ifaces(ifs, names, sizeof(names));
  if (rc != 0) {
    if (env->socket_ifname != NULL && strlen(env->socket_ifname) > 1)
      rail_doctor_say(d, RAIL_DOCTOR_FAIL, "bootstrap",
                      "unset NCCL_SOCKET_IFNAME (nccl-rail does not need it), or name an "
                      "interface that is up here",
                      "NCCL_SOCKET_IFNAME=%s matches no interface that is up with an address "
                      "(up here: %s): NCCL fails with \"no socket interface found\"",
                      env->socket_ifname, names[0] ? names : "none");
    else
      rail_doctor_say(d, RAIL_DOCTOR_FAIL, "bootstrap", "bring up a network interface",
                      "no interface is up with an address: NCCL cannot bootstrap");
    return;
  }
  rail_ifaces_addr_str(&bt->b.addr, addr, sizeof(addr));
  if (strncmp(bt->b.name, "lo", 2) == 0)
    rail_doctor_say(d, RAIL_DOCTOR_FAIL, "bootstrap",
                    "bring up the node's network interface, or set NCCL_SOCKET_IFNAME to it",
                    "NCCL will bootstrap over %s %s (%s): other nodes cannot reach it, so a "
                    "multi-node job hangs at init",
                    bt->b.name, addr, bt->b.rule);
  else if (strncmp(bt->b.name, "docker", 6) == 0 || strncmp(bt->b.name, "virbr", 5) == 0)
    rail_doctor_say(d, RAIL_DOCTOR_WARN, "bootstrap",
                    "set NCCL_SOCKET_IFNAME to the interface that reaches the other nodes",
                    "NCCL will bootstrap over %s %s (%s): a bridge usually reaches only this "
                    "host's containers or VMs",
                    bt->b.name, addr, bt->b.rule);
  else
    rail_doctor_say(d, RAIL_DOCTOR_OK, "bootstrap", NULL, "NCCL will bootstrap over %s %s (%s)%s",
                    bt->b.name, addr, bt->b.rule,
                    d->npeers ? "; reaching the peers is checked below" : "");
  if (bt->b.family_ignored)
    rail_doctor_say(d, RAIL_DOCTOR_WARN, "bootstrap", "set NCCL_SOCKET_FAMILY=AF_INET or AF_INET6",
                    "NCCL_SOCKET_FAMILY=%s is neither AF_INET nor AF_INET6: NCCL ignores it",
                    env->socket_family);
}

void rail_doctor_check_bootstrap(struct rail_doctor *d) {
  struct rail_bootif_env env;
  struct ifaddrs *ifs = NULL;
  int rc;

  d->boot = calloc(1, sizeof(*d->boot));
  if (d->boot == NULL) return;
  if (getifaddrs(&ifs) != 0) {
    rail_doctor_say(d, RAIL_DOCTOR_WARN, "bootstrap", NULL,
                    "cannot list interfaces (%s): bootstrap interface not checked",
                    strerror(errno));
    return;
  }
  rail_bootif_env_get(&env);
  if (env.socket_ifname != NULL)
    snprintf(d->boot->env_ifname, sizeof(d->boot->env_ifname), "%s", env.socket_ifname);
  rc = rail_bootif_pick(ifs, &env, &d->boot->b);
  d->boot->found = rc == 0;
  boot_report(d, ifs, &env, rc);
  freeifaddrs(ifs);
}

/* The bootstrap interface's address, for the peer check's out-of-band
 * connection (which leaves from it, as NCCL's bootstrap would); NULL if
 * none was found. */
const struct sockaddr_storage *rail_doctor_boot_addr(const struct rail_doctor *d,
                                                     const char **name) {
  if (d->boot == NULL || !d->boot->found) return NULL;
  if (name != NULL) *name = d->boot->b.name;
  return &d->boot->b.addr;
}

void rail_doctor_json_bootstrap(struct rail_doctor *d, struct rail_json *j) {
  char addr[64];

  if (d->boot == NULL) return;
  rail_json_object(j, "bootstrap", RAIL_JSON_INLINE);
  if (d->boot->found) {
    rail_json_str(j, "interface", d->boot->b.name);
    rail_json_str(j, "address", rail_ifaces_addr_str(&d->boot->b.addr, addr, sizeof(addr)));
    rail_json_int(j, "prefix_len", d->boot->b.prefix_len);
    rail_json_str(j, "rule", d->boot->b.rule);
  } else {
    rail_json_null(j, "interface");
  }
  rail_json_str(j, "NCCL_SOCKET_IFNAME", d->boot->env_ifname[0] ? d->boot->env_ifname : NULL);
  rail_json_object_end(j);
}
