/* fuzz.hello: the hello decoder (net/core/wire.h) never reads past its
 * input, and what it accepts is within every range the format fixes and
 * encodes back to the same bytes. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "net/core/wire.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  struct rail_wire_hello h;
  uint8_t *in = malloc(size ? size : 1), out[RAIL_WIRE_HELLO_BYTES];

  memcpy(in, data, size);
  if (rail_wire_hello_decode(in, size, &h) == 0) {
    if (h.nrails < 1 || h.nrails > RAIL_WIRE_MAX_RAILS || h.rail >= h.nrails ||
        h.nstreams > RAIL_WIRE_MAX_STREAMS ||
        (h.kind == RAIL_WIRE_HELLO_DATA && h.stream >= h.nstreams))
      abort();
    rail_wire_hello_encode(&h, out);
    /* Bytes 45..47 are reserved: the decoder ignores them. */
    if (memcmp(out, in, 45) != 0) abort();
  }
  free(in);
  return 0;
}
