/* The JSON writer (json.h). */
#include "common/json.h"

#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

static void rail_json_put(struct rail_json *j, const char *s) {
  if (fputs(s, j->out) == EOF) j->err = j->err ? j->err : -EIO;
}

static void rail_json_put_str(FILE *out, const char *s, int *err) {
  char esc[8];

  if (fputc('"', out) == EOF) *err = -EIO;
  for (; *s != '\0'; s++) {
    unsigned char c = (unsigned char)*s;
    const char *rep = NULL;
    switch (c) {
    case '"':
      rep = "\\\"";
      break;
    case '\\':
      rep = "\\\\";
      break;
    case '\n':
      rep = "\\n";
      break;
    case '\r':
      rep = "\\r";
      break;
    case '\t':
      rep = "\\t";
      break;
    default:
      if (c < 0x20) {
        snprintf(esc, sizeof(esc), "\\u%04x", c);
        rep = esc;
      }
    }
    if ((rep ? fputs(rep, out) : fputc(c, out)) == EOF) *err = -EIO;
  }
  if (fputc('"', out) == EOF) *err = -EIO;
}

static void rail_json_indent(struct rail_json *j, int depth) {
  if (fputc('\n', j->out) == EOF) j->err = -EIO;
  for (int i = 0; i < depth; i++)
    rail_json_put(j, "  ");
}

/* Writes what comes before a value: the comma, the line break or space,
 * and the key. */
static void rail_json_member(struct rail_json *j, const char *key) {
  int d = j->depth;

  if (d == 0) {
    if (key != NULL) j->err = -EINVAL;
    return;
  }
  if ((key != NULL) == j->is_array[d - 1]) j->err = -EINVAL;
  if (j->count[d - 1]) rail_json_put(j, ",");
  if (j->inline_[d - 1]) {
    if (j->count[d - 1]) rail_json_put(j, " ");
  } else {
    rail_json_indent(j, d);
  }
  j->count[d - 1] = 1;
  if (key != NULL) {
    int err = 0;
    rail_json_put_str(j->out, key, &err);
    if (err) j->err = err;
    rail_json_put(j, ": ");
  }
}

static void rail_json_open(struct rail_json *j, const char *key, int layout, int array) {
  rail_json_member(j, key);
  rail_json_put(j, array ? "[" : "{");
  if (j->depth >= RAIL_JSON_MAX_DEPTH) {
    j->err = -EINVAL;
    return;
  }
  /* A container inside an inline one is inline too. */
  int in_inline = j->depth > 0 && j->inline_[j->depth - 1];
  j->count[j->depth] = 0;
  j->inline_[j->depth] = (uint8_t)(layout == RAIL_JSON_INLINE || in_inline);
  j->is_array[j->depth] = (uint8_t)array;
  j->depth++;
}

static void rail_json_close(struct rail_json *j, int array) {
  if (j->depth == 0 || j->is_array[j->depth - 1] != array) {
    j->err = -EINVAL;
    return;
  }
  j->depth--;
  if (!j->inline_[j->depth] && j->count[j->depth]) rail_json_indent(j, j->depth);
  rail_json_put(j, array ? "]" : "}");
}

void rail_json_begin(struct rail_json *j, FILE *out) {
  memset(j, 0, sizeof(*j));
  j->out = out;
}

int rail_json_end(struct rail_json *j) {
  if (j->depth != 0) j->err = j->err ? j->err : -EINVAL;
  rail_json_put(j, "\n");
  if (fflush(j->out) != 0) j->err = j->err ? j->err : -EIO;
  return j->err;
}

void rail_json_object(struct rail_json *j, const char *key, enum rail_json_layout layout) {
  rail_json_open(j, key, layout, 0);
}

void rail_json_object_end(struct rail_json *j) { rail_json_close(j, 0); }

void rail_json_array(struct rail_json *j, const char *key, enum rail_json_layout layout) {
  rail_json_open(j, key, layout, 1);
}

void rail_json_array_end(struct rail_json *j) { rail_json_close(j, 1); }

void rail_json_str(struct rail_json *j, const char *key, const char *v) {
  int err = 0;

  rail_json_member(j, key);
  if (v == NULL) {
    rail_json_put(j, "null");
    return;
  }
  rail_json_put_str(j->out, v, &err);
  if (err) j->err = err;
}

void rail_json_int(struct rail_json *j, const char *key, long long v) {
  rail_json_member(j, key);
  if (fprintf(j->out, "%lld", v) < 0) j->err = -EIO;
}

void rail_json_uint(struct rail_json *j, const char *key, unsigned long long v) {
  rail_json_member(j, key);
  if (fprintf(j->out, "%llu", v) < 0) j->err = -EIO;
}

void rail_json_bool(struct rail_json *j, const char *key, int v) {
  rail_json_member(j, key);
  rail_json_put(j, v ? "true" : "false");
}

void rail_json_null(struct rail_json *j, const char *key) {
  rail_json_member(j, key);
  rail_json_put(j, "null");
}

void rail_json_double(struct rail_json *j, const char *key, double v) {
  char buf[32];

  rail_json_member(j, key);
  if (!isfinite(v)) {
    rail_json_put(j, "null");
    return;
  }
  /* The shortest precision that reads back exactly, in positional form
   * where a reader expects one (400, not 4e+02). */
  for (int prec = 1; prec <= 17; prec++) {
    double mag = fabs(v);
    snprintf(buf, sizeof(buf), "%.*g", prec, v);
    if (strchr(buf, 'e') != NULL && mag >= 1e-4 && mag < 1e15) continue;
    if (strtod(buf, NULL) == v) break;
  }
  rail_json_put(j, buf);
}

void rail_json_fixed(struct rail_json *j, const char *key, double v, int decimals) {
  rail_json_member(j, key);
  if (!isfinite(v)) {
    rail_json_put(j, "null");
    return;
  }
  if (decimals < 0) decimals = 0;
  if (decimals > 12) decimals = 12;
  if (fprintf(j->out, "%.*f", decimals, v) < 0) j->err = -EIO;
}

void rail_json_escape(const char *s, char *out, size_t outlen) {
  FILE *f;
  int err = 0;

  if (outlen == 0) return;
  out[0] = '\0';
  f = fmemopen(out, outlen, "w");
  if (f == NULL) return;
  rail_json_put_str(f, s, &err);
  fclose(f);
}
