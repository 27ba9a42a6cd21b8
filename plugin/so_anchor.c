/* The plugin .so is the whole static library linked whole-archive; CMake
 * needs at least one source of its own for the target. */
