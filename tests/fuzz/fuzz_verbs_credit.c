/* fuzz.verbs_credit: the credit decoder (what a peer RDMA-writes into the
 * sender's FIFO) reads only its slot, accepts no buffer count, capacity or
 * address range beyond the limits (overflow included), and what it accepts
 * encodes back to a slot that decodes the same; the immediate decoder
 * (every data write's 32 bits, the first four input bytes) likewise. */
#include <stdlib.h>
#include <string.h>

#include "net/core/wire.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void imm_round_trip(const uint8_t *data, size_t size) {
  struct rail_wire_verbs_imm m;
  uint32_t imm;

  if (size < 4) return;
  imm = rail_get_le32(data);
  if (rail_wire_verbs_imm_decode(imm, &m) != 0) return;
  if (m.nparts < 1 || m.nparts > 16 || m.entry < 0 || m.entry >= RAIL_WIRE_VERBS_MAX_RECVS) abort();
  if (rail_wire_verbs_imm_encode(&m) != imm) abort();
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  struct rail_wire_verbs_credit c, d;
  uint8_t slot[RAIL_WIRE_VERBS_CREDIT_BYTES];

  imm_round_trip(data, size);
  if (rail_wire_verbs_credit_decode(data, size, &c) != 0) return 0;
  if (c.n < 1 || c.n > RAIL_WIRE_VERBS_MAX_RECVS) abort();
  for (int i = 0; i < c.n; i++) {
    uint64_t end;
    if (c.e[i].size > RAIL_WIRE_VERBS_MAX_MSG || rail_add_overflows(c.e[i].addr, c.e[i].size, &end))
      abort();
  }
  if (rail_wire_verbs_credit_encode(&c, slot) != 0) abort();
  if (rail_wire_verbs_credit_decode(slot, sizeof(slot), &d) != 0 || d.seq != c.seq || d.n != c.n ||
      memcmp(d.e, c.e, sizeof(c.e[0]) * (size_t)c.n) != 0)
    abort();
  return 0;
}
