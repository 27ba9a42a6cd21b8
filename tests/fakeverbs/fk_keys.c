/* Memory keys as real HCAs build them, and the writes that use a key after
 * its MR is gone (fakeverbs.h, "Keys").
 *
 * mlx5 and rxe both build a key from an index into the device's MR table
 * and an 8-bit variant: mlx5 as index << 8 | a counter of every key the
 * device made (assign_mkey_variant in drivers/infiniband/hw/mlx5/mr.c),
 * rxe as elem.index << 8 | a random byte (rxe_mr_init, rxe_get_next_key).
 * The index of a deregistered MR is handed out again, so a key kept past
 * its MR's deregistration either is refused (remote access error, status
 * 10) or, when the variant happens to match, lands in whatever MR holds
 * the index now: silent corruption. Here:
 *  - indices are reused, oldest released first, once FK_KEY_POISON more
 *    have been released after them; until then the index is "poisoned":
 *    nothing holds it, and any use of a key in it is late;
 *  - the variant is a counter over every key made, as mlx5's, but never
 *    one this index already had, so that a key names one registration for
 *    the process's life (an index that has had all 256 is retired). That
 *    is what lets the fake tell, for every use of a key, whether the MR it
 *    names is the one holding it now, where hardware cannot;
 *  - a use of a key whose MR is gone is recorded, reported on stderr with
 *    what it named and what holds the index now, and by default aborts
 *    the process (FAKEVERBS_STALE_KEYS=count only counts), so the test
 *    that caused it fails whichever harness runs it. The requester gets
 *    what the hardware most often gives: a remote access error.
 * Called with fk.lock held. */
#define _GNU_SOURCE
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "fk.h"

/* How many later deregistrations an index stays poisoned for. */
#define FK_KEY_POISON 16
#define FK_KEY_MAX_INDEX 0xffffffu

struct fk_key_slot {
  struct fk_mr *live; /* the MR holding the index, or NULL */
  uint8_t issued[32]; /* variants handed out at this index */
  int nissued;
  int poisoned;       /* released, waiting in the free list */
  uint32_t next_free; /* the free list, oldest first */
  uint32_t dead_key;  /* the last MR deregistered here: for the report */
  uint64_t dead_addr, dead_len, dead_ns;
};

static struct fk_key_slot *fk_keys;
static uint32_t fk_nkeys = 1; /* index 0 is never handed out: no key is below 0x100 */
static uint32_t fk_keys_cap;
static uint32_t fk_free_head, fk_free_tail, fk_free_count; /* released indices, oldest first */
static uint8_t fk_variant;                                 /* mlx5's counter */

static int fk_key_issued(const struct fk_key_slot *s, uint8_t v) {
  return (s->issued[v / 8] >> (v % 8)) & 1;
}

/* An index to register at: the oldest released one once FK_KEY_POISON
 * more have been released after it (its reuse is what a late write would
 * run into), else a new one. */
static int fk_key_index(uint32_t *out) {
  while (fk_free_count > FK_KEY_POISON) {
    uint32_t idx = fk_free_head;
    fk_free_head = fk_keys[idx].next_free;
    fk_free_count--;
    fk_keys[idx].poisoned = 0;
    if (fk_keys[idx].nissued < 256) {
      *out = idx;
      return 0;
    }
  }
  if (fk_nkeys > FK_KEY_MAX_INDEX) return -ENOMEM;
  if (fk_nkeys >= fk_keys_cap) {
    uint32_t cap = fk_keys_cap ? fk_keys_cap * 2 : 1024;
    struct fk_key_slot *k = realloc(fk_keys, (size_t)cap * sizeof(*k));
    if (k == NULL) return -ENOMEM;
    memset(k + fk_keys_cap, 0, (size_t)(cap - fk_keys_cap) * sizeof(*k));
    fk_keys = k;
    fk_keys_cap = cap;
  }
  *out = fk_nkeys++;
  return 0;
}

int fk_key_new(struct fk_mr *m, uint32_t *key) {
  struct fk_key_slot *s;
  uint32_t idx;
  int rc = fk_key_index(&idx);

  if (rc != 0) return rc;
  s = &fk_keys[idx];
  do
    fk_variant++;
  while (fk_key_issued(s, fk_variant));
  s->issued[fk_variant / 8] |= (uint8_t)(1u << (fk_variant % 8));
  s->nissued++;
  s->live = m;
  *key = idx << 8 | fk_variant;
  return 0;
}

void fk_key_release(struct fk_mr *m) {
  uint32_t idx = m->mr.lkey >> 8;
  struct fk_key_slot *s = &fk_keys[idx];

  s->live = NULL;
  s->dead_key = m->mr.lkey;
  s->dead_addr = m->iova;
  s->dead_len = m->mr.length;
  s->dead_ns = fk_now_ns();
  if (fk_free_count++ == 0)
    fk_free_head = idx;
  else
    fk_keys[fk_free_tail].next_free = idx;
  fk_free_tail = idx;
  s->poisoned = 1;
}

struct fk_mr *fk_mr_find(uint32_t key) {
  uint32_t idx = key >> 8;

  if (idx == 0 || idx >= fk_nkeys || fk_keys[idx].live == NULL) return NULL;
  return fk_keys[idx].live->mr.lkey == key ? fk_keys[idx].live : NULL;
}

int fk_key_check_stale(uint32_t key, uint64_t addr, uint64_t len, int need) {
  uint32_t idx = key >> 8;
  const struct fk_key_slot *s;
  const char *mode = getenv("FAKEVERBS_STALE_KEYS");
  char now[160];

  if (idx == 0 || idx >= fk_nkeys) return 0;
  s = &fk_keys[idx];
  if (!fk_key_issued(s, (uint8_t)key) || (s->live != NULL && s->live->mr.lkey == key)) return 0;
  fk.st.stale_key_uses++;
  if (s->live != NULL)
    snprintf(now, sizeof(now), "reused by MR %#x [%#llx, +%llu), where a matching variant lands it",
             s->live->mr.lkey, (unsigned long long)s->live->iova,
             (unsigned long long)s->live->mr.length);
  else
    snprintf(now, sizeof(now), "%s",
             s->poisoned ? "poisoned (not reused yet)" : "retired (every variant used)");
  /* The MR the key named is the last one deregistered at its index only if
   * no later one came and went there; say which it was when it is. */
  if (s->dead_key == key)
    fprintf(stderr,
            "fakeverbs: pid %d: STALE KEY %#x: a %s of %llu bytes at %#llx uses the key of MR "
            "[%#llx, +%llu), deregistered %.3f ms ago; its index is now %s\n",
            (int)getpid(), key, need & IBV_ACCESS_REMOTE_WRITE ? "remote write" : "use",
            (unsigned long long)len, (unsigned long long)addr, (unsigned long long)s->dead_addr,
            (unsigned long long)s->dead_len, (double)(fk_now_ns() - s->dead_ns) / 1e6, now);
  else
    fprintf(stderr,
            "fakeverbs: pid %d: STALE KEY %#x: a %s of %llu bytes at %#llx uses the key of an MR "
            "deregistered earlier; its index is now %s\n",
            (int)getpid(), key, need & IBV_ACCESS_REMOTE_WRITE ? "remote write" : "use",
            (unsigned long long)len, (unsigned long long)addr, now);
  if (mode == NULL || strcmp(mode, "count") != 0) {
    fprintf(stderr, "fakeverbs: aborting: a key was used after its MR was deregistered "
                    "(FAKEVERBS_STALE_KEYS=count only counts)\n");
    abort();
  }
  return 1;
}
