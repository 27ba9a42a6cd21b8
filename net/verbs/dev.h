/* RDMA device discovery for the verbs transport: which ports are ACTIVE, what
 * they are (InfiniBand or RoCE, speed, PCI path, NUMA node, netdev) and which
 * GID index to use, so that NCCL_IB_GID_INDEX never has to be set.
 *
 * Two layers, both re-entrant (no globals; call from one thread at init):
 *  - rail_verbs_scan_sysfs() reads only files under NCCL_RAIL_SYSFS_ROOT and
 *    is what the unit tests drive with fake trees;
 *  - rail_verbs_discover() runs the scan, then keeps only ports that verbs
 *    itself lists and reports ACTIVE, and fills what only verbs knows (LID,
 *    MTU, the GID bytes as the device returns them).
 * Errors: 0 or -errno; outputs written only on success. Units: Mbps. */
#ifndef RAIL_NET_VERBS_DEV_H
#define RAIL_NET_VERBS_DEV_H

#include <stdint.h>

#include "net/verbs/api.h"

#define RAIL_VERBS_MAX_PORTS 32
#define RAIL_VERBS_NAME 64
#define RAIL_VERBS_PATH 256

enum rail_verbs_link {
  RAIL_VERBS_LINK_IB = 1,  /* InfiniBand: addressed by LID, GID index 0 */
  RAIL_VERBS_LINK_ETH = 2, /* RoCE: addressed by GID; index chosen here */
};

struct rail_verbs_port {
  char dev[RAIL_VERBS_NAME];      /* RDMA device, "mlx5_0" or "rxe0" */
  int port;                       /* 1-based port number */
  int link;                       /* RAIL_VERBS_LINK_* */
  int speed_mbps;                 /* from the port's rate, else the netdev's speed, else 10000 */
  char netdev[RAIL_VERBS_NAME];   /* RoCE: the netdev under the port; IB: IPoIB netdev or "" */
  char pci_path[RAIL_VERBS_PATH]; /* realpath of the PCI device in /sys, "" for soft devices */
  int numa;                       /* -1 if unknown */
  uint64_t guid;                  /* node GUID, host order; 0 if unknown */
  int gid_index;                  /* the GID index QPs use as source */
  uint8_t gid[16];                /* that GID, network order */
  char gid_why[96];               /* how the index was chosen, for the INFO line */
  uint16_t lid;                   /* IB only; 0 until rail_verbs_discover */
  int mtu;                        /* enum ibv_mtu, active; 0 until rail_verbs_discover */
  int max_qp_wr;                  /* device limit; 0 until rail_verbs_discover */
};

/* One row of a port's GID table as sysfs shows it. */
enum rail_verbs_gid_type { RAIL_GID_NONE = 0, RAIL_GID_IB_ROCE_V1 = 1, RAIL_GID_ROCE_V2 = 2 };
struct rail_verbs_gid {
  int index;
  uint8_t gid[16];
  int type;                   /* enum rail_verbs_gid_type */
  char ndev[RAIL_VERBS_NAME]; /* gid_attrs/ndevs: "" when unreadable */
};

/* The automatic choice for RoCE, pure so tests can state the rules:
 *  1. only entries of the port's netdev (when the table names one), not zero;
 *  2. RoCE v2 over RoCE v1 (v1 is not routable);
 *  3. within a type: the IPv4-mapped GID of the netdev's first IPv4 address
 *     in `v4` (network order), then any IPv4-mapped GID, then a global IPv6
 *     GID, then a link-local one; lower index first on a tie.
 * `why` (may be NULL) gets a short reason. -ENOENT when nothing qualifies. */
int rail_verbs_gid_pick(const struct rail_verbs_gid *gids, int ngids, const char *netdev,
                        const uint32_t *v4, int nv4, int *index, char *why, size_t whylen);

/* ACTIVE ports under `root` (NCCL_RAIL_SYSFS_ROOT semantics: "" means "/"),
 * at most `max`, in device-name then port order. Ports that are not ACTIVE, or
 * RoCE ports without a usable GID, are skipped with one INFO line each.
 * `override_gid` >= 0 forces that GID index (warned about and ignored if the
 * entry is empty). Only with the real root are the netdev's addresses read
 * (getifaddrs) to prefer its primary IPv4 GID. */
int rail_verbs_scan_sysfs(const char *root, int override_gid, struct rail_verbs_port *ports,
                          int max, int *nports);

/* The devices the verbs transport offers: the sysfs scan under
 * NCCL_RAIL_SYSFS_ROOT with NCCL_RAIL_GID_INDEX, confirmed by verbs. `api`
 * NULL (no libibverbs) gives 0 ports. One INFO line per port kept. */
int rail_verbs_discover(const struct rail_verbs_api *api, struct rail_verbs_port *ports, int max,
                        int *nports);

/* NCCL_RAIL_TRANSPORT: "auto" picks verbs when `nports` > 0; "verbs" with no
 * ports is -ENODEV (a WARN: the user asked for RDMA and would otherwise run
 * at TCP speed); "socket" never picks verbs. An unknown value is warned about
 * once and treated as auto. *use_verbs is 1 or 0. */
int rail_verbs_transport_pick(const char *setting, int nports, int *use_verbs);

/* "RoCE" / "IB" for logs. */
const char *rail_verbs_link_name(int link);

#endif
