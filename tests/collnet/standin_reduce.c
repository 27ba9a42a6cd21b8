/* The stand-in's element-wise reductions: acc[i] = acc[i] (op) in[i] for
 * every NCCL type and the four operators CollNet is given. Integers use
 * their own arithmetic (wrapping, as on the GPU); half, bfloat16 and fp8
 * are computed in double and rounded back after every step, as a switch
 * reducing member by member would. */
#include "tests/collnet/standin.h"

#include <math.h>

#include "plugin/abi/nccl_collnet.h"
#include "tests/collnet/minifloat.h"

#define STANDIN_INT_REDUCE(T, U)                                                                   \
  do {                                                                                             \
    T *a = acc;                                                                                    \
    const T *b = in;                                                                               \
    for (size_t i = 0; i < count; i++) {                                                           \
      switch (op) {                                                                                \
      case ncclSum:                                                                                \
        a[i] = (T)((U)a[i] + (U)b[i]);                                                             \
        break;                                                                                     \
      case ncclProd:                                                                               \
        a[i] = (T)((U)a[i] * (U)b[i]);                                                             \
        break;                                                                                     \
      case ncclMax:                                                                                \
        a[i] = a[i] > b[i] ? a[i] : b[i];                                                          \
        break;                                                                                     \
      default:                                                                                     \
        a[i] = a[i] < b[i] ? a[i] : b[i];                                                          \
        break;                                                                                     \
      }                                                                                            \
    }                                                                                              \
  } while (0)

#define STANDIN_FLOAT_REDUCE(T)                                                                    \
  do {                                                                                             \
    T *a = acc;                                                                                    \
    const T *b = in;                                                                               \
    for (size_t i = 0; i < count; i++)                                                             \
      a[i] = (T)standin_op(a[i], b[i], op);                                                        \
  } while (0)

static double standin_op(double x, double y, int op) {
  switch (op) {
  case ncclSum:
    return x + y;
  case ncclProd:
    return x * y;
  case ncclMax:
    return fmax(x, y);
  default:
    return fmin(x, y);
  }
}

int standin_reduce_supported(int type, int op) {
  return type >= 0 && type < NCCL_NUM_TYPES_2_24 && op >= ncclSum && op <= ncclMin;
}

int standin_reduce(void *acc, const void *in, size_t count, int type, int op) {
  if (!standin_reduce_supported(type, op)) return -1;
  switch (type) {
  case ncclInt8:
    STANDIN_INT_REDUCE(int8_t, uint8_t);
    break;
  case ncclUint8:
    STANDIN_INT_REDUCE(uint8_t, uint32_t);
    break;
  case ncclInt32:
    STANDIN_INT_REDUCE(int32_t, uint32_t);
    break;
  case ncclUint32:
    STANDIN_INT_REDUCE(uint32_t, uint32_t);
    break;
  case ncclInt64:
    STANDIN_INT_REDUCE(int64_t, uint64_t);
    break;
  case ncclUint64:
    STANDIN_INT_REDUCE(uint64_t, uint64_t);
    break;
  case ncclFloat32:
    STANDIN_FLOAT_REDUCE(float);
    break;
  case ncclFloat64:
    STANDIN_FLOAT_REDUCE(double);
    break;
  default: /* half, bfloat16, fp8 */
    for (size_t i = 0; i < count; i++)
      rail_mf_set(acc, i, type,
                  standin_op(rail_mf_get(acc, i, type), rail_mf_get(in, i, type), op));
    break;
  }
  return 0;
}
