/* fuzz.handle: the handle decoder (net/core/wire.h) reads nothing past its
 * input or the token, never crashes on any bytes, and what it accepts
 * encodes back to a handle that decodes to the same thing. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "net/core/wire.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  struct rail_wire_handle h, back;
  uint8_t *in = malloc(size ? size : 1), out[RAIL_WIRE_HANDLE_BYTES];

  /* A copy of exactly `size` bytes, so ASan sees any read past them. */
  memcpy(in, data, size);
  if (rail_wire_handle_decode(in, size, &h) == 0) {
    int n = rail_wire_handle_encode(&h, out, sizeof(out));
    if (n != h.nrails) abort();
    if (rail_wire_handle_decode(out, sizeof(out), &back) != 0) abort();
    if (back.nrails != h.nrails || back.nonce != h.nonce || back.transport != h.transport ||
        memcmp(&back.fp, &h.fp, sizeof(h.fp)) != 0)
      abort();
    (void)rail_wire_handle_token(in);
  }
  free(in);
  return 0;
}
