/* Reading topology files: the XML reader (lines, entities, text, many
 * attributes), CPU masks, bad input with one clear error naming file and
 * line, unknown PCI classes, and damaged files that must never crash. */
#define _GNU_SOURCE
#include <errno.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>

#include "tests/unit/test.h"
#include "tests/unit/topology/helpers.h"
#include "topology/discover/discover.h"
#include "topology/load/xml.h"
#include "topology/model/model.h"
#include "topology/topo.h"

/* ---- bad input ---- */

static void check_bad(const char *name, int want_rc, const char *want_msg) {
  int rc = 0;
  struct rail_topo *t;
  capture_start();
  t = load_fixture("topo/bad", name, &rc);
  capture_stop();
  CHECK(t == NULL);
  CHECK_EQ_INT(rc, want_rc);
  CHECK_EQ_INT(nwarn, 1); /* logged once, where it was found */
  if (strstr(logbuf, want_msg) == NULL) {
    fprintf(stderr, "%s: %s: log lacks \"%s\":\n%s", rail_test_current, name, want_msg, logbuf);
    rail_test_failed_checks++;
  }
  rail_topo_free(t);
}

TEST(bad_input_gives_clear_errors) {
  check_bad("missing.xml", -ENOENT, "missing.xml: cannot open: No such file or directory");
  check_bad("empty-file.xml", -ENODATA, "empty-file.xml: the file is empty");
  check_bad(
      "malformed.xml", -EINVAL,
      "malformed.xml:8: malformed XML: closing tag </cpu> does not match <pci> opened at line 3");
  check_bad("empty-system.xml", -ENODATA, "empty-system.xml:2: empty topology");
  check_bad("bad-class.xml", -EINVAL, "bad-class.xml:4: <pci> has a bad class \"network\"");
  check_bad("bad-root.xml", -EINVAL, "bad-root.xml:2: root element <machine> is neither");
  check_bad("bad-hwloc-pci.xml", -EINVAL,
            "bad-hwloc-pci.xml:7: object has a bad pci_type \"three-d controller\"");
}

TEST(unknown_pci_classes_are_ignored) {
  struct rail_topo *t = load_fixture("topo/bad", "unknown-class.xml", NULL);
  if (t == NULL) return;
  CHECK_EQ_INT(t->ngpus, 1);
  CHECK_EQ_INT(t->nnics, 1);
  CHECK_EQ_STR(t->nics[0].name, "eth0");
  CHECK_EQ_INT(rail_topo_find_pci(t, "0000:1b:00.0"), -1);
  CHECK_EQ_INT(t->path[0][0], RAIL_PATH_PIX);
  rail_topo_free(t);
}

TEST(xml_reader_reports_the_line) {
  static const struct {
    const char *text, *msg;
  } cases[] = {
      {"<a>\n<b x=\"1\">\n</a>",
       "t.xml:3: malformed XML: closing tag </a> does not match <b> opened at line 2"},
      {"<a x=1/>", "t.xml:1: malformed XML: value of attribute x in <a> is not quoted"},
      {"<a x=\"1\" x=\"2\"/>", "attribute x repeated"},
      {"<a>\n<!-- never closed\n</a>", "t.xml:2: malformed XML: unterminated comment"},
      {"<a/>\n<b/>", "t.xml:2: malformed XML: a second root element"},
      {"<a>\n<b>\n", "unexpected end of file: <b> opened at line 2 is not closed"},
      {"<a y=\"&bogus;\"/>", "unknown entity"},
      {"junk", "text outside the root element"},
      {"<a x></a>", "attribute x of <a> has no value"},
  };
  for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
    struct rail_xml_node *root = NULL;
    capture_start();
    CHECK_EQ_INT(rail_xml_parse_buf("t.xml", cases[i].text, strlen(cases[i].text), &root), -EINVAL);
    capture_stop();
    CHECK(root == NULL);
    if (strstr(logbuf, cases[i].msg) == NULL) {
      fprintf(stderr, "%s: case %zu: log lacks \"%s\":\n%s", rail_test_current, i, cases[i].msg,
              logbuf);
      rail_test_failed_checks++;
    }
  }
}

TEST(xml_reader_decodes_and_skips) {
  static const char text[] =
      "<?xml version=\"1.0\"?>\n<!DOCTYPE t [ <!ENTITY x \"y\"> ]>\n"
      "<!-- c --><t a='1 &amp; 2' b=\"&lt;&#65;&#x42;&gt;\">text<![CDATA[<x>]]>"
      "<u/><v></v></t>\n";
  struct rail_xml_node *root = NULL;
  CHECK_EQ_INT(rail_xml_parse_buf("t.xml", text, strlen(text), &root), 0);
  if (root == NULL) return;
  CHECK_EQ_STR(root->name, "t");
  CHECK_EQ_STR(rail_xml_attr(root, "a"), "1 & 2");
  CHECK_EQ_STR(rail_xml_attr(root, "b"), "<AB>");
  CHECK(rail_xml_attr(root, "c") == NULL);
  CHECK(root->child != NULL && strcmp(root->child->name, "u") == 0);
  CHECK(root->child->next != NULL && strcmp(root->child->next->name, "v") == 0);
  CHECK_EQ_INT(root->line, 3);
  rail_xml_free(root);
}

/* Element text (hwloc keeps its matrices there), and a hostile element of
 * many attributes: parsed, and a repeat far from the first still found
 * and named at its own line. */
TEST(xml_reader_text_and_many_attributes) {
  static const char text[] = "<a><v> 1 &amp; 2 </v><w/>\n<x>one</x></a>";
  struct rail_xml_node *root = NULL;
  size_t len = 0, cap = 40 * 20000 + 64;
  char *big = malloc(cap);
  int rc;

  CHECK_EQ_INT(rail_xml_parse_buf("t.xml", text, strlen(text), &root), 0);
  if (root != NULL) {
    CHECK(root->text == NULL);
    CHECK_EQ_STR(rail_xml_child(root, "v")->text, "1 & 2");
    CHECK(rail_xml_child(root, "w")->text == NULL);
    CHECK_EQ_STR(rail_xml_child(root, "x")->text, "one");
    rail_xml_free(root);
  }
  if (big == NULL) return;
  len += (size_t)snprintf(big + len, cap - len, "<a");
  for (int i = 0; i < 20000; i++)
    len += (size_t)snprintf(big + len, cap - len, " k%d=\"%d\"%s", i, i, i == 10000 ? "\n" : "");
  snprintf(big + len, cap - len, "/>");
  root = NULL;
  CHECK_EQ_INT(rail_xml_parse_buf("t.xml", big, strlen(big), &root), 0);
  if (root != NULL) {
    CHECK_EQ_INT(root->nattrs, 20000);
    CHECK_EQ_STR(rail_xml_attr(root, "k19999"), "19999");
    rail_xml_free(root);
  }
  snprintf(big + len, cap - len, " k3=\"again\"/>");
  root = NULL;
  capture_start();
  rc = rail_xml_parse_buf("t.xml", big, strlen(big), &root);
  capture_stop();
  CHECK_EQ_INT(rc, -EINVAL);
  CHECK(strstr(logbuf, "t.xml:2: malformed XML: attribute k3 repeated in <a>") != NULL);
  free(big);
}

TEST(masks_to_cpulists) {
  char buf[64];
  CHECK_EQ_INT(rail_topo_mask_to_list("00000000,0000ffff,ffffffff", buf, sizeof(buf)), 0);
  CHECK_EQ_STR(buf, "0-47");
  CHECK_EQ_INT(rail_topo_mask_to_list("0x00ff00ff", buf, sizeof(buf)), 0);
  CHECK_EQ_STR(buf, "0-7,16-23");
  CHECK_EQ_INT(rail_topo_mask_to_list("0x00000001,0x00000000", buf, sizeof(buf)), 0);
  CHECK_EQ_STR(buf, "32");
  CHECK_EQ_INT(rail_topo_mask_to_list("ffffffffff", buf, sizeof(buf)), -EINVAL);
  /* hwloc writes an all-zero word as nothing (hwloc-calc reads it so). */
  CHECK_EQ_INT(rail_topo_mask_to_list("0x00000303,0x03030000,,0x0", buf, sizeof(buf)), 0);
  CHECK_EQ_STR(buf, "80-81,88-89,96-97,104-105");
  CHECK_EQ_INT(rail_topo_mask_to_list("0000,,ffff", buf, sizeof(buf)), 0);
  CHECK_EQ_STR(buf, "0-15");
  CHECK_EQ_INT(rail_topo_mask_to_list(",", buf, sizeof(buf)), -EINVAL);
  CHECK_EQ_INT(rail_topo_mask_to_list("00000000", buf, sizeof(buf)), -EINVAL);
  CHECK_EQ_INT(rail_topo_mask_to_list("zz", buf, sizeof(buf)), -EINVAL);
}

/* Every prefix and many one-byte corruptions of real files: an error or a
 * model, never a crash (run under ASan in CI). */
TEST(damaged_files_never_crash) {
  static const char *const files[] = {"nccl-azure-ndv4.xml", "hwloc-2numa-3gpu-2nic.xml"};
  static const char junk[] = "<>\"'&=/ \0x";
  int loaded = 0, failed = 0;
  capture_start();
  for (size_t f = 0; f < sizeof(files) / sizeof(files[0]); f++) {
    char path[PATH_MAX], *text;
    size_t len;
    snprintf(path, sizeof(path), "%s/tests/fixtures/topo/%s", src_dir(), files[f]);
    text = read_all(path);
    CHECK(text != NULL);
    if (text == NULL) continue;
    len = strlen(text);
    for (size_t cut = 0; cut <= len; cut += 1 + len / 200) {
      for (size_t j = 0; j < sizeof(junk); j++) {
        char *copy = malloc(len + 1);
        struct rail_xml_node *root = NULL;
        struct rail_topo *t = NULL;
        size_t n = j == 0 ? cut : len; /* first a prefix, then one byte changed */
        memcpy(copy, text, len + 1);
        if (j > 0 && cut < len) copy[cut] = junk[j - 1];
        if (rail_xml_parse_buf(files[f], copy, n, &root) == 0) {
          int rc = strcmp(root->name, "system") == 0 ? rail_topo_load_nccl_xml(files[f], root, &t)
                                                     : rail_topo_load_hwloc_xml(files[f], root, &t);
          if (rc == 0)
            loaded++, rail_topo_free(t);
          else
            failed++;
          rail_xml_free(root);
        } else {
          failed++;
        }
        free(copy);
      }
    }
    free(text);
  }
  capture_stop();
  CHECK(loaded > 0 && failed > 0);
}

RAIL_TEST_MAIN(bad_input_gives_clear_errors, unknown_pci_classes_are_ignored,
               xml_reader_reports_the_line, xml_reader_decodes_and_skips,
               xml_reader_text_and_many_attributes, masks_to_cpulists, damaged_files_never_crash)
