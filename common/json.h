/* The one JSON writer behind every --json of the nccl-rail command (topo,
 * plan, bench, doctor, env). The JSON those commands print is an interface
 * other tools read: add fields, never rename them.
 *
 * A streaming writer: members are written as they come, commas and
 * indentation are the writer's business, strings are escaped (quotes,
 * backslashes, control characters; bytes >= 0x80 pass through, so UTF-8
 * stays UTF-8). A container opened "inline" prints on one line, which keeps
 * arrays of records readable (one record a line). Non-finite numbers print
 * as null. `key` is the member name inside an object and must be NULL
 * inside an array or at the top level.
 *
 * Not thread-safe; one writer per output. Write errors and unbalanced
 * nesting are remembered and reported by rail_json_end(). */
#ifndef RAIL_COMMON_JSON_H
#define RAIL_COMMON_JSON_H

#include <stdint.h>
#include <stdio.h>

#define RAIL_JSON_MAX_DEPTH 16

enum rail_json_layout {
  RAIL_JSON_BLOCK = 0,  /* one member a line, indented */
  RAIL_JSON_INLINE = 1, /* the whole container on one line */
};

struct rail_json {
  FILE *out;
  int depth;
  int err;                            /* -EIO (write failed) or -EINVAL (misuse); sticky */
  uint8_t count[RAIL_JSON_MAX_DEPTH]; /* members written so far (saturates at 1 is enough) */
  uint8_t inline_[RAIL_JSON_MAX_DEPTH];
  uint8_t is_array[RAIL_JSON_MAX_DEPTH];
};

void rail_json_begin(struct rail_json *j, FILE *out);
/* 0, or the first error: a failed write (-EIO) or nesting left open or
 * closed twice (-EINVAL). Ends the document with a newline. */
int rail_json_end(struct rail_json *j);

void rail_json_object(struct rail_json *j, const char *key, enum rail_json_layout layout);
void rail_json_object_end(struct rail_json *j);
void rail_json_array(struct rail_json *j, const char *key, enum rail_json_layout layout);
void rail_json_array_end(struct rail_json *j);

/* v NULL prints null. */
void rail_json_str(struct rail_json *j, const char *key, const char *v);
void rail_json_int(struct rail_json *j, const char *key, long long v);
void rail_json_uint(struct rail_json *j, const char *key, unsigned long long v);
void rail_json_bool(struct rail_json *j, const char *key, int v);
void rail_json_null(struct rail_json *j, const char *key);
/* Shortest form that reads back as the same double ("%.17g" trimmed). */
void rail_json_double(struct rail_json *j, const char *key, double v);
/* A fixed number of decimals, for measured figures (GB/s to 3 places). */
void rail_json_fixed(struct rail_json *j, const char *key, double v, int decimals);

/* The escaped form of s, quotes included, into out (always terminated;
 * truncated to outlen). For callers that build JSON text by hand in tests. */
void rail_json_escape(const char *s, char *out, size_t outlen);

#endif
