/* The SVG writer and the picture files of the nccl-rail command (svg.h). */
#define _GNU_SOURCE
#include "tools/draw/svg.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <math.h>
#include <signal.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

/* Fonts in the order a renderer tries them: DejaVu Sans is what the widths
 * below measure and what Debian's librsvg finds (fonts-dejavu-core); the
 * others are no wider, so a label measured here fits there too. */
#define SVG_FONTS "DejaVu Sans, Verdana, Arial, Helvetica, sans-serif"
#define SVG_PNG_TIMEOUT_MS 60000
#define SVG_CONVERTER "rsvg-convert"

/* Advance widths of DejaVu Sans and DejaVu Sans Bold (version 2.37, the
 * fonts' hmtx tables) for ASCII 32..126, in thousandths of an em. */
static const unsigned short svg_width_regular[95] = {
    318, 401, 460, 838, 636, 950, 780, 275, 390, 390, 500, 838, 318, 361,  318, 337, 636, 636, 636,
    636, 636, 636, 636, 636, 636, 636, 337, 337, 838, 838, 838, 531, 1000, 684, 686, 698, 770, 632,
    575, 775, 752, 295, 295, 656, 557, 863, 748, 787, 603, 787, 695, 635,  611, 732, 684, 989, 685,
    611, 685, 390, 337, 390, 838, 500, 500, 613, 635, 550, 635, 615, 352,  635, 634, 278, 278, 579,
    278, 974, 634, 612, 635, 635, 411, 521, 392, 634, 592, 818, 592, 592,  525, 636, 337, 636, 838};
static const unsigned short svg_width_bold[95] = {
    348,  456, 521, 838, 696, 1002, 872, 306,  457, 457, 523, 838, 380, 415,  380, 365,
    696,  696, 696, 696, 696, 696,  696, 696,  696, 696, 400, 400, 838, 838,  838, 580,
    1000, 774, 762, 734, 830, 683,  683, 821,  837, 372, 372, 775, 637, 995,  837, 850,
    733,  850, 770, 720, 682, 812,  774, 1103, 771, 724, 725, 457, 365, 457,  838, 500,
    500,  675, 716, 593, 716, 678,  435, 716,  712, 343, 343, 665, 343, 1042, 712, 687,
    716,  716, 493, 595, 478, 712,  652, 924,  645, 652, 582, 712, 365, 712,  838};
/* A character outside ASCII: as wide as DejaVu's arrows and operators. */
#define SVG_WIDTH_OTHER 838

/* ---- characters ---------------------------------------------------------- */

/* The next character of s: its code point in *cp and its length, or
 * length 1 and cp -1 for a byte that does not start a well-formed UTF-8
 * sequence (overlong forms, surrogates and values past U+10FFFF
 * included). */
static size_t utf8_next(const unsigned char *s, int32_t *cp) {
  size_t n;
  int32_t c;

  if (s[0] < 0x80) {
    *cp = s[0];
    return 1;
  }
  if (s[0] >= 0xc2 && s[0] <= 0xdf) {
    n = 2;
    c = s[0] & 0x1f;
  } else if (s[0] >= 0xe0 && s[0] <= 0xef) {
    n = 3;
    c = s[0] & 0x0f;
  } else if (s[0] >= 0xf0 && s[0] <= 0xf4) {
    n = 4;
    c = s[0] & 0x07;
  } else {
    *cp = -1;
    return 1;
  }
  for (size_t i = 1; i < n; i++) {
    if ((s[i] & 0xc0) != 0x80) {
      *cp = -1;
      return 1;
    }
    c = (c << 6) | (s[i] & 0x3f);
  }
  if ((n == 3 && c < 0x800) || (n == 4 && (c < 0x10000 || c > 0x10ffff)) ||
      (c >= 0xd800 && c <= 0xdfff)) {
    *cp = -1;
    return 1;
  }
  *cp = c;
  return n;
}

/* What XML 1.0 allows in a document, less the line breaks and tabs that
 * SVG text would fold into spaces anyway. */
static int xml_char_ok(int32_t c) {
  return (c >= 0x20 && c < 0xd800) || (c >= 0xe000 && c <= 0xfffd) || c >= 0x10000;
}

const char *rail_svg_escape(const char *text, char *out, size_t len) {
  const unsigned char *p = (const unsigned char *)(text ? text : "");
  size_t o = 0;

  if (len == 0) return out;
  while (*p != '\0') {
    char rep[8];
    const char *piece = rep;
    size_t plen;
    int32_t c;
    size_t n = utf8_next(p, &c);

    if (c == '&')
      piece = "&amp;";
    else if (c == '<')
      piece = "&lt;";
    else if (c == '>')
      piece = "&gt;";
    else if (c == '"')
      piece = "&quot;";
    else if (c == '\'')
      piece = "&#39;";
    else if (c == '\t' || c == '\n' || c == '\r')
      piece = " ";
    else if (c < 0 || !xml_char_ok(c))
      piece = "?";
    else {
      memcpy(rep, p, n);
      rep[n] = '\0';
    }
    plen = strlen(piece);
    if (o + plen >= len) break;
    memcpy(out + o, piece, plen);
    o += plen;
    p += n;
  }
  out[o] = '\0';
  return out;
}

double rail_svg_text_width(const char *text, double size, int bold) {
  const unsigned char *p = (const unsigned char *)(text ? text : "");
  const unsigned short *w = bold ? svg_width_bold : svg_width_regular;
  double units = 0;

  while (*p != '\0') {
    int32_t c;
    p += utf8_next(p, &c);
    if (c >= 32 && c < 127)
      units += w[c - 32];
    else if (c < 0 || c < 32)
      units += w['?' - 32];
    else
      units += SVG_WIDTH_OTHER;
  }
  return units * size / 1000.0;
}

/* The longest prefix of s (at a character boundary) no wider than maxw,
 * at least one character. */
static size_t fit_prefix(const char *s, size_t len, double size, int bold, double maxw) {
  char buf[512];
  size_t best = 0, at = 0;

  while (at < len && at < sizeof(buf) - 1) {
    int32_t c;
    size_t n = utf8_next((const unsigned char *)s + at, &c);
    if (at + n > len || at + n >= sizeof(buf)) break;
    memcpy(buf, s, at + n);
    buf[at + n] = '\0';
    if (best > 0 && rail_svg_text_width(buf, size, bold) > maxw) break;
    at += n;
    best = at;
  }
  return best;
}

int rail_svg_wrap(const char *text, double size, int bold, double maxw, char *lines, size_t linelen,
                  int maxlines) {
  const char *p = text ? text : "";
  char cur[512] = "";
  int n = 0;

  if (maxlines <= 0 || linelen < 4) return 0;
  while (*p == ' ')
    p++;
  while (*p != '\0' && n < maxlines) {
    const char *end = strchr(p, ' ');
    size_t wlen = end ? (size_t)(end - p) : strlen(p);
    char trial[1024];

    snprintf(trial, sizeof(trial), "%s%s%.*s", cur, cur[0] ? " " : "", (int)wlen, p);
    if (rail_svg_text_width(trial, size, bold) <= maxw && strlen(trial) < linelen &&
        strlen(trial) < sizeof(cur)) {
      memcpy(cur, trial, strlen(trial) + 1);
      p += wlen;
    } else if (cur[0] != '\0') {
      snprintf(lines + (size_t)n * linelen, linelen, "%s", cur);
      n++;
      cur[0] = '\0';
      continue;
    } else {
      /* One word wider than a line: cut it. */
      size_t k = fit_prefix(p, wlen < linelen - 1 ? wlen : linelen - 1, size, bold, maxw);
      snprintf(lines + (size_t)n * linelen, linelen, "%.*s", (int)k, p);
      n++;
      p += k;
      continue;
    }
    while (*p == ' ')
      p++;
  }
  if (cur[0] != '\0' && n < maxlines) {
    snprintf(lines + (size_t)n * linelen, linelen, "%s", cur);
    n++;
    cur[0] = '\0';
  }
  if ((*p != '\0' || cur[0] != '\0') && n > 0) {
    /* More than fits: the last line says so. */
    char *last = lines + (size_t)(n - 1) * linelen;
    size_t l = strlen(last);
    while (l > 0 && (l + 4 > linelen || rail_svg_text_width(last, size, bold) +
                                                rail_svg_text_width("...", size, bold) >
                                            maxw)) {
      /* Drop a whole character (UTF-8 continuation bytes too). */
      do
        l--;
      while (l > 0 && ((unsigned char)last[l] & 0xc0) == 0x80);
      last[l] = '\0';
    }
    snprintf(last + l, linelen - l, "...");
  }
  return n;
}

/* ---- the writer ------------------------------------------------------------ */

/* A coordinate to 0.1 px, without a trailing ".0" and never "-0". */
static void svg_num(FILE *f, double v) {
  char buf[32];
  size_t n;

  if (!isfinite(v)) v = 0;
  v = round(v * 10) / 10;
  if (v == 0) v = 0; /* -0 */
  snprintf(buf, sizeof(buf), "%.1f", v);
  n = strlen(buf);
  if (n > 2 && strcmp(buf + n - 2, ".0") == 0) buf[n - 2] = '\0';
  fputs(buf, f);
}

static void svg_attr_num(FILE *f, const char *name, double v) {
  fprintf(f, " %s=\"", name);
  svg_num(f, v);
  fputc('"', f);
}

static void svg_attr_str(FILE *f, const char *name, const char *v) {
  char buf[1024];
  fprintf(f, " %s=\"%s\"", name, rail_svg_escape(v, buf, sizeof(buf)));
}

static void svg_indent(const struct rail_svg *s) {
  for (int i = 0; i <= s->depth; i++)
    fputs("  ", s->f);
}

static void svg_open(struct rail_svg *s, const char *tag, const char *cls) {
  svg_indent(s);
  fprintf(s->f, "<%s", tag);
  if (cls != NULL) svg_attr_str(s->f, "class", cls);
}

static void svg_paint(FILE *f, const char *fill, const char *stroke, double width,
                      const char *dash) {
  svg_attr_str(f, "fill", fill ? fill : "none");
  if (stroke != NULL && strcmp(stroke, "none") != 0) {
    svg_attr_str(f, "stroke", stroke);
    svg_attr_num(f, "stroke-width", width);
    if (dash != NULL) svg_attr_str(f, "stroke-dasharray", dash);
  }
}

void rail_svg_begin(struct rail_svg *s, FILE *f, double width, double height, const char *title) {
  char buf[1024];

  s->f = f;
  s->width = width;
  s->height = height;
  s->depth = 0;
  fputs("<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n", f);
  fputs("<svg xmlns=\"http://www.w3.org/2000/svg\" version=\"1.1\"", f);
  svg_attr_num(f, "width", width);
  svg_attr_num(f, "height", height);
  fputs(" viewBox=\"0 0 ", f);
  svg_num(f, width);
  fputc(' ', f);
  svg_num(f, height);
  fputc('"', f);
  svg_attr_str(f, "font-family", SVG_FONTS);
  fputs(">\n", f);
  fprintf(f, "  <title>%s</title>\n", rail_svg_escape(title, buf, sizeof(buf)));
  rail_svg_rect(s, "background", 0, 0, width, height, 0, "#ffffff", NULL, 0, NULL);
}

int rail_svg_end(struct rail_svg *s) {
  while (s->depth > 0)
    rail_svg_group_end(s);
  fputs("</svg>\n", s->f);
  return ferror(s->f) ? -EIO : 0;
}

void rail_svg_group(struct rail_svg *s, const char *cls) {
  svg_open(s, "g", cls);
  fputs(">\n", s->f);
  s->depth++;
}

void rail_svg_group_end(struct rail_svg *s) {
  if (s->depth == 0) return;
  s->depth--;
  svg_indent(s);
  fputs("</g>\n", s->f);
}

void rail_svg_rect(struct rail_svg *s, const char *cls, double x, double y, double w, double h,
                   double rx, const char *fill, const char *stroke, double width,
                   const char *dash) {
  svg_open(s, "rect", cls);
  svg_attr_num(s->f, "x", x);
  svg_attr_num(s->f, "y", y);
  svg_attr_num(s->f, "width", w > 0 ? w : 0);
  svg_attr_num(s->f, "height", h > 0 ? h : 0);
  if (rx > 0) svg_attr_num(s->f, "rx", rx);
  svg_paint(s->f, fill, stroke, width, dash);
  fputs("/>\n", s->f);
}

void rail_svg_line(struct rail_svg *s, const char *cls, double x1, double y1, double x2, double y2,
                   const char *stroke, double width, const char *dash) {
  svg_open(s, "line", cls);
  svg_attr_num(s->f, "x1", x1);
  svg_attr_num(s->f, "y1", y1);
  svg_attr_num(s->f, "x2", x2);
  svg_attr_num(s->f, "y2", y2);
  svg_paint(s->f, NULL, stroke, width, dash);
  fputs("/>\n", s->f);
}

static void svg_points(FILE *f, const double *xs, const double *ys, int n) {
  fputs(" points=\"", f);
  for (int i = 0; i < n; i++) {
    if (i > 0) fputc(' ', f);
    svg_num(f, xs[i]);
    fputc(',', f);
    svg_num(f, ys[i]);
  }
  fputc('"', f);
}

void rail_svg_polyline(struct rail_svg *s, const char *cls, const double *xs, const double *ys,
                       int n, const char *stroke, double width, const char *dash) {
  if (n < 2) return;
  svg_open(s, "polyline", cls);
  svg_points(s->f, xs, ys, n);
  svg_paint(s->f, NULL, stroke, width, dash);
  fputs(" stroke-linejoin=\"round\" stroke-linecap=\"round\"/>\n", s->f);
}

void rail_svg_polygon(struct rail_svg *s, const char *cls, const double *xs, const double *ys,
                      int n, const char *fill, const char *stroke, double width) {
  if (n < 3) return;
  svg_open(s, "polygon", cls);
  svg_points(s->f, xs, ys, n);
  svg_paint(s->f, fill, stroke, width, NULL);
  fputs("/>\n", s->f);
}

void rail_svg_circle(struct rail_svg *s, const char *cls, double cx, double cy, double r,
                     const char *fill, const char *stroke, double width) {
  svg_open(s, "circle", cls);
  svg_attr_num(s->f, "cx", cx);
  svg_attr_num(s->f, "cy", cy);
  svg_attr_num(s->f, "r", r);
  svg_paint(s->f, fill, stroke, width, NULL);
  fputs("/>\n", s->f);
}

void rail_svg_text(struct rail_svg *s, const char *cls, double x, double y, double size,
                   enum rail_svg_anchor anchor, int bold, const char *fill, double rotate,
                   const char *text) {
  static const char *const anchors[] = {"start", "middle", "end"};
  char buf[2048];

  svg_open(s, "text", cls);
  svg_attr_num(s->f, "x", x);
  svg_attr_num(s->f, "y", y);
  svg_attr_num(s->f, "font-size", size);
  if (anchor != RAIL_SVG_START) svg_attr_str(s->f, "text-anchor", anchors[anchor]);
  if (bold) svg_attr_str(s->f, "font-weight", "bold");
  svg_attr_str(s->f, "fill", fill ? fill : "#000000");
  if (rotate != 0) {
    fputs(" transform=\"rotate(", s->f);
    svg_num(s->f, rotate);
    fputc(' ', s->f);
    svg_num(s->f, x);
    fputc(' ', s->f);
    svg_num(s->f, y);
    fputs(")\"", s->f);
  }
  fprintf(s->f, ">%s</text>\n", rail_svg_escape(text, buf, sizeof(buf)));
}

/* ---- files -------------------------------------------------------------------- */

const char *rail_svg_png_converter(void) {
  static char found[PATH_MAX];
  const char *path = getenv("PATH");
  char *copy, *save = NULL;

  if (path == NULL || path[0] == '\0') return NULL;
  copy = strdup(path);
  if (copy == NULL) return NULL;
  found[0] = '\0';
  for (char *dir = strtok_r(copy, ":", &save); dir != NULL; dir = strtok_r(NULL, ":", &save)) {
    struct stat st;
    snprintf(found, sizeof(found), "%s/%s", dir[0] ? dir : ".", SVG_CONVERTER);
    if (stat(found, &st) == 0 && S_ISREG(st.st_mode) && access(found, X_OK) == 0) break;
    found[0] = '\0';
  }
  free(copy);
  return found[0] ? found : NULL;
}

int rail_svg_png_check(const char *cmd) {
  if (rail_svg_png_converter() != NULL) return 0;
  fprintf(stderr,
          "nccl-rail %s: --png needs %s, which is not on PATH (Debian/Ubuntu: apt-get install "
          "librsvg2-bin); --svg FILE needs nothing\n",
          cmd, SVG_CONVERTER);
  return -ENOENT;
}

/* A temporary file beside path ("PATH.XXXXXX"), open for writing. */
static FILE *tmp_beside(const char *path, char *tmp, size_t len) {
  FILE *f;
  int fd;

  if ((size_t)snprintf(tmp, len, "%s.XXXXXX", path) >= len) {
    errno = ENAMETOOLONG;
    return NULL;
  }
  fd = mkstemp(tmp);
  if (fd < 0) return NULL;
  /* mkstemp makes it 0600; a picture is for reading, like any file. */
  {
    mode_t mask = umask(0);
    umask(mask);
    fchmod(fd, 0666 & ~mask);
  }
  f = fdopen(fd, "w");
  if (f == NULL) {
    int e = errno;
    close(fd);
    unlink(tmp);
    errno = e;
  }
  return f;
}

/* Runs the converter on svg into png, bounded. 0, or -errno with why set. */
static int svg_convert(const char *svg, const char *png, char *why, size_t len) {
  const char *conv = rail_svg_png_converter();
  struct timespec nap = {0, 10 * 1000 * 1000};
  int status = 0, waited = 0;
  pid_t pid, r;

  if (conv == NULL) {
    snprintf(why, len, "%s is not on PATH", SVG_CONVERTER);
    return -ENOENT;
  }
  pid = fork();
  if (pid < 0) {
    snprintf(why, len, "fork: %s", strerror(errno));
    return -errno;
  }
  if (pid == 0) {
    int null = open("/dev/null", O_RDWR);
    if (null >= 0) dup2(null, STDIN_FILENO);
    execl(conv, SVG_CONVERTER, "-f", "png", "-o", png, svg, (char *)NULL);
    _exit(127);
  }
  while ((r = waitpid(pid, &status, WNOHANG)) == 0 && waited < SVG_PNG_TIMEOUT_MS) {
    nanosleep(&nap, NULL);
    waited += 10;
  }
  if (r == 0) {
    kill(pid, SIGKILL);
    waitpid(pid, &status, 0);
    snprintf(why, len, "%s took more than %d s", conv, SVG_PNG_TIMEOUT_MS / 1000);
    return -ETIMEDOUT;
  }
  if (r < 0) {
    snprintf(why, len, "waiting for %s: %s", conv, strerror(errno));
    return -ECHILD;
  }
  if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) {
    snprintf(why, len, "%s failed (%s %d)", conv, WIFEXITED(status) ? "exit status" : "signal",
             WIFEXITED(status) ? WEXITSTATUS(status) : WTERMSIG(status));
    return -EIO;
  }
  return 0;
}

/* draw() into a temporary file beside path; 0 with tmp named, or -errno
 * after saying so. */
static int svg_draw_tmp(const char *cmd, const char *path, char *tmp, size_t len,
                        int (*draw)(FILE *f, void *arg), void *arg) {
  FILE *f = tmp_beside(path, tmp, len);
  int rc;

  if (f == NULL) {
    rc = -errno;
    fprintf(stderr, "nccl-rail %s: cannot write %s: %s\n", cmd, path, strerror(-rc));
    return rc;
  }
  rc = draw(f, arg);
  if (fflush(f) != 0 && rc == 0) rc = -errno;
  if (ferror(f) && rc == 0) rc = -EIO;
  if (fclose(f) != 0 && rc == 0) rc = -errno;
  if (rc != 0) {
    fprintf(stderr, "nccl-rail %s: writing %s failed: %s\n", cmd, path, strerror(-rc));
    unlink(tmp);
  }
  return rc;
}

static int svg_place(const char *cmd, const char *tmp, const char *path) {
  if (rename(tmp, path) == 0) {
    fprintf(stderr, "nccl-rail %s: wrote %s\n", cmd, path);
    return 0;
  }
  fprintf(stderr, "nccl-rail %s: cannot write %s: %s\n", cmd, path, strerror(errno));
  unlink(tmp);
  return -EIO;
}

int rail_svg_write(const char *cmd, const char *svg_path, const char *png_path,
                   int (*draw)(FILE *f, void *arg), void *arg) {
  char svg_tmp[PATH_MAX], png_tmp[PATH_MAX], why[PATH_MAX + 64];
  const char *source;
  FILE *f;
  int rc;

  if (svg_path != NULL) {
    rc = svg_draw_tmp(cmd, svg_path, svg_tmp, sizeof(svg_tmp), draw, arg);
    if (rc == 0) rc = svg_place(cmd, svg_tmp, svg_path);
    if (rc != 0 || png_path == NULL) return rc;
    source = svg_path;
  } else {
    if (png_path == NULL) return 0;
    /* The SVG the PNG is made from, beside the PNG, removed afterwards. */
    rc = svg_draw_tmp(cmd, png_path, svg_tmp, sizeof(svg_tmp), draw, arg);
    if (rc != 0) return rc;
    source = svg_tmp;
  }
  f = tmp_beside(png_path, png_tmp, sizeof(png_tmp));
  if (f == NULL) {
    rc = -errno;
    fprintf(stderr, "nccl-rail %s: cannot write %s: %s\n", cmd, png_path, strerror(-rc));
  } else {
    fclose(f);
    rc = svg_convert(source, png_tmp, why, sizeof(why));
    if (rc != 0) {
      fprintf(stderr, "nccl-rail %s: cannot make %s: %s\n", cmd, png_path, why);
      unlink(png_tmp);
    } else {
      rc = svg_place(cmd, png_tmp, png_path);
    }
  }
  if (svg_path == NULL) unlink(svg_tmp);
  return rc;
}
