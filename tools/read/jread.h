/* A small JSON reader for the documents nccl-rail reads from other tools
 * (iperf3 -J): the whole text parsed into a tree once, strictly (RFC 8259:
 * no trailing commas, no leading zeros, escapes checked, nothing after the
 * value), then numbers looked up by a path of object keys.
 *
 * Not a general-purpose library: no arrays in paths, keys of at most 127
 * bytes, nesting at most 64 deep. A document is owned by its caller and
 * immutable once parsed; reading one from several threads is safe. */
#ifndef RAIL_TOOLS_JREAD_H
#define RAIL_TOOLS_JREAD_H

struct jread_doc;

/* 0 and *out (free with rail_jread_free), -EINVAL for text that is not one
 * JSON value, -ENOMEM. *out is left NULL on failure. */
int rail_jread_parse(const char *text, struct jread_doc **out);
/* The number at `path`, keys joined by '.' ("end.sum_received.bits_per_second"):
 * 0 and *out, -ENOENT when a key is missing, -EINVAL when the value there
 * is not a number. */
int rail_jread_number(const struct jread_doc *d, const char *path, double *out);
void rail_jread_free(struct jread_doc *d);

#endif
