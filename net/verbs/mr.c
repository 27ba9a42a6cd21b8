/* Memory registration and the per-NIC cache (mr.h).
 *
 * The cache must stay right when the memory under an address changes: CUDA
 * VMM and PyTorch's expandable segments unmap and map other physical memory
 * at the same addresses, and a registration pins what was there when it
 * was made, so reusing it for the new memory would move data to and from
 * pages nobody reads any more. Hence:
 *  - an entry is shared only by a registration of exactly its page range,
 *    type and access, never by one of a range inside it;
 *  - only while the memory is provably the same: GPU memory by the CUDA
 *    allocation's id at the first and the last byte (gdr.h), which a remap
 *    changes. Host memory has no such id (an unprivileged process cannot
 *    see its page frames), so every host registration is its own; NCCL
 *    registers each host buffer once per connection anyway;
 *  - once any registration overlapping an entry is released (the first
 *    sign that its memory may be freed or remapped), no new registration
 *    shares it; its holders keep it until they release it.
 * An entry is deregistered with its last holder.
 *
 * Least privilege: a registration itself takes no remote writes, and
 * remote reads only for GPU memory, which the flush reads back through its
 * loopback QP (flush.c). What a peer may write is a window: an MR of exactly
 * the buffer a receive posted, whose key the credit carries
 * (rail_verbs_mr_window_get). An MR's bounds are byte-exact on every HCA
 * and on soft-RoCE, unlike the pages it pins, so the peer's NIC is refused
 * one byte before or past the buffer. Windows are kept per registration and
 * NIC (NCCL posts into the same few slots of its buffers again and again,
 * so after the first round every receive finds its window) and released
 * with the registration. A window is deregistered only when no peer can
 * still write with its key: its receive has ended (every part placed, or
 * the sender's notice that nothing more of it will land) or its
 * connection's QPs are destroyed (conn.c); NICs hand a released key's
 * index to the next registration, and a stale write whose 8-bit variant
 * matches lands there (docs/design.md, "Registration"). Memory windows (ibv_alloc_mw) would do the same
 * with a bind and an invalidation per message, but not every provider has
 * them, nor every memory type. */
#include "net/verbs/mr.h"

#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "common/log.h"
#include "net/verbs/gdr.h"

struct rail_verbs_win {
  struct rail_verbs_win *next;
  struct rail_verbs_mr_entry *e;
  uintptr_t addr;
  size_t len;
  struct ibv_mr *mr;
  int uses;      /* receives posted with it */
  uint64_t last; /* when last released, for eviction */
};

struct rail_verbs_mr_entry {
  struct rail_verbs_mr_entry *next;
  uintptr_t base, end; /* page-aligned range (dma-buf: the registered range) */
  int type;
  int access;
  int refs;      /* handles holding it */
  int wins_busy; /* its windows held by posted receives: they keep it too */
  int shareable;
  uint64_t id_first, id_last; /* GPU memory: the allocation ids it was made for */
  struct ibv_mr *mr;
  int dmabuf_fd; /* a dma-buf entry: our duplicate of the fd, for its windows */
  uint64_t dmabuf_offset;
  struct rail_verbs_win *wins; /* guarded by the NIC's lock */
  int nwins;
  uint64_t clock;
};

struct rail_verbs_mr {
  int n;
  struct rail_verbs_nic *nics[RAIL_VERBS_MAX_RAILS];
  struct rail_verbs_mr_entry *e[RAIL_VERBS_MAX_RAILS];
  int dmabuf; /* entries are private, not in the caches */
};

/* Windows kept per registration and NIC while idle. */
#define RAIL_VERBS_MR_WINDOWS 64
#define RAIL_VERBS_WINDOW_ACCESS (IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE)

/* What a registration of memory of `type` allows: local writes, and remote
 * reads only where the flush reads it back (GPU memory). */
static int rail_verbs_mr_access(int type) {
  return IBV_ACCESS_LOCAL_WRITE | (type == RAIL_VERBS_MEM_HOST ? 0 : IBV_ACCESS_REMOTE_READ);
}

/* What a registration of [base, end) would be cached as. */
struct rail_verbs_mr_key {
  uintptr_t base, end;
  int type, access;
  int shareable;
  uint64_t id_first, id_last;
};

static struct rail_verbs_mr_key rail_verbs_mr_key(void *data, size_t size, int type) {
  uintptr_t page = (uintptr_t)sysconf(_SC_PAGESIZE);
  struct rail_verbs_mr_key k;

  memset(&k, 0, sizeof(k));
  k.base = (uintptr_t)data & ~(page - 1);
  k.end = ((uintptr_t)data + (size ? size : 1) + page - 1) & ~(page - 1);
  k.type = type;
  k.access = rail_verbs_mr_access(type);
  k.shareable = type == RAIL_VERBS_MEM_CUDA &&
                rail_verbs_gdr_buffer_id((uintptr_t)data, &k.id_first) == 0 &&
                rail_verbs_gdr_buffer_id((uintptr_t)data + (size ? size - 1 : 0), &k.id_last) == 0;
  return k;
}

static int rail_verbs_mr_key_matches(const struct rail_verbs_mr_entry *e,
                                     const struct rail_verbs_mr_key *k) {
  return e->shareable && k->shareable && e->base == k->base && e->end == k->end &&
         e->type == k->type && e->access == k->access && e->id_first == k->id_first &&
         e->id_last == k->id_last;
}

/* The entry's windows and MR go, and the entry; the NIC's lock is held or
 * the NIC is closing. */
static void rail_verbs_mr_entry_free(struct rail_verbs_nic *nic, struct rail_verbs_mr_entry *e) {
  while (e->wins != NULL) {
    struct rail_verbs_win *w = e->wins;
    e->wins = w->next;
    nic->api->dereg_mr(w->mr);
    free(w);
  }
  nic->api->dereg_mr(e->mr);
  if (e->dmabuf_fd >= 0) close(e->dmabuf_fd);
  free(e);
}

/* One holder less (a handle, or a window in use); the NIC's lock is held.
 * The last one frees the entry: a receive still posted into memory whose
 * handle was released (NCCL closes comms with receives pending) keeps the
 * entry, and what the NIC may still write stays registered, until the
 * receive is released. */
static void rail_verbs_mr_entry_unhold(struct rail_verbs_nic *nic, struct rail_verbs_mr_entry *e) {
  if (e->refs == 0 && e->wins_busy == 0) rail_verbs_mr_entry_free(nic, e);
}

static void rail_verbs_cache_put(struct rail_verbs_nic *nic, struct rail_verbs_mr_entry *e) {
  pthread_mutex_lock(&nic->lock);
  for (struct rail_verbs_mr_entry *o = nic->cache; o != NULL; o = o->next)
    if (o->base < e->end && e->base < o->end) o->shareable = 0;
  if (--e->refs == 0) {
    for (struct rail_verbs_mr_entry **p = &nic->cache; *p != NULL; p = &(*p)->next) {
      if (*p == e) {
        *p = e->next;
        break;
      }
    }
    rail_verbs_mr_entry_unhold(nic, e);
  }
  pthread_mutex_unlock(&nic->lock);
}

/* A new entry for k, registered; NULL (and *rc) on failure, with a WARN. */
static struct rail_verbs_mr_entry *
rail_verbs_cache_new(struct rail_verbs_nic *nic, const struct rail_verbs_mr_key *k, int *rc) {
  struct rail_verbs_mr_entry *e = calloc(1, sizeof(*e));

  if (e == NULL) {
    *rc = -ENOMEM;
    return NULL;
  }
  e->mr = rail_verbs_reg_mr(nic->api, nic->pd, (void *)k->base, k->end - k->base, k->access);
  if (e->mr == NULL) {
    *rc = -(errno ? errno : EIO);
    RAIL_WARN("verbs: %s: ibv_reg_mr of %s memory [%#lx, +%lu) failed: %s", nic->name,
              k->type == RAIL_VERBS_MEM_CUDA ? "GPU" : "host", (unsigned long)k->base,
              (unsigned long)(k->end - k->base), strerror(-*rc));
    free(e);
    return NULL;
  }
  e->base = k->base;
  e->end = k->end;
  e->type = k->type;
  e->access = k->access;
  e->shareable = k->shareable;
  e->id_first = k->id_first;
  e->id_last = k->id_last;
  e->dmabuf_fd = -1;
  e->refs = 1;
  return e;
}

static int rail_verbs_cache_get(struct rail_verbs_nic *nic, void *data, size_t size, int type,
                                struct rail_verbs_mr_entry **out) {
  struct rail_verbs_mr_key k = rail_verbs_mr_key(data, size, type);
  struct rail_verbs_mr_entry *e;
  int rc = 0;

  pthread_mutex_lock(&nic->lock);
  for (e = nic->cache; e != NULL; e = e->next) {
    if (rail_verbs_mr_key_matches(e, &k)) {
      e->refs++;
      goto unlock;
    }
  }
  e = rail_verbs_cache_new(nic, &k, &rc);
  if (e != NULL) {
    e->next = nic->cache;
    nic->cache = e;
  }
unlock:
  pthread_mutex_unlock(&nic->lock);
  if (rc == 0) *out = e;
  return rc;
}

int rail_verbs_mr_reg(struct rail_verbs_nic *const *nics, int nnics, void *data, size_t size,
                      int type, struct rail_verbs_mr **out) {
  struct rail_verbs_mr *mr;
  int rc = 0;

  if (nnics < 1 || nnics > RAIL_VERBS_MAX_RAILS) return -EINVAL;
  if (type != RAIL_VERBS_MEM_HOST && type != RAIL_VERBS_MEM_CUDA) return -EINVAL;
  mr = calloc(1, sizeof(*mr));
  if (mr == NULL) return -ENOMEM;
  for (mr->n = 0; mr->n < nnics; mr->n++) {
    rc = rail_verbs_cache_get(nics[mr->n], data, size, type, &mr->e[mr->n]);
    if (rc != 0) goto put_entries;
    mr->nics[mr->n] = nics[mr->n];
  }
  *out = mr;
  return 0;

put_entries:
  for (int i = 0; i < mr->n; i++)
    rail_verbs_cache_put(mr->nics[i], mr->e[i]);
  free(mr);
  return rc;
}

/* One NIC's entry of a dma-buf registration: private, with its own
 * duplicate of the fd (NCCL may close its own) for the windows. */
static int rail_verbs_mr_dmabuf_entry(struct rail_verbs_nic *nic, void *data, size_t size,
                                      uint64_t offset, int fd, struct rail_verbs_mr_entry **out) {
  struct rail_verbs_mr_entry *e;
  int rc;

  if (nic->api->reg_dmabuf_mr == NULL) return -ENOSYS;
  e = calloc(1, sizeof(*e));
  if (e == NULL) return -ENOMEM;
  e->type = RAIL_VERBS_MEM_DMABUF;
  e->access = rail_verbs_mr_access(RAIL_VERBS_MEM_DMABUF);
  e->dmabuf_fd = fcntl(fd, F_DUPFD_CLOEXEC, 0);
  if (e->dmabuf_fd < 0) {
    rc = -errno;
    RAIL_WARN("verbs: %s: cannot duplicate dma-buf fd %d: %s", nic->name, fd, strerror(-rc));
    free(e);
    return rc;
  }
  e->mr = nic->api->reg_dmabuf_mr(nic->pd, offset, size, (uintptr_t)data, fd, e->access);
  if (e->mr == NULL) {
    rc = -(errno ? errno : EIO);
    RAIL_WARN("verbs: %s: ibv_reg_dmabuf_mr of [%p, +%zu) fd %d failed: %s", nic->name, data, size,
              fd, strerror(-rc));
    close(e->dmabuf_fd);
    free(e);
    return rc;
  }
  e->base = (uintptr_t)data;
  e->end = (uintptr_t)data + size;
  e->dmabuf_offset = offset;
  e->refs = 1;
  *out = e;
  return 0;
}

int rail_verbs_mr_reg_dmabuf(struct rail_verbs_nic *const *nics, int nnics, void *data, size_t size,
                             uint64_t offset, int fd, struct rail_verbs_mr **out) {
  struct rail_verbs_mr *mr;
  int rc = 0;

  if (nnics < 1 || nnics > RAIL_VERBS_MAX_RAILS) return -EINVAL;
  mr = calloc(1, sizeof(*mr));
  if (mr == NULL) return -ENOMEM;
  mr->dmabuf = 1;
  for (mr->n = 0; mr->n < nnics; mr->n++) {
    rc = rail_verbs_mr_dmabuf_entry(nics[mr->n], data, size, offset, fd, &mr->e[mr->n]);
    if (rc != 0) goto free_entries;
    mr->nics[mr->n] = nics[mr->n];
  }
  *out = mr;
  return 0;

free_entries:
  for (int i = 0; i < mr->n; i++)
    rail_verbs_mr_entry_free(mr->nics[i], mr->e[i]);
  free(mr);
  return rc;
}

void rail_verbs_mr_dereg(struct rail_verbs_mr *mr) {
  if (mr == NULL) return;
  for (int i = 0; i < mr->n; i++) {
    if (mr->dmabuf) {
      pthread_mutex_lock(&mr->nics[i]->lock);
      mr->e[i]->refs--;
      rail_verbs_mr_entry_unhold(mr->nics[i], mr->e[i]);
      pthread_mutex_unlock(&mr->nics[i]->lock);
    } else {
      rail_verbs_cache_put(mr->nics[i], mr->e[i]);
    }
  }
  free(mr);
}

int rail_verbs_mr_type(const struct rail_verbs_mr *mr) { return mr->e[0]->type; }

static struct rail_verbs_mr_entry *rail_verbs_mr_entry_on(const struct rail_verbs_mr *mr,
                                                          const struct rail_verbs_nic *nic) {
  if (mr == NULL) return NULL;
  for (int i = 0; i < mr->n; i++)
    if (mr->nics[i] == nic) return mr->e[i];
  return NULL;
}

struct ibv_mr *rail_verbs_mr_on(const struct rail_verbs_mr *mr, const struct rail_verbs_nic *nic) {
  struct rail_verbs_mr_entry *e = rail_verbs_mr_entry_on(mr, nic);

  return e != NULL ? e->mr : NULL;
}

/* ---- windows ---- */

/* Room for one more window: the least recently used idle one goes. */
static void rail_verbs_mr_window_evict(struct rail_verbs_nic *nic, struct rail_verbs_mr_entry *e) {
  struct rail_verbs_win **victim = NULL;

  if (e->nwins < RAIL_VERBS_MR_WINDOWS) return;
  for (struct rail_verbs_win **p = &e->wins; *p != NULL; p = &(*p)->next)
    if ((*p)->uses == 0 && (victim == NULL || (*p)->last < (*victim)->last)) victim = p;
  if (victim != NULL) {
    struct rail_verbs_win *w = *victim;
    *victim = w->next;
    nic->api->dereg_mr(w->mr);
    free(w);
    e->nwins--;
  }
}

/* An MR of exactly [addr, addr + len), writable by the peer. */
static struct ibv_mr *rail_verbs_mr_window_reg(struct rail_verbs_nic *nic,
                                               const struct rail_verbs_mr_entry *e, uintptr_t addr,
                                               size_t len) {
  if (e->dmabuf_fd >= 0)
    return nic->api->reg_dmabuf_mr(nic->pd, e->dmabuf_offset + (addr - e->base), len, addr,
                                   e->dmabuf_fd, RAIL_VERBS_WINDOW_ACCESS);
  return rail_verbs_reg_mr(nic->api, nic->pd, (void *)addr, len, RAIL_VERBS_WINDOW_ACCESS);
}

int rail_verbs_mr_window_get(struct rail_verbs_mr *mr, struct rail_verbs_nic *nic, void *data,
                             size_t len, struct rail_verbs_win **out) {
  struct rail_verbs_mr_entry *e = rail_verbs_mr_entry_on(mr, nic);
  uintptr_t addr = (uintptr_t)data;
  struct rail_verbs_win *w;
  int rc = 0;

  if (e == NULL || len == 0 || addr < e->base || addr + len < addr || addr + len > e->end) {
    RAIL_WARN("verbs: %s: receive buffer [%p, +%zu) is not inside its registration", nic->name,
              data, len);
    return -EINVAL;
  }
  pthread_mutex_lock(&nic->lock);
  for (w = e->wins; w != NULL; w = w->next)
    if (w->addr == addr && w->len == len) goto take;
  rail_verbs_mr_window_evict(nic, e);
  w = calloc(1, sizeof(*w));
  if (w != NULL) w->mr = rail_verbs_mr_window_reg(nic, e, addr, len);
  if (w == NULL || w->mr == NULL) {
    rc = -(errno ? errno : ENOMEM);
    RAIL_WARN("verbs: %s: cannot register receive buffer [%p, +%zu) for the peer: %s", nic->name,
              data, len, strerror(-rc));
    free(w);
    goto unlock;
  }
  w->e = e;
  w->addr = addr;
  w->len = len;
  w->next = e->wins;
  e->wins = w;
  e->nwins++;
take:
  if (w->uses++ == 0) e->wins_busy++;
  *out = w;
unlock:
  pthread_mutex_unlock(&nic->lock);
  return rc;
}

uint32_t rail_verbs_mr_window_rkey(const struct rail_verbs_win *w) { return w->mr->rkey; }

void rail_verbs_mr_window_put(struct rail_verbs_nic *nic, struct rail_verbs_win *w) {
  struct rail_verbs_mr_entry *e = w->e;

  pthread_mutex_lock(&nic->lock);
  w->last = ++e->clock;
  if (--w->uses == 0 && --e->wins_busy == 0) rail_verbs_mr_entry_unhold(nic, e);
  pthread_mutex_unlock(&nic->lock);
}

void rail_verbs_mr_cache_release(struct rail_verbs_nic *nic) {
  for (struct rail_verbs_mr_entry *e = nic->cache, *next; e != NULL; e = next) {
    next = e->next;
    RAIL_WARN("verbs: %s: memory [%#lx, %#lx) still registered (%d refs) at close; releasing",
              nic->name, (unsigned long)e->base, (unsigned long)e->end, e->refs);
    rail_verbs_mr_entry_free(nic, e);
  }
  nic->cache = NULL;
}
