/* Site rules file parser (rules.h). */
#include "tuner/rules.h"

#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <unistd.h>

#include "common/log.h"
#include "common/param.h"
#include "tuner/model.h"

#define MAX_TOKENS 16
#define MAX_LINE 1024

/* "*", "N", "lo-hi", "lo-": an inclusive range; sizes in the syntax of
 * rail_param_parse_size. -ERANGE when a bound does not fit in 64 bits, so
 * the message can say so; -EINVAL for the rest. */
static int parse_range(const char *s, uint64_t *lo, uint64_t *hi) {
  char buf[64];
  char *dash;
  int rc;

  if (strcmp(s, "*") == 0) {
    *lo = 0;
    *hi = UINT64_MAX;
    return 0;
  }
  if (strlen(s) >= sizeof(buf)) return -EINVAL;
  strcpy(buf, s);
  dash = strchr(buf, '-');
  if (dash == NULL) {
    if ((rc = rail_param_parse_size(buf, lo)) != 0) return rc;
    *hi = *lo;
    return 0;
  }
  *dash = '\0';
  if ((rc = rail_param_parse_size(buf, lo)) != 0) return rc;
  if (dash[1] == '\0') {
    *hi = UINT64_MAX;
    return 0;
  }
  if ((rc = rail_param_parse_size(dash + 1, hi)) != 0) return rc;
  if (*hi < *lo) return -EINVAL;
  return 0;
}

static int parse_count_range(const char *s, int *lo, int *hi) {
  uint64_t l, h;
  if (parse_range(s, &l, &h) != 0 || l > INT_MAX) return -EINVAL;
  *lo = (int)l;
  *hi = h > INT_MAX ? INT_MAX : (int)h;
  return 0;
}

/* Splits on blanks; "->" stays a token of its own. Returns the count, or -1
 * when there are too many. */
static int tokenize(char *line, char **tok) {
  int n = 0;
  char *p = line;

  for (;;) {
    while (*p == ' ' || *p == '\t')
      p++;
    if (*p == '\0') return n;
    if (n == MAX_TOKENS) return -1;
    tok[n++] = p;
    while (*p != '\0' && *p != ' ' && *p != '\t')
      p++;
    if (*p != '\0') *p++ = '\0';
  }
}

/* The collective and the byte range: the first two tokens. */
static int parse_what(char **tok, struct rail_tuner_rule *r, char *why, size_t wlen) {
  int rc;

  if (strcmp(tok[0], "*") == 0) {
    r->coll = -1;
  } else if ((r->coll = rail_tuner_coll_parse(tok[0])) < 0) {
    snprintf(why, wlen,
             "unknown collective \"%s\" (allreduce, allgather, reducescatter, "
             "broadcast, reduce or *)",
             tok[0]);
    return -EINVAL;
  }
  rc = parse_range(tok[1], &r->min_bytes, &r->max_bytes);
  if (rc != 0) {
    snprintf(why, wlen,
             rc == -ERANGE ? "byte range \"%s\" has a size beyond 64 bits"
                           : "bad byte range \"%s\" (e.g. 0-64K, 1MiB-, *)",
             tok[1]);
    return -EINVAL;
  }
  return 0;
}

/* nodes= and ranks= conditions between the byte range and the arrow. */
static int parse_conditions(char **tok, int n, struct rail_tuner_rule *r, char *why, size_t wlen) {
  for (int i = 0; i < n; i++) {
    int rc = -EINVAL;
    if (strncasecmp(tok[i], "nodes=", 6) == 0)
      rc = parse_count_range(tok[i] + 6, &r->min_nodes, &r->max_nodes);
    else if (strncasecmp(tok[i], "ranks=", 6) == 0)
      rc = parse_count_range(tok[i] + 6, &r->min_ranks, &r->max_ranks);
    if (rc != 0) {
      snprintf(why, wlen, "bad condition \"%s\" (nodes=N, ranks=N, or ranges lo-hi)", tok[i]);
      return -EINVAL;
    }
  }
  return 0;
}

/* The algorithm and protocol after the arrow, and whether they go together.
 * "*" for one of them: the rule forces only the other and leaves the "*"
 * part to NCCL's own costs (a run that forced only NCCL_ALGO measured
 * exactly that); never both. */
static int parse_choice(char **tok, struct rail_tuner_rule *r, char *why, size_t wlen) {
  int any_algo = strcmp(tok[0], "*") == 0, any_proto = strcmp(tok[1], "*") == 0;

  if (any_algo && any_proto) {
    snprintf(why, wlen, "\"* *\" forces nothing (name the algorithm, the protocol or both)");
    return -EINVAL;
  }
  r->algo = any_algo ? RAIL_TUNER_RULE_ANY : rail_tuner_algo_parse(tok[0]);
  if (!any_algo && r->algo < 0) {
    snprintf(why, wlen,
             "unknown algorithm \"%s\" (tree, ring, nvls, nvls_tree, pat, "
             "collnet_direct, collnet_chain, or * for NCCL's choice)",
             tok[0]);
    return -EINVAL;
  }
  r->proto = any_proto ? RAIL_TUNER_RULE_ANY : rail_tuner_proto_parse(tok[1]);
  if (!any_proto && r->proto < 0) {
    snprintf(why, wlen, "unknown protocol \"%s\" (ll, ll128, simple, or * for NCCL's choice)",
             tok[1]);
    return -EINVAL;
  }
  if (!any_algo && !any_proto && r->proto != RAIL_PROTO_SIMPLE && r->algo != RAIL_ALGO_RING &&
      r->algo != RAIL_ALGO_TREE) {
    snprintf(why, wlen, "%s runs only with the simple protocol", tok[0]);
    return -EINVAL;
  }
  return 0;
}

/* channels=N after the choice: a cap on NCCL's channel count. */
static int parse_options(char **tok, int n, struct rail_tuner_rule *r, char *why, size_t wlen) {
  for (int i = 0; i < n; i++) {
    int lo, hi;
    if (strncasecmp(tok[i], "channels=", 9) != 0 || parse_count_range(tok[i] + 9, &lo, &hi) != 0 ||
        lo != hi || lo < 1 || lo > 64) {
      snprintf(why, wlen, "bad option \"%s\" (channels=1..64)", tok[i]);
      return -EINVAL;
    }
    r->channels = lo;
  }
  return 0;
}

/* Fills *r from one line's tokens, or says what is wrong in why. */
static int parse_rule(char **tok, int ntok, struct rail_tuner_rule *r, char *why, size_t wlen) {
  int arrow = -1;

  for (int i = 0; i < ntok; i++)
    if (strcmp(tok[i], "->") == 0) arrow = i;
  if (arrow < 0) {
    snprintf(why, wlen, "no \"->\" between the match and the choice");
    return -EINVAL;
  }
  if (arrow < 2) {
    snprintf(why, wlen, "expected \"<collective> <bytes>\" before \"->\"");
    return -EINVAL;
  }
  if (ntok - arrow < 3) {
    snprintf(why, wlen, "expected \"<algorithm> <protocol>\" after \"->\"");
    return -EINVAL;
  }
  memset(r, 0, sizeof(*r));
  r->max_nodes = r->max_ranks = INT_MAX;
  if (parse_what(tok, r, why, wlen) != 0 ||
      parse_conditions(tok + 2, arrow - 2, r, why, wlen) != 0 ||
      parse_choice(tok + arrow + 1, r, why, wlen) != 0)
    return -EINVAL;
  return parse_options(tok + arrow + 3, ntok - arrow - 3, r, why, wlen);
}

/* "fabric NAME": what the site's network is, which NCCL's table cannot
 * show. One such line a file. */
static int parse_fabric(char **tok, int ntok, struct rail_tuner_rules *rules, int lineno, char *why,
                        size_t wlen) {
  int f;

  if (ntok != 2 || (f = rail_tuner_fabric_parse(tok[1])) <= RAIL_TUNER_FABRIC_UNKNOWN) {
    snprintf(why, wlen, "expected \"fabric ib|roce|efa|tcp|libfabric\"");
    return -EINVAL;
  }
  if (rules->fabric_line > 0) {
    snprintf(why, wlen, "a second fabric line (the first is line %d)", rules->fabric_line);
    return -EINVAL;
  }
  rules->fabric = f;
  rules->fabric_line = lineno;
  return 0;
}

/* "shape gpus=N sm=N nics=N mbps=N", each part optional: the job shape
 * the rules were measured on. One such line a file. */
static int parse_shape(char **tok, int ntok, struct rail_tuner_rules *rules, int lineno, char *why,
                       size_t wlen) {
  static const char *const keys[] = {"gpus", "sm", "nics", "mbps"};
  int *vals[] = {&rules->shape_gpus, &rules->shape_sm, &rules->shape_nics, &rules->shape_mbps};

  if (rules->shape_line > 0) {
    snprintf(why, wlen, "a second shape line (the first is line %d)", rules->shape_line);
    return -EINVAL;
  }
  for (int i = 1; i < ntok; i++) {
    size_t k = 0;
    char *end;
    long v;
    for (; k < sizeof(keys) / sizeof(keys[0]); k++)
      if (strncmp(tok[i], keys[k], strlen(keys[k])) == 0 && tok[i][strlen(keys[k])] == '=') break;
    if (k == sizeof(keys) / sizeof(keys[0])) {
      snprintf(why, wlen, "expected \"shape gpus=N sm=N nics=N mbps=N\", not '%.40s'", tok[i]);
      return -EINVAL;
    }
    v = strtol(tok[i] + strlen(keys[k]) + 1, &end, 10);
    if (*end != '\0' || v < 1 || v > INT_MAX / 2) {
      snprintf(why, wlen, "shape: %s is not a positive number", tok[i]);
      return -EINVAL;
    }
    *vals[k] = (int)v;
  }
  rules->shape_line = lineno;
  return 0;
}

/* One line's tokens: a fabric or shape declaration, or a rule. */
static int parse_line(char **tok, int ntok, struct rail_tuner_rules *rules, int lineno, char *why,
                      size_t wlen) {
  struct rail_tuner_rule *r = &rules->rules[rules->nrules];

  if (strcasecmp(tok[0], "fabric") == 0) return parse_fabric(tok, ntok, rules, lineno, why, wlen);
  if (strcasecmp(tok[0], "shape") == 0) return parse_shape(tok, ntok, rules, lineno, why, wlen);
  if (parse_rule(tok, ntok, r, why, wlen) != 0) return -EINVAL;
  r->line = lineno;
  rules->nrules++;
  return 0;
}

/* FNV-1a, 64 bits: equal files give equal hashes on every node. */
static uint64_t text_hash(const char *text) {
  uint64_t h = 0xcbf29ce484222325ull;
  for (const unsigned char *p = (const unsigned char *)text; *p != '\0'; p++)
    h = (h ^ *p) * 0x100000001b3ull;
  return h;
}

int rail_tuner_rules_parse(const char *text, const char *name, struct rail_tuner_rules **out) {
  struct rail_tuner_rules *rules;
  const char *p = text;
  size_t cap = 1;
  int lineno = 0;

  /* One rule per line at most: count lines for the allocation. */
  for (const char *q = text; *q != '\0'; q++)
    if (*q == '\n') cap++;
  rules = calloc(1, sizeof(*rules) + cap * sizeof(rules->rules[0]));
  if (rules == NULL) return -ENOMEM;
  snprintf(rules->path, sizeof(rules->path), "%s", name);
  rules->hash = text_hash(text);

  while (*p != '\0') {
    char line[MAX_LINE], why[160];
    char *tok[MAX_TOKENS], *hash;
    size_t len = strcspn(p, "\n");
    int ntok;

    lineno++;
    if (len >= sizeof(line)) {
      RAIL_WARN("%s:%d: line longer than %zu characters; skipped", name, lineno, sizeof(line) - 1);
      rules->nbad++;
      goto next;
    }
    memcpy(line, p, len);
    line[len] = '\0';
    if ((hash = strchr(line, '#')) != NULL) *hash = '\0';
    for (char *c = line; *c != '\0'; c++)
      if (*c == '\r') *c = ' ';
    ntok = tokenize(line, tok);
    if (ntok == 0) goto next;
    if (ntok < 0) {
      RAIL_WARN("%s:%d: more than %d words; skipped", name, lineno, MAX_TOKENS);
      rules->nbad++;
      goto next;
    }
    if (parse_line(tok, ntok, rules, lineno, why, sizeof(why)) != 0) {
      RAIL_WARN("%s:%d: %s; line skipped", name, lineno, why);
      rules->nbad++;
    }
  next:
    p += len;
    if (*p == '\n') p++;
  }
  *out = rules;
  return 0;
}

int rail_tuner_rules_load(const char *path, struct rail_tuner_rules **out) {
  FILE *f;
  char *text = NULL;
  size_t len = 0, cap = 0;
  int rc;

  f = fopen(path, "r");
  if (f == NULL) {
    rc = -errno;
    RAIL_WARN("NCCL_RAIL_TUNER_FILE=%s: cannot open: %s; no site rules", path, strerror(-rc));
    return rc;
  }
  for (;;) {
    size_t got;
    if (cap - len < 4096) {
      char *grown = realloc(text, cap + 65536);
      if (grown == NULL) {
        rc = -ENOMEM;
        goto close_file;
      }
      text = grown;
      cap += 65536;
    }
    got = fread(text + len, 1, cap - len - 1, f);
    len += got;
    if (got == 0) break;
  }
  if (ferror(f)) {
    rc = -EIO;
    RAIL_WARN("NCCL_RAIL_TUNER_FILE=%s: read error; no site rules", path);
    goto close_file;
  }
  text[len] = '\0';
  rc = rail_tuner_rules_parse(text, path, out);
close_file:
  free(text);
  fclose(f);
  return rc;
}

void rail_tuner_rules_free(struct rail_tuner_rules *rules) { free(rules); }

const struct rail_tuner_rule *rail_tuner_rules_match(const struct rail_tuner_rules *rules, int coll,
                                                     size_t nbytes, int nodes, int ranks) {
  if (rules == NULL) return NULL;
  for (int i = 0; i < rules->nrules; i++) {
    const struct rail_tuner_rule *r = &rules->rules[i];
    if (r->coll >= 0 && r->coll != coll) continue;
    if ((uint64_t)nbytes < r->min_bytes || (uint64_t)nbytes > r->max_bytes) continue;
    if (nodes < r->min_nodes || nodes > r->max_nodes) continue;
    if (ranks < r->min_ranks || ranks > r->max_ranks) continue;
    return r;
  }
  return NULL;
}

int rail_tuner_rule_names(const struct rail_tuner_rule *rule, int algo, int proto) {
  return (rule->algo == RAIL_TUNER_RULE_ANY || rule->algo == algo) &&
         (rule->proto == RAIL_TUNER_RULE_ANY || rule->proto == proto);
}

int rail_tuner_rule_restrict(const struct rail_tuner_rule *rule, float (*cost)[RAIL_PROTO_COUNT]) {
  float top = -1.0f, over;

  for (int a = 0; a < RAIL_ALGO_COUNT; a++)
    for (int p = 0; p < RAIL_PROTO_COUNT; p++)
      if (cost[a][p] >= 0 && rail_tuner_rule_names(rule, a, p) && cost[a][p] > top)
        top = cost[a][p];
  if (top < 0) return -ENOENT;
  /* Above every named entry, by more than float rounding at any size. */
  over = top * 2.0f + 1.0f;
  for (int a = 0; a < RAIL_ALGO_COUNT; a++)
    for (int p = 0; p < RAIL_PROTO_COUNT; p++)
      if (cost[a][p] >= 0 && !rail_tuner_rule_names(rule, a, p) && cost[a][p] <= top)
        cost[a][p] = over;
  return 0;
}

const char *rail_tuner_rules_path(const char **source) {
  struct rail_param_info info;
  const char *site;

  rail_param_describe(RAIL_PARAM_TUNER_FILE, &info);
  if (info.from_env) {
    if (source != NULL) *source = info.value[0] ? "NCCL_RAIL_TUNER_FILE" : "none";
    return info.value;
  }
  site = rail_param_str(RAIL_PARAM_SITE_RULES);
  if (site[0] != '\0' && access(site, F_OK) == 0) {
    if (source != NULL) *source = "the site file";
    return site;
  }
  if (source != NULL) *source = "none";
  return "";
}

int rail_tuner_rules_fit(const struct rail_tuner_rules *rules, int gpus, int sm, int nics, int mbps,
                         char *why, size_t wlen) {
  if (rules == NULL || rules->shape_line == 0) return 1;
  if (rules->shape_gpus && gpus && rules->shape_gpus != gpus) {
    snprintf(why, wlen, "%d GPUs a node, this job %d", rules->shape_gpus, gpus);
    return 0;
  }
  if (rules->shape_sm && sm && rules->shape_sm != sm) {
    snprintf(why, wlen, "GPUs of compute capability %d.%d, this node's %d.%d", rules->shape_sm / 10,
             rules->shape_sm % 10, sm / 10, sm % 10);
    return 0;
  }
  if (rules->shape_nics && nics && rules->shape_nics != nics) {
    snprintf(why, wlen, "%d NIC rails a node, this node %d", rules->shape_nics, nics);
    return 0;
  }
  if (rules->shape_mbps && mbps &&
      (mbps > rules->shape_mbps * 1.1 || mbps < rules->shape_mbps / 1.1)) {
    snprintf(why, wlen, "NICs of %d Mb/s, this node's %d Mb/s", rules->shape_mbps, mbps);
    return 0;
  }
  return 1;
}
