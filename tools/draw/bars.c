/* Rates against line rate as bars (bars.h). */
#include "tools/draw/bars.h"

#include <math.h>
#include <stdarg.h>
#include <string.h>

#include "tools/draw/svg.h"

void rail_bar_printf(char *field, size_t len, const char *fmt, ...) {
  va_list ap;
  int n;

  if (len == 0) return;
  va_start(ap, fmt);
  n = vsnprintf(field, len, fmt, ap);
  va_end(ap);
  if (n >= (int)len && len > 4) memcpy(field + len - 4, "...", 4);
}

#define BARS_W 860.0
#define BARS_LEFT 24.0
#define BARS_ROW 34.0
#define BARS_H 18.0

static double bar_scale(const struct rail_bar *bars, int n) {
  double max = 0;
  for (int i = 0; i < n; i++)
    if (bars[i].gbps > max) max = bars[i].gbps;
  return max;
}

/* "6.52", "94.1", "412": three significant figures where they mean
 * something. */
static void rate_str(double v, char *buf, size_t len) {
  snprintf(buf, len, v < 10 ? "%.2f" : v < 100 ? "%.1f" : "%.0f", v);
}

const char *rail_bar_text(const struct rail_bar *b, int width, double scale_gbps, char *buf,
                          size_t len) {
  char bar[256], v[32], l[32];
  double full = b->line_gbps > 0 ? b->line_gbps : scale_gbps;
  int fill = 0, over = 0;

  if (b->gbps < 0 || !isfinite(b->gbps)) {
    snprintf(buf, len, "%s", b->note[0] ? b->note : "not measured");
    return buf;
  }
  if (width < 1) width = 1;
  if (width > (int)sizeof(bar) - 3) width = (int)sizeof(bar) - 3;
  if (full > 0) {
    double cells = b->gbps / full * width;
    over = cells > width + 0.5;
    fill = cells >= width ? width : (int)lround(cells);
  }
  bar[0] = '[';
  for (int i = 0; i < width; i++)
    bar[1 + i] = i < fill ? '#' : '.';
  bar[1 + width] = over ? '>' : ']';
  bar[2 + width] = '\0';
  rate_str(b->gbps, v, sizeof(v));
  if (b->line_gbps > 0) {
    rate_str(b->line_gbps, l, sizeof(l));
    snprintf(buf, len, "%s %s of %s Gbit/s (%.0f%%)", bar, v, l, b->gbps / b->line_gbps * 100);
  } else {
    snprintf(buf, len, "%s %s Gbit/s (line rate unknown)", bar, v);
  }
  return buf;
}

void rail_bars_print(FILE *out, const char *title, const struct rail_bar *bars, int n) {
  double scale = bar_scale(bars, n);
  int width = 0;
  char line[512];

  for (int i = 0; i < n; i++)
    if ((int)strlen(bars[i].label) > width) width = (int)strlen(bars[i].label);
  fprintf(out, "%s\n", title);
  for (int i = 0; i < n; i++)
    fprintf(out, "  %-*s  %s\n", width, bars[i].label,
            rail_bar_text(&bars[i], RAIL_BARS_TEXT_WIDTH, scale, line, sizeof(line)));
}

int rail_bars_svg(FILE *f, const char *title, const struct rail_bar *bars, int n, double low) {
  double scale = bar_scale(bars, n), labw = 0, x0, bw, y = 66;
  struct rail_svg s;
  char buf[512], v[32];

  for (int i = 0; i < n; i++) {
    double w = rail_svg_text_width(bars[i].label, 11.5, 0);
    if (w > labw) labw = w;
  }
  if (labw > 320) labw = 320;
  x0 = BARS_LEFT + labw + 14;
  bw = BARS_W - x0 - 200;
  rail_svg_begin(&s, f, BARS_W, 66 + n * BARS_ROW + 44, title);
  rail_svg_text(&s, "title", BARS_LEFT, 28, 16, RAIL_SVG_START, 1, "#222222", 0, title);
  rail_svg_text(&s, "subtitle", BARS_LEFT, 48, 11.5, RAIL_SVG_START, 0, "#666666", 0,
                "each rail's throughput through the plugin, against the slower end's line rate");
  for (int i = 0; i < n; i++) {
    const struct rail_bar *b = &bars[i];
    double full = b->line_gbps > 0 ? b->line_gbps : scale;
    char lab[2 * RAIL_BAR_LABEL];

    rail_svg_group(&s, "rail");
    if (rail_svg_wrap(b->label, 11.5, 0, 320, lab, RAIL_BAR_LABEL * 2, 1) < 1) lab[0] = '\0';
    rail_svg_text(&s, "label", x0 - 10, y + 13, 11.5, RAIL_SVG_END, 0, "#222222", 0, lab);
    rail_svg_rect(&s, "bar-line", x0, y, bw, BARS_H, 3, "#eeeeee", "#cccccc", 1, NULL);
    if (b->gbps < 0 || !isfinite(b->gbps)) {
      rail_svg_rect(&s, "bar-failed", x0, y, bw, BARS_H, 3, "#fde0dd", "#de2d26", 1.2, "4 3");
      rail_svg_text(&s, "value", x0 + 8, y + 13, 11, RAIL_SVG_START, 1, "#a50f15", 0,
                    b->note[0] ? b->note : "not measured");
    } else {
      double share = full > 0 ? b->gbps / full : 0;
      double w = (share > 1 ? 1 : share) * bw;
      const char *fill = b->line_gbps > 0 && share < low ? "#f28e2b" : "#4e79a7";
      rail_svg_rect(&s, "bar-measured", x0, y, w > 1 ? w : 1, BARS_H, 3, fill, NULL, 0, NULL);
      if (b->line_gbps > 0)
        rail_svg_line(&s, "low-mark", x0 + low * bw, y - 3, x0 + low * bw, y + BARS_H + 3,
                      "#888888", 1, "2 2");
      rate_str(b->gbps, v, sizeof(v));
      if (b->line_gbps > 0) {
        char l[32];
        rate_str(b->line_gbps, l, sizeof(l));
        snprintf(buf, sizeof(buf), "%s of %s Gbit/s  (%.0f%%)", v, l, share * 100);
      } else {
        snprintf(buf, sizeof(buf), "%s Gbit/s (line rate unknown)", v);
      }
      rail_svg_text(&s, "value", x0 + bw + 10, y + 13, 11.5, RAIL_SVG_START, 1, "#222222", 0, buf);
    }
    rail_svg_group_end(&s);
    y += BARS_ROW;
  }
  snprintf(buf, sizeof(buf),
           "dashed mark: %.0f%% of line rate; a rail below it (orange) usually takes another path",
           low * 100);
  rail_svg_text(&s, "note", BARS_LEFT, y + 16, 11, RAIL_SVG_START, 0, "#666666", 0, buf);
  return rail_svg_end(&s);
}
