/* The ABI edge's error mapping and the tunables table. */
#include <errno.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdlib.h>

#include "plugin/errors.h"
#include "plugin/log.h"
#include "plugin/param.h"
#include "tests/unit/test.h"

static char last_warn[1024];
static int nwarn;

static void capture(int level, unsigned long flags, const char *file, int line, const char *fmt,
                    ...) {
  va_list ap;
  if (level != RAIL_LOG_WARN) return;
  va_start(ap, fmt);
  vsnprintf(last_warn, sizeof(last_warn), fmt, ap);
  va_end(ap);
  nwarn++;
}

TEST(errors_map_once_at_the_edge) {
  CHECK_EQ_INT(rail_abi_result(0), ncclSuccess);
  CHECK_EQ_INT(rail_abi_result(-EMSGSIZE), ncclInvalidUsage);
  CHECK_EQ_INT(rail_abi_result(-EPROTONOSUPPORT), ncclInvalidUsage);
  CHECK_EQ_INT(rail_abi_result(-EINVAL), ncclInvalidArgument);
  CHECK_EQ_INT(rail_abi_result(-ECONNRESET), ncclRemoteError);
  CHECK_EQ_INT(rail_abi_result(-ETIMEDOUT), ncclSystemError);
  CHECK_EQ_INT(rail_abi_result(-ENOMEM), ncclSystemError);
  CHECK_EQ_INT(rail_abi_result(-ENOSYS), ncclInternalError);
  CHECK_EQ_INT(rail_abi_result(5), ncclInternalError);
}

TEST(param_defaults_and_suffixes) {
  unsetenv("NCCL_RAIL_CHUNK_BYTES");
  rail_param_reload();
  CHECK_EQ_INT(rail_param_int(RAIL_PARAM_CHUNK_BYTES), 524288);
  setenv("NCCL_RAIL_CHUNK_BYTES", "1M", 1);
  rail_param_reload();
  CHECK_EQ_INT(rail_param_int(RAIL_PARAM_CHUNK_BYTES), 1 << 20);
  setenv("NCCL_RAIL_IFNAMES", "^docker,lo", 1);
  rail_param_reload();
  CHECK_EQ_STR(rail_param_str(RAIL_PARAM_IFNAMES), "^docker,lo");
  unsetenv("NCCL_RAIL_CHUNK_BYTES");
  unsetenv("NCCL_RAIL_IFNAMES");
  rail_param_reload();
}

TEST(param_bad_value_warns_naming_the_variable_and_keeps_default) {
  rail_log_set_logger(capture);
  nwarn = 0;
  setenv("NCCL_RAIL_NSTREAMS", "many", 1);
  rail_param_reload();
  CHECK_EQ_INT(rail_param_int(RAIL_PARAM_NSTREAMS), 0);
  CHECK_EQ_INT(nwarn, 1);
  CHECK(strstr(last_warn, "NCCL_RAIL_NSTREAMS=\"many\"") != NULL);
  setenv("NCCL_RAIL_NSTREAMS", "99", 1); /* out of range */
  rail_param_reload();
  CHECK_EQ_INT(rail_param_int(RAIL_PARAM_NSTREAMS), 0);
  CHECK_EQ_INT(nwarn, 2);
  unsetenv("NCCL_RAIL_NSTREAMS");
  rail_param_reload();
  rail_log_set_logger(NULL);
}

/* rail_param_parse_size(s) as one number: the value, or the -errno. A
 * sentinel in *out shows that failures leave it alone. */
static long long parse_size(const char *s) {
  uint64_t v = 12345;
  int rc = rail_param_parse_size(s, &v);
  if (rc != 0 && v != 12345) return -1000; /* output written on failure */
  return rc != 0 ? rc : (long long)v;
}

TEST(size_suffix_spellings_are_powers_of_1024) {
  static const char *const k64[] = {"64K",  "64k",   "64KB",  "64kb",
                                    "64Kb", "64KiB", "64kib", "64KIB"};
  for (size_t i = 0; i < sizeof(k64) / sizeof(k64[0]); i++) {
    if (parse_size(k64[i]) != 65536) fprintf(stderr, "  spelling \"%s\"\n", k64[i]);
    CHECK_EQ_INT(parse_size(k64[i]), 65536);
  }
  CHECK_EQ_INT(parse_size("0"), 0);
  CHECK_EQ_INT(parse_size("4096"), 4096);
  CHECK_EQ_INT(parse_size("010"), 10); /* decimal, not octal */
  CHECK_EQ_INT(parse_size("512B"), 512);
  CHECK_EQ_INT(parse_size("512b"), 512);
  CHECK_EQ_INT(parse_size("4M"), 4LL << 20);
  CHECK_EQ_INT(parse_size("4MB"), 4LL << 20);
  CHECK_EQ_INT(parse_size("4MiB"), 4LL << 20);
  CHECK_EQ_INT(parse_size("4m"), 4LL << 20);
  CHECK_EQ_INT(parse_size("1G"), 1LL << 30);
  CHECK_EQ_INT(parse_size("1GiB"), 1LL << 30);
  CHECK_EQ_INT(parse_size("1gb"), 1LL << 30);
  CHECK_EQ_INT(parse_size("2T"), 2LL << 40);
  CHECK_EQ_INT(parse_size("2TiB"), 2LL << 40);
  CHECK_EQ_INT(parse_size("0x10"), 16);
  CHECK_EQ_INT(parse_size("0X1b"), 27); /* hex takes no suffix: B is a digit */
}

TEST(size_overflow_is_erange) {
  uint64_t v = 0;
  CHECK_EQ_INT(rail_param_parse_size("18446744073709551615", &v), 0);
  CHECK(v == UINT64_MAX);
  CHECK_EQ_INT(parse_size("18446744073709551616"), -ERANGE);
  CHECK_EQ_INT(parse_size("99999999999999999999999"), -ERANGE);
  CHECK_EQ_INT(parse_size("16777215T"), (long long)(16777215ULL << 40));
  CHECK_EQ_INT(parse_size("16777216T"), -ERANGE); /* 2^64 */
  CHECK_EQ_INT(parse_size("17179869184G"), -ERANGE);
  CHECK_EQ_INT(parse_size("0x10000000000000000"), -ERANGE);
}

TEST(size_garbage_empty_and_negative_are_einval) {
  static const char *const bad[] = {"",    "-1",   "-4K",  "+4",  " 4",    "4 ",  "4 K", "4X",
                                    "4KX", "4KBB", "4Ki",  "4iB", "4.5M",  "1e6", "K",   "KiB",
                                    "B",   "0x",   "0x1K", "0xg", "4MiBs", "--1", "4-",  "0x-1"};
  uint64_t v = 7;
  for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
    if (parse_size(bad[i]) != -EINVAL) fprintf(stderr, "  input \"%s\"\n", bad[i]);
    CHECK_EQ_INT(parse_size(bad[i]), -EINVAL);
  }
  CHECK_EQ_INT(rail_param_parse_size(NULL, &v), -EINVAL);
  CHECK_EQ_INT(v, 7);
}

/* Integer tunables share the size syntax; -1 still means "automatic" where
 * the table allows it, and bad values name the variable and the value. */
TEST(param_int_takes_sizes_and_keeps_negatives) {
  rail_log_set_logger(capture);
  nwarn = 0;
  setenv("NCCL_RAIL_CHUNK_BYTES", "64KiB", 1);
  setenv("NCCL_RAIL_INLINE_BYTES", "0x2000", 1);
  setenv("NCCL_RAIL_GID_INDEX", "3", 1);
  rail_param_reload();
  CHECK_EQ_INT(rail_param_int(RAIL_PARAM_CHUNK_BYTES), 65536);
  CHECK_EQ_INT(rail_param_int(RAIL_PARAM_INLINE_BYTES), 8192);
  CHECK_EQ_INT(rail_param_int(RAIL_PARAM_GID_INDEX), 3);
  CHECK_EQ_INT(nwarn, 0);
  setenv("NCCL_RAIL_GID_INDEX", "-1", 1);
  rail_param_reload();
  CHECK_EQ_INT(rail_param_int(RAIL_PARAM_GID_INDEX), -1);
  CHECK_EQ_INT(nwarn, 0);

  setenv("NCCL_RAIL_GID_INDEX", "-2", 1); /* below the table's minimum */
  rail_param_reload();
  CHECK_EQ_INT(rail_param_int(RAIL_PARAM_GID_INDEX), -1);
  CHECK_EQ_INT(nwarn, 1);
  CHECK(strstr(last_warn, "NCCL_RAIL_GID_INDEX=\"-2\"") != NULL);
  unsetenv("NCCL_RAIL_GID_INDEX");

  setenv("NCCL_RAIL_CHUNK_BYTES", "4X", 1);
  rail_param_reload();
  CHECK_EQ_INT(rail_param_int(RAIL_PARAM_CHUNK_BYTES), 524288);
  CHECK_EQ_INT(nwarn, 2);
  CHECK(strstr(last_warn, "NCCL_RAIL_CHUNK_BYTES=\"4X\" is not a number") != NULL);

  /* Overflow is a range error, not a wrapped value that might pass. */
  setenv("NCCL_RAIL_CHUNK_BYTES", "18446744073709551617", 1);
  rail_param_reload();
  CHECK_EQ_INT(rail_param_int(RAIL_PARAM_CHUNK_BYTES), 524288);
  CHECK_EQ_INT(nwarn, 3);
  CHECK(strstr(last_warn, "NCCL_RAIL_CHUNK_BYTES=\"18446744073709551617\" is outside") != NULL);

  setenv("NCCL_RAIL_CHUNK_BYTES", "16777216T", 1);
  rail_param_reload();
  CHECK_EQ_INT(rail_param_int(RAIL_PARAM_CHUNK_BYTES), 524288);
  CHECK_EQ_INT(nwarn, 4);

  setenv("NCCL_RAIL_CHUNK_BYTES", "", 1);
  rail_param_reload();
  CHECK_EQ_INT(rail_param_int(RAIL_PARAM_CHUNK_BYTES), 524288);
  CHECK_EQ_INT(nwarn, 5);

  unsetenv("NCCL_RAIL_CHUNK_BYTES");
  unsetenv("NCCL_RAIL_INLINE_BYTES");
  rail_param_reload();
  rail_log_set_logger(NULL);
}

RAIL_TEST_MAIN(errors_map_once_at_the_edge, param_defaults_and_suffixes,
               param_bad_value_warns_naming_the_variable_and_keeps_default,
               size_suffix_spellings_are_powers_of_1024, size_overflow_is_erange,
               size_garbage_empty_and_negative_are_einval,
               param_int_takes_sizes_and_keeps_negatives)
