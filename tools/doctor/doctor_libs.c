/* doctor's checks of what gets loaded: the plugin library as NCCL's name
 * rules find it, the libraries it needs (what ldd would say: the ELF's
 * DT_NEEDED entries, each resolved by the dynamic loader itself), whether
 * hwloc and libibverbs are there, and which NCCL a job will meet. */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <elf.h>
#include <errno.h>
#include <fcntl.h>
#include <glob.h>
#include <limits.h>
#include <link.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "net/verbs/api.h"
#include "tools/doctor/doctor.h"
#include "plugin/collnet/collnet.h"
#include "topology/topo.h"

#if __ELF_NATIVE_CLASS == 64
#define LIBS_ELFCLASS ELFCLASS64
#else
#define LIBS_ELFCLASS ELFCLASS32
#endif
#define LIBS_MAX_NEEDED 32
#define LIBS_MAX_NCCL 16
/* The oldest NCCL whose net ABI (v8) the plugin exports. */
#define LIBS_NCCL_OLDEST 22000
#define LIBS_NCCL_TUNED 22200 /* the first with tuner v3's cost table */

struct libs_needed {
  char name[128];
  char path[PATH_MAX]; /* "" when the loader cannot find it */
};

struct libs_nccl {
  char path[PATH_MAX];
  const char *found_by; /* "LD_LIBRARY_PATH", "ld.so.cache", ... */
  int code;             /* ncclGetVersion's; -1 when it could not be read */
};

struct rail_doctor_libs {
  char value[PATH_MAX];       /* what NCCL_NET_PLUGIN names (or --plugin, or "rail") */
  char plugin_path[PATH_MAX]; /* "" when it did not open */
  char tried[640];
  int net_abi[16], nnet, tuner_abi[16], ntuner;
  struct libs_needed needed[LIBS_MAX_NEEDED];
  int nneeded;
  struct libs_nccl nccl[LIBS_MAX_NCCL];
  int nnccl;
};

static struct rail_doctor_libs *libs_get(struct rail_doctor *d) {
  if (d->libs == NULL) d->libs = calloc(1, sizeof(*d->libs));
  return d->libs;
}

/* ---- the plugin ---------------------------------------------------------- */

/* NCCL's rules from 2.27 (src/plugin/plugin_open.cc): the value as given,
 * then, for a bare name, libnccl-net-<value>.so; dlopen(RTLD_NOW|RTLD_LOCAL)
 * searching the loader's path. 2.21 to 2.26 try the prefixed name after any
 * value, which finds nothing more; 2.20 tries only the prefixed name
 * (libs_nccl_names_check). On failure `err` holds the last dlerror(). */
static void *libs_open_plugin(const char *value, char *tried, size_t tlen, char *err, size_t elen) {
  char name[300];
  void *dl = dlopen(value, RTLD_NOW | RTLD_LOCAL);
  size_t vlen = strlen(value);

  snprintf(tried, tlen, "%s", value);
  if (dl != NULL) return dl;
  snprintf(err, elen, "%s", dlerror());
  if (strchr(value, '/') != NULL ||
      (strncmp(value, "lib", 3) == 0 && vlen > 3 && strcmp(value + vlen - 3, ".so") == 0))
    return NULL;
  snprintf(name, sizeof(name), "libnccl-net-%s.so", value);
  snprintf(tried, tlen, "%s, then %s", value, name);
  dl = dlopen(name, RTLD_NOW | RTLD_LOCAL);
  if (dl == NULL) snprintf(err, elen, "%s", dlerror());
  return dl;
}

static void libs_dl_path(void *dl, char *out, size_t len) {
  struct link_map *lm = NULL;

  out[0] = '\0';
  if (dlinfo(dl, RTLD_DI_LINKMAP, &lm) == 0 && lm != NULL && lm->l_name != NULL)
    snprintf(out, len, "%s", lm->l_name);
}

static void libs_abis(void *dl, struct rail_doctor_libs *L) {
  char sym[64];

  for (int v = 2; v <= 15; v++) {
    snprintf(sym, sizeof(sym), "ncclNetPlugin_v%d", v);
    if (dlsym(dl, sym) != NULL) L->net_abi[L->nnet++] = v;
    snprintf(sym, sizeof(sym), "ncclTunerPlugin_v%d", v);
    if (dlsym(dl, sym) != NULL) L->tuner_abi[L->ntuner++] = v;
  }
}

static void libs_abi_str(const int *v, int n, char *out, size_t len) {
  if (n == 0)
    snprintf(out, len, "none");
  else if (n == 1)
    snprintf(out, len, "v%d", v[0]);
  else
    snprintf(out, len, "v%d-v%d", v[0], v[n - 1]);
}

/* DT_NEEDED of an ELF object of this machine's class, read from the file:
 * the names the loader will look for. 0, or -errno / -ENOEXEC. */
static int libs_elf_needed(const char *path, struct libs_needed *out, int max, int *n) {
  const ElfW(Ehdr) * eh;
  const ElfW(Phdr) * ph, *dyn = NULL;
  const unsigned char *img;
  struct stat st;
  uint64_t strtab = 0, stroff = 0;
  int fd = open(path, O_RDONLY | O_CLOEXEC), rc = 0, found = 0;

  *n = 0;
  if (fd < 0) return -errno;
  if (fstat(fd, &st) != 0 || st.st_size < (off_t)sizeof(*eh)) {
    close(fd);
    return -ENOEXEC;
  }
  img = mmap(NULL, (size_t)st.st_size, PROT_READ, MAP_PRIVATE, fd, 0);
  close(fd);
  if (img == MAP_FAILED) return -errno;
  eh = (const ElfW(Ehdr) *)img;
  if (memcmp(eh->e_ident, ELFMAG, SELFMAG) != 0 || eh->e_ident[EI_CLASS] != LIBS_ELFCLASS ||
      eh->e_phoff + (uint64_t)eh->e_phnum * sizeof(*ph) > (uint64_t)st.st_size) {
    rc = -ENOEXEC;
    goto unmap;
  }
  ph = (const ElfW(Phdr) *)(img + eh->e_phoff);
  for (int i = 0; i < eh->e_phnum; i++)
    if (ph[i].p_type == PT_DYNAMIC) dyn = &ph[i];
  if (dyn == NULL || dyn->p_offset + dyn->p_filesz > (uint64_t)st.st_size) goto unmap;
  for (const ElfW(Dyn) *e = (const ElfW(Dyn) *)(img + dyn->p_offset);
       (const unsigned char *)(e + 1) <= img + dyn->p_offset + dyn->p_filesz && e->d_tag != DT_NULL;
       e++)
    if (e->d_tag == DT_STRTAB) strtab = e->d_un.d_ptr;
  /* DT_STRTAB is an address: the PT_LOAD that maps it gives its offset. */
  for (int i = 0; i < eh->e_phnum && !found; i++)
    if (ph[i].p_type == PT_LOAD && strtab >= ph[i].p_vaddr &&
        strtab < ph[i].p_vaddr + ph[i].p_filesz) {
      stroff = strtab - ph[i].p_vaddr + ph[i].p_offset;
      found = 1;
    }
  if (!found) {
    rc = -ENOEXEC;
    goto unmap;
  }
  for (const ElfW(Dyn) *e = (const ElfW(Dyn) *)(img + dyn->p_offset);
       (const unsigned char *)(e + 1) <= img + dyn->p_offset + dyn->p_filesz && e->d_tag != DT_NULL;
       e++) {
    if (e->d_tag != DT_NEEDED || *n >= max) continue;
    if (stroff + e->d_un.d_val >= (uint64_t)st.st_size) continue;
    snprintf(out[*n].name, sizeof(out[*n].name), "%.*s",
             (int)strnlen((const char *)img + stroff + e->d_un.d_val,
                          (size_t)st.st_size - (stroff + e->d_un.d_val)),
             (const char *)img + stroff + e->d_un.d_val);
    (*n)++;
  }
unmap:
  munmap((void *)img, (size_t)st.st_size);
  return rc;
}

/* Each needed library as the loader resolves it (the same search a job's
 * dlopen of the plugin makes, LD_LIBRARY_PATH and ld.so.cache included). */
static void libs_resolve(struct rail_doctor_libs *L) {
  for (int i = 0; i < L->nneeded; i++) {
    void *dl = dlopen(L->needed[i].name, RTLD_LAZY | RTLD_LOCAL);
    L->needed[i].path[0] = '\0';
    if (dl == NULL) continue;
    libs_dl_path(dl, L->needed[i].path, sizeof(L->needed[i].path));
    if (L->needed[i].path[0] == '\0') snprintf(L->needed[i].path, sizeof(L->needed[i].path), "?");
    dlclose(dl);
  }
}

static void libs_report_needed(struct rail_doctor *d, const struct rail_doctor_libs *L) {
  char list[1024] = "";
  size_t off = 0;

  for (int i = 0; i < L->nneeded; i++) {
    const struct libs_needed *nd = &L->needed[i];
    if (nd->path[0] == '\0') {
      char fix[256];
      snprintf(fix, sizeof(fix),
               "install the package that provides %s (Debian: apt-get install %s), or add its "
               "folder to LD_LIBRARY_PATH",
               nd->name, strncmp(nd->name, "libhwloc.so.", 12) == 0 ? "libhwloc15" : "it");
      rail_doctor_say(d, RAIL_DOCTOR_FAIL, "libs", fix,
                      "%s needs %s, which the loader cannot find: NCCL cannot load the plugin",
                      L->plugin_path, nd->name);
    } else if (off < sizeof(list)) {
      off += (size_t)snprintf(list + off, sizeof(list) - off, "%s%s => %s", off ? ", " : "",
                              nd->name, nd->path);
    }
  }
  if (off > 0) rail_doctor_say(d, RAIL_DOCTOR_OK, "libs", NULL, "%s", list);
}

/* NCCL 2.27 and later take NCCL_NET_PLUGIN as a comma-separated list and
 * use the first plugin that loads (src/plugin/net.cc); each name by
 * libs_open_plugin's rules. All the names tried go into L->tried. */
static void *libs_open_list(struct rail_doctor_libs *L, const char *value, char *err, size_t elen) {
  char list[PATH_MAX], tried[sizeof(L->tried)], *save = NULL;
  size_t off = 0;
  void *dl = NULL;

  snprintf(list, sizeof(list), "%s", value);
  L->tried[0] = '\0';
  for (char *tok = strtok_r(list, ",", &save); tok != NULL && dl == NULL;
       tok = strtok_r(NULL, ",", &save)) {
    dl = libs_open_plugin(tok, tried, sizeof(tried), err, elen);
    if (off < sizeof(L->tried))
      off += (size_t)snprintf(L->tried + off, sizeof(L->tried) - off, "%s%s", off ? ", then " : "",
                              tried);
  }
  return dl;
}

/* What NCCL_NET_PLUGIN names (or --plugin; "rail" when both are unset),
 * found as NCCL finds it; then its NEEDED libraries. */
void rail_doctor_check_plugin(struct rail_doctor *d) {
  struct rail_doctor_libs *L = libs_get(d);
  const char *value = d->plugin;
  char err[512] = "", net[32], tuner[32];
  void *dl;
  int rc;

  if (L == NULL) return;
  if (value == NULL) value = getenv("NCCL_NET_PLUGIN");
  if (value == NULL || strcasecmp(value, "none") == 0 || value[0] == '\0') value = "rail";
  snprintf(L->value, sizeof(L->value), "%s", value);
  dl = libs_open_list(L, value, err, sizeof(err));
  if (dl == NULL) {
    rail_doctor_say(d, RAIL_DOCTOR_FAIL, "plugin",
                    "install the nccl-rail package (it puts the library in the loader's path), "
                    "or add the folder holding libnccl-net-rail.so to LD_LIBRARY_PATH",
                    "NCCL_NET_PLUGIN=%s: NCCL will not find the plugin (tried %s: %s)", value,
                    L->tried, err);
    /* The library may be there with a dependency missing: say which. */
    if (strchr(value, '/') != NULL) snprintf(L->plugin_path, sizeof(L->plugin_path), "%s", value);
  } else {
    libs_dl_path(dl, L->plugin_path, sizeof(L->plugin_path));
    libs_abis(dl, L);
    libs_abi_str(L->net_abi, L->nnet, net, sizeof(net));
    libs_abi_str(L->tuner_abi, L->ntuner, tuner, sizeof(tuner));
    rail_doctor_say(d, L->nnet ? RAIL_DOCTOR_OK : RAIL_DOCTOR_FAIL, "plugin",
                    L->nnet ? NULL : "point NCCL_NET_PLUGIN at nccl-rail's library",
                    "NCCL_NET_PLUGIN=%s opens %s: net ABI %s, tuner ABI %s", value, L->plugin_path,
                    net, tuner);
    dlclose(dl);
  }
  if (L->plugin_path[0] == '\0') return;
  rc = libs_elf_needed(L->plugin_path, L->needed, LIBS_MAX_NEEDED, &L->nneeded);
  if (rc != 0) {
    rail_doctor_say(d, RAIL_DOCTOR_WARN, "libs", NULL, "%s: cannot read its ELF headers (%s)",
                    L->plugin_path, strerror(-rc));
    return;
  }
  libs_resolve(L);
  libs_report_needed(d, L);
}

/* hwloc and libibverbs are both opened at run time: without hwloc the
 * model comes from sysfs alone (as good for NICs and NUMA nodes), and only
 * a node with RDMA devices needs libibverbs. The topology source is what
 * the plugin's model was built from, and why. */
void rail_doctor_check_runtime(struct rail_doctor *d) {
  const char *note = d->topo->source_note;
  char path[PATH_MAX] = "", sysfs[PATH_MAX];
  struct stat st;
  void *dl;
  int rdma;

  rail_doctor_say(d, RAIL_DOCTOR_OK, "hwloc", NULL, "%s; topology source: %s%s%s%s",
                  rail_topo_hwloc_status(), d->topo->source[0] ? d->topo->source : "(none)",
                  note[0] ? " (" : "", note, note[0] ? ")" : "");
  rdma = d->sysfs_ok &&
         rail_sysfs_path(&d->sysfs, sysfs, sizeof(sysfs), "sys/class/infiniband") == 0 &&
         stat(sysfs, &st) == 0;
  dl = dlopen("libibverbs.so.1", RTLD_LAZY | RTLD_LOCAL);
  if (dl != NULL) {
    libs_dl_path(dl, path, sizeof(path));
    dlclose(dl);
    if (rail_verbs_api_get() != NULL)
      rail_doctor_say(d, RAIL_DOCTOR_OK, "verbs", NULL, "libibverbs.so.1 => %s", path);
    else
      rail_doctor_say(d, rdma ? RAIL_DOCTOR_WARN : RAIL_DOCTOR_OK, "verbs",
                      rdma ? "install the distribution's current libibverbs (Debian: libibverbs1)"
                           : NULL,
                      "libibverbs.so.1 => %s lacks calls the plugin needs (NCCL_DEBUG=INFO says "
                      "which): the data goes over TCP",
                      path);
  } else {
    rail_doctor_say(d, rdma ? RAIL_DOCTOR_WARN : RAIL_DOCTOR_OK, "verbs",
                    rdma ? "apt-get install libibverbs1 ibverbs-providers" : NULL,
                    "libibverbs.so.1 not found%s",
                    rdma ? ": RDMA devices are present but the "
                           "data will go over TCP"
                         : " (not needed: no RDMA device here)");
  }
}

/* ---- NCCL ---------------------------------------------------------------- */

static void libs_nccl_add(struct rail_doctor_libs *L, const char *path, const char *by) {
  char real[PATH_MAX];

  if (L->nnccl >= LIBS_MAX_NCCL || access(path, R_OK) != 0 || realpath(path, real) == NULL) return;
  for (int i = 0; i < L->nnccl; i++) {
    char other[PATH_MAX];
    if (realpath(L->nccl[i].path, other) != NULL && strcmp(other, real) == 0) return;
  }
  snprintf(L->nccl[L->nnccl].path, sizeof(L->nccl[0].path), "%s", path);
  L->nccl[L->nnccl].found_by = by;
  L->nccl[L->nnccl].code = -1;
  L->nnccl++;
}

static void libs_nccl_ld_path(struct rail_doctor_libs *L) {
  const char *env = getenv("LD_LIBRARY_PATH");
  char dirs[4096], file[PATH_MAX], *save = NULL;

  if (env == NULL) return;
  snprintf(dirs, sizeof(dirs), "%s", env);
  for (char *dir = strtok_r(dirs, ":", &save); dir != NULL; dir = strtok_r(NULL, ":", &save)) {
    snprintf(file, sizeof(file), "%s/libnccl.so.2", dir);
    libs_nccl_add(L, file, "LD_LIBRARY_PATH");
  }
}

/* ldconfig -p lists the cache the loader reads: "libnccl.so.2 (...) => PATH". */
static void libs_nccl_cache(struct rail_doctor_libs *L) {
  static const char *const cmds[] = {"/sbin/ldconfig -p 2>/dev/null", "ldconfig -p 2>/dev/null"};
  char line[PATH_MAX + 128];

  for (size_t c = 0; c < sizeof(cmds) / sizeof(cmds[0]); c++) {
    FILE *p = popen(cmds[c], "r");
    int any = 0;
    if (p == NULL) continue;
    while (fgets(line, sizeof(line), p) != NULL) {
      char *arrow = strstr(line, "=> ");
      const char *name = line + strspn(line, " \t");
      any = 1;
      if (arrow == NULL || strncmp(name, "libnccl.so.2 ", 13) != 0) continue;
      arrow[3 + strcspn(arrow + 3, "\n")] = '\0';
      libs_nccl_add(L, arrow + 3, "ld.so.cache");
    }
    pclose(p);
    if (any) return;
  }
}

static void libs_nccl_default_dirs(struct rail_doctor_libs *L) {
  static const char *const dirs[] = {"/lib/" RAIL_MULTIARCH, "/usr/lib/" RAIL_MULTIARCH, "/lib",
                                     "/usr/lib"};
  char file[PATH_MAX];

  for (size_t i = 0; i < sizeof(dirs) / sizeof(dirs[0]); i++) {
    snprintf(file, sizeof(file), "%s/libnccl.so.2", dirs[i]);
    libs_nccl_add(L, file, "the loader's default folders");
  }
}

/* PyTorch's NCCL comes in the nvidia-nccl wheel, loaded through torch's own
 * RPATH: site-packages/nvidia/nccl/lib under a virtualenv, conda, the system
 * or the user's Python. */
static void libs_nccl_wheels(struct rail_doctor_libs *L) {
  const char *home = getenv("HOME");
  char user[PATH_MAX], pat[PATH_MAX];
  const char *roots[] = {
      getenv("VIRTUAL_ENV"), getenv("CONDA_PREFIX"), "/usr/local", "/usr", "/opt/conda", NULL};

  if (home != NULL) {
    snprintf(user, sizeof(user), "%s/.local", home);
    roots[5] = user;
  }
  for (size_t i = 0; i < sizeof(roots) / sizeof(roots[0]); i++) {
    glob_t g;
    if (roots[i] == NULL) continue;
    snprintf(pat, sizeof(pat), "%s/lib/python3*/*-packages/nvidia/nccl/lib/libnccl.so.2", roots[i]);
    if (glob(pat, 0, NULL, &g) != 0) continue;
    for (size_t k = 0; k < g.gl_pathc; k++)
      libs_nccl_add(L, g.gl_pathv[k], "a Python wheel (nvidia-nccl, PyTorch's NCCL)");
    globfree(&g);
  }
}

/* ncclGetVersion() of one library, called in a child process: loading an
 * NCCL runs its constructors, and a broken one must not take doctor down
 * or hang it. -1 when it cannot be read within 10 s. */
static int libs_nccl_version(const char *path) {
  int pfd[2], code = -1, status;
  pid_t pid;

  if (pipe(pfd) != 0) return -1;
  pid = fork();
  if (pid < 0) {
    close(pfd[0]);
    close(pfd[1]);
    return -1;
  }
  if (pid == 0) {
    void *dl = dlopen(path, RTLD_NOW | RTLD_LOCAL);
    int (*get)(int *) = dl ? (int (*)(int *))dlsym(dl, "ncclGetVersion") : NULL;
    int v = -1;
    close(pfd[0]);
    if (get == NULL || get(&v) != 0) v = -1;
    if (write(pfd[1], &v, sizeof(v)) != (ssize_t)sizeof(v)) _exit(1);
    _exit(0);
  }
  close(pfd[1]);
  for (int waited = 0; waited < 100; waited++) {
    struct timespec ts = {0, 100 * 1000000L};
    if (waitpid(pid, &status, WNOHANG) == pid) {
      if (read(pfd[0], &code, sizeof(code)) != (ssize_t)sizeof(code)) code = -1;
      close(pfd[0]);
      return code;
    }
    nanosleep(&ts, NULL);
  }
  kill(pid, SIGKILL);
  waitpid(pid, &status, 0);
  close(pfd[0]);
  return -1;
}

/* NCCL's version code: 2.28.9 is 22809 (from 2.9 on); older ones 2708. */
static void libs_nccl_str(int code, char *out, size_t len) {
  if (code >= 10000)
    snprintf(out, len, "%d.%d.%d", code / 10000, code % 10000 / 100, code % 100);
  else
    snprintf(out, len, "%d.%d.%d", code / 1000, code % 1000 / 100, code % 100);
}

/* The net ABI an NCCL release prefers (it falls back to older ones). */
static int libs_nccl_net_abi(int code) {
  if (code >= 23000) return 12;
  if (code >= 22800) return 11;
  if (code >= 22600) return 10;
  if (code >= 22400) return 9;
  return 8;
}

/* What an NCCL release before 2.27 does with NCCL_NET_PLUGIN that 2.27's
 * rules (libs_open_plugin) do not: 2.20 opens only libnccl-net-<value>.so
 * (src/net.cc, ncclNetPluginInit), so a path or a full file name never
 * loads; before 2.27 the value is one name, never a comma-separated list
 * (src/plugin/net.cc at 2.27 splits it). Says how that release fares. */
static void libs_nccl_names_check(struct rail_doctor *d, const struct libs_nccl *n,
                                  const char *ver) {
  const struct rail_doctor_libs *L = d->libs;
  char name[PATH_MAX + 32];
  void *dl;

  if (L->value[0] == '\0') return; /* the plugin check did not run */
  if (n->code < 22700 && strchr(L->value, ',') != NULL) {
    rail_doctor_say(d, RAIL_DOCTOR_FAIL, "nccl",
                    "set NCCL_NET_PLUGIN to one name (rail) for this NCCL; lists work from 2.27",
                    "NCCL %s at %s takes NCCL_NET_PLUGIN=%s as one library name, not a list: it "
                    "will not load the plugin",
                    ver, n->path, L->value);
    return;
  }
  if (n->code >= 22100) return;
  snprintf(name, sizeof(name), "libnccl-net-%s.so", L->value);
  dl = dlopen(name, RTLD_NOW | RTLD_LOCAL);
  if (dl != NULL) {
    dlclose(dl);
    return;
  }
  rail_doctor_say(d, RAIL_DOCTOR_FAIL, "nccl",
                  "set NCCL_NET_PLUGIN=rail and put the folder holding libnccl-net-rail.so on "
                  "LD_LIBRARY_PATH (the nccl-rail package installs it where the loader looks)",
                  "NCCL %s at %s opens only libnccl-net-<NCCL_NET_PLUGIN>.so, here %s, which the "
                  "loader cannot find: it will not load the plugin (a path or a file name works "
                  "from NCCL 2.21)",
                  ver, n->path, name);
}

static void libs_nccl_report(struct rail_doctor *d, const struct libs_nccl *n, int first) {
  const struct rail_doctor_libs *L = d->libs;
  char ver[32], uses[64] = "";
  int want, best = 0;

  if (n->code < 0) {
    rail_doctor_say(d, RAIL_DOCTOR_WARN, "nccl", NULL,
                    "%s (%s): ncclGetVersion could not be read; not an NCCL, or it failed to load",
                    n->path, n->found_by);
    return;
  }
  libs_nccl_str(n->code, ver, sizeof(ver));
  if (n->code < LIBS_NCCL_OLDEST) {
    rail_doctor_say(d, RAIL_DOCTOR_FAIL, "nccl", "use NCCL 2.20 or later",
                    "NCCL %s at %s (%s) is older than 2.20, the oldest this plugin supports: it "
                    "will not load the plugin",
                    ver, n->path, n->found_by);
    return;
  }
  want = libs_nccl_net_abi(n->code);
  for (int i = 0; i < L->nnet; i++)
    if (L->net_abi[i] <= want && L->net_abi[i] > best) best = L->net_abi[i];
  if (best > 0) snprintf(uses, sizeof(uses), "; it will use the plugin's net v%d", best);
  rail_doctor_say(d, RAIL_DOCTOR_OK, "nccl", NULL, "NCCL %s at %s (%s%s), prefers net v%d%s", ver,
                  n->path, n->found_by,
                  first ? "; the one a plain dlopen(\"libnccl.so.2\") takes" : "", want, uses);
  libs_nccl_names_check(d, n, ver);
  /* The network part works on 2.20 and 2.21, but the tuner cannot: 2.20
   * looks only for tuner v1, 2.21's v2 passes no cost table
   * (plugin/tuner_abi.c). A user who expects NCCL_ALGO to be unneeded
   * should hear it here, not from a slow job. */
  if (n->code < LIBS_NCCL_TUNED)
    rail_doctor_say(d, RAIL_DOCTOR_WARN, "nccl", "use NCCL 2.22 or later for the tuner",
                    "NCCL %s at %s gives a tuner no cost table (%s): nccl-rail's tuner leaves "
                    "every algorithm and protocol choice to NCCL there",
                    ver, n->path,
                    n->code < 22100 ? "it looks only for tuner v1" : "tuner v2 has none");
}

void rail_doctor_check_nccl(struct rail_doctor *d) {
  struct rail_doctor_libs *L = libs_get(d);
  int loader_first = -1;

  if (L == NULL) return;
  libs_nccl_ld_path(L);
  libs_nccl_cache(L);
  libs_nccl_default_dirs(L);
  libs_nccl_wheels(L);
  if (L->nnccl == 0) {
    rail_doctor_say(d, RAIL_DOCTOR_OK, "nccl", NULL,
                    "no libnccl.so.2 on this node (LD_LIBRARY_PATH, ld.so.cache, /usr/lib, "
                    "Python wheels): jobs bring their own, e.g. in a container or a wheel");
    return;
  }
  for (int i = 0; i < L->nnccl; i++) {
    L->nccl[i].code = libs_nccl_version(L->nccl[i].path);
    if (loader_first < 0 && strncmp(L->nccl[i].found_by, "a Python", 8) != 0) loader_first = i;
  }
  for (int i = 0; i < L->nnccl; i++)
    libs_nccl_report(d, &L->nccl[i], i == loader_first);
}

/* ---- JSON ----------------------------------------------------------------- */

static void libs_json_ints(struct rail_json *j, const char *key, const int *v, int n) {
  rail_json_array(j, key, RAIL_JSON_INLINE);
  for (int i = 0; i < n; i++)
    rail_json_int(j, NULL, v[i]);
  rail_json_array_end(j);
}

void rail_doctor_json_plugin(struct rail_doctor *d, struct rail_json *j) {
  const struct rail_doctor_libs *L = d->libs;

  if (L == NULL) return;
  rail_json_object(j, "plugin", RAIL_JSON_BLOCK);
  rail_json_str(j, "tried", L->tried);
  rail_json_str(j, "path", L->plugin_path[0] ? L->plugin_path : NULL);
  libs_json_ints(j, "net_abi", L->net_abi, L->nnet);
  libs_json_ints(j, "tuner_abi", L->tuner_abi, L->ntuner);
  rail_json_array(j, "needed", RAIL_JSON_BLOCK);
  for (int i = 0; i < L->nneeded; i++) {
    rail_json_object(j, NULL, RAIL_JSON_INLINE);
    rail_json_str(j, "name", L->needed[i].name);
    rail_json_str(j, "path", L->needed[i].path[0] ? L->needed[i].path : NULL);
    rail_json_object_end(j);
  }
  rail_json_array_end(j);
  rail_json_object_end(j);
}

void rail_doctor_json_nccl(struct rail_doctor *d, struct rail_json *j) {
  const struct rail_doctor_libs *L = d->libs;
  char ver[32];

  if (L == NULL) return;
  rail_json_array(j, "nccl", RAIL_JSON_BLOCK);
  for (int i = 0; i < L->nnccl; i++) {
    rail_json_object(j, NULL, RAIL_JSON_INLINE);
    rail_json_str(j, "path", L->nccl[i].path);
    rail_json_str(j, "found_by", L->nccl[i].found_by);
    if (L->nccl[i].code >= 0) {
      libs_nccl_str(L->nccl[i].code, ver, sizeof(ver));
      rail_json_str(j, "version", ver);
      rail_json_int(j, "version_code", L->nccl[i].code);
      rail_json_int(j, "net_abi", libs_nccl_net_abi(L->nccl[i].code));
    } else {
      rail_json_null(j, "version");
    }
    rail_json_object_end(j);
  }
  rail_json_array_end(j);
}

/* CollNet (SHARP) comes through the plugin only if a delegate is found
 * (plugin/collnet/collnet.h): say whether, from which file, and what to
 * set. Asked for by name and unusable is a failure; not installed is not. */
void rail_doctor_check_collnet(struct rail_doctor *d) {
  struct rail_collnet_info ci;
  const char *asked = getenv("NCCL_RAIL_COLLNET_PLUGIN");

  rail_collnet_describe(&ci);
  if (ci.available && ci.enabled)
    rail_doctor_say(d, RAIL_DOCTOR_OK, "collnet", NULL,
                    "CollNet (in-network reduction) from %s, CollNet ABI v%d", ci.path, ci.version);
  else if (ci.available)
    rail_doctor_say(d, RAIL_DOCTOR_OK, "collnet", NULL,
                    "a CollNet plugin is installed (%s) but off: %s", ci.path, ci.why);
  else if (asked != NULL && asked[0] != '\0' && strcasecmp(asked, "none") != 0)
    rail_doctor_say(d, RAIL_DOCTOR_FAIL, "collnet",
                    "point NCCL_RAIL_COLLNET_PLUGIN at the site's SHARP plugin "
                    "(libnccl-net.so of nccl-rdma-sharp-plugins), or unset it",
                    "NCCL_RAIL_COLLNET_PLUGIN=%s cannot be used: %s", asked, ci.why);
  else
    rail_doctor_say(d, RAIL_DOCTOR_OK, "collnet", NULL, "CollNet off: %s", ci.why);
}

void rail_doctor_json_collnet(struct rail_doctor *d, struct rail_json *j) {
  struct rail_collnet_info ci;

  rail_collnet_describe(&ci);
  rail_json_object(j, "collnet", RAIL_JSON_INLINE);
  rail_json_bool(j, "available", ci.available);
  rail_json_bool(j, "enabled", ci.enabled);
  rail_json_int(j, "version", ci.version);
  rail_json_str(j, "path", ci.path);
  rail_json_str(j, "why", ci.why);
  rail_json_object_end(j);
}
