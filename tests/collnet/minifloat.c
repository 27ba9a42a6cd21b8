#include "tests/collnet/minifloat.h"

#include <math.h>
#include <string.h>

#include "plugin/abi/nccl_collnet.h"

/* A binary float of 1 sign, ebits exponent and mbits mantissa bits. */
struct mf_format {
  int ebits, mbits, bias;
  int has_inf;       /* an all-ones exponent is inf/NaN (IEEE) rather than finite */
  int saturate;      /* overflow gives the largest finite value, not infinity */
  double max_finite; /* largest finite magnitude */
  uint32_t nan;      /* the NaN pattern without sign */
};

static const struct mf_format mf_half = {5, 10, 15, 1, 0, 65504.0, 0x7e00};
static const struct mf_format mf_e4m3 = {4, 3, 7, 0, 1, 448.0, 0x7f};
static const struct mf_format mf_e5m2 = {5, 2, 15, 1, 1, 57344.0, 0x7e};

static uint32_t mf_encode(double v, const struct mf_format *f) {
  uint32_t sign = signbit(v) ? 1u << (f->ebits + f->mbits) : 0;
  int min_exp = 1 - f->bias; /* exponent of the smallest normal */
  double a = fabs(v), q, quantum;
  int e;

  if (isnan(v)) return sign | f->nan;
  if (a > f->max_finite || isinf(v)) {
    if (f->saturate || !f->has_inf) return sign | mf_encode(f->max_finite, f);
    return sign | ((uint32_t)((1 << f->ebits) - 1) << f->mbits);
  }
  if (a == 0.0) return sign;
  frexp(a, &e); /* a = m * 2^e, m in [0.5, 1): its exponent is e - 1 */
  e -= 1;
  if (e < min_exp) e = min_exp;
  quantum = ldexp(1.0, e - f->mbits);
  q = nearbyint(a / quantum) * quantum; /* nearest, ties to even */
  if (q > f->max_finite) return sign | mf_encode(f->saturate ? f->max_finite : INFINITY, f);
  if (q < ldexp(1.0, min_exp)) /* subnormal (or rounded to zero) */
    return sign | (uint32_t)(q / ldexp(1.0, min_exp - f->mbits));
  frexp(q, &e);
  e -= 1;
  return sign | ((uint32_t)(e + f->bias) << f->mbits) |
         ((uint32_t)(q / ldexp(1.0, e - f->mbits)) & ((1u << f->mbits) - 1));
}

static double mf_decode(uint32_t bits, const struct mf_format *f) {
  uint32_t mant = bits & ((1u << f->mbits) - 1);
  uint32_t exp = (bits >> f->mbits) & ((1u << f->ebits) - 1);
  double s = (bits >> (f->ebits + f->mbits)) & 1 ? -1.0 : 1.0;
  uint32_t top = (1u << f->ebits) - 1;

  if (f->has_inf && exp == top) return mant ? NAN : s * INFINITY;
  if (!f->has_inf && exp == top && mant == (1u << f->mbits) - 1) return NAN;
  if (exp == 0) return s * ldexp((double)mant, 1 - f->bias - f->mbits);
  return s * ldexp((double)(mant | (1u << f->mbits)), (int)exp - f->bias - f->mbits);
}

/* bfloat16 is the top half of a float, rounded to nearest even. */
static uint16_t mf_bf16_encode(double v) {
  float x = (float)v;
  uint32_t u;

  memcpy(&u, &x, 4);
  if (isnan(x)) return (uint16_t)((u >> 16) | 0x40);
  u += 0x7fff + ((u >> 16) & 1);
  return (uint16_t)(u >> 16);
}

static double mf_bf16_decode(uint16_t b) {
  uint32_t u = (uint32_t)b << 16;
  float x;

  memcpy(&x, &u, 4);
  return x;
}

size_t rail_mf_size(int type) {
  switch (type) {
  case ncclInt8:
  case ncclUint8:
  case ncclFloat8e4m3:
  case ncclFloat8e5m2:
    return 1;
  case ncclFloat16:
  case ncclBfloat16:
    return 2;
  case ncclInt32:
  case ncclUint32:
  case ncclFloat32:
    return 4;
  case ncclInt64:
  case ncclUint64:
  case ncclFloat64:
    return 8;
  default:
    return 0;
  }
}

double rail_mf_get(const void *base, size_t i, int type) {
  switch (type) {
  case ncclInt8:
    return ((const int8_t *)base)[i];
  case ncclUint8:
    return ((const uint8_t *)base)[i];
  case ncclInt32:
    return ((const int32_t *)base)[i];
  case ncclUint32:
    return ((const uint32_t *)base)[i];
  case ncclInt64:
    return (double)((const int64_t *)base)[i];
  case ncclUint64:
    return (double)((const uint64_t *)base)[i];
  case ncclFloat16:
    return mf_decode(((const uint16_t *)base)[i], &mf_half);
  case ncclFloat32:
    return ((const float *)base)[i];
  case ncclFloat64:
    return ((const double *)base)[i];
  case ncclBfloat16:
    return mf_bf16_decode(((const uint16_t *)base)[i]);
  case ncclFloat8e4m3:
    return mf_decode(((const uint8_t *)base)[i], &mf_e4m3);
  case ncclFloat8e5m2:
    return mf_decode(((const uint8_t *)base)[i], &mf_e5m2);
  default:
    return NAN;
  }
}

void rail_mf_set(void *base, size_t i, int type, double v) {
  switch (type) {
  case ncclInt8:
    ((int8_t *)base)[i] = (int8_t)v;
    break;
  case ncclUint8:
    ((uint8_t *)base)[i] = (uint8_t)v;
    break;
  case ncclInt32:
    ((int32_t *)base)[i] = (int32_t)v;
    break;
  case ncclUint32:
    ((uint32_t *)base)[i] = (uint32_t)v;
    break;
  case ncclInt64:
    ((int64_t *)base)[i] = (int64_t)v;
    break;
  case ncclUint64:
    ((uint64_t *)base)[i] = (uint64_t)v;
    break;
  case ncclFloat16:
    ((uint16_t *)base)[i] = (uint16_t)mf_encode(v, &mf_half);
    break;
  case ncclFloat32:
    ((float *)base)[i] = (float)v;
    break;
  case ncclFloat64:
    ((double *)base)[i] = v;
    break;
  case ncclBfloat16:
    ((uint16_t *)base)[i] = mf_bf16_encode(v);
    break;
  case ncclFloat8e4m3:
    ((uint8_t *)base)[i] = (uint8_t)mf_encode(v, &mf_e4m3);
    break;
  case ncclFloat8e5m2:
    ((uint8_t *)base)[i] = (uint8_t)mf_encode(v, &mf_e5m2);
    break;
  default:
    break;
  }
}
