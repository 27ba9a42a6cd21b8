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
 * An entry is deregistered with its last holder. */
#include "net/verbs/mr.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "common/log.h"
#include "net/verbs/gdr.h"

struct rail_verbs_mr_entry {
  struct rail_verbs_mr_entry *next;
  uintptr_t base, end; /* page-aligned range */
  int type;
  int access;
  int refs;
  int shareable;
  uint64_t id_first, id_last; /* GPU memory: the allocation ids it was made for */
  struct ibv_mr *mr;
};

struct rail_verbs_mr {
  int n;
  struct rail_verbs_nic *nics[RAIL_VERBS_MAX_RAILS];
  struct rail_verbs_mr_entry *e[RAIL_VERBS_MAX_RAILS];
  int dmabuf; /* entries are private, not in the caches */
};

#define RAIL_VERBS_ACCESS                                                                          \
  (IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ)

/* What a registration of [base, end) would be cached as. */
struct rail_verbs_mr_key {
  uintptr_t base, end;
  int type, access;
  int shareable;
  uint64_t id_first, id_last;
};

static struct rail_verbs_mr_key rail_verbs_mr_key(void *data, size_t size, int type, int access) {
  uintptr_t page = (uintptr_t)sysconf(_SC_PAGESIZE);
  struct rail_verbs_mr_key k;

  memset(&k, 0, sizeof(k));
  k.base = (uintptr_t)data & ~(page - 1);
  k.end = ((uintptr_t)data + (size ? size : 1) + page - 1) & ~(page - 1);
  k.type = type;
  k.access = access;
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
    nic->api->dereg_mr(e->mr);
    free(e);
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
  e->refs = 1;
  return e;
}

static int rail_verbs_cache_get(struct rail_verbs_nic *nic, void *data, size_t size, int type,
                                struct rail_verbs_mr_entry **out) {
  struct rail_verbs_mr_key k = rail_verbs_mr_key(data, size, type, RAIL_VERBS_ACCESS);
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

int rail_verbs_mr_reg_dmabuf(struct rail_verbs_nic *const *nics, int nnics, void *data, size_t size,
                             uint64_t offset, int fd, struct rail_verbs_mr **out) {
  struct rail_verbs_mr *mr;
  int rc = 0;

  if (nnics < 1 || nnics > RAIL_VERBS_MAX_RAILS) return -EINVAL;
  mr = calloc(1, sizeof(*mr));
  if (mr == NULL) return -ENOMEM;
  mr->dmabuf = 1;
  for (mr->n = 0; mr->n < nnics; mr->n++) {
    struct rail_verbs_nic *nic = nics[mr->n];
    struct rail_verbs_mr_entry *e;

    if (nic->api->reg_dmabuf_mr == NULL) {
      rc = -ENOSYS;
      goto free_entries;
    }
    e = calloc(1, sizeof(*e));
    if (e == NULL) {
      rc = -ENOMEM;
      goto free_entries;
    }
    e->mr = nic->api->reg_dmabuf_mr(nic->pd, offset, size, (uintptr_t)data, fd, RAIL_VERBS_ACCESS);
    if (e->mr == NULL) {
      rc = -(errno ? errno : EIO);
      RAIL_WARN("verbs: %s: ibv_reg_dmabuf_mr of [%p, +%zu) fd %d failed: %s", nic->name, data,
                size, fd, strerror(-rc));
      free(e);
      goto free_entries;
    }
    e->base = (uintptr_t)data;
    e->end = (uintptr_t)data + size;
    e->type = RAIL_VERBS_MEM_DMABUF;
    e->refs = 1;
    mr->e[mr->n] = e;
    mr->nics[mr->n] = nic;
  }
  *out = mr;
  return 0;

free_entries:
  for (int i = 0; i < mr->n; i++) {
    mr->nics[i]->api->dereg_mr(mr->e[i]->mr);
    free(mr->e[i]);
  }
  free(mr);
  return rc;
}

void rail_verbs_mr_dereg(struct rail_verbs_mr *mr) {
  if (mr == NULL) return;
  for (int i = 0; i < mr->n; i++) {
    if (mr->dmabuf) {
      mr->nics[i]->api->dereg_mr(mr->e[i]->mr);
      free(mr->e[i]);
    } else {
      rail_verbs_cache_put(mr->nics[i], mr->e[i]);
    }
  }
  free(mr);
}

int rail_verbs_mr_type(const struct rail_verbs_mr *mr) { return mr->e[0]->type; }

struct ibv_mr *rail_verbs_mr_on(const struct rail_verbs_mr *mr, const struct rail_verbs_nic *nic) {
  if (mr == NULL) return NULL;
  for (int i = 0; i < mr->n; i++)
    if (mr->nics[i] == nic) return mr->e[i]->mr;
  return NULL;
}

void rail_verbs_mr_cache_release(struct rail_verbs_nic *nic) {
  for (struct rail_verbs_mr_entry *e = nic->cache, *next; e != NULL; e = next) {
    next = e->next;
    RAIL_WARN("verbs: %s: memory [%#lx, %#lx) still registered (%d refs) at close; releasing",
              nic->name, (unsigned long)e->base, (unsigned long)e->end, e->refs);
    nic->api->dereg_mr(e->mr);
    free(e);
  }
  nic->cache = NULL;
}
