/* fuzz.xml: the topology XML reader and both XML loaders on any bytes.
 * Parsing never reads past the buffer, crashes or leaks (ASan/UBSan), and
 * whatever parses either loads into a model or fails with -errno. The
 * committed corpus (tests/fuzz/corpus/xml/) starts it from small NCCL and
 * hwloc files. */
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "topology/discover/discover.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  struct rail_xml_node *root = NULL;
  struct rail_topo *topo = NULL;
  int rc;

  if (rail_xml_parse_buf("fuzz.xml", (const char *)data, size, &root) != 0) return 0;
  if (strcmp(root->name, "system") == 0)
    rc = rail_topo_load_nccl_xml("fuzz.xml", root, &topo);
  else if (strcmp(root->name, "topology") == 0)
    rc = rail_topo_load_hwloc_xml("fuzz.xml", root, &topo);
  else
    rc = -1;
  if (rc == 0) {
    /* The model a file gives must hold together. */
    if (topo->nnics > RAIL_TOPO_MAX_NICS || topo->ngpus > RAIL_TOPO_MAX_GPUS) abort();
    for (int n = 0; n < topo->nnics; n++)
      if (topo->nics[n].group < 0 || topo->nics[n].group >= topo->ngroups) abort();
    rail_topo_free(topo);
  }
  rail_xml_free(root);
  return 0;
}
