/* fuzz.bytes: the bounded reader (common/bytes.h) never reads past its
 * buffer, whatever lengths the input asks for. The input is a script:
 * each byte picks a read of 1, 2, 4 or 8 bytes or of a length taken from
 * the next byte. */
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>

#include "common/bytes.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  struct rail_rd r = rail_rd_init(data, size);
  uint8_t sink[256];

  while (!r.err) {
    size_t before = r.off;
    switch (rail_rd_u8(&r) & 7) {
    case 0:
      rail_rd_u8(&r);
      break;
    case 1:
      rail_rd_u16(&r);
      break;
    case 2:
      rail_rd_u32(&r);
      break;
    case 3:
      rail_rd_u64(&r);
      break;
    default:
      rail_rd_bytes(&r, sink, rail_rd_u8(&r));
      break;
    }
    if (r.off > r.len || r.off < before) abort();
  }
  if (r.off > size) abort();
  return 0;
}
