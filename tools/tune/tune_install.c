/* nccl-rail tune --install, enable, disable: no variable for a job to set.
 *
 * The rules go to the site file the package owns (NCCL_RAIL_SITE_RULES,
 * /etc/nccl-rail/tuner.rules), which the plugin loads where
 * NCCL_RAIL_TUNER_FILE is unset (tuner/rules.h). And NCCL itself reads
 * /etc/nccl.conf into its environment before it loads any plugin (NCCL
 * 2.28.9 src/misc/param.cc initEnv, from ncclEnvPluginInit at the start of
 * every init: KEY=VALUE lines, '#' lines skipped, setenv without
 * overwriting; NCCL_CONF_FILE or ~/.nccl.conf first, so a job's own
 * environment and the user's file win), so `enable` writes
 * NCCL_NET_PLUGIN=rail there, between two marker lines, and `disable`
 * takes exactly those lines out again. Both edit through a temporary file
 * renamed over the old one: a failure leaves it as it was. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "common/param.h"
#include "tools/cli/cli.h"
#include "tools/tune/tune.h"

#define CONF_BEGIN "# >>> nccl-rail: written by `nccl-rail enable`; `nccl-rail disable` removes it"
#define CONF_END "# <<< nccl-rail"
#define CONF_LINES "NCCL_NET_PLUGIN=rail\n"

/* mkdir -p of path's folder. 0 or -errno. */
static int make_parent(const char *path) {
  char dir[4096];
  char *slash;

  if (snprintf(dir, sizeof(dir), "%s", path) >= (int)sizeof(dir)) return -ENAMETOOLONG;
  if ((slash = strrchr(dir, '/')) == NULL || slash == dir) return 0;
  *slash = '\0';
  for (char *p = dir + 1; *p != '\0'; p++) {
    if (*p != '/') continue;
    *p = '\0';
    if (mkdir(dir, 0755) != 0 && errno != EEXIST) return -errno;
    *p = '/';
  }
  if (mkdir(dir, 0755) != 0 && errno != EEXIST) return -errno;
  return 0;
}

int rail_tune_install(const char *text, char *err, size_t errlen) {
  const char *path = rail_param_str(RAIL_PARAM_SITE_RULES);
  int rc;

  if (path[0] == '\0') {
    snprintf(err, errlen, "NCCL_RAIL_SITE_RULES is empty: no site file to install to");
    return -EINVAL;
  }
  if ((rc = make_parent(path)) != 0) {
    snprintf(err, errlen, "%s: cannot create its folder: %s", path, strerror(-rc));
    return rc;
  }
  return rail_tune_write_atomic(path, text, err, errlen);
}

/* The whole file (malloc'd, NUL-terminated) or NULL with *rc (-ENOENT for
 * a file not there yet, which is an empty one). */
static char *slurp(const char *path, int *rc) {
  FILE *f = fopen(path, "r");
  char *text = NULL;
  size_t len = 0, cap = 0, got;

  *rc = 0;
  if (f == NULL) {
    *rc = -errno;
    return NULL;
  }
  do {
    if (cap - len < 4096) {
      char *grown = realloc(text, cap + 65536);
      if (grown == NULL) {
        *rc = -ENOMEM;
        break;
      }
      text = grown;
      cap += 65536;
    }
    got = fread(text + len, 1, cap - len - 1, f);
    len += got;
  } while (got > 0);
  if (*rc == 0 && ferror(f)) *rc = -EIO;
  fclose(f);
  if (*rc != 0) {
    free(text);
    return NULL;
  }
  text[len] = '\0';
  return text;
}

/* Where our block is in text: [*b, *e) including its end line's newline;
 * 0 if found, -ENOENT if not. */
static int find_block(const char *text, const char **b, const char **e) {
  const char *p = strstr(text, CONF_BEGIN), *q;

  if (p == NULL || (p != text && p[-1] != '\n')) return -ENOENT;
  q = strstr(p, "\n" CONF_END);
  if (q == NULL) return -ENOENT;
  q += 1 + strlen(CONF_END);
  if (*q == '\n') q++;
  *b = p;
  *e = q;
  return 0;
}

/* The first line outside our block that sets NCCL_NET_PLUGIN: NCCL takes
 * the first value it reads, so ours would lose to it. Its line number, or 0. */
static int other_plugin_line(const char *text, char *value, size_t vlen) {
  const char *b = NULL, *e = NULL, *p = text;
  int line = 1;

  if (find_block(text, &b, &e) != 0) b = e = NULL;
  for (; *p != '\0'; line++) {
    size_t n = strcspn(p, "\n");
    if ((b == NULL || p < b || p >= e) && strncmp(p, "NCCL_NET_PLUGIN=", 16) == 0) {
      snprintf(value, vlen, "%.*s", (int)(n - 16 < 200 ? n - 16 : 200), p + 16);
      return line;
    }
    p += n + (p[n] == '\n');
  }
  return 0;
}

/* Writes text to path keeping the old file's mode (a new one 0644). */
static int conf_write(const char *path, const char *text, char *err, size_t errlen) {
  struct stat st;
  int had = stat(path, &st) == 0;
  int rc = rail_tune_write_atomic(path, text, err, errlen);

  if (rc == 0 && had && (st.st_mode & 07777) != 0644) (void)chmod(path, st.st_mode & 07777);
  return rc;
}

static int conf_edit(int enable) {
  const char *path = rail_param_str(RAIL_PARAM_NCCL_CONF);
  const char *b, *e;
  char err[512], value[256], *text, *out = NULL;
  int rc, line;

  text = slurp(path, &rc);
  if (text == NULL && rc != -ENOENT) {
    fprintf(stderr, "nccl-rail %s: %s: %s; nothing changed\n", enable ? "enable" : "disable", path,
            strerror(-rc));
    return RAIL_CLI_FAIL;
  }
  if (text == NULL && (text = strdup("")) == NULL) return RAIL_CLI_FAIL;
  rc = find_block(text, &b, &e);
  if (enable && rc == 0) {
    printf("%s: already enabled (NCCL_NET_PLUGIN=rail, between nccl-rail's marker lines)\n", path);
    free(text);
    return RAIL_CLI_OK;
  }
  if (!enable && rc != 0) {
    printf("%s: nothing of nccl-rail's there; not changed\n", path);
    free(text);
    return RAIL_CLI_OK;
  }
  if (enable && (line = other_plugin_line(text, value, sizeof(value))) > 0) {
    fprintf(
        stderr,
        "nccl-rail enable: %s:%d sets NCCL_NET_PLUGIN=%s already, and NCCL takes the first "
        "value it reads: not changed (edit that line, or set NCCL_NET_PLUGIN=rail in the job)\n",
        path, line, value);
    free(text);
    return RAIL_CLI_FAIL;
  }
  if (enable) {
    size_t n = strlen(text);
    out = malloc(n + strlen(CONF_BEGIN) + strlen(CONF_LINES) + strlen(CONF_END) + 8);
    if (out != NULL)
      sprintf(out, "%s%s%s\n%s%s\n", text, n > 0 && text[n - 1] != '\n' ? "\n" : "", CONF_BEGIN,
              CONF_LINES, CONF_END);
  } else {
    out = malloc(strlen(text) + 1);
    if (out != NULL) {
      memcpy(out, text, (size_t)(b - text));
      strcpy(out + (b - text), e);
    }
  }
  free(text);
  if (out == NULL) return RAIL_CLI_FAIL;
  rc = make_parent(path);
  if (rc == 0)
    rc = conf_write(path, out, err, sizeof(err));
  else
    snprintf(err, sizeof(err), "%s: %s", path, strerror(-rc));
  free(out);
  if (rc != 0) {
    fprintf(stderr, "nccl-rail %s: %s; nothing changed\n", enable ? "enable" : "disable", err);
    return RAIL_CLI_FAIL;
  }
  if (enable)
    printf("%s: NCCL_NET_PLUGIN=rail added between nccl-rail's marker lines: every NCCL job on "
           "this node loads the plugin (a job's own NCCL_NET_PLUGIN, NCCL_CONF_FILE or "
           "~/.nccl.conf still wins); `nccl-rail disable` takes it out\n",
           path);
  else
    printf("%s: nccl-rail's lines removed; the rest of the file is as it was\n", path);
  return RAIL_CLI_OK;
}

static int conf_cmd(int argc, char **argv, int enable) {
  if (argc > 1 && (strcmp(argv[1], "--help") == 0 || strcmp(argv[1], "-h") == 0)) {
    printf("usage: nccl-rail %s\n"
           "  %s NCCL_NET_PLUGIN=rail in %s (NCCL_RAIL_NCCL_CONF), which NCCL reads\n"
           "  into its environment before it loads plugins: jobs then set nothing. Only\n"
           "  nccl-rail's own lines (between its marker lines) are %s.\n"
           "exit codes: 0 done (or nothing to do), 1 the file could not be changed, 2 bad usage\n",
           enable ? "enable" : "disable", enable ? "Adds" : "Removes",
           rail_param_str(RAIL_PARAM_NCCL_CONF), enable ? "written" : "removed");
    return RAIL_CLI_OK;
  }
  if (argc > 1) {
    fprintf(stderr, "nccl-rail %s: takes no arguments (see --help)\n",
            enable ? "enable" : "disable");
    return RAIL_CLI_USAGE;
  }
  return conf_edit(enable);
}

int rail_tune_enable(void) { return conf_edit(1) == RAIL_CLI_OK ? 0 : -EIO; }

int rail_cmd_enable(int argc, char **argv) { return conf_cmd(argc, argv, 1); }
int rail_cmd_disable(int argc, char **argv) { return conf_cmd(argc, argv, 0); }
