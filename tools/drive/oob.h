/* The out-of-band TCP connections of nccl-rail bench and doctor --peers:
 * how two nccl-rail processes on two hosts (or network namespaces) find
 * each other before the plugin is driven between them.
 *
 * Every call is blocking and bounded by its timeout; messages go to stderr
 * prefixed with `who` ("nccl-rail bench"), naming the address and strerror.
 * Returns are a file descriptor (>= 0) or -errno. Thread-safe. */
#ifndef RAIL_TOOLS_OOB_H
#define RAIL_TOOLS_OOB_H

#include <stddef.h>
#include <sys/socket.h>

/* Connects to host:port within timeout_ms. `src` (may be NULL) is bound
 * first, so the connection leaves from that address; `dev` (may be NULL)
 * pins it to that interface (SO_BINDTODEVICE, root only: -EPERM
 * otherwise). quiet: no message on failure (probes report their own). */
int rail_oob_connect(const char *who, const char *host, int port,
                     const struct sockaddr_storage *src, const char *dev, int timeout_ms,
                     int quiet);
/* A listening socket on host (NULL: every address, IPv6 and IPv4) and port
 * (0: any); *port_out gets the port. */
int rail_oob_listen(const char *who, const char *host, int port, int *port_out);
/* accept() within timeout_ms (< 0: no bound), TCP_NODELAY set when asked. */
int rail_oob_accept(int lfd, int nodelay, int timeout_ms);
/* "HOST:PORT" or "[V6]:PORT"; a port is required unless default_port > 0,
 * which a bare HOST then gets. 0 or -EINVAL. */
int rail_oob_split_hostport(const char *s, char *host, size_t hostlen, int *port, int default_port);
/* The one line of a handle file, waited for up to timeout_ms: both ends
 * of a rig are often started at the same moment. */
int rail_oob_read_handle_file(const char *who, const char *path, char *out, size_t len,
                              int timeout_ms);
/* Writes `line` into path whole (aside, then renamed), so that a reader
 * never sees half of it. */
int rail_oob_write_handle_file(const char *who, const char *path, const char *line);

#endif
