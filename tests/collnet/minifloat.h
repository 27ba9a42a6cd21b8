/* Element values of every NCCL data type as doubles and back, for the
 * stand-in CollNet's host reductions and for the harness's expected
 * results: IEEE half, bfloat16 and the OCP fp8 types (E4M3 "fn": no
 * infinity, max 448; E5M2: IEEE-like, max 57344), rounded to nearest even.
 * fp8 saturates to its largest finite value, as CUDA's __NV_SATFINITE
 * conversions do; half overflows to infinity. Test code only. */
#ifndef RAIL_TEST_MINIFLOAT_H
#define RAIL_TEST_MINIFLOAT_H

#include <stddef.h>
#include <stdint.h>

/* Bytes per element of NCCL data type `type` (ncclDataType_t values), 0 for
 * an unknown type. */
size_t rail_mf_size(int type);
/* Element i of an array of `type` as a double (integers exactly). */
double rail_mf_get(const void *base, size_t i, int type);
/* Stores v as element i: integers by C conversion of the double (callers
 * keep it in range), floats rounded as above. */
void rail_mf_set(void *base, size_t i, int type, double v);

#endif
