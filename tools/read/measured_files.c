/* nccl-tests output from files (measured.h): reading one whole, the
 * forcing its name says, and several files made one set. The parsing is
 * measured.c's. */
#include <ctype.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tools/read/measured.h"
#include "tuner/model.h"

int rail_measured_load(const char *path, int default_coll, struct rail_measured *out, char *err,
                       size_t errlen) {
  FILE *f = fopen(path, "rb");
  char *buf = NULL;
  size_t len = 0, cap = 0;
  int rc;

  memset(out, 0, sizeof(*out));
  if (f == NULL) {
    rc = -errno;
    snprintf(err, errlen, "%s: %s", path, strerror(-rc));
    return rc;
  }
  for (;;) {
    size_t got;
    if (len == cap) {
      char *grown;
      if (cap > RAIL_MEASURED_MAX_BYTES) break;
      cap = cap ? cap * 2 : 65536;
      grown = realloc(buf, cap);
      if (grown == NULL) {
        free(buf);
        fclose(f);
        snprintf(err, errlen, "%s: out of memory", path);
        return -ENOMEM;
      }
      buf = grown;
    }
    got = fread(buf + len, 1, cap - len, f);
    len += got;
    if (got == 0) break;
  }
  if (ferror(f)) {
    rc = errno ? -errno : -EIO;
    snprintf(err, errlen, "%s: %s", path, strerror(-rc));
    free(buf);
    fclose(f);
    return rc;
  }
  fclose(f);
  rc = rail_measured_parse(path, buf ? buf : "", len, default_coll, out, err, errlen);
  free(buf);
  return rc;
}

void rail_measured_name_forcing(const char *path, int *algo, int *proto) {
  const char *base = strrchr(path, '/');
  char word[32];
  size_t n = 0;

  base = base ? base + 1 : path;
  *algo = *proto = -1;
  for (const char *p = base;; p++) {
    int end = *p == '\0' || strchr(".-_+=", *p) != NULL;
    if (!end && n < sizeof(word) - 1) word[n++] = (char)tolower((unsigned char)*p);
    if (!end) continue;
    word[n] = '\0';
    /* "ll" alone is a protocol; algorithm names never are */
    if (n > 0 && *algo < 0 && rail_tuner_algo_parse(word) >= 0)
      *algo = rail_tuner_algo_parse(word);
    else if (n > 0 && *proto < 0 && rail_tuner_proto_parse(word) >= 0)
      *proto = rail_tuner_proto_parse(word);
    n = 0;
    if (*p == '\0') break;
  }
}

int rail_measured_append(struct rail_measured *into, struct rail_measured *from) {
  struct rail_measured_run *grown;

  if (from->nruns == 0) return 0;
  grown = realloc(into->runs, (size_t)(into->nruns + from->nruns) * sizeof(*grown));
  if (grown == NULL) return -ENOMEM;
  memcpy(grown + into->nruns, from->runs, (size_t)from->nruns * sizeof(*grown));
  into->runs = grown;
  into->nruns += from->nruns;
  if (into->skipped == 0) into->skipped_line = from->skipped_line;
  into->skipped += from->skipped;
  free(from->runs);
  from->runs = NULL;
  from->nruns = 0;
  return 0;
}
