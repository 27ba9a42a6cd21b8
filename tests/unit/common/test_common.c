/* common/: the tunables table, the byte-order helpers every wire format
 * uses, and the JSON writer. */
#include <errno.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdlib.h>

#include "common/log.h"
#include "common/bytes.h"
#include "common/json.h"
#include "common/param.h"
#include "common/sysfs.h"
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

/* Topology, interfaces, verbs and doctor each open the sysfs root: one that
 * does not resolve fails every open, and is said once per root. */
TEST(sysfs_bad_root_fails_every_open_and_warns_once) {
  struct rail_sysfs fs;

  rail_log_set_logger(capture);
  nwarn = 0;
  for (int i = 0; i < 3; i++)
    CHECK_EQ_INT(rail_sysfs_open(&fs, "/nonexistent-rail-root-a"), -ENOENT);
  CHECK_EQ_INT(nwarn, 1);
  CHECK(strstr(last_warn, "/nonexistent-rail-root-a") != NULL);
  CHECK_EQ_INT(rail_sysfs_open(&fs, "/nonexistent-rail-root-b"), -ENOENT);
  CHECK_EQ_INT(nwarn, 2);
  CHECK(strstr(last_warn, "/nonexistent-rail-root-b") != NULL);
  CHECK_EQ_INT(rail_sysfs_open(&fs, "/"), 0);
  CHECK(rail_sysfs_is_live(&fs));
  rail_log_set_logger(NULL);
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

TEST(bytes_round_trip_little_endian) {
  uint8_t b[8];
  rail_put_le64(b, 0x0102030405060708ull);
  CHECK_EQ_INT(b[0], 0x08);
  CHECK_EQ_INT(b[7], 0x01);
  CHECK(rail_get_le64(b) == 0x0102030405060708ull);
  rail_put_le32(b, 0xdeadbeefu);
  CHECK_EQ_INT(b[0], 0xef);
  CHECK(rail_get_le32(b) == 0xdeadbeefu);
  rail_put_le16(b, 0xbeef);
  CHECK_EQ_INT(b[1], 0xbe);
  CHECK_EQ_INT(rail_get_le16(b), 0xbeef);
}

TEST(bytes_reader_never_reads_past_the_end) {
  const uint8_t buf[6] = {1, 0, 0, 0, 7, 9};
  struct rail_rd r = rail_rd_init(buf, sizeof(buf));
  uint8_t two[2] = {0xff, 0xff};

  CHECK_EQ_INT(rail_rd_u32(&r), 1);
  CHECK_EQ_INT(r.err, 0);
  /* 4 bytes asked, 2 left: 0 and the error, and it stays. */
  CHECK_EQ_INT(rail_rd_u32(&r), 0);
  CHECK_EQ_INT(r.err, 1);
  CHECK_EQ_INT(rail_rd_u8(&r), 0);
  rail_rd_bytes(&r, two, 2);
  CHECK_EQ_INT(two[0], 0);
  CHECK(rail_rd_take(&r, 0) == NULL);
  /* A length near SIZE_MAX cannot wrap the check. */
  r = rail_rd_init(buf, sizeof(buf));
  rail_rd_u8(&r);
  CHECK(rail_rd_take(&r, SIZE_MAX) == NULL);
  CHECK_EQ_INT(r.err, 1);
}

TEST(bytes_writer_never_writes_past_capacity) {
  uint8_t buf[8];
  memset(buf, 0xaa, sizeof(buf));
  struct rail_wr w = rail_wr_init(buf, 6);
  rail_wr_u32(&w, 0x01020304u);
  CHECK_EQ_INT(w.err, 0);
  rail_wr_u32(&w, 0x05060708u);
  CHECK_EQ_INT(w.err, 1);
  CHECK_EQ_INT(buf[4], 0xaa);
  CHECK_EQ_INT(buf[6], 0xaa);
  CHECK_EQ_INT(w.off, 4);
}

TEST(bytes_add_overflow_is_caught) {
  uint64_t s = 7;
  CHECK_EQ_INT(rail_add_overflows(UINT64_MAX - 1, 2, &s), 1);
  CHECK_EQ_INT(s, 7);
  CHECK_EQ_INT(rail_add_overflows(1ull << 40, 4096, &s), 0);
  CHECK(s == (1ull << 40) + 4096);
}

/* Writes through the JSON writer into a memory buffer. */
static int json_to(char *buf, size_t len, void (*fill)(struct rail_json *)) {
  FILE *f = fmemopen(buf, len, "w");
  struct rail_json j;
  int rc;

  if (f == NULL) return -1;
  rail_json_begin(&j, f);
  fill(&j);
  rc = rail_json_end(&j);
  fclose(f);
  return rc;
}

static void json_fill_doc(struct rail_json *j) {
  rail_json_object(j, NULL, RAIL_JSON_BLOCK);
  rail_json_int(j, "schema", 1);
  rail_json_str(j, "name", "a\"b\\c\n\x01");
  rail_json_array(j, "rows", RAIL_JSON_BLOCK);
  rail_json_object(j, NULL, RAIL_JSON_INLINE);
  rail_json_bool(j, "up", 1);
  rail_json_double(j, "gbps", 0.1);
  rail_json_fixed(j, "ratio", 2.0 / 3.0, 2);
  rail_json_str(j, "none", NULL);
  rail_json_object_end(j);
  rail_json_array_end(j);
  rail_json_array(j, "empty", RAIL_JSON_BLOCK);
  rail_json_array_end(j);
  rail_json_double(j, "inf", 1.0 / 0.0);
  rail_json_double(j, "gbps", 400);
  rail_json_double(j, "tiny", 1e-9);
  rail_json_object_end(j);
}

TEST(json_writer_escapes_and_lays_out) {
  char buf[512];
  CHECK_EQ_INT(json_to(buf, sizeof(buf), json_fill_doc), 0);
  CHECK_EQ_STR(buf, "{\n"
                    "  \"schema\": 1,\n"
                    "  \"name\": \"a\\\"b\\\\c\\n\\u0001\",\n"
                    "  \"rows\": [\n"
                    "    {\"up\": true, \"gbps\": 0.1, \"ratio\": 0.67, \"none\": null}\n"
                    "  ],\n"
                    "  \"empty\": [],\n"
                    "  \"inf\": null,\n"
                    "  \"gbps\": 400,\n"
                    "  \"tiny\": 1e-09\n"
                    "}\n");
}

static void json_fill_unbalanced(struct rail_json *j) {
  rail_json_object(j, NULL, RAIL_JSON_BLOCK);
  rail_json_array(j, "a", RAIL_JSON_INLINE);
  rail_json_object_end(j); /* closes an array as an object */
}

static void json_fill_key_in_array(struct rail_json *j) {
  rail_json_array(j, NULL, RAIL_JSON_INLINE);
  rail_json_int(j, "k", 1);
  rail_json_array_end(j);
}

TEST(json_writer_reports_misuse) {
  char buf[128];
  CHECK_EQ_INT(json_to(buf, sizeof(buf), json_fill_unbalanced), -EINVAL);
  CHECK_EQ_INT(json_to(buf, sizeof(buf), json_fill_key_in_array), -EINVAL);
}

TEST(json_escape_for_hand_built_text) {
  char out[16];
  rail_json_escape("x\"y", out, sizeof(out));
  CHECK_EQ_STR(out, "\"x\\\"y\"");
}

RAIL_TEST_MAIN(param_defaults_and_suffixes,
               param_bad_value_warns_naming_the_variable_and_keeps_default,
               sysfs_bad_root_fails_every_open_and_warns_once,
               size_suffix_spellings_are_powers_of_1024, size_overflow_is_erange,
               size_garbage_empty_and_negative_are_einval,
               param_int_takes_sizes_and_keeps_negatives, bytes_round_trip_little_endian,
               bytes_reader_never_reads_past_the_end, bytes_writer_never_writes_past_capacity,
               bytes_add_overflow_is_caught, json_writer_escapes_and_lays_out,
               json_writer_reports_misuse, json_escape_for_hand_built_text)
