/* unit.net_wire: the one wire module (net/core/wire.h). Every format
 * round-trips, and every decoder refuses what a lying or broken peer could
 * send: short input, another version, out-of-range fields, lengths that
 * overflow. */
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <string.h>

#include "net/core/wire.h"
#include "test.h"

static struct sockaddr_storage nt_v4(const char *ip, unsigned port) {
  struct sockaddr_storage a;
  struct sockaddr_in *in = (struct sockaddr_in *)&a;

  memset(&a, 0, sizeof(a));
  in->sin_family = AF_INET;
  in->sin_port = htons((uint16_t)port);
  inet_pton(AF_INET, ip, &in->sin_addr);
  return a;
}

static struct sockaddr_storage nt_v6(const char *ip, unsigned port) {
  struct sockaddr_storage a;
  struct sockaddr_in6 *in6 = (struct sockaddr_in6 *)&a;

  memset(&a, 0, sizeof(a));
  in6->sin6_family = AF_INET6;
  in6->sin6_port = htons((uint16_t)port);
  inet_pton(AF_INET6, ip, &in6->sin6_addr);
  return a;
}

static int nt_same(const struct sockaddr_storage *a, const struct sockaddr_storage *b) {
  if (a->ss_family != b->ss_family) return 0;
  if (a->ss_family == AF_INET) return memcmp(a, b, sizeof(struct sockaddr_in)) == 0;
  return memcmp(&((const struct sockaddr_in6 *)a)->sin6_addr,
                &((const struct sockaddr_in6 *)b)->sin6_addr, 16) == 0 &&
         ((const struct sockaddr_in6 *)a)->sin6_port == ((const struct sockaddr_in6 *)b)->sin6_port;
}

TEST(handle_round_trips_and_names_what_fits) {
  struct rail_wire_handle h, back;
  uint8_t buf[RAIL_WIRE_HANDLE_BYTES];

  memset(&h, 0, sizeof(h));
  h.transport = 1;
  h.nrails = 2;
  h.nonce = 0x0123456789abcdefull;
  h.fp = (struct rail_topo_fp){.version = 1,
                               .ngpus = 8,
                               .ngroups = 4,
                               .nics_per_group = 2,
                               .group_mbps = 400000,
                               .nic_mbps = 200000,
                               .hash = 0xdeadbeef};
  h.rails[0] = nt_v4("10.0.0.1", 5000);
  h.rails[1] = nt_v6("fd00::1:2", 6000);
  CHECK_EQ_INT(rail_wire_handle_encode(&h, buf, sizeof(buf)), 2);
  CHECK(rail_wire_handle_token(buf) == 0);
  CHECK_EQ_INT(rail_wire_handle_decode(buf, sizeof(buf), &back), 0);
  CHECK_EQ_INT(back.nrails, 2);
  CHECK_EQ_INT(back.transport, 1);
  CHECK(back.nonce == h.nonce);
  CHECK(memcmp(&back.fp, &h.fp, sizeof(h.fp)) == 0);
  CHECK(nt_same(&back.rails[0], &h.rails[0]));
  CHECK(nt_same(&back.rails[1], &h.rails[1]));

  /* The token is the connecting process's; the rest does not move. */
  rail_wire_handle_set_token(buf, 0x7f00deadbeefull);
  CHECK(rail_wire_handle_token(buf) == 0x7f00deadbeefull);
  CHECK_EQ_INT(rail_wire_handle_decode(buf, sizeof(buf), &back), 0);
  CHECK(back.nonce == h.nonce);

  /* Eight IPv4 rails fit; of eight IPv6 rails, four. */
  h.nrails = 8;
  for (int r = 0; r < 8; r++) {
    char ip[32];
    snprintf(ip, sizeof(ip), "10.0.%d.1", r);
    h.rails[r] = nt_v4(ip, 4000 + (unsigned)r);
  }
  CHECK_EQ_INT(rail_wire_handle_encode(&h, buf, sizeof(buf)), 8);
  CHECK_EQ_INT(rail_wire_handle_decode(buf, sizeof(buf), &back), 0);
  CHECK_EQ_INT(back.nrails, 8);
  CHECK(nt_same(&back.rails[7], &h.rails[7]));
  for (int r = 0; r < 8; r++)
    h.rails[r] = nt_v6("fd00::9", 4000 + (unsigned)r);
  CHECK_EQ_INT(rail_wire_handle_encode(&h, buf, sizeof(buf)), 4);
  CHECK_EQ_INT(rail_wire_handle_decode(buf, sizeof(buf), &back), 0);
  CHECK_EQ_INT(back.nrails, 4);
  h.rails[0].ss_family = AF_UNIX;
  CHECK_EQ_INT(rail_wire_handle_encode(&h, buf, sizeof(buf)), -EINVAL);
}

TEST(handle_decoder_refuses_what_is_not_one) {
  struct rail_wire_handle h, back;
  uint8_t buf[RAIL_WIRE_HANDLE_BYTES], bad[RAIL_WIRE_HANDLE_BYTES];

  memset(&h, 0, sizeof(h));
  h.nrails = 1;
  h.rails[0] = nt_v4("10.0.0.1", 1);
  CHECK_EQ_INT(rail_wire_handle_encode(&h, buf, sizeof(buf)), 1);
  CHECK_EQ_INT(rail_wire_handle_decode(buf, sizeof(buf) - 1, &back), -EPROTO); /* short */
  memcpy(bad, buf, sizeof(buf));
  bad[0] ^= 0xff; /* magic */
  CHECK_EQ_INT(rail_wire_handle_decode(bad, sizeof(bad), &back), -EPROTO);
  memcpy(bad, buf, sizeof(buf));
  bad[4] = 99; /* a future version */
  CHECK_EQ_INT(rail_wire_handle_decode(bad, sizeof(bad), &back), -EPROTONOSUPPORT);
  CHECK_EQ_INT(rail_wire_handle_version(bad), 99);
  memcpy(bad, buf, sizeof(buf));
  bad[6] = 9; /* more rails than exist */
  CHECK_EQ_INT(rail_wire_handle_decode(bad, sizeof(bad), &back), -EPROTO);
  bad[6] = 0;
  CHECK_EQ_INT(rail_wire_handle_decode(bad, sizeof(bad), &back), -EPROTO);
  memcpy(bad, buf, sizeof(buf));
  bad[6] = 5; /* five rails, of which four are not there: families 0 */
  CHECK_EQ_INT(rail_wire_handle_decode(bad, sizeof(bad), &back), -EPROTO);
  memcpy(bad, buf, sizeof(buf));
  bad[32] = 5; /* an unknown family */
  CHECK_EQ_INT(rail_wire_handle_decode(bad, sizeof(bad), &back), -EPROTO);
  memcpy(bad, buf, sizeof(buf));
  /* Five IPv6 rails would run into the token: never read past 120. */
  bad[6] = 5;
  for (int i = 0; i < 5; i++)
    bad[32 + 19 * i] = 6;
  CHECK_EQ_INT(rail_wire_handle_decode(bad, sizeof(bad), &back), -EPROTO);
}

TEST(hello_round_trips_and_checks_every_range) {
  struct rail_wire_hello h = {.kind = RAIL_WIRE_HELLO_DATA,
                              .rail = 7,
                              .stream = 15,
                              .nonce = 42,
                              .conn_id = 77,
                              .nrails = 8,
                              .nstreams = 16,
                              .transport = 1},
                         back;
  uint8_t buf[RAIL_WIRE_HELLO_BYTES], bad[RAIL_WIRE_HELLO_BYTES];

  h.fp.hash = 1234;
  rail_wire_hello_encode(&h, buf);
  CHECK_EQ_INT(rail_wire_hello_decode(buf, sizeof(buf), &back), 0);
  CHECK_EQ_INT(back.kind, RAIL_WIRE_HELLO_DATA);
  CHECK_EQ_INT(back.rail, 7);
  CHECK_EQ_INT(back.stream, 15);
  CHECK(back.nonce == 42 && back.conn_id == 77);
  CHECK_EQ_INT(back.fp.hash, 1234);
  CHECK_EQ_INT(back.nrails, 8);
  CHECK_EQ_INT(back.nstreams, 16);
  CHECK_EQ_INT(back.transport, 1);
  CHECK_EQ_INT(rail_wire_hello_decode(buf, sizeof(buf) - 1, &back), -EPROTO);
  memset(bad, 'G', sizeof(bad));
  CHECK_EQ_INT(rail_wire_hello_decode(bad, sizeof(bad), &back), -EPROTO);
  struct {
    int off, value, rc;
  } cases[] = {
      {4, 2, -EPROTONOSUPPORT},  /* a hello of protocol 2 */
      {43, 2, -EPROTONOSUPPORT}, /* another record format */
      {44, 9, -EPROTONOSUPPORT}, /* another chunk format */
      {5, 2, -EPROTO},           /* kind */
      {6, 8, -EPROTO},           /* rail >= nrails */
      {7, 16, -EPROTO},          /* stream >= nstreams */
      {40, 0, -EPROTO},          /* no rails */
      {40, 9, -EPROTO},          /* nine rails */
      {41, 17, -EPROTO},         /* seventeen streams */
  };
  for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
    memcpy(bad, buf, sizeof(buf));
    bad[cases[i].off] = (uint8_t)cases[i].value;
    CHECK_EQ_INT(rail_wire_hello_decode(bad, sizeof(bad), &back), cases[i].rc);
  }
  /* A control hello names stream 0. */
  h.kind = RAIL_WIRE_HELLO_CONTROL;
  rail_wire_hello_encode(&h, bad);
  CHECK_EQ_INT(rail_wire_hello_decode(bad, sizeof(bad), &back), -EPROTO);
  h.stream = 0;
  rail_wire_hello_encode(&h, bad);
  CHECK_EQ_INT(rail_wire_hello_decode(bad, sizeof(bad), &back), 0);
}

TEST(record_round_trips_and_bounds_its_payload) {
  struct rail_wire_rec r = {.type = RAIL_WIRE_REC_MSG,
                            .flags = RAIL_WIRE_REC_INLINE,
                            .aux = 0x55,
                            .tag = -7,
                            .seq = 1ull << 40,
                            .arg = 16384,
                            .ack = 99},
                       back;
  uint8_t buf[RAIL_WIRE_REC_BYTES];
  size_t plen = 1;

  rail_wire_rec_encode(&r, buf);
  CHECK_EQ_INT(rail_wire_rec_decode(buf, sizeof(buf), &back, &plen), 0);
  CHECK(memcmp(&back, &r, sizeof(r)) == 0);
  CHECK_EQ_INT(plen, 16384);
  CHECK_EQ_INT(rail_wire_rec_decode(buf, sizeof(buf) - 1, &back, &plen), -EPROTO);
  r.arg = RAIL_WIRE_MAX_INLINE + 1ull; /* more payload than any peer may send */
  rail_wire_rec_encode(&r, buf);
  CHECK_EQ_INT(rail_wire_rec_decode(buf, sizeof(buf), &back, &plen), -EPROTO);
  r.arg = UINT64_MAX;
  rail_wire_rec_encode(&r, buf);
  CHECK_EQ_INT(rail_wire_rec_decode(buf, sizeof(buf), &back, &plen), -EPROTO);
  /* A notice of a large message names its buffer and has no payload,
   * whatever its size. */
  r.flags = RAIL_WIRE_REC_PAIRED;
  rail_wire_rec_encode(&r, buf);
  CHECK_EQ_INT(rail_wire_rec_decode(buf, sizeof(buf), &back, &plen), 0);
  CHECK_EQ_INT(back.flags, RAIL_WIRE_REC_PAIRED);
  CHECK_EQ_INT(plen, 0);
  /* An inline one that names its buffer carries its payload. */
  r.flags = RAIL_WIRE_REC_INLINE | RAIL_WIRE_REC_PAIRED;
  r.arg = 100;
  rail_wire_rec_encode(&r, buf);
  CHECK_EQ_INT(rail_wire_rec_decode(buf, sizeof(buf), &back, &plen), 0);
  CHECK_EQ_INT(plen, 100);
  r.type = RAIL_WIRE_REC_RTR;
  r.flags = RAIL_WIRE_REC_INLINE; /* payload on a record that has none */
  rail_wire_rec_encode(&r, buf);
  CHECK_EQ_INT(rail_wire_rec_decode(buf, sizeof(buf), &back, &plen), -EPROTO);
  r.flags = RAIL_WIRE_REC_PAIRED; /* only a message takes a buffer */
  rail_wire_rec_encode(&r, buf);
  CHECK_EQ_INT(rail_wire_rec_decode(buf, sizeof(buf), &back, &plen), -EPROTO);
  r.flags = 0x80;
  rail_wire_rec_encode(&r, buf);
  CHECK_EQ_INT(rail_wire_rec_decode(buf, sizeof(buf), &back, &plen), -EPROTO);
  r.flags = 0;
  r.type = 0;
  rail_wire_rec_encode(&r, buf);
  CHECK_EQ_INT(rail_wire_rec_decode(buf, sizeof(buf), &back, &plen), -EPROTO);
  r.type = RAIL_WIRE_REC_ABORT + 1;
  rail_wire_rec_encode(&r, buf);
  CHECK_EQ_INT(rail_wire_rec_decode(buf, sizeof(buf), &back, &plen), -EPROTO);
}

static int nt_chunk(uint32_t len, uint64_t offset, uint64_t total) {
  struct rail_wire_chunk c = {.len = len, .seq = 3, .offset = offset, .total = total}, back;
  uint8_t buf[RAIL_WIRE_CHUNK_BYTES];
  int rc;

  rail_wire_chunk_encode(&c, buf);
  rc = rail_wire_chunk_decode(buf, sizeof(buf), &back);
  if (rc == 0 &&
      (back.len != c.len || back.seq != c.seq || back.offset != c.offset || back.total != c.total))
    return -EBADMSG;
  return rc;
}

TEST(chunk_decoder_refuses_ranges_outside_the_message) {
  uint8_t buf[RAIL_WIRE_CHUNK_BYTES];
  struct rail_wire_chunk back;

  CHECK_EQ_INT(nt_chunk(4096, 0, 4096), 0);
  CHECK_EQ_INT(nt_chunk(5000, 0, 5000), 0); /* the last chunk may end unaligned */
  CHECK_EQ_INT(nt_chunk(904, 4096, 5000), 0);
  CHECK_EQ_INT(nt_chunk(8192, 1 << 20, 2 << 20), 0);
  CHECK_EQ_INT(nt_chunk(0, 0, 4096), -EPROTO);      /* empty */
  CHECK_EQ_INT(nt_chunk(4096, 0, 0), -EPROTO);      /* no message */
  CHECK_EQ_INT(nt_chunk(8192, 0, 4096), -EPROTO);   /* past the end */
  CHECK_EQ_INT(nt_chunk(4096, 100, 8192), -EPROTO); /* unaligned offset */
  CHECK_EQ_INT(nt_chunk(1000, 0, 8192), -EPROTO);   /* unaligned length, not the last */
  CHECK_EQ_INT(nt_chunk(8192, UINT64_MAX - 4095, 1 << 20), -EPROTO); /* wraps past 2^64 */
  CHECK_EQ_INT(nt_chunk(8192, (1ull << 63), 1 << 20), -EPROTO);
  CHECK_EQ_INT(nt_chunk(RAIL_WIRE_CHUNK_MAX_LEN + 4096, 0, 1ull << 30), -EPROTO);
  CHECK_EQ_INT(nt_chunk(4096, 0, (1ull << 30) + 4096), -EPROTO); /* larger than any message */
  memset(buf, 0, sizeof(buf));
  CHECK_EQ_INT(rail_wire_chunk_decode(buf, sizeof(buf), &back), -EPROTO); /* no magic */
  CHECK_EQ_INT(rail_wire_chunk_decode(buf, 3, &back), -EPROTO);
}

RAIL_TEST_MAIN(handle_round_trips_and_names_what_fits, handle_decoder_refuses_what_is_not_one,
               hello_round_trips_and_checks_every_range, record_round_trips_and_bounds_its_payload,
               chunk_decoder_refuses_ranges_outside_the_message)
