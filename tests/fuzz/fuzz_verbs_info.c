/* fuzz.verbs_info: the verbs connection-info decoder (net/core/wire.h)
 * reads only its input, whatever counts and lengths the input claims, and
 * what it accepts encodes back to the same bytes. */
#include <stdlib.h>
#include <string.h>

#include "net/core/wire.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  struct rail_wire_verbs_info v, w;
  uint8_t out[RAIL_WIRE_VERBS_INFO_MAX];
  size_t n = 0;

  if (rail_wire_verbs_info_decode(data, size, &v) != 0) return 0;
  if (rail_wire_verbs_info_encode(&v, out, sizeof(out), &n) != 0) abort();
  if (n != size || memcmp(out, data, n) != 0) abort();
  if (rail_wire_verbs_info_decode(out, n, &w) != 0 || w.nrails != v.nrails || w.qps != v.qps)
    abort();
  return 0;
}
