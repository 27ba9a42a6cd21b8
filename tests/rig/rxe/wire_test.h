/* wire_test.h: what verbs_wire_test's files share (see verbs_wire_test.c
 * for the program): its options and role, FAIL, the logger and the WARNs it
 * keeps, the side channel, the devices and the connection, the data helpers,
 * and the scenarios child() dispatches to. The globals carry a wire_ prefix:
 * each process (sender, receiver, bw1) sets them up once and the scenarios
 * read them. */
#ifndef RAIL_TESTS_RIG_RXE_WIRE_TEST_H
#define RAIL_TESTS_RIG_RXE_WIRE_TEST_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

#include "common/log.h"
#include "net/verbs/api.h"
#include "net/verbs/conn.h"
#include "net/verbs/dev.h"

#define MAX_INFLIGHT RAIL_VERBS_FIFO
#define SLOT_BYTES (4u << 20)

struct wire_opt {
  const char *mode;
  char send_devs[128], recv_devs[128];
  int qps, inflight, iters, idle_us, timeout_ms;
  size_t size;
};
extern struct wire_opt wire_opt;

extern const char *wire_role;

#define FAIL(...)                                                                                  \
  do {                                                                                             \
    fprintf(stderr, "[%s] FAIL: ", wire_role);                                                     \
    fprintf(stderr, __VA_ARGS__);                                                                  \
    fputc('\n', stderr);                                                                           \
    exit(1);                                                                                       \
  } while (0)

double now_s(void);

/* Logs go to stderr with the role, and WARNs are kept in wire_warns so that
 * scenarios can check what was said. */
extern char wire_warns[8192];
void logger(int level, unsigned long flags, const char *file, int line, const char *fmt, ...);

/* Side channel: length-prefixed blobs with a deadline; FAIL on error. */
void chan_send(int fd, const void *buf, uint32_t len);
uint32_t chan_recv(int fd, void *buf, uint32_t cap);

/* Devices and connection. */
extern struct rail_verbs_port wire_ports[RAIL_VERBS_MAX_PORTS];
extern int wire_nports;
extern struct rail_verbs_nic *wire_nics[RAIL_VERBS_MAX_RAILS];
extern int wire_nnics;
void open_nics(const char *list);
struct rail_verbs_conn *connect_side(int fd, int is_sender, int watch);

/* One-buffer requests, as the scenarios post them (a flush of one byte). */
static inline int xsend(struct rail_verbs_conn *c, void *p, size_t n, struct rail_verbs_mr *mr,
                        struct rail_verbs_req **r) {
  return rail_verbs_send_post(c, p, n, 0, mr, r);
}

static inline int xrecv(struct rail_verbs_conn *c, void *p, size_t n, struct rail_verbs_mr *mr,
                        struct rail_verbs_req **r) {
  return rail_verbs_recv_post(c, 1, &p, &n, NULL, &mr, r);
}

static inline int xflush(struct rail_verbs_conn *c, void *p, struct rail_verbs_mr *mr,
                         struct rail_verbs_req **r) {
  int one = 1;
  return rail_verbs_flush_post(c, 1, &p, &one, &mr, r);
}

/* Data. */
void fill(uint8_t *p, size_t len, uint32_t msg);
long check(const uint8_t *p, size_t len, uint32_t msg);
size_t sched_size(int i);
int wait_req(struct rail_verbs_req *r, size_t *size, double secs);

struct req_slot {
  struct rail_verbs_req *req;
  int msg;
};

/* The scenarios (wire_data.c, wire_fault.c, wire_transport.c). */
extern int wire_streaming_fd;
int run_sizes(struct rail_verbs_conn *c, int is_sender, int total);
int run_trunc(struct rail_verbs_conn *c, int is_sender);
int run_bw(struct rail_verbs_conn *c, int is_sender);
int run_bw1(void);
int run_badkey_receiver(struct rail_verbs_conn *c, int fd);
int run_badkey_sender(int fd);
int run_until_error(struct rail_verbs_conn *c, int is_sender, int status_fd);
int run_portdown(struct rail_verbs_conn *c, int is_sender, int fd);
int run_transport(int is_sender, int fd, const char *devs);

#endif
