/* Helpers the topology test binaries share: a log capture, fixture
 * loading, golden files, model lookups and fake /sys trees built from
 * manifests (tests/fixtures/sysfs/README.md). Not thread-safe: tests run
 * one at a time. */
#define _GNU_SOURCE
#include "tests/unit/topology/helpers.h"

#include <errno.h>
#include <ftw.h>
#include <limits.h>
#include <stdarg.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>

#include "common/log.h"
#include "tests/unit/test.h"
#include "topology/topo.h"

/* ---- helpers ---- */

char logbuf[16384];
int nwarn;

static void capture(int level, unsigned long flags, const char *file, int line, const char *fmt,
                    ...) {
  size_t o = strlen(logbuf);
  va_list ap;
  if (level == RAIL_LOG_WARN) nwarn++;
  if (level > RAIL_LOG_INFO || o + 2 >= sizeof(logbuf)) return;
  o += (size_t)snprintf(logbuf + o, sizeof(logbuf) - o, "%s ",
                        level == RAIL_LOG_WARN ? "WARN" : "INFO");
  va_start(ap, fmt);
  if (o < sizeof(logbuf)) o += (size_t)vsnprintf(logbuf + o, sizeof(logbuf) - o, fmt, ap);
  va_end(ap);
  if (o + 1 < sizeof(logbuf)) strcat(logbuf, "\n");
}

void capture_start(void) {
  logbuf[0] = '\0';
  nwarn = 0;
  rail_log_set_logger(capture);
}

void capture_stop(void) { rail_log_set_logger(NULL); }

const char *src_dir(void) {
  const char *s = getenv("RAIL_SOURCE_DIR");
  return s != NULL ? s : ".";
}

struct rail_topo *load_fixture(const char *sub, const char *name, int *rc_out) {
  char dir[PATH_MAX], cwd[PATH_MAX];
  struct rail_topo *topo = NULL;
  int rc;

  snprintf(dir, sizeof(dir), "%s/tests/fixtures/%s", src_dir(), sub);
  if (getcwd(cwd, sizeof(cwd)) == NULL || chdir(dir) != 0) {
    fprintf(stderr, "%s: cannot enter %s\n", rail_test_current, dir);
    rail_test_failed_checks++;
    return NULL;
  }
  rc = rail_topo_load_file(name, &topo);
  if (chdir(cwd) != 0) rail_test_failed_checks++;
  if (rc_out != NULL)
    *rc_out = rc;
  else if (rc != 0) {
    fprintf(stderr, "%s: loading %s failed: %s\n", rail_test_current, name, strerror(-rc));
    rail_test_failed_checks++;
  }
  return rc == 0 ? topo : NULL;
}

char *print_text(const struct rail_topo *topo) {
  char *buf = NULL;
  size_t len = 0;
  FILE *f = open_memstream(&buf, &len);
  rail_topo_print_text(topo, f);
  fclose(f);
  return buf;
}

char *read_all(const char *path) {
  FILE *f = fopen(path, "r");
  char *buf;
  long n;
  if (f == NULL) return NULL;
  fseek(f, 0, SEEK_END);
  n = ftell(f);
  rewind(f);
  buf = calloc(1, (size_t)n + 1);
  if (buf != NULL && fread(buf, 1, (size_t)n, f) != (size_t)n) buf[0] = '\0';
  fclose(f);
  return buf;
}

/* Compares with the golden file; RAIL_UPDATE_GOLDEN=1 rewrites it instead
 * (then review the diff: the golden files are the expected machines). */
void check_golden(const char *golden, const char *actual) {
  char *want;
  if (getenv("RAIL_UPDATE_GOLDEN") != NULL) {
    FILE *f = fopen(golden, "w");
    if (f != NULL) {
      fputs(actual, f);
      fclose(f);
    }
    return;
  }
  want = read_all(golden);
  if (want == NULL) {
    fprintf(stderr, "%s: golden file %s missing\n", rail_test_current, golden);
    rail_test_failed_checks++;
    return;
  }
  if (strcmp(want, actual) != 0) {
    const char *a = want, *b = actual;
    int line = 1;
    while (*a && *a == *b) {
      if (*a == '\n') line++;
      a++, b++;
    }
    fprintf(stderr, "%s: output differs from %s at line %d:\n  want: %.*s\n  got:  %.*s\n",
            rail_test_current, golden, line, (int)strcspn(a, "\n"), a, (int)strcspn(b, "\n"), b);
    rail_test_failed_checks++;
  }
  free(want);
}

void check_fixture_golden(const struct rail_topo *topo, const char *name) {
  char golden[PATH_MAX], *text = print_text(topo);
  snprintf(golden, sizeof(golden), "%s/tests/fixtures/topo/%.*s.txt", src_dir(),
           (int)(strlen(name) - 4), name);
  check_golden(golden, text);
  free(text);
}

int gpu_by_bus(const struct rail_topo *topo, const char *bus) {
  for (int g = 0; g < topo->ngpus; g++)
    if (strcmp(topo->gpus[g].bus_id, bus) == 0) return g;
  return -1;
}

int nic_by_bus(const struct rail_topo *topo, const char *bus) {
  for (int n = 0; n < topo->nnics; n++)
    if (strcmp(topo->nics[n].bus_id, bus) == 0) return n;
  return -1;
}

int nic_by_name(const struct rail_topo *topo, const char *name) {
  const struct rail_topo_nic *n = rail_topo_find_netdev(topo, name);
  return n != NULL ? (int)(n - topo->nics) : -1;
}

int numa_os(const struct rail_topo *topo, int numa) {
  return numa >= 0 ? topo->numa[numa].os_index : -1;
}

uint64_t gpu_mask(const struct rail_topo *topo, const char *const *buses) {
  uint64_t m = 0;
  for (; *buses != NULL; buses++) {
    int g = gpu_by_bus(topo, *buses);
    CHECK(g >= 0);
    if (g >= 0) m |= 1ULL << g;
  }
  return m;
}

void check_rail(const struct rail_topo *topo, const struct want_rail *w) {
  int first = nic_by_bus(topo, w->nics[0]), k;
  const struct rail_topo_group *grp;

  CHECK(first >= 0);
  if (first < 0) return;
  grp = &topo->groups[topo->nics[first].group];
  for (k = 0; w->nics[k] != NULL; k++) {
    int n = nic_by_bus(topo, w->nics[k]);
    CHECK(n >= 0);
    if (n < 0) continue;
    CHECK_EQ_INT(topo->nics[n].group, topo->nics[first].group);
    for (int g = 0; w->gpus[g] != NULL; g++) {
      int gi = gpu_by_bus(topo, w->gpus[g]);
      CHECK(gi >= 0);
      if (gi >= 0) CHECK_EQ_STR(rail_path_name(topo->path[gi][n]), rail_path_name(w->path));
    }
  }
  CHECK_EQ_INT(grp->nnics, k);
  CHECK_EQ_INT(grp->gpu_mask, gpu_mask(topo, w->gpus));
  CHECK_EQ_INT(numa_os(topo, grp->numa), w->numa);
}

/* ---- fake sysfs trees ---- */

static int mkdirs(const char *path) {
  char buf[PATH_MAX];
  snprintf(buf, sizeof(buf), "%s", path);
  for (char *p = buf + 1; *p; p++) {
    if (*p != '/') continue;
    *p = '\0';
    if (mkdir(buf, 0755) != 0 && errno != EEXIST) return -1;
    *p = '/';
  }
  return mkdir(buf, 0755) != 0 && errno != EEXIST ? -1 : 0;
}

static int mkparent(const char *path) {
  char buf[PATH_MAX], *slash;
  snprintf(buf, sizeof(buf), "%s", path);
  slash = strrchr(buf, '/');
  if (slash == NULL) return 0;
  *slash = '\0';
  return mkdirs(buf);
}

/* A file's content: text and a newline ("= text"), or bytes ("=x 8f 00"). */
static int write_value(const char *path, const char *value, int hex) {
  FILE *f;
  int rc = 0;
  if (mkparent(path) != 0 || (f = fopen(path, "w")) == NULL) return -1;
  if (!hex) {
    fprintf(f, "%s\n", value);
  } else {
    for (const char *p = value; *p != '\0' && rc == 0;) {
      char *end;
      unsigned long b = strtoul(p, &end, 16);
      if (end == p || b > 0xff)
        rc = -1;
      else if (fputc((int)b, f) == EOF)
        rc = -1;
      for (p = end; *p == ' '; p++)
        ;
    }
  }
  if (fclose(f) != 0) rc = -1;
  return rc;
}

/* Builds a tree from manifest text (tests/fixtures/sysfs/README.md). */
static int build_tree(const char *root, const char *manifest) {
  char *copy = strdup(manifest), *save = NULL, *line;
  int rc = 0;
  for (line = strtok_r(copy, "\n", &save); line != NULL && rc == 0;
       line = strtok_r(NULL, "\n", &save)) {
    char path[PATH_MAX], *sep;
    const char *value = NULL, *target = NULL;
    size_t n = strlen(line);
    int len, hex = 0;
    if (line[0] == '#' || n == 0) continue;
    if ((sep = strstr(line, " -> ")) != NULL)
      target = sep + 4;
    else if ((sep = strstr(line, " =x ")) != NULL)
      value = sep + 4, hex = 1;
    else if ((sep = strstr(line, " = ")) != NULL)
      value = sep + 3;
    else if (line[n - 1] != '/')
      continue;
    if (sep != NULL) *sep = '\0';
    len = snprintf(path, sizeof(path), "%s/%s", root, line);
    if (len < 0 || (size_t)len >= sizeof(path))
      rc = -1;
    else if (target != NULL)
      rc = mkparent(path) || symlink(target, path);
    else if (value != NULL)
      rc = write_value(path, value, hex);
    else
      rc = mkdirs(path);
    if (rc != 0)
      fprintf(stderr, "%s: cannot create %s: %s\n", rail_test_current, path, strerror(errno));
  }
  free(copy);
  return rc;
}

static char tree_root[PATH_MAX];

const char *make_tree_text(const char *manifest) {
  const char *tmp = getenv("TMPDIR");
  snprintf(tree_root, sizeof(tree_root), "%s/rail-sysfs-XXXXXX", tmp ? tmp : "/tmp");
  if (mkdtemp(tree_root) == NULL || build_tree(tree_root, manifest) != 0) {
    rail_test_failed_checks++;
    return NULL;
  }
  return tree_root;
}

const char *make_tree(const char *name) {
  char path[PATH_MAX], *manifest;
  const char *root;
  snprintf(path, sizeof(path), "%s/tests/fixtures/sysfs/%s.tree", src_dir(), name);
  manifest = read_all(path);
  if (manifest == NULL) {
    fprintf(stderr, "%s: cannot read %s\n", rail_test_current, path);
    rail_test_failed_checks++;
    return NULL;
  }
  root = make_tree_text(manifest);
  free(manifest);
  return root;
}

static int rm_entry(const char *path, const struct stat *st, int flag, struct FTW *ftw) {
  return remove(path);
}

void remove_tree(void) {
  if (tree_root[0] != '\0') nftw(tree_root, rm_entry, 16, FTW_DEPTH | FTW_PHYS);
  tree_root[0] = '\0';
}
