/* A stand-in libnccl.so.2 for nccl-rail doctor's NCCL check: ncclGetVersion
 * returns FAKE_NCCL_VERSION_CODE from the environment (default 22809, NCCL
 * 2.28.9), so a test can show doctor any release without NCCL installed. */
#include <stdlib.h>

__attribute__((visibility("default"))) int ncclGetVersion(int *version);

int ncclGetVersion(int *version) {
  const char *v = getenv("FAKE_NCCL_VERSION_CODE");
  *version = v != NULL ? atoi(v) : 22809;
  return 0;
}
