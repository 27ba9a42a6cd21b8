/* A library linked against one that the test then hides: nccl-rail doctor
 * must name the missing dependency, as ldd would. */
int rail_test_missing_dep(void);
__attribute__((visibility("default"))) int rail_test_needs_missing(void);

int rail_test_needs_missing(void) { return rail_test_missing_dep(); }
