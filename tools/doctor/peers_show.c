/* doctor --peers' results shown: the JSON, the rate bars in text and the
 * same bars as a picture (split from doctor_peers.c, which measures). */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/json.h"
#include "tools/doctor/doctor.h"
#include "tools/doctor/peers.h"
#include "tools/draw/bars.h"
#include "tools/draw/svg.h"

/* ---- JSON --------------------------------------------------------------------- */

static void peers_json_one(const struct rail_doctor_peers *P, const struct peers_one *o,
                           struct rail_json *j) {
  rail_json_object(j, NULL, RAIL_JSON_BLOCK);
  rail_json_str(j, "host", o->host);
  rail_json_int(j, "port", o->port);
  rail_json_bool(j, "reached", o->reached && o->err[0] == '\0');
  rail_json_str(j, "error", o->err[0] ? o->err : NULL);
  if (o->reached && o->err[0] == '\0') {
    rail_json_object(j, "bootstrap", RAIL_JSON_INLINE);
    rail_json_str(j, "local", P->local.boot_if[0] ? P->local.boot_if : NULL);
    rail_json_str(j, "remote", o->remote.boot_if[0] ? o->remote.boot_if : NULL);
    rail_json_bool(j, "reaches_peer", o->boot_out == 0);
    rail_json_bool(j, "reached_by_peer", o->boot_in == 0);
    rail_json_object_end(j);
    rail_json_bool(j, "same_tuner_rules",
                   P->local.rules_state == o->remote.rules_state &&
                       P->local.rules_hash == o->remote.rules_hash);
  }
  rail_json_array(j, "rails", RAIL_JSON_BLOCK);
  for (int i = 0; i < P->local.nifs && o->reached && o->err[0] == '\0'; i++) {
    const struct peers_rail *r = &o->rail[i];
    int line = r->local_mbps < r->remote_mbps ? r->local_mbps : r->remote_mbps;
    rail_json_object(j, NULL, RAIL_JSON_INLINE);
    rail_json_str(j, "local", P->local.ifs[i].name);
    rail_json_str(j, "local_addr", P->local.ifs[i].addr);
    rail_json_str(j, "remote", o->match[i] >= 0 ? o->remote.ifs[o->match[i]].name : NULL);
    rail_json_str(j, "remote_addr", o->match[i] >= 0 ? o->remote.ifs[o->match[i]].addr : NULL);
    rail_json_bool(j, "reached", o->match[i] >= 0);
    if (o->match[i] >= 0 && r->rc == 0) {
      rail_json_fixed(j, "gbit_per_s", r->gbps, 3);
      rail_json_int(j, "line_rate_mbps", line);
      rail_json_fixed(j, "line_rate_ratio", line > 0 ? r->gbps * 1000 / line : 0, 3);
      rail_json_uint(j, "bytes", r->bytes);
    } else if (o->match[i] >= 0) {
      rail_json_str(j, "error", strerror(-r->rc));
    }
    rail_json_object_end(j);
  }
  rail_json_array_end(j);
  rail_json_object_end(j);
}

void rail_doctor_json_peers(struct rail_doctor *d, struct rail_json *j) {
  const struct rail_doctor_peers *P = d->peer_results;

  if (P == NULL) return;
  rail_json_array(j, "peers", RAIL_JSON_BLOCK);
  for (int k = 0; k < P->n; k++)
    peers_json_one(P, &P->p[k], j);
  rail_json_array_end(j);
}

/* ---- the chart ------------------------------------------------------------------ */

#define PEERS_CHART_TITLE "rail throughput through the plugin against line rate"

/* One bar per local interface of every peer checked (a peer that could
 * not be checked: one bar saying why). *out is malloc'd; returns the
 * count, -ENOMEM. */
static int peers_bars(const struct rail_doctor_peers *P, struct rail_bar **out) {
  struct rail_bar *bars = calloc((size_t)P->n * (PEERS_MAX_IFS + 1) + 1, sizeof(*bars));
  int n = 0;

  if (bars == NULL) return -ENOMEM;
  for (int k = 0; k < P->n; k++) {
    const struct peers_one *o = &P->p[k];
    if (!o->reached || o->err[0] != '\0') {
      struct rail_bar *b = &bars[n++];
      rail_bar_printf(b->label, sizeof(b->label), "%s:%d", o->host, o->port);
      rail_bar_printf(b->note, sizeof(b->note), "peer not checked: %s",
                      o->err[0] ? o->err : "not reached");
      b->gbps = -1;
      continue;
    }
    for (int i = 0; i < P->local.nifs; i++) {
      struct rail_bar *b = &bars[n++];
      const struct peers_rail *r = &o->rail[i];
      b->gbps = -1;
      if (o->match[i] < 0) {
        rail_bar_printf(b->label, sizeof(b->label), "%s -> %s", P->local.ifs[i].name, o->host);
        rail_bar_printf(b->note, sizeof(b->note), "reaches none of the peer's interfaces");
        continue;
      }
      rail_bar_printf(b->label, sizeof(b->label), "%s -> %s %s", P->local.ifs[i].name, o->host,
                      o->remote.ifs[o->match[i]].name);
      if (r->rc != 0) {
        rail_bar_printf(b->note, sizeof(b->note), "the plugin's transfer failed: %s",
                        strerror(-r->rc));
        continue;
      }
      b->gbps = r->gbps;
      b->line_gbps = (r->local_mbps < r->remote_mbps ? r->local_mbps : r->remote_mbps) / 1000.0;
      if (b->line_gbps < 0) b->line_gbps = 0;
    }
  }
  *out = bars;
  return n;
}

void rail_doctor_peers_bars(struct rail_doctor *d, FILE *out) {
  struct rail_bar *bars = NULL;
  int n;

  if (d->peer_results == NULL) return;
  n = peers_bars(d->peer_results, &bars);
  if (n > 0) {
    fprintf(out, "\n");
    rail_bars_print(out, PEERS_CHART_TITLE ":", bars, n);
  }
  free(bars);
}

struct peers_chart {
  struct rail_bar *bars;
  int n;
};

static int peers_chart_draw(FILE *f, void *arg) {
  const struct peers_chart *c = arg;
  return rail_bars_svg(f, "nccl-rail doctor --peers: " PEERS_CHART_TITLE, c->bars, c->n,
                       PEERS_LOW_RATIO);
}

int rail_doctor_peers_picture(struct rail_doctor *d, const char *svg, const char *png) {
  struct peers_chart c = {NULL, 0};
  int rc;

  if (d->peer_results == NULL) return 0;
  c.n = peers_bars(d->peer_results, &c.bars);
  if (c.n < 0) return c.n;
  rc = rail_svg_write("doctor", svg, png, peers_chart_draw, &c);
  free(c.bars);
  return rc;
}
