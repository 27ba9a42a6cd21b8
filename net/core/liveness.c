/* The dead-peer policy (liveness.h). */
#include "net/core/liveness.h"

#include <errno.h>
#include <linux/sockios.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/socket.h>

#include "common/log.h"

static void rail_liveness_opt(int fd, int level, int name, int value, const char *what) {
  if (setsockopt(fd, level, name, &value, sizeof(value)) != 0)
    RAIL_INFO(RAIL_SUBSYS_NET, "setsockopt %s=%d on fd %d failed: %s", what, value, fd,
              strerror(errno));
}

void rail_liveness_tune(int fd, int timeout_ms) {
  /* Three probes spread over the timeout: idle + 2 intervals ~ timeout. */
  int step_s = timeout_ms / 3000;

  if (step_s < 1) step_s = 1;
  rail_liveness_opt(fd, SOL_SOCKET, SO_KEEPALIVE, 1, "SO_KEEPALIVE");
  rail_liveness_opt(fd, IPPROTO_TCP, TCP_KEEPIDLE, step_s, "TCP_KEEPIDLE");
  rail_liveness_opt(fd, IPPROTO_TCP, TCP_KEEPINTVL, step_s, "TCP_KEEPINTVL");
  rail_liveness_opt(fd, IPPROTO_TCP, TCP_KEEPCNT, 2, "TCP_KEEPCNT");
}

int rail_liveness_check(int fd, struct rail_liveness *st, int timeout_ms, uint64_t now_ns) {
  struct tcp_info ti;
  socklen_t len = sizeof(ti);
  int outq = 0;

  memset(&ti, 0, sizeof(ti));
  if (getsockopt(fd, IPPROTO_TCP, TCP_INFO, &ti, &len) != 0) return -errno;
  if (ti.tcpi_state != TCP_ESTABLISHED && ti.tcpi_state != TCP_CLOSE_WAIT) return -ECONNRESET;
  /* SIOCOUTQ: bytes in the send queue not yet acknowledged, sent or not. */
  if (ioctl(fd, SIOCOUTQ, &outq) != 0) return -errno;
  if (outq <= 0) {
    st->busy_since_ns = 0;
    return 0;
  }
  if (st->busy_since_ns == 0) {
    st->busy_since_ns = now_ns;
    return 0;
  }
  /* Dead only when both hold: nothing at all has been heard for the
   * timeout (tcpi_last_ack_recv: any acknowledgement, zero-window probe
   * answers included), and the kernel's last two tries went unanswered
   * (retransmission timeouts with the window open, or zero-window probes
   * with it closed; an answer resets both counts). A live receiver whose
   * window is closed answers every probe, but the probes back off (up to
   * two minutes apart), so silence alone proves nothing. busy_since keeps
   * an idle spell before the bytes were queued from counting. */
  if (now_ns - st->busy_since_ns >= (uint64_t)timeout_ms * 1000000u &&
      ti.tcpi_last_ack_recv >= (uint32_t)timeout_ms &&
      (ti.tcpi_probes >= 2 || ti.tcpi_retransmits >= 2))
    return -ETIMEDOUT;
  return 0;
}
