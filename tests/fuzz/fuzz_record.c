/* fuzz.record: the control record decoder (net/core/wire.h) never reads
 * past its input, bounds an inline payload by RAIL_WIRE_MAX_INLINE, and
 * what it accepts encodes back to the same 32 bytes. The input is a stream
 * of records, as a control stream would carry them. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "net/core/wire.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  uint8_t *in = malloc(size ? size : 1);
  size_t off = 0;

  memcpy(in, data, size);
  while (off < size) {
    struct rail_wire_rec r;
    uint8_t out[RAIL_WIRE_REC_BYTES];
    size_t plen = 0;

    if (rail_wire_rec_decode(in + off, size - off, &r, &plen) != 0) break;
    if (plen > RAIL_WIRE_MAX_INLINE || (plen > 0 && r.type != RAIL_WIRE_REC_MSG)) abort();
    rail_wire_rec_encode(&r, out);
    if (memcmp(out, in + off, sizeof(out)) != 0) abort();
    if (plen > size - off - RAIL_WIRE_REC_BYTES) break; /* the payload is not all here */
    off += RAIL_WIRE_REC_BYTES + plen;
  }
  free(in);
  return 0;
}
