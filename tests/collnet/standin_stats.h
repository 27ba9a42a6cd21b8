/* What the stand-in CollNet library (tests/collnet) saw, exported from it as
 * `rail_standin_stats` so that a test which loaded it through nccl-rail's
 * CollNet tables can check the delegation: which of its tables was used,
 * which device each listen named, whether NCCL's logger arrived unchanged.
 * Counters are updated atomically. Test code only. */
#ifndef RAIL_TEST_STANDIN_STATS_H
#define RAIL_TEST_STANDIN_STATS_H

#include <stddef.h>
#include <stdint.h>

#define RAIL_STANDIN_STATS_SYMBOL "rail_standin_stats"

struct rail_standin_stats {
  int abi_version; /* the CollNet version whose init was called last */
  int inits, finalizes;
  int ndevs; /* devices reported, virtual ones included */
  int vdevices;
  int listens, connects, close_colls, close_listens;
  int last_listen_dev;
  char last_listen_name[64];
  int reduce_support_queries;
  int regs, deregs, regs_live;
  int allreduces, allgathers, reducescatters, flushes;
  uint64_t bytes_reduced;
  void *logger;          /* the logger the last init was given */
  size_t max_coll_bytes; /* what getProperties reports (v9 and later) */
  int rail_id, plane_id; /* what its v12 getProperties reports */
  /* Its newest table as its own code sees it at init: another library's
   * table of the same name when it was opened without RTLD_DEEPBIND while
   * that one sat in the global scope. */
  const void *own_table;
};

#endif
