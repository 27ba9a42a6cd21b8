/* Rooted sysfs reads, the PCI address checker and the RDMA <-> netdev
 * resolver (sysfs.h). */
#include "common/sysfs.h"

#include <ctype.h>
#include <dirent.h>
#include <errno.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/log.h"
#include "common/param.h"

/* Every module opens the root (topology, interfaces, verbs, doctor): a root
 * that does not resolve is said once a process, not once a module. */
static void rail_sysfs_warn_root(const char *root, int rc) {
  static pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;
  static char warned[PATH_MAX];
  int say;

  pthread_mutex_lock(&mu);
  say = strcmp(warned, root) != 0;
  if (say) snprintf(warned, sizeof(warned), "%s", root);
  pthread_mutex_unlock(&mu);
  if (say) RAIL_WARN("sysfs root %s (NCCL_RAIL_SYSFS_ROOT): %s", root, strerror(-rc));
}

int rail_sysfs_open(struct rail_sysfs *fs, const char *root) {
  if (root == NULL) root = rail_param_str(RAIL_PARAM_SYSFS_ROOT);
  if (strcmp(root, "/") == 0) root = "";
  if (strlen(root) >= sizeof(fs->root)) return -ENAMETOOLONG;
  snprintf(fs->root, sizeof(fs->root), "%s", root);
  fs->real[0] = '\0';
  if (root[0] != '\0' && realpath(root, fs->real) == NULL) {
    int rc = -errno;
    rail_sysfs_warn_root(root, rc);
    return rc;
  }
  if (strcmp(fs->real, "/") == 0) fs->real[0] = '\0';
  return 0;
}

int rail_sysfs_is_live(const struct rail_sysfs *fs) { return fs->real[0] == '\0'; }

__attribute__((format(printf, 4, 0))) static int vpath(const struct rail_sysfs *fs, char *buf,
                                                       size_t len, const char *fmt, va_list ap) {
  int n = snprintf(buf, len, "%s/", fs->real), m;
  if (n < 0 || (size_t)n >= len) return -ENAMETOOLONG;
  m = vsnprintf(buf + n, len - (size_t)n, fmt, ap);
  if (m < 0 || (size_t)(n + m) >= len) return -ENAMETOOLONG;
  return 0;
}

int rail_sysfs_path(const struct rail_sysfs *fs, char *buf, size_t len, const char *fmt, ...) {
  va_list ap;
  int rc;
  va_start(ap, fmt);
  rc = vpath(fs, buf, len, fmt, ap);
  va_end(ap);
  return rc;
}

__attribute__((format(printf, 4, 0))) static int vread(const struct rail_sysfs *fs, char *out,
                                                       size_t len, const char *fmt, va_list ap) {
  char path[PATH_MAX];
  FILE *f;
  size_t n;
  int rc;

  if (len == 0) return -EINVAL;
  out[0] = '\0';
  rc = vpath(fs, path, sizeof(path), fmt, ap);
  if (rc != 0) return rc;
  f = fopen(path, "r");
  if (f == NULL) return -errno;
  n = fread(out, 1, len - 1, f);
  rc = ferror(f) ? (errno ? -errno : -EIO) : 0;
  fclose(f);
  if (rc != 0) {
    out[0] = '\0';
    return rc;
  }
  out[n] = '\0';
  while (n > 0 && (out[n - 1] == '\n' || out[n - 1] == ' ' || out[n - 1] == '\t'))
    out[--n] = '\0';
  return 0;
}

int rail_sysfs_read(const struct rail_sysfs *fs, char *out, size_t len, const char *fmt, ...) {
  va_list ap;
  int rc;
  va_start(ap, fmt);
  rc = vread(fs, out, len, fmt, ap);
  va_end(ap);
  return rc;
}

long rail_sysfs_read_long(const struct rail_sysfs *fs, long dflt, const char *fmt, ...) {
  char buf[64], *end;
  va_list ap;
  long v;
  int rc;

  va_start(ap, fmt);
  rc = vread(fs, buf, sizeof(buf), fmt, ap);
  va_end(ap);
  if (rc != 0) return dflt;
  errno = 0;
  v = strtol(buf, &end, 0);
  return end == buf || errno != 0 ? dflt : v;
}

int rail_sysfs_realpath(const struct rail_sysfs *fs, char *out, size_t len, const char *fmt, ...) {
  char path[PATH_MAX], real[PATH_MAX];
  size_t rl = strlen(fs->real);
  va_list ap;
  int rc;

  va_start(ap, fmt);
  rc = vpath(fs, path, sizeof(path), fmt, ap);
  va_end(ap);
  if (rc != 0) return rc;
  if (realpath(path, real) == NULL) return -errno;
  if (strncmp(real, fs->real, rl) != 0 || (real[rl] != '/' && real[rl] != '\0')) return -EXDEV;
  if ((size_t)snprintf(out, len, "%s", real + rl) >= len) return -ENAMETOOLONG;
  return 0;
}

/* Digit runs compare as numbers, so that device and node names sort as a
 * person (and the kernel's enumeration) would. */
static int natural_cmp(const char *a, const char *b) {
  while (*a != '\0' && *b != '\0') {
    if (isdigit((unsigned char)*a) && isdigit((unsigned char)*b)) {
      const char *ea = a, *eb = b;
      size_t la, lb;
      int c;
      while (*a == '0' && isdigit((unsigned char)a[1]))
        a++;
      while (*b == '0' && isdigit((unsigned char)b[1]))
        b++;
      for (ea = a; isdigit((unsigned char)*ea); ea++)
        ;
      for (eb = b; isdigit((unsigned char)*eb); eb++)
        ;
      la = (size_t)(ea - a);
      lb = (size_t)(eb - b);
      if (la != lb) return la < lb ? -1 : 1;
      c = strncmp(a, b, la);
      if (c != 0) return c;
      a = ea;
      b = eb;
      continue;
    }
    if (*a != *b) return (unsigned char)*a < (unsigned char)*b ? -1 : 1;
    a++;
    b++;
  }
  return (unsigned char)*a - (unsigned char)*b;
}

static int cmp_names(const void *a, const void *b) {
  const char *x = *(const char *const *)a, *y = *(const char *const *)b;
  int c = natural_cmp(x, y);
  return c != 0 ? c : strcmp(x, y);
}

int rail_sysfs_list(const struct rail_sysfs *fs, char ***names, int *count, const char *fmt, ...) {
  char path[PATH_MAX], **v = NULL;
  struct dirent *e;
  va_list ap;
  DIR *d;
  int n = 0, cap = 0, rc;

  va_start(ap, fmt);
  rc = vpath(fs, path, sizeof(path), fmt, ap);
  va_end(ap);
  if (rc != 0) return rc;
  d = opendir(path);
  if (d == NULL) return -errno;
  while ((e = readdir(d)) != NULL) {
    if (strcmp(e->d_name, ".") == 0 || strcmp(e->d_name, "..") == 0) continue;
    if (n == cap) {
      char **nv = realloc(v, (size_t)(cap = cap ? 2 * cap : 16) * sizeof(*v));
      if (nv == NULL) goto no_memory;
      v = nv;
    }
    if ((v[n] = strdup(e->d_name)) == NULL) goto no_memory;
    n++;
  }
  closedir(d);
  if (n > 0) qsort(v, (size_t)n, sizeof(*v), cmp_names);
  *names = v;
  *count = n;
  return 0;

no_memory:
  closedir(d);
  rail_sysfs_free_list(v, n);
  return -ENOMEM;
}

void rail_sysfs_free_list(char **names, int count) {
  for (int i = 0; i < count; i++)
    free(names[i]);
  free(names);
}

/* One hex field of at most max digits ending at one of `ends`. */
static const char *hex_field(const char *s, int max, const char *ends, unsigned long *v) {
  int n = 0;
  *v = 0;
  while (n <= max && isxdigit((unsigned char)s[n])) {
    *v = *v * 16 + (unsigned long)(isdigit((unsigned char)s[n])
                                       ? s[n] - '0'
                                       : tolower((unsigned char)s[n]) - 'a' + 10);
    n++;
  }
  /* strchr finds every string's NUL, so the end of s counts as an end only
   * for the last field (ends ""): a field cut short by it must not let the
   * caller step past the terminator. */
  if (n == 0 || n > max) return NULL;
  if (s[n] == '\0' ? ends[0] != '\0' : strchr(ends, s[n]) == NULL) return NULL;
  return s + n;
}

int rail_sysfs_bdf(const char *s, char *canon, size_t len) {
  unsigned long dom, bus, dev, fn;
  const char *p = s;

  if (s == NULL) return 0;
  if ((p = hex_field(p, 8, ":", &dom)) == NULL) return 0;
  if ((p = hex_field(p + 1, 2, ":", &bus)) == NULL) return 0;
  if ((p = hex_field(p + 1, 2, ".", &dev)) == NULL) return 0;
  if ((p = hex_field(p + 1, 1, "", &fn)) == NULL) return 0;
  if (dev > 0x1f || fn > 7) return 0;
  if (canon != NULL &&
      (size_t)snprintf(canon, len, "%04lx:%02lx:%02lx.%lx", dom, bus, dev, fn) >= len)
    return 0;
  return 1;
}

int rail_sysfs_pci_function(char *path) {
  for (;;) {
    char *slash = strrchr(path, '/');
    if (slash == NULL) return rail_sysfs_bdf(path, NULL, 0) ? 0 : -ENOENT;
    if (rail_sysfs_bdf(slash + 1, NULL, 0)) return 0;
    if (slash == path) return -ENOENT;
    *slash = '\0';
  }
}

int rail_sysfs_rdma_netdev(const struct rail_sysfs *fs, const char *dev, int port, char *out,
                           size_t len) {
  char buf[64], **names = NULL;
  int n = 0, rc = -ENOENT;

  out[0] = '\0';
  if (rail_sysfs_read(fs, buf, sizeof(buf), "sys/class/infiniband/%s/ports/%d/gid_attrs/ndevs/0",
                      dev, port) == 0 &&
      buf[0] != '\0') {
    snprintf(out, len, "%s", buf);
    return 0;
  }
  if (rail_sysfs_read(fs, buf, sizeof(buf), "sys/class/infiniband/%s/parent", dev) == 0 &&
      buf[0] != '\0') {
    snprintf(out, len, "%s", buf);
    return 0;
  }
  if (rail_sysfs_list(fs, &names, &n, "sys/class/infiniband/%s/device/net", dev) != 0)
    return -ENOENT;
  for (int i = 0; i < n && rc != 0; i++)
    if (rail_sysfs_read_long(fs, -1, "sys/class/infiniband/%s/device/net/%s/dev_port", dev,
                             names[i]) == port - 1) {
      snprintf(out, len, "%s", names[i]);
      rc = 0;
    }
  if (rc != 0 && n > 0) {
    snprintf(out, len, "%s", names[0]);
    rc = 0;
  }
  rail_sysfs_free_list(names, n);
  return rc;
}

int rail_sysfs_rdma_first_port(const struct rail_sysfs *fs, const char *dev) {
  char **ports = NULL;
  int n = 0, port = 1;

  if (rail_sysfs_list(fs, &ports, &n, "sys/class/infiniband/%s/ports", dev) != 0) return 1;
  for (int i = 0; i < n; i++)
    if (atoi(ports[i]) > 0) {
      port = atoi(ports[i]);
      break;
    }
  rail_sysfs_free_list(ports, n);
  return port;
}

int rail_sysfs_pci_rdma(const struct rail_sysfs *fs, const char *bdf, char *out, size_t len) {
  char **names = NULL;
  int n = 0, rc;

  out[0] = '\0';
  rc = rail_sysfs_list(fs, &names, &n, "sys/bus/pci/devices/%s/infiniband", bdf);
  if (rc != 0) return rc;
  if (n > 0) snprintf(out, len, "%s", names[0]);
  rail_sysfs_free_list(names, n);
  return n > 0 ? 0 : -ENOENT;
}
