/* The XML reader the file loaders share (xml.c): elements, attributes and
 * text, every malformed file reported with its line. Calls nothing else in
 * the topology module. Not for other modules. */
#ifndef RAIL_TOPO_XML_H
#define RAIL_TOPO_XML_H

#include <stddef.h>

struct rail_xml_attr {
  char *name;
  char *value; /* entities decoded */
  int line;    /* where the attribute is */
};

struct rail_xml_node {
  char *name;
  /* Character data directly inside the element, entities decoded, blanks
   * at both ends removed; NULL when there is none (hwloc keeps matrices in
   * text: <u64values>1 2 3</u64values>). */
  char *text;
  int line; /* where the start tag is */
  int nattrs;
  struct rail_xml_attr *attrs;
  struct rail_xml_node *parent, *child, *last_child, *next;
};

/* Parses a whole file into a tree of elements (comments, processing
 * instructions and DOCTYPE are skipped). A malformed file is logged as
 * "FILE:LINE: what is wrong" and gives -EINVAL; a missing file -ENOENT etc.,
 * an empty one -ENODATA. *root is set only on success; free with
 * rail_xml_free(). Bounded: 64 MiB, 256 levels of nesting; an element's
 * attributes are checked for repeats in O(n log n). */
int rail_xml_parse_file(const char *path, struct rail_xml_node **root);
int rail_xml_parse_buf(const char *name, const char *buf, size_t len, struct rail_xml_node **root);
void rail_xml_free(struct rail_xml_node *root);
/* NULL when the element has no such attribute. */
const char *rail_xml_attr(const struct rail_xml_node *node, const char *name);
/* The first child element of that name, NULL if none. */
const struct rail_xml_node *rail_xml_child(const struct rail_xml_node *node, const char *name);

#endif
