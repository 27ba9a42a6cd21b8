/* The stand-in CollNet library: a CollNet plugin for tests only (never
 * installed), standing where the site's SHARP plugin stands, so that
 * nccl-rail's delegation is exercised end to end without InfiniBand. It does
 * real reductions in host memory across processes over TCP: each group is a
 * star around member 0, which reduces chunk by chunk and sends the results
 * back; a worker thread per group runs the collectives in the order they
 * were posted, so iallreduce and friends only queue.
 *
 * Built once per CollNet ABI version (STANDIN_ABI 8..12, exporting only that
 * table) and once with every version (STANDIN_ABI 0), from the same code.
 *
 * Its devices: one per interface that is up with an IPv4 address, in the
 * reverse of getifaddrs order (so its numbering is not nccl-rail's), named
 * after the interface, with the interface's PCI function as pciPath; in
 * front of them RAIL_STANDIN_FAKE_DEVICES devices "standin-fake<i>" with no
 * address; interfaces listed in RAIL_STANDIN_HIDE (comma list) left out.
 * HOST memory only; it reports railId 7 and planeId 3, which nccl-rail must
 * not pass on. Waits are bounded by RAIL_STANDIN_TIMEOUT_MS (60 s). */
#ifndef RAIL_TEST_STANDIN_H
#define RAIL_TEST_STANDIN_H

#include <limits.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/socket.h>

#include "plugin/abi/nccl_collnet.h"
#include "tests/collnet/standin_stats.h"

#define STANDIN_EXPORT __attribute__((visibility("default")))
#define STANDIN_MAX_DEVS 32
#define STANDIN_MAX_RANKS 64
#define STANDIN_MAX_PARTS 8
#define STANDIN_MAX_COLL_BYTES (768ull << 20)
#define STANDIN_RAIL_ID 7
#define STANDIN_PLANE_ID 3

struct standin_dev {
  char name[64];
  char pci_path[PATH_MAX]; /* "" when none */
  int has_addr;
  struct sockaddr_storage addr;
  int ndevs; /* 1, or the members of a virtual device */
  int devs[NCCL_NET_MAX_DEVS_PER_NIC_V12];
};

extern struct rail_standin_stats rail_standin_stats;
#define STANDIN_COUNT(field) __atomic_add_fetch(&rail_standin_stats.field, 1, __ATOMIC_RELAXED)

/* standin.c: the device list, discovered once. */
int standin_ndevs(void);
const struct standin_dev *standin_dev(int dev);
void standin_log(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
int standin_timeout_ms(void);

/* standin_comm.c: groups, memory handles, collectives (v9-v12 shapes). */
ncclResult_t standin_listen(int dev, void *handle, void **listen_comm);
ncclResult_t standin_connect(void *handles[], int nranks, int rank, void *listen_comm,
                             void **coll_comm);
ncclResult_t standin_reg_mr(void *coll_comm, void *data, size_t size, int type, void **mhandle);
ncclResult_t standin_dereg_mr(void *coll_comm, void *mhandle);
ncclResult_t standin_iallreduce(void *coll_comm, void *send_data, void *recv_data, size_t count,
                                ncclDataType_t type, ncclRedOp_t op, void *send_mhandle,
                                void *recv_mhandle, void **request);
ncclResult_t standin_iallgather(void *coll_comm, void *send_data, int nparts,
                                ncclNetSGE_v9_t *parts, size_t bytes_per_rank, size_t window_offset,
                                size_t window_bytes, void *send_mhandle, void **request);
ncclResult_t standin_ireducescatter(void *coll_comm, int nparts, ncclNetSGE_v9_t *parts,
                                    void *recv_data, size_t bytes_per_rank, size_t window_offset,
                                    size_t window_bytes, ncclDataType_t type, ncclRedOp_t op,
                                    void *recv_mhandle, void **request);
ncclResult_t standin_test(void *request, int *done, int *size);
ncclResult_t standin_close_coll(void *coll_comm);
ncclResult_t standin_close_listen(void *listen_comm);

/* standin_reduce.c */
int standin_reduce_supported(int type, int op);
/* acc[i] = acc[i] op in[i]; -1 for a type or operator it does not take. */
int standin_reduce(void *acc, const void *in, size_t count, int type, int op);

#endif
