/* The strict JSON reader (jread.h). */
#include "tools/read/jread.h"

#include <errno.h>
#include <stdlib.h>
#include <stdio.h>
#include <string.h>

#define JREAD_MAX_DEPTH 64
#define JREAD_KEY_MAX 128

enum { J_NULL, J_BOOL, J_NUM, J_STR, J_ARR, J_OBJ };

struct jread_node {
  int type;
  char key[JREAD_KEY_MAX]; /* member name inside an object ("" otherwise; longer keys cut) */
  double num;
  int child, next; /* first child and next sibling, -1 for none */
};

struct jread_doc {
  struct jread_node *nodes;
  int n, cap;
};

struct jread_parser {
  const char *p;
  struct jread_doc *d;
  int depth;
};

static void jread_ws(struct jread_parser *ps) {
  while (*ps->p == ' ' || *ps->p == '\t' || *ps->p == '\n' || *ps->p == '\r')
    ps->p++;
}

static int jread_node_new(struct jread_parser *ps, int type) {
  struct jread_doc *d = ps->d;

  if (d->n == d->cap) {
    int cap = d->cap ? d->cap * 2 : 64;
    struct jread_node *grown = realloc(d->nodes, (size_t)cap * sizeof(*grown));
    if (grown == NULL) return -ENOMEM;
    d->nodes = grown;
    d->cap = cap;
  }
  memset(&d->nodes[d->n], 0, sizeof(d->nodes[0]));
  d->nodes[d->n].type = type;
  d->nodes[d->n].child = d->nodes[d->n].next = -1;
  return d->n++;
}

static int jread_hex4(const char *s, unsigned *out) {
  unsigned v = 0;
  for (int i = 0; i < 4; i++) {
    char c = s[i];
    v <<= 4;
    if (c >= '0' && c <= '9')
      v |= (unsigned)(c - '0');
    else if (c >= 'a' && c <= 'f')
      v |= (unsigned)(c - 'a' + 10);
    else if (c >= 'A' && c <= 'F')
      v |= (unsigned)(c - 'A' + 10);
    else
      return -EINVAL;
  }
  *out = v;
  return 0;
}

/* A string at ps->p (on its opening quote), decoded into out (cut to len;
 * out may be NULL to skip). Escapes are checked whether kept or not. */
static int jread_string(struct jread_parser *ps, char *out, size_t len) {
  size_t k = 0;

  ps->p++;
  for (;;) {
    unsigned char c = (unsigned char)*ps->p++;
    unsigned cp;
    if (c == '"') break;
    if (c < 0x20) return -EINVAL; /* includes the terminating NUL */
    if (c == '\\') {
      c = (unsigned char)*ps->p++;
      switch (c) {
      case '"':
      case '\\':
      case '/':
        break;
      case 'b':
        c = '\b';
        break;
      case 'f':
        c = '\f';
        break;
      case 'n':
        c = '\n';
        break;
      case 'r':
        c = '\r';
        break;
      case 't':
        c = '\t';
        break;
      case 'u':
        if (jread_hex4(ps->p, &cp) != 0) return -EINVAL;
        ps->p += 4;
        /* Kept keys are ASCII in the documents we read: others become '?'. */
        c = cp < 0x80 ? (unsigned char)cp : '?';
        break;
      default:
        return -EINVAL;
      }
    }
    if (out != NULL && k + 1 < len) out[k++] = (char)c;
  }
  if (out != NULL && len > 0) out[k] = '\0';
  return 0;
}

/* A number by the JSON grammar: -?(0|[1-9][0-9]*)(.[0-9]+)?([eE][+-]?[0-9]+)? */
static int jread_number(struct jread_parser *ps, double *out) {
  const char *s = ps->p, *q = s;
  char *end = NULL;

  if (*q == '-') q++;
  if (*q == '0')
    q++;
  else if (*q >= '1' && *q <= '9')
    while (*q >= '0' && *q <= '9')
      q++;
  else
    return -EINVAL;
  if (*q == '.') {
    q++;
    if (!(*q >= '0' && *q <= '9')) return -EINVAL;
    while (*q >= '0' && *q <= '9')
      q++;
  }
  if (*q == 'e' || *q == 'E') {
    q++;
    if (*q == '+' || *q == '-') q++;
    if (!(*q >= '0' && *q <= '9')) return -EINVAL;
    while (*q >= '0' && *q <= '9')
      q++;
  }
  *out = strtod(s, &end);
  if (end != q) return -EINVAL;
  ps->p = q;
  return 0;
}

static int jread_value(struct jread_parser *ps, const char *key);

/* The members or elements of a container node, linked as its children. */
static int jread_container(struct jread_parser *ps, int node, int is_obj) {
  char close = is_obj ? '}' : ']', key[JREAD_KEY_MAX];
  int prev = -1;

  if (++ps->depth > JREAD_MAX_DEPTH) return -EINVAL;
  ps->p++;
  jread_ws(ps);
  if (*ps->p == close) {
    ps->p++;
    ps->depth--;
    return 0;
  }
  for (;;) {
    int child;
    key[0] = '\0';
    if (is_obj) {
      if (*ps->p != '"' || jread_string(ps, key, sizeof(key)) != 0) return -EINVAL;
      jread_ws(ps);
      if (*ps->p++ != ':') return -EINVAL;
    }
    child = jread_value(ps, key);
    if (child < 0) return child;
    if (prev < 0)
      ps->d->nodes[node].child = child;
    else
      ps->d->nodes[prev].next = child;
    prev = child;
    jread_ws(ps);
    if (*ps->p == ',') {
      ps->p++;
      jread_ws(ps);
      continue;
    }
    if (*ps->p++ != close) return -EINVAL;
    ps->depth--;
    return 0;
  }
}

/* One value; returns its node index or -errno. */
static int jread_value(struct jread_parser *ps, const char *key) {
  static const struct {
    const char *word;
    int type;
  } words[] = {{"null", J_NULL}, {"true", J_BOOL}, {"false", J_BOOL}};
  int node, rc;

  jread_ws(ps);
  if (*ps->p == '{' || *ps->p == '[') {
    int is_obj = *ps->p == '{';
    node = jread_node_new(ps, is_obj ? J_OBJ : J_ARR);
    if (node < 0) return node;
    snprintf(ps->d->nodes[node].key, JREAD_KEY_MAX, "%s", key);
    rc = jread_container(ps, node, is_obj);
    return rc < 0 ? rc : node;
  }
  node = jread_node_new(ps, J_NULL);
  if (node < 0) return node;
  snprintf(ps->d->nodes[node].key, JREAD_KEY_MAX, "%s", key);
  if (*ps->p == '"') {
    ps->d->nodes[node].type = J_STR;
    return jread_string(ps, NULL, 0) == 0 ? node : -EINVAL;
  }
  for (size_t i = 0; i < sizeof(words) / sizeof(words[0]); i++)
    if (strncmp(ps->p, words[i].word, strlen(words[i].word)) == 0) {
      ps->d->nodes[node].type = words[i].type;
      ps->p += strlen(words[i].word);
      return node;
    }
  ps->d->nodes[node].type = J_NUM;
  return jread_number(ps, &ps->d->nodes[node].num) == 0 ? node : -EINVAL;
}

int rail_jread_parse(const char *text, struct jread_doc **out) {
  struct jread_doc *d = calloc(1, sizeof(*d));
  struct jread_parser ps = {text, d, 0};
  int rc;

  *out = NULL;
  if (d == NULL) return -ENOMEM;
  rc = text != NULL ? jread_value(&ps, "") : -EINVAL;
  if (rc >= 0) {
    jread_ws(&ps);
    rc = *ps.p == '\0' ? 0 : -EINVAL;
  }
  if (rc != 0) {
    rail_jread_free(d);
    return rc == -ENOMEM ? rc : -EINVAL;
  }
  *out = d;
  return 0;
}

int rail_jread_number(const struct jread_doc *d, const char *path, double *out) {
  int node = 0;
  const char *p = path;

  if (d == NULL || d->n == 0) return -ENOENT;
  while (*p != '\0') {
    size_t len = strcspn(p, ".");
    int c;
    if (d->nodes[node].type != J_OBJ) return -ENOENT;
    for (c = d->nodes[node].child; c >= 0; c = d->nodes[c].next)
      if (strlen(d->nodes[c].key) == len && strncmp(d->nodes[c].key, p, len) == 0) break;
    if (c < 0) return -ENOENT;
    node = c;
    p += len;
    if (*p == '.') p++;
  }
  if (d->nodes[node].type != J_NUM) return -EINVAL;
  *out = d->nodes[node].num;
  return 0;
}

void rail_jread_free(struct jread_doc *d) {
  if (d == NULL) return;
  free(d->nodes);
  free(d);
}
