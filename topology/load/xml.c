/* A small XML reader for topology files: elements and attributes only, which
 * is all the NCCL and hwloc formats use. We parse ourselves rather than add
 * a dependency, and so that every malformed file is reported with its line. */
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "common/log.h"
#include "topology/load/xml.h"

/* Topology files are tens of kilobytes; this only guards against reading a
 * wrong file (a disk image, /dev/zero) into memory. */
#define RAIL_XML_MAX_BYTES (64 << 20)
/* Real files nest about ten levels; a limit keeps hostile input bounded. */
#define RAIL_XML_MAX_DEPTH 256

struct rail_xml_parser {
  const char *file;
  const char *p, *end;
  int line;
  struct rail_xml_node *root, *cur; /* the tree so far, the open element */
  int depth;
};

static int xml_error(const struct rail_xml_parser *x, int line, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

static int xml_error(const struct rail_xml_parser *x, int line, const char *fmt, ...) {
  char msg[512];
  va_list ap;

  va_start(ap, fmt);
  vsnprintf(msg, sizeof(msg), fmt, ap);
  va_end(ap);
  RAIL_WARN("%s:%d: malformed XML: %s", x->file, line, msg);
  return -EINVAL;
}

static void xml_free_node(struct rail_xml_node *n) {
  free(n->name);
  free(n->text);
  for (int i = 0; i < n->nattrs; i++) {
    free(n->attrs[i].name);
    free(n->attrs[i].value);
  }
  free(n->attrs);
  free(n);
}

void rail_xml_free(struct rail_xml_node *root) {
  struct rail_xml_node *n = root;

  /* Iterative post-order walk: hostile files may nest deeply. */
  while (n != NULL) {
    if (n->child != NULL) {
      struct rail_xml_node *c = n->child;
      n->child = NULL;
      n = c;
      continue;
    }
    struct rail_xml_node *next = n->next, *parent = n->parent;
    int last = (n == root);
    xml_free_node(n);
    if (last) break;
    n = next != NULL ? next : parent;
  }
}

const char *rail_xml_attr(const struct rail_xml_node *node, const char *name) {
  for (int i = 0; i < node->nattrs; i++)
    if (strcmp(node->attrs[i].name, name) == 0) return node->attrs[i].value;
  return NULL;
}

const struct rail_xml_node *rail_xml_child(const struct rail_xml_node *node, const char *name) {
  for (const struct rail_xml_node *c = node->child; c != NULL; c = c->next)
    if (strcmp(c->name, name) == 0) return c;
  return NULL;
}

static void xml_advance(struct rail_xml_parser *x, size_t n) {
  for (size_t i = 0; i < n && x->p < x->end; i++, x->p++)
    if (*x->p == '\n') x->line++;
}

static void xml_skip_space(struct rail_xml_parser *x) {
  while (x->p < x->end && (*x->p == ' ' || *x->p == '\t' || *x->p == '\r' || *x->p == '\n'))
    xml_advance(x, 1);
}

static int xml_starts(const struct rail_xml_parser *x, const char *s) {
  size_t n = strlen(s);
  return (size_t)(x->end - x->p) >= n && memcmp(x->p, s, n) == 0;
}

/* Skips past the terminator; what reports an unterminated construct. */
static int xml_skip_to(struct rail_xml_parser *x, const char *term, const char *what) {
  int line = x->line;
  while (x->p < x->end && !xml_starts(x, term))
    xml_advance(x, 1);
  if (x->p >= x->end) return xml_error(x, line, "unterminated %s", what);
  xml_advance(x, strlen(term));
  return 0;
}

static int xml_skip_doctype(struct rail_xml_parser *x) {
  int line = x->line, depth = 0;
  while (x->p < x->end) {
    char c = *x->p;
    xml_advance(x, 1);
    if (c == '[')
      depth++;
    else if (c == ']')
      depth--;
    else if (c == '>' && depth <= 0)
      return 0;
  }
  return xml_error(x, line, "unterminated <!DOCTYPE");
}

static int xml_name_start(char c) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_' || c == ':';
}

static int xml_name_char(char c) {
  return xml_name_start(c) || (c >= '0' && c <= '9') || c == '-' || c == '.';
}

static char *xml_read_name(struct rail_xml_parser *x) {
  const char *start = x->p;
  if (x->p >= x->end || !xml_name_start(*x->p)) return NULL;
  while (x->p < x->end && xml_name_char(*x->p))
    x->p++;
  return strndup(start, (size_t)(x->p - start));
}

/* Decodes the five predefined entities and ASCII character references. */
static int xml_decode(const struct rail_xml_parser *x, const char *s, size_t n, char **out) {
  char *buf = malloc(n + 1), *o = buf;
  if (buf == NULL) return -ENOMEM;
  for (size_t i = 0; i < n; i++) {
    if (s[i] == '<') {
      free(buf);
      return xml_error(x, x->line, "'<' inside an attribute value");
    }
    if (s[i] != '&') {
      *o++ = s[i];
      continue;
    }
    static const struct {
      const char *ent;
      char c;
    } ents[] = {{"&lt;", '<'}, {"&gt;", '>'}, {"&amp;", '&'}, {"&quot;", '"'}, {"&apos;", '\''}};
    size_t k;
    for (k = 0; k < sizeof(ents) / sizeof(ents[0]); k++) {
      size_t len = strlen(ents[k].ent);
      if (n - i >= len && memcmp(s + i, ents[k].ent, len) == 0) {
        *o++ = ents[k].c;
        i += len - 1;
        break;
      }
    }
    if (k < sizeof(ents) / sizeof(ents[0])) continue;
    if (n - i > 2 && s[i + 1] == '#') {
      char *end;
      int hex = (s[i + 2] == 'x');
      long v = strtol(s + i + 2 + hex, &end, hex ? 16 : 10);
      if (end < s + n && *end == ';' && v > 0 && v < 128) {
        *o++ = (char)v;
        i = (size_t)(end - s);
        continue;
      }
    }
    free(buf);
    return xml_error(x, x->line, "unknown entity in an attribute value");
  }
  *o = '\0';
  *out = buf;
  return 0;
}

static int xml_add_attr(struct rail_xml_node *n, int *cap, char *name, char *value, int line) {
  if (n->nattrs == *cap) {
    int ncap = *cap ? 2 * *cap : 8;
    struct rail_xml_attr *a = realloc(n->attrs, (size_t)ncap * sizeof(*a));
    if (a == NULL) return -ENOMEM;
    n->attrs = a;
    *cap = ncap;
  }
  n->attrs[n->nattrs].name = name;
  n->attrs[n->nattrs].value = value;
  n->attrs[n->nattrs].line = line;
  n->nattrs++;
  return 0;
}

static int cmp_attr(const void *a, const void *b) {
  const struct rail_xml_attr *x = *(const struct rail_xml_attr *const *)a;
  const struct rail_xml_attr *y = *(const struct rail_xml_attr *const *)b;
  int c = strcmp(x->name, y->name);
  /* Ties in document order, so that the repeat named is the later one. */
  return c != 0 ? c : (x < y ? -1 : x > y);
}

/* A repeated attribute is an error (XML 1.0, 3.1). Sorting once keeps a
 * hostile element of many attributes at O(n log n). */
static int xml_check_repeats(const struct rail_xml_parser *x, const struct rail_xml_node *n) {
  const struct rail_xml_attr **v;
  int rc = 0;

  if (n->nattrs < 2) return 0;
  v = malloc((size_t)n->nattrs * sizeof(*v));
  if (v == NULL) return -ENOMEM;
  for (int i = 0; i < n->nattrs; i++)
    v[i] = &n->attrs[i];
  qsort(v, (size_t)n->nattrs, sizeof(*v), cmp_attr);
  for (int i = 1; i < n->nattrs && rc == 0; i++)
    if (strcmp(v[i]->name, v[i - 1]->name) == 0)
      rc = xml_error(x, v[i]->line, "attribute %s repeated in <%s>", v[i]->name, n->name);
  free(v);
  return rc;
}

/* One attribute: name = "value" or 'value'. */
static int xml_read_attr(struct rail_xml_parser *x, struct rail_xml_node *n, int *cap) {
  char *name, *value = NULL, quote;
  const char *vstart;
  int line = x->line, rc;

  name = xml_read_name(x);
  if (name == NULL) return xml_error(x, x->line, "unexpected '%c' in <%s>", *x->p, n->name);
  xml_skip_space(x);
  if (x->p >= x->end || *x->p != '=') {
    rc = xml_error(x, x->line, "attribute %s of <%s> has no value", name, n->name);
    goto free_name;
  }
  xml_advance(x, 1);
  xml_skip_space(x);
  if (x->p >= x->end || (*x->p != '"' && *x->p != '\'')) {
    rc = xml_error(x, x->line, "value of attribute %s in <%s> is not quoted", name, n->name);
    goto free_name;
  }
  quote = *x->p;
  xml_advance(x, 1);
  vstart = x->p;
  while (x->p < x->end && *x->p != quote)
    xml_advance(x, 1);
  if (x->p >= x->end) {
    rc = xml_error(x, n->line, "unterminated value of attribute %s in <%s>", name, n->name);
    goto free_name;
  }
  rc = xml_decode(x, vstart, (size_t)(x->p - vstart), &value);
  xml_advance(x, 1);
  if (rc == 0) rc = xml_add_attr(n, cap, name, value, line);
  if (rc == 0) return 0;
  free(value);
free_name:
  free(name);
  return rc;
}

/* Reads attributes up to '>' or "/>"; *empty tells which. */
static int xml_read_attrs(struct rail_xml_parser *x, struct rail_xml_node *n, int *empty) {
  int cap = 0, rc;
  for (;;) {
    xml_skip_space(x);
    if (x->p >= x->end) return xml_error(x, n->line, "unexpected end of file in <%s", n->name);
    if (*x->p == '>' || xml_starts(x, "/>")) {
      *empty = *x->p == '/';
      xml_advance(x, *empty ? 2 : 1);
      return xml_check_repeats(x, n);
    }
    rc = xml_read_attr(x, n, &cap);
    if (rc != 0) return rc;
  }
}

/* Character data: meaningless in both formats except where hwloc keeps
 * numbers in it (<u64values>); only legal inside the root. The first
 * non-blank run is kept as the element's text. */
static int xml_text(struct rail_xml_parser *x) {
  const char *start = x->p, *s, *e;
  int line = x->line;

  while (x->p < x->end && *x->p != '<') {
    if (*x->p == '\0') return xml_error(x, x->line, "NUL byte: not a text file");
    xml_advance(x, 1);
  }
  for (s = start; s < x->p && (*s == ' ' || *s == '\t' || *s == '\r' || *s == '\n'); s++)
    ;
  for (e = x->p; e > s && (e[-1] == ' ' || e[-1] == '\t' || e[-1] == '\r' || e[-1] == '\n'); e--)
    ;
  if (s == e) return 0;
  if (x->cur == NULL) return xml_error(x, line, "text outside the root element");
  if (x->cur->text != NULL) return 0;
  return xml_decode(x, s, (size_t)(e - s), &x->cur->text);
}

static int xml_end_tag(struct rail_xml_parser *x) {
  int line = x->line, rc = 0;
  char *name;

  xml_advance(x, 2);
  name = xml_read_name(x);
  if (name == NULL || x->cur == NULL || strcmp(name, x->cur->name) != 0) {
    if (x->cur == NULL)
      rc = xml_error(x, line, "closing tag </%s> without an open element", name ? name : "");
    else
      rc = xml_error(x, line, "closing tag </%s> does not match <%s> opened at line %d",
                     name ? name : "", x->cur->name, x->cur->line);
  }
  free(name);
  if (rc != 0) return rc;
  xml_skip_space(x);
  if (x->p >= x->end || *x->p != '>')
    return xml_error(x, line, "closing tag </%s> not ended by '>'", x->cur->name);
  xml_advance(x, 1);
  x->cur = x->cur->parent;
  x->depth--;
  return 0;
}

static int xml_start_tag(struct rail_xml_parser *x) {
  struct rail_xml_node *n;
  int empty = 0, rc;

  xml_advance(x, 1);
  if (x->root != NULL && x->cur == NULL)
    return xml_error(x, x->line, "a second root element after </%s>", x->root->name);
  if (x->depth >= RAIL_XML_MAX_DEPTH)
    return xml_error(x, x->line, "elements nested deeper than %d", RAIL_XML_MAX_DEPTH);
  n = calloc(1, sizeof(*n));
  if (n == NULL) return -ENOMEM;
  n->line = x->line;
  n->name = xml_read_name(x);
  if (n->name == NULL) {
    xml_free_node(n);
    return xml_error(x, x->line, "'<' not followed by an element name");
  }
  /* Link first, so that an error below frees the node with the tree. */
  n->parent = x->cur;
  if (x->cur == NULL) {
    x->root = n;
  } else if (x->cur->last_child == NULL) {
    x->cur->child = x->cur->last_child = n;
  } else {
    x->cur->last_child->next = n;
    x->cur->last_child = n;
  }
  rc = xml_read_attrs(x, n, &empty);
  if (rc != 0) return rc;
  if (!empty) {
    x->cur = n;
    x->depth++;
  }
  return 0;
}

/* One construct at x->p: text, a skipped one, or a tag. */
static int xml_step(struct rail_xml_parser *x) {
  if (*x->p != '<') return xml_text(x);
  if (xml_starts(x, "<?")) return xml_skip_to(x, "?>", "<? processing instruction");
  if (xml_starts(x, "<!--")) return xml_skip_to(x, "-->", "comment");
  if (xml_starts(x, "<![CDATA[")) return xml_skip_to(x, "]]>", "CDATA section");
  if (xml_starts(x, "<!")) return xml_skip_doctype(x);
  if (xml_starts(x, "</")) return xml_end_tag(x);
  return xml_start_tag(x);
}

static int xml_parse(struct rail_xml_parser *x, struct rail_xml_node **out) {
  int rc = 0;

  while (x->p < x->end && rc == 0)
    rc = xml_step(x);
  if (rc == 0 && x->cur != NULL)
    rc = xml_error(x, x->line, "unexpected end of file: <%s> opened at line %d is not closed",
                   x->cur->name, x->cur->line);
  if (rc != 0) {
    if (x->root != NULL) rail_xml_free(x->root);
    return rc;
  }
  if (x->root == NULL) {
    RAIL_WARN("%s: no XML element in the file", x->file);
    return -ENODATA;
  }
  *out = x->root;
  return 0;
}

int rail_xml_parse_buf(const char *name, const char *buf, size_t len, struct rail_xml_node **root) {
  struct rail_xml_parser x = {.file = name, .p = buf, .end = buf + len, .line = 1};
  size_t i;

  for (i = 0; i < len && (buf[i] == ' ' || buf[i] == '\t' || buf[i] == '\r' || buf[i] == '\n'); i++)
    ;
  if (i == len) {
    RAIL_WARN("%s: the file is empty", name);
    return -ENODATA;
  }
  return xml_parse(&x, root);
}

int rail_xml_parse_file(const char *path, struct rail_xml_node **root) {
  struct stat st;
  FILE *f;
  char *buf;
  size_t got;
  int rc;

  f = fopen(path, "r");
  if (f == NULL) {
    rc = -errno;
    RAIL_WARN("%s: cannot open: %s", path, strerror(-rc));
    return rc;
  }
  if (fstat(fileno(f), &st) != 0) {
    rc = -errno;
    RAIL_WARN("%s: cannot stat: %s", path, strerror(-rc));
    goto close_file;
  }
  if (S_ISDIR(st.st_mode)) {
    rc = -EISDIR;
    RAIL_WARN("%s: is a directory, not a topology file", path);
    goto close_file;
  }
  if (st.st_size > RAIL_XML_MAX_BYTES) {
    rc = -EFBIG;
    RAIL_WARN("%s: %lld bytes is too large for a topology file (limit %d)", path,
              (long long)st.st_size, RAIL_XML_MAX_BYTES);
    goto close_file;
  }
  buf = malloc((size_t)st.st_size + 1);
  if (buf == NULL) {
    rc = -ENOMEM;
    RAIL_WARN("%s: cannot allocate %lld bytes to read it", path, (long long)st.st_size);
    goto close_file;
  }
  got = fread(buf, 1, (size_t)st.st_size, f);
  if (ferror(f)) {
    rc = -EIO;
    RAIL_WARN("%s: read error", path);
    goto free_buf;
  }
  rc = rail_xml_parse_buf(path, buf, got, root);

free_buf:
  free(buf);
close_file:
  fclose(f);
  return rc;
}
