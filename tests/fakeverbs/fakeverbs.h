/* The fake verbs provider's control interface, for tests.
 *
 * libfakeverbs.so stands in for libibverbs.so.1 behind the plugin's dlopen
 * seam (net/verbs/api.h; NCCL_RAIL_VERBS_LIB names it). It exports the
 * ibv_* entry points the plugin resolves and implements, in memory, what a
 * reliable-connected HCA does for them: devices with one RoCE port, PDs,
 * MRs with the access and bounds checks of a real responder, CQs, RC QPs
 * with their state machine, RDMA WRITE, WRITE_WITH_IMM and READ, and async
 * events. Peers are found by GID and QP number: in the same process a work
 * request is carried out when it is posted; in another process (the ABI
 * harness's two processes) it travels over a Unix socket to that process's
 * "HCA" thread, which writes the memory and answers, so a peer whose
 * application is stopped still has its writes placed and acknowledged.
 *
 * What it models, and on purpose:
 *  - a registration pins what it covers: for shared mappings the MR keeps
 *    its own mapping of the registered pages (mremap with old size 0), so
 *    after the application remaps the address, writes through the old MR
 *    still go to the old pages, as on real hardware;
 *  - an RC requester whose peer does not answer (QP gone, port down,
 *    device frozen, process killed) gets IBV_WC_RETRY_EXC_ERR after the QP's
 *    retry time, 4.096 us * 2^timeout * (retry_cnt + 1), and the QP goes to
 *    the error state; later work requests are flushed;
 *  - a write with immediate that finds no posted receive waits (RNR, retried
 *    for ever with rnr_retry 7), and completions stay in order per QP;
 *  - zero-length RDMA operations check no key (IB spec, as hardware does);
 *  - keys are built as mlx5 and rxe build them, index << 8 | an 8-bit
 *    variant, and a deregistered MR's index is reused (after a short
 *    quarantine, "poisoned"); any use of a key whose MR is gone (a late
 *    write, a credit kept too long) is reported on stderr and aborts the
 *    process, so the test that caused it fails (fk_keys.c says why and
 *    how; FAKEVERBS_STALE_KEYS=count only counts, in stats).
 *
 * Not modelled: SEND/RECV with data, atomics, memory windows, SRQs,
 * completion channels (the plugin uses none of them), and the retry
 * timeout of a peer in another process that stops answering without dying
 * (its "HCA" is a thread of the stopped process; a real one would answer).
 *
 * Configuration, read at the first call:
 *   FAKEVERBS_DEVICES   comma-separated device names (default "fake0,fake1")
 *   FAKEVERBS_FORK      "disabled" (default) or "enabled": what
 *                       ibv_is_fork_initialized() reports before ibv_fork_init;
 *                       "unneeded" (read at every call): what a kernel that
 *                       copies pinned pages at fork reports
 *   FAKEVERBS_STALE_KEYS "abort" (default) or "count": what a use of a
 *                       deregistered MR's key does besides being refused
 *
 * Thread-safe: one lock inside. Functions return 0 or -errno. */
#ifndef RAIL_TESTS_FAKEVERBS_H
#define RAIL_TESTS_FAKEVERBS_H

#include <stdint.h>

/* What a QP was set up with. */
struct fakeverbs_qp {
  int state;  /* enum ibv_qp_state */
  int access; /* IBV_ACCESS_REMOTE_* it accepts */
  int timeout, retry_cnt, rnr_retry;
};

struct fakeverbs_stats {
  int calls_before_fork_init; /* verbs entry points called before ibv_fork_init */
  int fork_init_calls;
  int live_mrs, live_qps, live_cqs, live_pds, open_contexts;
  long reg_mr_calls, dereg_mr_calls;
  /* Bytes of RDMA writes completed from QPs of each device, in
   * FAKEVERBS_DEVICES order. */
  uint64_t tx_bytes[8];
  /* Uses of a key whose MR was deregistered (fk_keys.c): each one is a
   * write that hardware refuses or, 1 time in 256, lands in another MR. */
  long stale_key_uses;
};

/* The control entry points, resolved with dlsym from the library the test
 * opened (tests/fakeverbs/fakeverbs_ctl.h does that). */
struct fakeverbs_ctl {
  /* Port 1 of `dev` goes down (active 0) or up: an async event on every
   * context of the device; while down, the port neither sends nor answers. */
  int (*port_set)(const char *dev, int active);
  /* An IBV_EVENT_DEVICE_FATAL on every context of `dev`. */
  int (*device_fatal)(const char *dev);
  /* The next `count` send work requests posted on QPs of `dev` whose opcode
   * is `opcode` (enum ibv_wr_opcode, or -1 for any) complete with `status`
   * (enum ibv_wc_status) and take their QP to the error state. */
  int (*inject_error)(const char *dev, int opcode, int status, int count);
  /* A frozen device neither sends nor answers (a host gone): its peers'
   * requests time out by their QPs' retry time. */
  int (*freeze)(const char *dev, int frozen);
  /* What a key registers: address (the iova), length, access flags. */
  int (*mr_info)(uint32_t key, uint64_t *addr, uint64_t *len, int *access);
  int (*qp_info)(uint32_t qpn, struct fakeverbs_qp *out);
  void (*stats)(struct fakeverbs_stats *st);
};

#endif
