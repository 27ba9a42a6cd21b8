/* The one wire module: every format of bytes that crosses the network, each
 * with its version, its size, an encoder and a bounds-checked decoder built
 * on common/bytes.h. A decoder takes the bytes and their length, never
 * trusts a length or offset it reads (overflow included), and returns 0 or
 * -EPROTO (malformed) / -EPROTONOSUPPORT (another version); its output is
 * written only on success. Each decoder has a libFuzzer target in
 * tests/fuzz/.
 *
 * Formats of core and the socket transport are in wire.c; those of the
 * verbs transport in wire_verbs.c. */
#ifndef RAIL_NET_CORE_WIRE_H
#define RAIL_NET_CORE_WIRE_H

#include <stddef.h>
#include <stdint.h>

#include "common/bytes.h"

/* ---- core and socket transport (wire.c) ---------------------------------- */

/* ---- verbs transport (wire_verbs.c) -------------------------------------- */

#endif
