/* A small SVG writer for the nccl-rail command's pictures (plan curves,
 * topology drawings, doctor's rail bars), and what the commands share to
 * put one in a file or turn it into a PNG.
 *
 * Nothing here is in the plugin: the .so never draws. The writer emits
 * plain SVG 1.1 that librsvg, browsers and Inkscape all read: shapes with
 * inline presentation attributes, text in one font family (DejaVu Sans
 * first, whose advance widths rail_svg_text_width() uses, so a label's box
 * is known before it is placed). Every element may carry a class naming
 * what it shows ("gpu", "crossover", ...): the tests count them. Text is
 * escaped, and bytes that are not UTF-8 or are XML-illegal control
 * characters become '?', so a name read from a file cannot break the
 * document. Coordinates are written to 0.1 px, so the same input gives the
 * same bytes (golden tests compare them).
 *
 * Single-threaded; a write error is kept (sticky) and returned by
 * rail_svg_end(). */
#ifndef RAIL_TOOLS_SVG_H
#define RAIL_TOOLS_SVG_H

#include <stddef.h>
#include <stdio.h>

struct rail_svg {
  FILE *f;
  double width, height; /* px */
  int depth;            /* open groups */
};

enum rail_svg_anchor { RAIL_SVG_START = 0, RAIL_SVG_MIDDLE = 1, RAIL_SVG_END = 2 };

/* The document: its size in px, a <title> (what a viewer shows as the
 * name) and a white background. */
void rail_svg_begin(struct rail_svg *s, FILE *f, double width, double height, const char *title);
/* Closes open groups and the document; 0, or -EIO if any write failed. */
int rail_svg_end(struct rail_svg *s);

/* <g class="cls"> ... </g>; cls may be NULL. */
void rail_svg_group(struct rail_svg *s, const char *cls);
void rail_svg_group_end(struct rail_svg *s);

/* Shapes. cls may be NULL; fill and stroke are CSS colours ("#1f77b4",
 * "none"; NULL is "none"); dash is a stroke-dasharray ("4 3") or NULL for
 * a solid line; width is the stroke width in px. */
void rail_svg_rect(struct rail_svg *s, const char *cls, double x, double y, double w, double h,
                   double rx, const char *fill, const char *stroke, double width, const char *dash);
void rail_svg_line(struct rail_svg *s, const char *cls, double x1, double y1, double x2, double y2,
                   const char *stroke, double width, const char *dash);
void rail_svg_polyline(struct rail_svg *s, const char *cls, const double *xs, const double *ys,
                       int n, const char *stroke, double width, const char *dash);
void rail_svg_polygon(struct rail_svg *s, const char *cls, const double *xs, const double *ys,
                      int n, const char *fill, const char *stroke, double width);
void rail_svg_circle(struct rail_svg *s, const char *cls, double cx, double cy, double r,
                     const char *fill, const char *stroke, double width);

/* Text at (x, y) (the baseline), size in px; bold 0 or 1; rotate in
 * degrees about (x, y), 0 for none. */
void rail_svg_text(struct rail_svg *s, const char *cls, double x, double y, double size,
                   enum rail_svg_anchor anchor, int bold, const char *fill, double rotate,
                   const char *text);

/* The width of text in px at size, from DejaVu Sans's advance widths
 * (Bold's when bold); a character outside ASCII counts as a wide one, so
 * the estimate errs wide. Fonts that stand in for DejaVu (Verdana, Arial)
 * are no wider. */
double rail_svg_text_width(const char *text, double size, int bold);

/* Breaks text into at most maxlines lines no wider than maxw px, at
 * spaces (a word wider than a line is cut); a text that needs more lines
 * ends its last one with "...". Each line is at most linelen bytes with
 * its NUL. Returns the number of lines (0 for an empty text). */
int rail_svg_wrap(const char *text, double size, int bold, double maxw, char *lines, size_t linelen,
                  int maxlines);

/* Text escaped for XML character data or an attribute value, as the
 * writer writes it; out is always NUL-terminated (cut at a character
 * boundary when short). Returns out. */
const char *rail_svg_escape(const char *text, char *out, size_t len);

/* ---- files ------------------------------------------------------------- */

/* The converter --png uses: the full path of rsvg-convert on PATH, or NULL
 * when there is none. */
const char *rail_svg_png_converter(void);

/* For a command's --png option, before any work: 0 when the converter is
 * there, else -ENOENT after printing "nccl-rail CMD: --png needs
 * rsvg-convert ..." with the package that has it. */
int rail_svg_png_check(const char *cmd);

/* Writes one picture: draw(f, arg) writes the whole SVG document (0 or
 * -errno). It goes to svg_path if given, and is turned into png_path if
 * given (by rail_svg_png_converter(), bounded to 60 s). Each file is
 * written beside its final name and renamed into place once complete, so
 * a failure never leaves a half-written picture or clobbers an old one.
 * Prints "nccl-rail CMD: wrote PATH" (stderr) for each file, or what went
 * wrong naming the file. Returns 0 or -errno. */
int rail_svg_write(const char *cmd, const char *svg_path, const char *png_path,
                   int (*draw)(FILE *f, void *arg), void *arg);

#endif
