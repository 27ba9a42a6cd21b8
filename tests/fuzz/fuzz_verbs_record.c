/* fuzz.verbs_record: the side-channel record header decoder reads only its
 * input and accepts only lengths its type may carry; an accepted header
 * encodes back to the same bytes. */
#include <stdlib.h>
#include <string.h>

#include "net/core/wire.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  uint8_t head[RAIL_WIRE_VERBS_REC_HEAD];
  uint32_t len = 0;
  int type = 0;

  if (rail_wire_verbs_rec_decode(data, size, &type, &len) != 0) return 0;
  if (len > RAIL_WIRE_VERBS_INFO_MAX) abort();
  rail_wire_verbs_rec_encode(head, type, len);
  if (memcmp(head, data, sizeof(head)) != 0) abort();
  return 0;
}
