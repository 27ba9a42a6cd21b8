/* Helpers the topology test binaries share (helpers.c). Each binary
 * defines the harness globals through RAIL_TEST_MAIN (tests/unit/test.h). */
#ifndef RAIL_TEST_TOPOLOGY_HELPERS_H
#define RAIL_TEST_TOPOLOGY_HELPERS_H

#include <stdint.h>

#include "topology/topo.h"

/* Log capture: INFO and WARN lines into logbuf, WARNs counted in nwarn. */
extern char logbuf[16384];
extern int nwarn;
void capture_start(void);
void capture_stop(void);

/* RAIL_SOURCE_DIR (ctest sets it), else ".". */
const char *src_dir(void);
/* Loads tests/fixtures/<sub>/<name> by its bare name, so that the model's
 * source (and golden output) does not depend on the checkout path. With
 * rc_out NULL a failure fails the test; else *rc_out says how it went. */
struct rail_topo *load_fixture(const char *sub, const char *name, int *rc_out);
/* rail_topo_print_text() into a malloc'd string. */
char *print_text(const struct rail_topo *topo);
/* A whole file, malloc'd; NULL if unreadable. */
char *read_all(const char *path);
/* Compares with the golden file; RAIL_UPDATE_GOLDEN=1 rewrites it instead
 * (then review the diff: the golden files are the expected machines). */
void check_golden(const char *golden, const char *actual);
/* tests/fixtures/topo/<name without .xml>.txt against the model's text. */
void check_fixture_golden(const struct rail_topo *topo, const char *name);

/* Indexes in gpus[] / nics[] by bus id or name (netdev, name, RDMA
 * device); -1 when absent. */
int gpu_by_bus(const struct rail_topo *topo, const char *bus);
int nic_by_bus(const struct rail_topo *topo, const char *bus);
int nic_by_name(const struct rail_topo *topo, const char *name);
/* The OS number of NUMA index numa, -1 if unknown. */
int numa_os(const struct rail_topo *topo, int numa);
/* The mask of the GPUs with these bus ids (NULL-terminated). */
uint64_t gpu_mask(const struct rail_topo *topo, const char *const *buses);

/* A rail as the machine has it: these NICs (bus ids), fused, nearest to
 * these GPUs (bus ids), on this NUMA node, PIX to them. */
struct want_rail {
  const char *nics[5];
  const char *gpus[5];
  int numa;
  enum rail_path path;
};

void check_rail(const struct rail_topo *topo, const struct want_rail *w);

/* A fake /sys tree in a fresh temporary directory, from manifest text or
 * from tests/fixtures/sysfs/<name>.tree; NULL (and the test failed) if it
 * cannot be built. One tree at a time: remove_tree() deletes it. */
const char *make_tree_text(const char *manifest);
const char *make_tree(const char *name);
void remove_tree(void);

#endif
