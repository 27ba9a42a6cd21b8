/* A tiny test harness: each unit.<module> binary is a list of TEST()s run in
 * order; every failed check prints both values and the test goes on to the
 * next check. main() comes from RAIL_TEST_MAIN(). A test that needs hardware
 * that is truly absent calls TEST_SKIP("why"); the binary exits 77 only if
 * every test skipped (ctest SKIP_RETURN_CODE). */
#ifndef RAIL_TEST_H
#define RAIL_TEST_H

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

struct rail_test {
  const char *name;
  void (*fn)(void);
};

extern int rail_test_failed_checks;
extern int rail_test_skipped;
extern const char *rail_test_current;

#define TEST(name) static void name(void)

#define CHECK(cond)                                                                                \
  do {                                                                                             \
    if (!(cond)) {                                                                                 \
      fprintf(stderr, "%s:%d: %s: CHECK(%s) failed\n", __FILE__, __LINE__, rail_test_current,      \
              #cond);                                                                              \
      rail_test_failed_checks++;                                                                   \
    }                                                                                              \
  } while (0)

#define CHECK_EQ_INT(a, b)                                                                         \
  do {                                                                                             \
    long long va_ = (long long)(a), vb_ = (long long)(b);                                          \
    if (va_ != vb_) {                                                                              \
      fprintf(stderr, "%s:%d: %s: %s == %s failed: %lld != %lld\n", __FILE__, __LINE__,            \
              rail_test_current, #a, #b, va_, vb_);                                                \
      rail_test_failed_checks++;                                                                   \
    }                                                                                              \
  } while (0)

#define CHECK_EQ_STR(a, b)                                                                         \
  do {                                                                                             \
    const char *sa_ = (a), *sb_ = (b);                                                             \
    if (sa_ == NULL || sb_ == NULL || strcmp(sa_, sb_) != 0) {                                     \
      fprintf(stderr, "%s:%d: %s: %s == %s failed:\n  got:      \"%s\"\n  expected: \"%s\"\n",     \
              __FILE__, __LINE__, rail_test_current, #a, #b, sa_ ? sa_ : "(null)",                 \
              sb_ ? sb_ : "(null)");                                                               \
      rail_test_failed_checks++;                                                                   \
    }                                                                                              \
  } while (0)

#define TEST_SKIP(why)                                                                             \
  do {                                                                                             \
    fprintf(stderr, "%s: SKIP: %s\n", rail_test_current, why);                                     \
    rail_test_skipped = 1;                                                                         \
    return;                                                                                        \
  } while (0)

/* Usage: RAIL_TEST_MAIN(test_a, test_b, ...) */
#define RAIL_TEST_ENTRY(fn)                                                                        \
  { #fn, fn }
#define RAIL_TEST_MAIN(...)                                                                        \
  int rail_test_failed_checks, rail_test_skipped;                                                  \
  const char *rail_test_current;                                                                   \
  int main(int argc, char **argv) {                                                                \
    static void (*const fns_[])(void) = {__VA_ARGS__};                                             \
    const char *names_ = #__VA_ARGS__;                                                             \
    return rail_test_run(fns_, sizeof(fns_) / sizeof(fns_[0]), names_, argc, argv);                \
  }

/* Runs every test (or only the one named in argv[1]); prints one line per
 * test and the closing "N passed, N failed" line. */
static inline int rail_test_run(void (*const *fns)(void), size_t n, const char *names, int argc,
                                char **argv) {
  int passed = 0, failed = 0, skipped = 0;
  char buf[4096], *save = NULL, *tok;

  snprintf(buf, sizeof(buf), "%s", names);
  tok = strtok_r(buf, ", \t\n", &save);
  for (size_t i = 0; i < n && tok != NULL; i++, tok = strtok_r(NULL, ", \t\n", &save)) {
    if (argc > 1 && strcmp(argv[1], tok) != 0) continue;
    int before = rail_test_failed_checks;
    rail_test_skipped = 0;
    rail_test_current = tok;
    fns[i]();
    if (rail_test_failed_checks != before) {
      printf("FAIL %s\n", tok);
      failed++;
    } else if (rail_test_skipped) {
      printf("SKIP %s\n", tok);
      skipped++;
    } else {
      printf("ok   %s\n", tok);
      passed++;
    }
  }
  printf("%d passed, %d failed, %d skipped\n", passed, failed, skipped);
  /* A ctest entry naming a test that is gone would pass having run none. */
  if (argc > 1 && passed + failed + skipped == 0) {
    printf("FAIL no test named %s\n", argv[1]);
    return 1;
  }
  if (failed) return 1;
  if (passed == 0 && skipped > 0) return 77;
  return 0;
}

#endif
