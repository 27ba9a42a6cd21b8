/* nccl-rail topo's drawing (topo_svg.h).
 *
 * The words a NIC is described with and the warnings come from the text
 * output's own helpers (topology/print/print.h), so the drawing can never say
 * something the text does not: it is the third form of the same output,
 * beside print.c and print_json.c, kept on the tools' side because the
 * plugin never draws. */
#include "tools/topo/topo_svg.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "tools/draw/svg.h"
#include "topology/print/print.h"

#define TS_MAX_NODES                                                                               \
  (RAIL_TOPO_MAX_PCI + RAIL_TOPO_MAX_GPUS + RAIL_TOPO_MAX_NICS + RAIL_TOPO_MAX_NUMA + 4)
#define TS_MAXW 1180.0 /* the machine box's widest content before rows wrap */
#define TS_MARGIN 20.0
#define TS_PAD 8.0
#define TS_GAP 8.0
#define TS_HEAD 20.0 /* a container's title line */
#define TS_DEV_MINW 96.0
#define TS_DEV_MAXW 176.0
#define TS_NUMA_COLS 4
#define TS_LINE 256

#define INK "#222222"
#define MUTED "#666666"

/* Rail ids' colours (Tableau 10, its grey swapped for cyan: grey is for
 * the NICs that are not rails), and the same mixed 80% with white for a
 * box's fill. */
static const char *const ts_rail[10] = {"#4e79a7", "#f28e2b", "#e15759", "#76b7b2", "#59a14f",
                                        "#edc948", "#b07aa1", "#ff9da7", "#9c755f", "#17becf"};
static const char *const ts_rail_tint[10] = {"#dce4ed", "#fce8d5", "#f9dcde", "#e4f1f0", "#deecdc",
                                             "#fbf4da", "#efe4ec", "#ffebed", "#ebe3df", "#d1f2f5"};
/* Whether a rail pill's text is white on that colour. */
static const int ts_rail_dark[10] = {1, 0, 1, 0, 1, 0, 1, 0, 1, 0};

enum ts_kind { TS_MACHINE, TS_NUMA, TS_HOSTBRIDGE, TS_SWITCH, TS_GPU, TS_NIC };

struct ts_node {
  enum ts_kind kind;
  int ref;   /* numa[] (-1: unknown), pci[], gpus[] or nics[] index */
  int first; /* first child, -1 none */
  int last;
  int next;          /* next sibling */
  double x, y, w, h; /* x, y relative to the parent */
};

struct ts_tree {
  const struct rail_topo *topo;
  struct ts_node n[TS_MAX_NODES];
  int count;
  int gpu_rails[RAIL_TOPO_MAX_GPUS][4], gpu_nrails[RAIL_TOPO_MAX_GPUS];
  double nvbar_top; /* the NVSwitch bar's top edge (absolute), 0 without */
};

static int add_node(struct ts_tree *t, int parent, enum ts_kind kind, int ref) {
  struct ts_node *n;

  if (t->count == TS_MAX_NODES) return -1;
  n = &t->n[t->count];
  memset(n, 0, sizeof(*n));
  n->kind = kind;
  n->ref = ref;
  n->first = n->last = n->next = -1;
  if (parent >= 0) {
    if (t->n[parent].last >= 0)
      t->n[t->n[parent].last].next = t->count;
    else
      t->n[parent].first = t->count;
    t->n[parent].last = t->count;
  }
  return t->count++;
}

/* ---- words ------------------------------------------------------------------ */

static int rail_color(int rail_id) { return rail_id >= 0 ? rail_id % 10 : -1; }

/* A host bridge or switch id worth showing: NCCL's XML makes up "cpu0"
 * and "ffff:ff:01.0" for the ones it does not know. */
static const char *shown_bus(const char *bus) {
  if (strncmp(bus, "ffff:", 5) == 0 || strncmp(bus, "cpu", 3) == 0) return NULL;
  return bus;
}

static void container_title(const struct ts_tree *t, const struct ts_node *n, char *buf,
                            size_t len) {
  const struct rail_topo *topo = t->topo;
  const char *bus;

  switch (n->kind) {
  case TS_MACHINE:
    snprintf(buf, len, "Machine");
    break;
  case TS_NUMA:
    if (n->ref >= 0 && topo->numa[n->ref].os_index >= 0)
      snprintf(buf, len, "NUMA node %d  ·  CPUs %s", topo->numa[n->ref].os_index,
               topo->numa[n->ref].cpulist[0] ? topo->numa[n->ref].cpulist : "?");
    else
      snprintf(buf, len, "NUMA node unknown");
    break;
  case TS_HOSTBRIDGE:
    bus = shown_bus(topo->pci[n->ref].bus_id);
    snprintf(buf, len, "Host bridge%s%s", bus ? " " : "", bus ? bus : "");
    break;
  default:
    bus = shown_bus(topo->pci[n->ref].bus_id);
    snprintf(buf, len, "PCIe switch%s%s", bus ? " " : "", bus ? bus : "");
    break;
  }
}

/* "InfiniBand 400G", "RoCE 200G", "EFA 100G", "TCP 1G", "virtual". */
static void nic_kind(const struct rail_topo_nic *nic, char *buf, size_t len) {
  static const char *const fabric[] = {"", "TCP", "RoCE", "InfiniBand", "EFA", "libfabric"};
  const char *f =
      nic->fabric > 0 && nic->fabric <= 5 ? fabric[nic->fabric] : rail_topo_nic_kind_str(nic);
  char sp[16];

  if (nic->flags & RAIL_NIC_NO_PCI)
    snprintf(buf, len, "virtual, %s", nic->fabric > 0 ? f : "TCP");
  else if (nic->speed_mbps > 0)
    snprintf(buf, len, "%s %s", f, rail_topo_speed_str(nic->speed_mbps, sp, sizeof(sp)));
  else
    snprintf(buf, len, "%s", f);
}

/* "ib0 · mlx5_0": the interface and the RDMA device it goes with. */
static void nic_name(const struct rail_topo_nic *n, char *buf, size_t len) {
  if (n->netdev[0] && n->rdma_dev[0] && strcmp(n->netdev, n->rdma_dev) != 0)
    snprintf(buf, len, "%s · %s", n->netdev, n->rdma_dev);
  else
    snprintf(buf, len, "%s", n->name);
}

static const char *gpu_gen(int sm) {
  switch (sm) {
  case 60:
    return "P100";
  case 70:
    return "V100";
  case 80:
    return "A100";
  case 90:
    return "H100/H200";
  case 100:
    return "B200";
  case 103:
    return "B300";
  default:
    return NULL;
  }
}

/* ---- the tree ------------------------------------------------------------------ */

/* 1 if PCI node p has a GPU or NIC at or below it. */
static int pci_useful(const struct rail_topo *topo, int p) {
  for (int g = 0; g < topo->ngpus; g++)
    for (int q = topo->gpus[g].pci; q >= 0; q = topo->pci[q].parent)
      if (q == p) return 1;
  for (int n = 0; n < topo->nnics; n++)
    for (int q = topo->nics[n].pci; q >= 0; q = topo->pci[q].parent)
      if (q == p) return 1;
  return 0;
}

/* The devices on PCI node p and its child switches, in the order a reader
 * follows: GPUs, the NICs that are rails, switches, then the NICs that are
 * not rails. */
static void add_pci_children(struct ts_tree *t, int parent, int p) {
  const struct rail_topo *topo = t->topo;

  for (int g = 0; g < topo->ngpus; g++)
    if (topo->gpus[g].pci >= 0 && topo->pci[topo->gpus[g].pci].parent == p)
      add_node(t, parent, TS_GPU, g);
  for (int pass = 0; pass < 3; pass++) {
    if (pass == 1) {
      for (int q = 0; q < topo->npci; q++) {
        int id;
        if (topo->pci[q].parent != p || topo->pci[q].kind == RAIL_PCI_DEVICE ||
            !pci_useful(topo, q))
          continue;
        id = add_node(t, parent, TS_SWITCH, q);
        if (id >= 0) add_pci_children(t, id, q);
      }
      continue;
    }
    for (int n = 0; n < topo->nnics; n++) {
      int pci = topo->nics[n].pci;
      int compute = topo->nics[n].role == RAIL_NIC_ROLE_COMPUTE;
      if (pci >= 0 && topo->pci[pci].parent == p && compute == (pass == 0))
        add_node(t, parent, TS_NIC, n);
    }
  }
}

static int numa_of_root(const struct rail_topo *topo, int p) {
  return topo->pci[p].numa >= 0 && topo->pci[p].numa < topo->nnuma ? topo->pci[p].numa : -1;
}

/* One NUMA node's contents (numa -1: what no NUMA node claims). */
static void add_numa(struct ts_tree *t, int machine, int numa) {
  const struct rail_topo *topo = t->topo;
  int roots[RAIL_TOPO_MAX_PCI], nroots = 0, id, any = 0;

  for (int q = 0; q < topo->npci; q++)
    if (topo->pci[q].parent < 0 && numa_of_root(topo, q) == numa && pci_useful(topo, q))
      roots[nroots++] = q;
  for (int g = 0; g < topo->ngpus; g++)
    any |= topo->gpus[g].pci < 0 && topo->gpus[g].numa == numa;
  for (int n = 0; n < topo->nnics; n++)
    any |= topo->nics[n].pci < 0 && topo->nics[n].numa == numa;
  if (numa < 0 && nroots == 0 && !any) return;
  id = add_node(t, machine, TS_NUMA, numa);
  if (id < 0) return;
  for (int r = 0; r < nroots; r++) {
    int q = roots[r], parent = id;
    /* A host bridge is a box of its own only where a node has several. */
    if (topo->pci[q].kind == RAIL_PCI_HOSTBRIDGE && nroots > 1)
      parent = add_node(t, id, TS_HOSTBRIDGE, q);
    if (parent < 0) continue;
    if (topo->pci[q].kind == RAIL_PCI_SWITCH) {
      int sw = add_node(t, parent, TS_SWITCH, q);
      if (sw >= 0) add_pci_children(t, sw, q);
    } else {
      add_pci_children(t, parent, q);
    }
  }
  /* Devices with no PCI place: a VM's GPUs and its virtual NICs. */
  for (int g = 0; g < topo->ngpus; g++)
    if (topo->gpus[g].pci < 0 && topo->gpus[g].numa == numa) add_node(t, id, TS_GPU, g);
  for (int n = 0; n < topo->nnics; n++)
    if (topo->nics[n].pci < 0 && topo->nics[n].numa == numa) add_node(t, id, TS_NIC, n);
  /* A root device (not under a bridge) is its own root. */
  for (int g = 0; g < topo->ngpus; g++)
    if (topo->gpus[g].pci >= 0 && topo->pci[topo->gpus[g].pci].parent < 0 &&
        numa_of_root(topo, topo->gpus[g].pci) == numa)
      add_node(t, id, TS_GPU, g);
  for (int n = 0; n < topo->nnics; n++)
    if (topo->nics[n].pci >= 0 && topo->pci[topo->nics[n].pci].parent < 0 &&
        numa_of_root(topo, topo->nics[n].pci) == numa)
      add_node(t, id, TS_NIC, n);
}

static void build(struct ts_tree *t) {
  const struct rail_topo *topo = t->topo;
  int machine = add_node(t, -1, TS_MACHINE, -1);

  for (int i = 0; i < topo->nnuma; i++)
    add_numa(t, machine, i);
  add_numa(t, machine, -1);
  /* The rails that serve each GPU, for its pills. */
  for (int gi = 0; gi < topo->ngroups; gi++) {
    const struct rail_topo_group *grp = &topo->groups[gi];
    if (!rail_topo_group_used(topo, gi) || grp->rail_id < 0) continue;
    for (int g = 0; g < topo->ngpus && g < 64; g++) {
      int dup = 0;
      if (!(grp->gpu_mask & (1ULL << g))) continue;
      for (int k = 0; k < t->gpu_nrails[g]; k++)
        dup |= t->gpu_rails[g][k] == grp->rail_id;
      if (!dup && t->gpu_nrails[g] < 4) t->gpu_rails[g][t->gpu_nrails[g]++] = grp->rail_id;
    }
  }
}

/* ---- sizes and places ------------------------------------------------------------- */

/* A device box's lines: [0] the name (bold), then smaller ones. */
struct ts_dev {
  char line[8][TS_LINE];
  int nlines;
  int reason_from;      /* lines from here are the reason a NIC is not used */
  int pills[4], npills; /* rail ids */
  int nvlink;           /* the GPU's NVLink stripe */
  int unused;
};

static void dev_text(const struct ts_tree *t, const struct ts_node *n, struct ts_dev *d) {
  const struct rail_topo *topo = t->topo;

  memset(d, 0, sizeof(*d));
  d->reason_from = 99;
  if (n->kind == TS_GPU) {
    const struct rail_topo_gpu *g = &topo->gpus[n->ref];
    const char *gen = gpu_gen(g->sm);
    snprintf(d->line[d->nlines++], TS_LINE, "GPU%d", n->ref);
    if (g->sm > 0)
      snprintf(d->line[d->nlines++], TS_LINE, "%s%ssm %d", gen ? gen : "", gen ? ", " : "", g->sm);
    if (g->bus_id[0]) snprintf(d->line[d->nlines++], TS_LINE, "%s", g->bus_id);
    for (int k = 0; k < t->gpu_nrails[n->ref]; k++)
      d->pills[d->npills++] = t->gpu_rails[n->ref][k];
    d->nvlink = topo->nvlink && (g->nvlinks > 0 || topo->nvswitches > 0);
    return;
  }
  {
    const struct rail_topo_nic *nic = &topo->nics[n->ref];
    const char *unused = rail_topo_nic_unused_str(nic);
    nic_name(nic, d->line[0], TS_LINE);
    nic_kind(nic, d->line[1], TS_LINE);
    d->nlines = 2;
    if (nic->bus_id[0] && strcmp(nic->bus_id, nic->name) != 0)
      snprintf(d->line[d->nlines++], TS_LINE, "%s", nic->bus_id);
    if (unused == NULL) {
      if (nic->rail_id >= 0) d->pills[d->npills++] = nic->rail_id;
      return;
    }
    d->unused = 1;
    snprintf(d->line[d->nlines++], TS_LINE, "not used: %s", unused);
    d->reason_from = d->nlines;
    if (nic->role_note[0]) {
      char lines[4 * TS_LINE];
      int nl = rail_svg_wrap(nic->role_note, 9.5, 0, TS_DEV_MAXW - 14, lines, TS_LINE, 4);
      for (int l = 0; l < nl && d->nlines < 8; l++)
        memcpy(d->line[d->nlines++], lines + l * TS_LINE, TS_LINE);
    }
  }
}

/* The name and the "not used" line are bold. */
static int line_bold(const struct ts_dev *d, int l) { return l == 0 || l == d->reason_from - 1; }

static double line_size(const struct ts_dev *d, int l) {
  if (l == 0) return 11.5;
  /* Reasons and bus ids (a device's last line) are the smallest. */
  return l >= d->reason_from || (l == d->nlines - 1 && !d->unused) ? 9.5 : 10;
}

static void dev_size(const struct ts_dev *d, double *w, double *h) {
  double width = TS_DEV_MINW;

  for (int l = 0; l < d->nlines; l++) {
    double lw = rail_svg_text_width(d->line[l], line_size(d, l), line_bold(d, l)) + 14;
    if (lw > width) width = lw;
  }
  if (d->npills > 0) {
    double pw = 7;
    for (int k = 0; k < d->npills; k++) {
      char pill[16];
      snprintf(pill, sizeof(pill), "rail %d", d->pills[k]);
      pw += rail_svg_text_width(pill, 9.5, 1) + 10 + 4;
    }
    if (pw + 3 > width) width = pw + 3;
  }
  *w = width > TS_DEV_MAXW ? TS_DEV_MAXW : width;
  *h = 10 + 14 + (d->nlines - 1) * 13 + (d->npills ? 20 : 0) + (d->nvlink ? 17 : 0) + 4;
}

static void layout(struct ts_tree *t, int id, double maxw);

/* The machine's NUMA nodes, ncols a row within inner: each as wide as it
 * wants where all fit in a row, else a share of the row in proportion to
 * what it wants. */
static void layout_numa(struct ts_tree *t, const struct ts_node *n, double inner, int ncols,
                        int nchildren) {
  double want = 0, share[RAIL_TOPO_MAX_NUMA + 1];
  int k = 0;

  for (int c = n->first; c >= 0; c = t->n[c].next, k++) {
    layout(t, c, inner);
    share[k] = t->n[c].w;
    want += t->n[c].w;
  }
  k = 0;
  for (int c = n->first; c >= 0; c = t->n[c].next, k++)
    if (nchildren > ncols || want + (ncols - 1) * TS_GAP > inner)
      layout(t, c,
             nchildren > ncols ? (inner - (ncols - 1) * TS_GAP) / ncols
                               : (inner - (ncols - 1) * TS_GAP) * share[k] / want);
}

/* Lays node id out within maxw: devices by their text, containers as rows
 * of children that wrap at maxw. */
static void layout(struct ts_tree *t, int id, double maxw) {
  struct ts_node *n = &t->n[id];
  double inner, x = 0, y, rowh = 0, width = 0;
  char title[TS_LINE];
  int cols = 0, ncols = 0, nchildren = 0;

  if (n->kind == TS_GPU || n->kind == TS_NIC) {
    struct ts_dev d;
    dev_text(t, n, &d);
    dev_size(&d, &n->w, &n->h);
    return;
  }
  for (int c = n->first; c >= 0; c = t->n[c].next)
    nchildren++;
  inner = maxw - 2 * TS_PAD;
  if (n->kind == TS_MACHINE) {
    /* NUMA nodes side by side, up to four a row, each its share. */
    ncols = nchildren < TS_NUMA_COLS ? nchildren : TS_NUMA_COLS;
    if (ncols < 1) ncols = 1;
  }
  if (ncols > 0) {
    layout_numa(t, n, inner, ncols, nchildren);
  } else {
    for (int c = n->first; c >= 0; c = t->n[c].next)
      layout(t, c, inner);
  }
  y = n->kind == TS_MACHINE ? TS_PAD : TS_HEAD;
  for (int c = n->first; c >= 0; c = t->n[c].next) {
    struct ts_node *ch = &t->n[c];
    if (x > 0 && (x + ch->w > inner || (ncols && cols == ncols))) {
      y += rowh + TS_GAP;
      x = rowh = 0;
      cols = 0;
    }
    ch->x = TS_PAD + x;
    ch->y = y;
    x += ch->w + TS_GAP;
    cols++;
    if (ch->h > rowh) rowh = ch->h;
    if (x - TS_GAP > width) width = x - TS_GAP;
  }
  if (n->kind == TS_MACHINE) {
    /* NUMA nodes of one row share its height. */
    for (int c = n->first; c >= 0; c = t->n[c].next)
      for (int d = n->first; d >= 0; d = t->n[d].next)
        if (t->n[d].y == t->n[c].y && t->n[d].h > t->n[c].h) t->n[c].h = t->n[d].h;
  }
  container_title(t, n, title, sizeof(title));
  n->w = width + 2 * TS_PAD;
  if (n->kind != TS_MACHINE && rail_svg_text_width(title, 10.5, 1) + 2 * TS_PAD > n->w)
    n->w = rail_svg_text_width(title, 10.5, 1) + 2 * TS_PAD;
  n->h = y + rowh + TS_PAD;
  if (n->first < 0) n->h = TS_HEAD + 12;
}

/* ---- drawing ----------------------------------------------------------------------- */

static void draw_pill(struct rail_svg *s, double x, double y, int rail_id) {
  char pill[16];
  int c = rail_color(rail_id);
  double w;

  snprintf(pill, sizeof(pill), "rail %d", rail_id);
  w = rail_svg_text_width(pill, 9.5, 1) + 10;
  rail_svg_rect(s, "rail-pill", x, y, w, 14, 7, ts_rail[c], NULL, 0, NULL);
  rail_svg_text(s, "rail-label", x + w / 2, y + 10.5, 9.5, RAIL_SVG_MIDDLE, 1,
                ts_rail_dark[c] ? "#ffffff" : "#111111", 0, pill);
}

static void draw_device(struct rail_svg *s, const struct ts_tree *t, const struct ts_node *n,
                        double x, double y) {
  struct ts_dev d;
  const char *fill, *stroke, *dash = NULL, *cls;
  double ty = y + 10 + 11, px = x + 7;

  dev_text(t, n, &d);
  if (n->kind == TS_GPU) {
    cls = "gpu";
    fill = "#e3f1cf";
    stroke = "#5f9400";
  } else if (d.unused) {
    cls = "nic nic-unused";
    fill = "#eeeeee";
    stroke = "#9e9e9e";
    dash = "4 3";
  } else {
    int c = rail_color(t->topo->nics[n->ref].rail_id);
    cls = "nic nic-rail";
    fill = c >= 0 ? ts_rail_tint[c] : "#ffffff";
    stroke = c >= 0 ? ts_rail[c] : "#777777";
  }
  rail_svg_group(s, cls);
  rail_svg_rect(s, "box", x, y, n->w, n->h, 4, fill, stroke, n->kind == TS_GPU ? 1.4 : 1.6, dash);
  for (int l = 0; l < d.nlines; l++) {
    char fit[TS_LINE];
    double size = line_size(&d, l);
    /* A name wider than the widest box is cut, with "...". */
    if (rail_svg_wrap(d.line[l], size, line_bold(&d, l), n->w - 12, fit, TS_LINE, 1) < 1)
      fit[0] = '\0';
    rail_svg_text(s,
                  l == 0               ? "name"
                  : l >= d.reason_from ? "reason"
                                       : "detail",
                  px, ty, size, RAIL_SVG_START, line_bold(&d, l), d.unused || l > 0 ? MUTED : INK,
                  0, fit);
    ty += l == 0 ? 14 : 13;
  }
  for (int k = 0; k < d.npills; k++) {
    char pill[16];
    snprintf(pill, sizeof(pill), "rail %d", d.pills[k]);
    draw_pill(s, px, ty - 4, d.pills[k]);
    px += rail_svg_text_width(pill, 9.5, 1) + 14;
  }
  if (d.nvlink) {
    char nv[48];
    const struct rail_topo_gpu *g = &t->topo->gpus[n->ref];
    if (g->nvlinks > 0)
      snprintf(nv, sizeof(nv), "NVLink ×%d", g->nvlinks);
    else
      snprintf(nv, sizeof(nv), "NVLink");
    rail_svg_rect(s, "nvlink", x + 1, y + n->h - 16, n->w - 2, 15, 0, "#76b900", NULL, 0, NULL);
    rail_svg_text(s, "nvlink-label", x + n->w / 2, y + n->h - 5, 9.5, RAIL_SVG_MIDDLE, 1, "#ffffff",
                  0, nv);
  }
  rail_svg_group_end(s);
}

static void draw_node(struct rail_svg *s, const struct ts_tree *t, int id, double ox, double oy) {
  const struct ts_node *n = &t->n[id];
  double x = ox + n->x, y = oy + n->y;
  char title[TS_LINE];

  if (n->kind == TS_GPU || n->kind == TS_NIC) {
    draw_device(s, t, n, x, y);
    return;
  }
  if (n->kind != TS_MACHINE) {
    static const char *const cls[] = {"machine", "numa", "hostbridge", "pcie-switch"};
    static const char *const fill[] = {"#f7f7f7", "#eef4e3", "#f4f4f4", "#ffffff"};
    static const char *const stroke[] = {"#555555", "#8fae5a", "#b0b0b0", "#a0a0a0"};
    container_title(t, n, title, sizeof(title));
    rail_svg_group(s, cls[n->kind]);
    rail_svg_rect(s, "box", x, y, n->w, n->h, n->kind == TS_NUMA ? 6 : 3, fill[n->kind],
                  stroke[n->kind], n->kind == TS_NUMA ? 1.4 : 1, NULL);
    rail_svg_text(s, "title", x + TS_PAD, y + 14, n->kind == TS_NUMA ? 11 : 10, RAIL_SVG_START,
                  n->kind == TS_NUMA, n->kind == TS_NUMA ? "#3d5a12" : MUTED, 0, title);
  }
  for (int c = n->first; c >= 0; c = t->n[c].next)
    draw_node(s, t, c, x, y);
  if (n->kind != TS_MACHINE) rail_svg_group_end(s);
}

/* The drop lines from each GPU to the NVSwitch bar, drawn first: they
 * show only where no box covers them, between the NUMA nodes and the bar. */
static void draw_nvlink_drops(struct rail_svg *s, const struct ts_tree *t, int id, double ox,
                              double oy) {
  const struct ts_node *n = &t->n[id];
  double x = ox + n->x, y = oy + n->y;

  if (n->kind == TS_GPU) {
    rail_svg_line(s, "nvlink-drop", x + n->w / 2, y + n->h, x + n->w / 2, t->nvbar_top, "#76b900",
                  2, NULL);
    return;
  }
  for (int c = n->first; c >= 0; c = t->n[c].next)
    draw_nvlink_drops(s, t, c, x, y);
}

struct ts_warn {
  char lines[24][TS_LINE];
  int n;
  double width;
};

static void collect_warning(void *arg, const char *msg) {
  struct ts_warn *w = arg;
  char lines[3 * TS_LINE];
  int nl;

  nl = rail_svg_wrap(msg, 11, 0, w->width - 30, lines, TS_LINE, 3);
  for (int l = 0; l < nl && w->n < 24; l++)
    snprintf(w->lines[w->n++], TS_LINE, "%s%.250s", l == 0 ? "• " : "  ", lines + l * TS_LINE);
}

static void summary(const struct rail_topo *topo, char *buf, size_t len) {
  int rails = 0, other = 0, used = 0;
  struct rail_topo_fp fp;
  char fps[64];

  for (int n = 0; n < topo->nnics; n++)
    if (topo->nics[n].role == RAIL_NIC_ROLE_COMPUTE)
      rails++;
    else
      other++;
  for (int gi = 0; gi < topo->ngroups; gi++)
    used += rail_topo_group_used(topo, gi);
  rail_topo_fingerprint(topo, &fp);
  snprintf(buf, len,
           "%d GPU%s, %d NIC%s (%d on rails, %d not used), %d NUMA node%s, %d rail group%s "
           "used; %d NVSwitch%s; fingerprint %s",
           topo->ngpus, topo->ngpus == 1 ? "" : "s", topo->nnics, topo->nnics == 1 ? "" : "s",
           rails, other, topo->nnuma, topo->nnuma == 1 ? "" : "s", used, used == 1 ? "" : "s",
           topo->nvswitches, topo->nvswitches == 1 ? "" : "es",
           rail_topo_fp_str(&fp, fps, sizeof(fps)));
}

static double draw_legend(struct rail_svg *s, double x, double y, int draw) {
  static const struct {
    const char *cls, *fill, *stroke, *dash, *text;
  } items[] = {
      {"legend-gpu", "#e3f1cf", "#5f9400", NULL, "GPU"},
      {"legend-rail", "#dce4ed", "#4e79a7", NULL, "NIC on a rail (colour: rail id)"},
      {"legend-unused", "#eeeeee", "#9e9e9e", "4 3", "NIC not used, with why"},
      {"legend-switch", "#ffffff", "#a0a0a0", NULL, "PCIe switch"},
      {"legend-numa", "#eef4e3", "#8fae5a", NULL, "NUMA node"},
  };
  double x0 = x;

  for (size_t i = 0; i < sizeof(items) / sizeof(items[0]); i++) {
    double w = rail_svg_text_width(items[i].text, 10.5, 0);
    if (draw) {
      rail_svg_rect(s, items[i].cls, x, y - 10, 22, 13, 3, items[i].fill, items[i].stroke, 1.2,
                    items[i].dash);
      rail_svg_text(s, "legend-text", x + 28, y, 10.5, RAIL_SVG_START, 0, INK, 0, items[i].text);
    }
    x += 28 + w + 18;
  }
  if (draw) {
    rail_svg_rect(s, "legend-nvlink", x, y - 9, 22, 11, 0, "#76b900", NULL, 0, NULL);
    rail_svg_text(s, "legend-text", x + 28, y, 10.5, RAIL_SVG_START, 0, INK, 0, "NVLink");
  }
  x += 28 + rail_svg_text_width("NVLink", 10.5, 0);
  return x - x0;
}

/* The title, the summary line and, for a multi-node NVLink dump, what it
 * holds. */
static void draw_heading(struct rail_svg *s, const struct rail_topo *topo, const char *title,
                         const char *sum) {
  rail_svg_text(s, "title", TS_MARGIN, 28, 16, RAIL_SVG_START, 1, INK, 0, title);
  rail_svg_text(s, "summary", TS_MARGIN, 48, 11.5, RAIL_SVG_START, 0, MUTED, 0, sum);
  if (topo->mnnvl) {
    char note[160];
    snprintf(note, sizeof(note),
             "multi-node NVLink: the dump holds %d hosts, this is the first; NCCL keeps the "
             "collectives",
             topo->mnnvl_hosts);
    rail_svg_text(s, "note", TS_MARGIN, 66, 11.5, RAIL_SVG_START, 1, "#8a4b00", 0, note);
  }
}

/* The NVLink bar under the machine box (barh high), with each GPU's drop
 * to it. */
static void draw_nvlink_bar(struct rail_svg *s, struct ts_tree *t, double mx, double my,
                            double barh) {
  const struct rail_topo *topo = t->topo;
  const struct ts_node *m = &t->n[0];
  char bar[160];

  t->nvbar_top = my + m->h + 16;
  draw_nvlink_drops(s, t, 0, mx, my);
  if (topo->nvswitches > 0)
    snprintf(bar, sizeof(bar), "NVSwitch ×%d: NVLink joins the %d GPUs", topo->nvswitches,
             topo->ngpus);
  else
    snprintf(bar, sizeof(bar), "NVLink between the GPUs (no NVSwitch in the model)");
  rail_svg_rect(s, "nvswitch", mx, t->nvbar_top, m->w, barh, 5, "#76b900", NULL, 0, NULL);
  rail_svg_text(s, "nvswitch-label", mx + m->w / 2, t->nvbar_top + 22, 12.5, RAIL_SVG_MIDDLE, 1,
                "#ffffff", 0, bar);
}

/* The text's warnings in a box at y, w wide with the margins; returns the
 * y below it. */
static double draw_warnings(struct rail_svg *s, const struct ts_warn *warn, double w, double y) {
  if (warn->n == 0) {
    rail_svg_text(s, "no-warnings", TS_MARGIN, y + 10, 11, RAIL_SVG_START, 0, MUTED, 0,
                  "warnings: none");
    return y + 26;
  }
  rail_svg_group(s, "warnings");
  rail_svg_rect(s, "box", TS_MARGIN, y, w - 2 * TS_MARGIN, 26 + warn->n * 15 + 6, 5, "#fff4e0",
                "#e69a28", 1.4, NULL);
  rail_svg_text(s, "title", TS_MARGIN + 12, y + 18, 12, RAIL_SVG_START, 1, "#8a4b00", 0,
                "warnings");
  for (int i = 0; i < warn->n; i++)
    rail_svg_text(s, "warning", TS_MARGIN + 12, y + 36 + i * 15, 11, RAIL_SVG_START, 0, INK, 0,
                  warn->lines[i]);
  rail_svg_group_end(s);
  return y + 26 + warn->n * 15 + 6 + 22;
}

int rail_topo_svg(const struct rail_topo *topo, FILE *f) {
  struct ts_tree *t = calloc(1, sizeof(*t));
  struct ts_warn *warn = calloc(1, sizeof(*warn));
  struct rail_svg s;
  char title[RAIL_TOPO_PATH + 32], sum[320];
  const struct ts_node *m;
  double w, h, y, mx = TS_MARGIN, my = topo->mnnvl ? 80 : 62, barh = 0;
  const char *slash = strrchr(topo->source, '/');
  int rc;

  if (t == NULL || warn == NULL) {
    free(t);
    free(warn);
    return -ENOMEM;
  }
  t->topo = topo;
  build(t);
  layout(t, 0, TS_MAXW);
  m = &t->n[0];
  summary(topo, sum, sizeof(sum));
  w = m->w + 2 * TS_MARGIN;
  if (rail_svg_text_width(sum, 11.5, 0) + 2 * TS_MARGIN > w)
    w = rail_svg_text_width(sum, 11.5, 0) + 2 * TS_MARGIN;
  if (draw_legend(NULL, 0, 0, 0) + 2 * TS_MARGIN > w)
    w = draw_legend(NULL, 0, 0, 0) + 2 * TS_MARGIN;
  if (w < 760) w = 760;
  warn->width = w - 2 * TS_MARGIN;
  rail_topo_warnings(topo, collect_warning, warn);
  if (topo->nvlink) barh = 34;
  y = my + m->h + (barh ? 16 + barh : 0);
  h = y + 18 + (warn->n ? 26 + warn->n * 15 + 14 : 22) + 30;

  /* A file by its name (the whole path is what the text's first line
   * gives), a live machine by how it was read. */
  snprintf(title, sizeof(title), "nccl-rail topo: %s",
           slash             ? slash + 1
           : topo->source[0] ? topo->source
                             : "?");
  rail_svg_begin(&s, f, w, h, title);
  draw_heading(&s, topo, title, sum);
  rail_svg_group(&s, "machine");
  if (barh) draw_nvlink_bar(&s, t, mx, my, barh);
  /* The machine box goes over the drops, so they show below it only. */
  rail_svg_rect(&s, "box", mx, my, m->w, m->h, 6, "#f7f7f7", "#555555", 1.4, NULL);
  draw_node(&s, t, 0, mx, my);
  rail_svg_group_end(&s);
  y = draw_warnings(&s, warn, w, y + 18);
  rail_svg_group(&s, "legend");
  draw_legend(&s, TS_MARGIN, y + 8, 1);
  rail_svg_group_end(&s);
  rc = rail_svg_end(&s);
  free(t);
  free(warn);
  return rc;
}
