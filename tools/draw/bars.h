/* Horizontal bars of measured rates against their line rate: the end of
 * `nccl-rail doctor --peers`, as plain text for the terminal and as SVG
 * (--svg). Pure functions of their arguments but for the writing. */
#ifndef RAIL_TOOLS_BARS_H
#define RAIL_TOOLS_BARS_H

#include <stdio.h>

#define RAIL_BAR_LABEL 128
#define RAIL_BAR_NOTE 96
#define RAIL_BARS_TEXT_WIDTH 40 /* characters of the text bar at 100% */

struct rail_bar {
  char label[RAIL_BAR_LABEL]; /* "r0 -> 10.203.1.1 r0" */
  double gbps;                /* measured, Gbit/s; < 0 when there is no measurement */
  double line_gbps;           /* line rate, Gbit/s; 0 when unknown */
  char note[RAIL_BAR_NOTE];   /* why no measurement ("not reached"), "" otherwise */
};

/* Writes a bar's label or note from a printf format; text longer than the
 * field is cut and ends in "..." (a host name can take 255 bytes). */
void rail_bar_printf(char *field, size_t len, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

/* One bar as text, without a newline: "[#######.......]  6.52 of 10 Gbit/s
 * (65%)". `width` characters stand for the line rate (the largest rate of
 * the set, `scale_gbps`, where the line rate is unknown); a rate above it
 * fills the bar and ends it with '>'. Returns buf. */
const char *rail_bar_text(const struct rail_bar *b, int width, double scale_gbps, char *buf,
                          size_t len);
/* The chart: a title line, then one line per bar, labels aligned. */
void rail_bars_print(FILE *out, const char *title, const struct rail_bar *bars, int n);
/* The same as an SVG document (0 or -EIO); `low` is the share of line rate
 * below which a rail is worth a look, drawn as a mark on every bar. */
int rail_bars_svg(FILE *f, const char *title, const struct rail_bar *bars, int n, double low);

#endif
