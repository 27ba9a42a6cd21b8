/* Which of the CollNet delegate's devices serves one of our net devices'
 * interfaces. NCCL pairs CollNet device i with net device i by name, so we
 * present our own devices as CollNet devices and find, behind each of their
 * interfaces, the delegate's device on the same PCI function: an IPoIB
 * interface ib0 and the HCA mlx5_0 that SHARP reports sit on one function.
 *
 * A delegate device's PCI function is the one sysfs gives for its name
 * (/sys/class/infiniband/<name>/device), else the basename of the pciPath it
 * reports: SHARP's IB code may report a port's path as function 0, while
 * sysfs knows each port's own. Where several delegate devices share the
 * function (ports of one HCA), the interface's dev_port + 1 picks the port.
 * An interface without a PCI function (loopback, virtual) is served by a
 * delegate device of its own name.
 *
 * Reads sysfs under NCCL_RAIL_SYSFS_ROOT. Pure otherwise; thread-safe. */
#ifndef RAIL_PLUGIN_COLLNET_DEVMAP_H
#define RAIL_PLUGIN_COLLNET_DEVMAP_H

#include <stddef.h>

#include "plugin/collnet/delegate.h"

/* The delegate device (an index into props, of n) serving interface ifname,
 * or -ENODEV with why (one sentence naming the interface and what was
 * looked for). Only plain devices (ndevs == 1) are candidates. */
int rail_devmap_find(const char *ifname, const struct rail_delegate_props *props, int n, char *why,
                     size_t whylen);

/* Splits a net device's name ("eth0+eth1", net/net.h) into its interfaces'
 * names, in place in buf (of buflen); returns how many (at most max) or
 * -EINVAL when the name does not fit or has more members. */
int rail_devmap_members(const char *name, char *buf, size_t buflen, const char **members, int max);

#endif
