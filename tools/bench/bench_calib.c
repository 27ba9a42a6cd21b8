/* nccl-rail bench: what is measured and for how long (bench.h): the sizes
 * rank 0 imposes, the buffer slots both loops cycle over, and the message
 * count per size that makes one measurement last --seconds on any link. */
#include <string.h>

#include "tools/bench/bench.h"

/* The sizes rank 0 imposes. --quick keeps one small, one at the 4 MiB
 * target boundary and one large size. Message counts are calibrated per
 * size during the run, so every measurement lasts about --seconds on any
 * link speed. */
void rail_bench_make_cfg(const struct bench_opts *o, struct bench_cfg *c) {
  memset(c, 0, sizeof(*c));
  c->magic = BENCH_MAGIC;
  c->proto = BENCH_PROTO;
  c->window = o->window;
  if (o->quick) {
    static const uint64_t quick[] = {64u << 10, 4u << 20, 64u << 20};
    for (size_t i = 0; i < 3; i++)
      if (quick[i] >= o->min_bytes && quick[i] <= o->max_bytes) c->size[c->nsizes++] = quick[i];
  }
  if (c->nsizes == 0)
    for (uint64_t s = o->min_bytes; s <= o->max_bytes && c->nsizes < BENCH_MAX_SIZES;
         s *= (uint64_t)o->step)
      c->size[c->nsizes++] = s;
  c->target_ms = (int32_t)(o->seconds * 1000);
  c->streams = o->streams;
  c->lat_iters = o->lat_iters;
  c->raw = o->raw || o->against; /* --against: the reference is the baseline */
  c->against = o->against;
  c->iperf3 = o->iperf3;
  c->iperf3_secs = o->iperf3_secs;
  c->twoway = o->twoway;
  c->rounds = o->rounds;
}

/* Buffer slots a direction's messages cycle over: as many as the window
 * needs and memory allows. The raw TCP loop uses the same, so that both
 * copy to and from the same amount of memory (a loop that reuses one small
 * buffer runs from the cache and flatters itself). */
uint64_t rail_bench_slots(const struct bench *b, uint64_t size) {
  uint64_t slots = BENCH_SLOT_BYTES / size;

  if (slots > (uint64_t)b->cfg.window) slots = (uint64_t)b->cfg.window;
  return slots < 1 ? 1 : slots;
}

/* The pilot of size index si, up to 64 MiB of messages (2 to 4096 of
 * them), that the plugin's side times (bench_plugin.c) before
 * rail_bench_agree_iters. */
uint64_t rail_bench_pilot(const struct bench *b, int si) {
  uint64_t pilot = (64u << 20) / b->cfg.size[si];

  if (pilot < 2) pilot = 2;
  if (pilot > 4096) pilot = 4096;
  return pilot;
}

/* Rank 0 turns the pilot's time t into the count that makes a measurement
 * last target_ms (a window at least, a million at most) and sends it; both
 * ranks keep it in cfg.iters[si]. */
int rail_bench_agree_iters(struct bench *b, int si, uint64_t pilot, double t) {
  uint64_t iters = 0;
  int rc;

  if (b->rank == 0) {
    double want = (double)b->cfg.target_ms / 1e3 * (double)pilot / (t > 1e-6 ? t : 1e-6);
    iters = want > 1e6 ? 1000000 : (uint64_t)want;
    if (iters < (uint64_t)b->cfg.window) iters = (uint64_t)b->cfg.window;
    rc = rail_nd_oob_send(b->oob, &iters, sizeof(iters));
  } else {
    rc = rail_nd_oob_recv(b->oob, &iters, sizeof(iters), BENCH_STEP_MS);
  }
  if (rc == 0) b->cfg.iters[si] = iters;
  return rc;
}
