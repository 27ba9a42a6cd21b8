/* unit.tools: the pure parts of the nccl-rail command: NCCL's bootstrap
 * interface rules (tools/doctor/bootif.c), the HOST:PORT syntax of the out-of-band
 * connections (tools/drive/oob.c), the option value checks (tools/cli/cli.c) and the
 * JSON reader that takes iperf3's results apart (tools/read/jread.c). */
#include <arpa/inet.h>
#include <errno.h>
#include <ifaddrs.h>
#include <net/if.h>
#include <netinet/in.h>

#include "tests/unit/test.h"
#include "tools/cli/cli.h"
#include "tools/doctor/bootif.h"
#include "tools/drive/oob.h"
#include "tools/read/jread.h"

/* A fake getifaddrs list: entries in the order given. */
struct fake_if {
  struct ifaddrs ifa;
  struct sockaddr_storage addr, mask;
  char name[IF_NAMESIZE];
};

static struct fake_if fakes[16];
static int nfakes;

static void fake_reset(void) {
  memset(fakes, 0, sizeof(fakes));
  nfakes = 0;
}

static void fake_add(const char *name, const char *addr, int prefix, int running) {
  struct fake_if *f = &fakes[nfakes];

  snprintf(f->name, sizeof(f->name), "%s", name);
  f->ifa.ifa_name = f->name;
  f->ifa.ifa_flags = IFF_UP | (running ? IFF_RUNNING : 0);
  if (strchr(addr, ':') != NULL) {
    struct sockaddr_in6 *a = (struct sockaddr_in6 *)&f->addr, *m = (struct sockaddr_in6 *)&f->mask;
    a->sin6_family = m->sin6_family = AF_INET6;
    inet_pton(AF_INET6, addr, &a->sin6_addr);
    for (int b = 0; b < prefix; b++)
      m->sin6_addr.s6_addr[b / 8] |= (uint8_t)(0x80 >> (b % 8));
  } else {
    struct sockaddr_in *a = (struct sockaddr_in *)&f->addr, *m = (struct sockaddr_in *)&f->mask;
    a->sin_family = m->sin_family = AF_INET;
    inet_pton(AF_INET, addr, &a->sin_addr);
    m->sin_addr.s_addr = htonl(prefix ? ~0u << (32 - prefix) : 0);
  }
  f->ifa.ifa_addr = (struct sockaddr *)&f->addr;
  f->ifa.ifa_netmask = (struct sockaddr *)&f->mask;
  if (nfakes > 0) fakes[nfakes - 1].ifa.ifa_next = &f->ifa;
  nfakes++;
}

static const char *pick(const char *ifname, const char *family, const char *comm_id) {
  static struct rail_bootif b;
  struct rail_bootif_env env = {ifname, family, comm_id};

  memset(&b, 0, sizeof(b));
  if (rail_bootif_pick(&fakes[0].ifa, &env, &b) != 0) return "(none)";
  return b.name;
}

/* A typical GPU node: lo, a docker bridge, the management NIC, IPoIB. */
static void fake_node(void) {
  fake_reset();
  fake_add("lo", "127.0.0.1", 8, 1);
  fake_add("docker0", "172.17.0.1", 16, 1);
  fake_add("eth0", "10.0.0.5", 24, 1);
  fake_add("ib0", "10.1.0.5", 16, 1);
  fake_add("eth0", "fd00::5", 64, 1);
}

TEST(bootif_prefers_ib_then_anything_but_docker_and_lo) {
  fake_node();
  CHECK_EQ_STR(pick(NULL, NULL, NULL), "ib0");
  fakes[3].ifa.ifa_flags = IFF_UP; /* ib0 not running */
  CHECK_EQ_STR(pick(NULL, NULL, NULL), "eth0");
  fakes[2].ifa.ifa_flags = IFF_UP;
  fakes[4].ifa.ifa_flags = IFF_UP;
  CHECK_EQ_STR(pick(NULL, NULL, NULL), "docker0");
  fakes[1].ifa.ifa_flags = IFF_UP;
  CHECK_EQ_STR(pick(NULL, NULL, NULL), "lo");
  fakes[0].ifa.ifa_flags = IFF_UP;
  CHECK_EQ_STR(pick(NULL, NULL, NULL), "(none)");
}

TEST(bootif_socket_ifname_is_a_prefix_list_with_exclusions) {
  fake_node();
  CHECK_EQ_STR(pick("eth", NULL, NULL), "eth0");
  CHECK_EQ_STR(pick("^ib,lo", NULL, NULL), "docker0");
  CHECK_EQ_STR(pick("=eth", NULL, NULL), "(none)");
  CHECK_EQ_STR(pick("=eth0", NULL, NULL), "eth0");
  CHECK_EQ_STR(pick("bond", NULL, NULL), "(none)"); /* set and matching nothing: none */
  /* One character is not honoured: the automatic order applies. */
  CHECK_EQ_STR(pick("e", NULL, NULL), "ib0");
}

TEST(bootif_family_and_comm_id_subnet) {
  struct rail_bootif b;
  struct rail_bootif_env env = {"eth", "AF_INET6", NULL};
  char addr[64];

  fake_node();
  CHECK_EQ_INT(rail_bootif_pick(&fakes[0].ifa, &env, &b), 0);
  inet_ntop(AF_INET6, &((struct sockaddr_in6 *)&b.addr)->sin6_addr, addr, sizeof(addr));
  CHECK_EQ_STR(addr, "fd00::5");
  CHECK_EQ_INT(b.prefix_len, 64);
  env.socket_family = "inet";
  CHECK_EQ_INT(rail_bootif_pick(&fakes[0].ifa, &env, &b), 0);
  CHECK_EQ_INT(b.family_ignored, 1);
  CHECK_EQ_INT(b.addr.ss_family, AF_INET);
  /* Without ib*, NCCL_COMM_ID's subnet comes before "anything else". */
  fakes[3].ifa.ifa_flags = IFF_UP;
  CHECK_EQ_STR(pick(NULL, NULL, "172.17.3.4:5000"), "docker0");
  CHECK_EQ_STR(pick(NULL, NULL, "192.0.2.9:5000"), "eth0");
}

TEST(oob_hostport_syntax) {
  char host[64];
  int port = 0;

  CHECK_EQ_INT(rail_oob_split_hostport("node1:1234", host, sizeof(host), &port, 0), 0);
  CHECK_EQ_STR(host, "node1");
  CHECK_EQ_INT(port, 1234);
  CHECK_EQ_INT(rail_oob_split_hostport("[fd00::1]:99", host, sizeof(host), &port, 0), 0);
  CHECK_EQ_STR(host, "fd00::1");
  CHECK_EQ_INT(rail_oob_split_hostport("node1", host, sizeof(host), &port, 0), -EINVAL);
  CHECK_EQ_INT(rail_oob_split_hostport("node1", host, sizeof(host), &port, 18519), 0);
  CHECK_EQ_INT(port, 18519);
  CHECK_EQ_INT(rail_oob_split_hostport("fd00::1", host, sizeof(host), &port, 7), 0);
  CHECK_EQ_STR(host, "fd00::1");
  CHECK_EQ_INT(port, 7);
  CHECK_EQ_INT(rail_oob_split_hostport("node1:0", host, sizeof(host), &port, 7), -EINVAL);
  CHECK_EQ_INT(rail_oob_split_hostport("node1:12x", host, sizeof(host), &port, 7), -EINVAL);
}

TEST(cli_values_are_checked) {
  int i = 0;
  double x = 0;

  CHECK_EQ_INT(rail_cli_int("t", "n", "0x10", 0, 100, &i), 0);
  CHECK_EQ_INT(i, 16);
  CHECK_EQ_INT(rail_cli_int("t", "n", "101", 0, 100, &i), -EINVAL);
  CHECK_EQ_INT(rail_cli_int("t", "n", "5x", 0, 100, &i), -EINVAL);
  CHECK_EQ_INT(rail_cli_int("t", "n", "", 0, 100, &i), -EINVAL);
  CHECK_EQ_INT(i, 16);
  CHECK_EQ_INT(rail_cli_double("t", "s", "0.25", 0.01, 60, &x), 0);
  CHECK(x == 0.25);
  CHECK_EQ_INT(rail_cli_double("t", "s", "nan", 0.01, 60, &x), -EINVAL);
  CHECK_EQ_INT(rail_cli_double("t", "s", "61", 0.01, 60, &x), -EINVAL);
}

TEST(jread_finds_nested_numbers) {
  static const char doc[] =
      "{\"start\": {\"connected\": [{\"socket\": 5}]}, \"intervals\": [],\n"
      " \"end\": {\"streams\": [{\"sender\": {\"bits_per_second\": 1}}],\n"
      "  \"sum_sent\": {\"bits_per_second\": 9.5e9, \"retransmits\": 3},\n"
      "  \"sum_received\": {\"seconds\": 1.0, \"bits_per_second\": 8.0e9},\n"
      "  \"note\": \"a \\\"quoted\\\" \\u00e9 value\", \"ok\": true, \"none\": null}}";
  struct jread_doc *d = NULL;
  double v = 0;

  CHECK_EQ_INT(rail_jread_parse(doc, &d), 0);
  CHECK_EQ_INT(rail_jread_number(d, "end.sum_received.bits_per_second", &v), 0);
  CHECK(v == 8.0e9);
  CHECK_EQ_INT(rail_jread_number(d, "end.sum_sent.bits_per_second", &v), 0);
  CHECK(v == 9.5e9);
  /* A key of the same name deeper in another member is not it. */
  CHECK_EQ_INT(rail_jread_number(d, "end.bits_per_second", &v), -ENOENT);
  CHECK_EQ_INT(rail_jread_number(d, "end.note", &v), -EINVAL);
  CHECK_EQ_INT(rail_jread_number(d, "start.connected", &v), -EINVAL);
  rail_jread_free(d);
}

TEST(jread_rejects_what_is_not_json) {
  static const char *const bad[] = {"",
                                    "{",
                                    "{\"a\": }",
                                    "{\"a\": 1,}",
                                    "[1 2]",
                                    "{\"a\": 1} x",
                                    "{\"a\": \"\\q\"}",
                                    "{a: 1}",
                                    "{\"a\": 01}"};
  struct jread_doc *d = NULL;

  for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
    int rc = rail_jread_parse(bad[i], &d);
    if (rc != -EINVAL) fprintf(stderr, "accepted: %s\n", bad[i]);
    CHECK_EQ_INT(rc, -EINVAL);
    CHECK(d == NULL);
  }
}

RAIL_TEST_MAIN(bootif_prefers_ib_then_anything_but_docker_and_lo,
               bootif_socket_ifname_is_a_prefix_list_with_exclusions,
               bootif_family_and_comm_id_subnet, oob_hostport_syntax, cli_values_are_checked,
               jread_finds_nested_numbers, jread_rejects_what_is_not_json)
