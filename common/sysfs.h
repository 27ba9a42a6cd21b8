/* Reading /sys: the one place that knows how sysfs names things.
 *
 * Every read is rooted: paths are taken relative to a root, "" (or "/")
 * for the machine's own /sys, a copy of the tree for tests
 * (NCCL_RAIL_SYSFS_ROOT, tests/fixtures/sysfs/). Paths handed back
 * (realpaths) are the machine's, with the root removed, so that what a test
 * tree reports is what the real machine would.
 *
 * Also here: the one PCI function address checker and the one RDMA device
 * <-> network interface resolver, so that the topology model, the socket
 * interfaces and the verbs ports agree on which netdev an HCA port is.
 *
 * Blocking: every call reads small sysfs files (no waits). Thread-safety: a
 * struct rail_sysfs is immutable after rail_sysfs_open(), so threads may
 * share one. Errors: 0 or -errno; nothing is logged here except by
 * rail_sysfs_open(), which names a root that does not exist. */
#ifndef RAIL_COMMON_SYSFS_H
#define RAIL_COMMON_SYSFS_H

#include <limits.h>
#include <stddef.h>

struct rail_sysfs {
  char root[PATH_MAX]; /* as given, "" for the machine's own / */
  char real[PATH_MAX]; /* realpath of root, "" for / */
};

/* root NULL means NCCL_RAIL_SYSFS_ROOT. A root that does not resolve is
 * -errno, logged as a WARN naming it (the tunable was set wrong) once per
 * process for that root, however many modules open it. */
int rail_sysfs_open(struct rail_sysfs *fs, const char *root);
/* 1 when fs reads the machine's own /sys. */
int rail_sysfs_is_live(const struct rail_sysfs *fs);

/* The rooted path of "sys/..." into buf; -ENAMETOOLONG if it does not fit. */
int rail_sysfs_path(const struct rail_sysfs *fs, char *buf, size_t len, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));
/* A small attribute, trailing newline and blanks removed. Attributes that
 * fail on read (the speed of a down link: EINVAL) give that -errno. */
int rail_sysfs_read(const struct rail_sysfs *fs, char *out, size_t len, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));
/* An integer attribute, decimal or 0x hex (class, vendor); dflt when the
 * file is absent or holds no number. */
long rail_sysfs_read_long(const struct rail_sysfs *fs, long dflt, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
/* The realpath of an entry as the machine has it (root removed). -EXDEV for
 * a link that leaves a test tree (it would not be the machine's). */
int rail_sysfs_realpath(const struct rail_sysfs *fs, char *out, size_t len, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));
/* The entries of a directory (not "." or ".."), in natural order: "mlx5_9"
 * before "mlx5_10", "node2" before "node10". *names is freed with
 * rail_sysfs_free_list(). */
int rail_sysfs_list(const struct rail_sysfs *fs, char ***names, int *count, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));
void rail_sysfs_free_list(char **names, int count);

/* 1 when s is a PCI function address as Linux names them: hex
 * domain:bus:device.function, "0000:3b:00.0" (domains above 0xffff, from
 * Intel VMD, have more digits: "10000:e1:00.0"). Bus ids from files are
 * also taken with shorter fields or capitals ("0:3B:0.0"); canon (may be
 * NULL) receives the kernel's form, lower case, at least 16 bytes. */
int rail_sysfs_bdf(const char *s, char *canon, size_t len);
/* The nearest PCI function at or above a sysfs device path: the device
 * link of a virtio or USB NIC ends below its function (".../0000:00:03.0/
 * virtio2"). Cuts path in place; -ENOENT when no component is one. */
int rail_sysfs_pci_function(char *path);

/* The network interface of port `port` (1-based) of RDMA device `dev`, in
 * this order of precedence:
 *   1. ports/<port>/gid_attrs/ndevs/0: the kernel's own netdev for the
 *      port's GID table (RoCE ports, and rxe/siw on top of a netdev);
 *   2. parent: what a software device (rxe, siw) was created on;
 *   3. device/net/<if> whose dev_port is port - 1: the interface of that
 *      port of the same PCI function (IPoIB, or either port of a dual-port
 *      card whose ports share one function);
 *   4. the first interface under device/net (kernels without dev_port).
 * The port's own records come first because a PCI function may carry
 * several interfaces (a VPI card's ib0 and eth2). -ENOENT with out "" when
 * the device has none (EFA, an IB port without IPoIB). */
int rail_sysfs_rdma_netdev(const struct rail_sysfs *fs, const char *dev, int port, char *out,
                           size_t len);
/* The first port of an RDMA device (the lowest number under ports/), 1 if
 * it lists none. */
int rail_sysfs_rdma_first_port(const struct rail_sysfs *fs, const char *dev);
/* The RDMA device of a PCI function (its infiniband/ directory), first in
 * natural order; -ENOENT when it has none. */
int rail_sysfs_pci_rdma(const struct rail_sysfs *fs, const char *bdf, char *out, size_t len);

#endif
