/* fuzz.chunk: the chunk header decoder (net/core/wire.h) never reads past
 * its input, and what it accepts names a range inside the message that
 * does not wrap: the guarantees the receiver's buffer offsets rely on. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "net/core/wire.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  struct rail_wire_chunk c;
  uint8_t *in = malloc(size ? size : 1), out[RAIL_WIRE_CHUNK_BYTES];

  memcpy(in, data, size);
  if (rail_wire_chunk_decode(in, size, &c) == 0) {
    if (c.len == 0 || c.len > RAIL_WIRE_CHUNK_MAX_LEN || c.total == 0 ||
        c.total > RAIL_NET_MAX_P2P_BYTES || c.offset > c.total || c.len > c.total - c.offset ||
        c.offset % RAIL_WIRE_CHUNK_UNIT != 0 ||
        (c.len % RAIL_WIRE_CHUNK_UNIT != 0 && c.offset + c.len != c.total))
      abort();
    rail_wire_chunk_encode(&c, out);
    if (memcmp(out, in, sizeof(out)) != 0) abort();
  }
  free(in);
  return 0;
}
