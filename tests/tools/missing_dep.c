/* The dependency needs_missing.c links against; built into a folder that
 * is on no search path, so the loader cannot find it. */
__attribute__((visibility("default"))) int rail_test_missing_dep(void);

int rail_test_missing_dep(void) { return 1; }
