/* nccl-rail doctor: what every check uses to report, below the checks and
 * the command that runs them (doctor.h says what a finding is). Here and not
 * in cmd_doctor.c, so that a check never calls up into the file whose table
 * calls it. */
#define _GNU_SOURCE
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tools/doctor/doctor.h"

void rail_doctor_say(struct rail_doctor *d, int level, const char *check, const char *fix,
                     const char *fmt, ...) {
  struct rail_doctor_finding *f;
  va_list ap;
  char *msg = NULL;

  if (d->nfindings == d->cap) {
    int cap = d->cap ? d->cap * 2 : 32;
    struct rail_doctor_finding *grown = realloc(d->findings, (size_t)cap * sizeof(*grown));
    if (grown == NULL) return;
    d->findings = grown;
    d->cap = cap;
  }
  va_start(ap, fmt);
  if (vasprintf(&msg, fmt, ap) < 0) msg = NULL;
  va_end(ap);
  if (msg == NULL) return;
  f = &d->findings[d->nfindings++];
  f->level = level;
  f->check = check;
  f->message = msg;
  f->fix = level != RAIL_DOCTOR_OK && fix != NULL ? strdup(fix) : NULL;
  if (level == RAIL_DOCTOR_WARN) d->warn++;
  if (level == RAIL_DOCTOR_FAIL) d->fail++;
}

int rail_doctor_read_int(const char *path, long *out) {
  FILE *f = fopen(path, "r");
  int ok;

  if (f == NULL) return -1;
  ok = fscanf(f, "%ld", out) == 1;
  fclose(f);
  return ok ? 0 : -1;
}
