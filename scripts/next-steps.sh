#!/usr/bin/env bash
# What a newcomer needs after scripts/run.sh: where the plugin is, the one
# variable a job sets, and the NCCL_DEBUG=INFO lines that show NCCL took it.
# $1: the build folder (default build). tests/tools/next_steps.sh keeps the
# lines quoted here in step with what the plugin logs.
set -euo pipefail
cd "$(dirname "$0")/.."
build=$(cd "${1:-build}" && pwd)
multiarch=$(dpkg-architecture -qDEB_HOST_MULTIARCH 2>/dev/null || gcc -dumpmachine)
version=$("$build/nccl-rail" --version)

cat <<TEXT

== Next: use it in a job ($version)

The plugin, net and tuner in one file:
  $build/libnccl-net-rail.so
  ($build/libnccl-tuner-rail.so is a link to it, for NCCL_TUNER_PLUGIN=rail)
Installed from the package (scripts/package.sh, then dpkg -i) it is
  /usr/lib/$multiarch/libnccl-net-rail.so, where NCCL finds it with no LD_LIBRARY_PATH.

The one variable a job sets:
  export NCCL_NET_PLUGIN=rail
From this build tree instead of the package, NCCL also needs the folder:
  export LD_LIBRARY_PATH=$build\${LD_LIBRARY_PATH:+:\$LD_LIBRARY_PATH}
No NCCL_SOCKET_IFNAME, NCCL_IB_HCA, NCCL_ALGO or NCCL_PROTO: the plugin chooses.

To see that NCCL took it, run the job once with NCCL_DEBUG=INFO and look for:
  NET/Plugin: Loaded net plugin Rail (v11)   NCCL opened libnccl-net-rail.so (the v is the ABI
                                             your NCCL chose: v8 for 2.20, v11 for 2.28,
                                             v12 for 2.30)
  NET/Rail : nccl-rail 0.1.0 (git ...)       the plugin's release and the commit it was built
                                             from, once per process
  Using network Rail                         NCCL runs this communicator over the plugin
  NET/Rail device 0 eth0+eth1: ...           the plugin's devices: each rail group, its speed,
                                             PCI path and NUMA node
  NET/Rail transport: verbs (2 RDMA port(s) open)
                                             RDMA, or "socket" for TCP
  TUNER/Plugin: Using Rail (v5)              NCCL took the tuner from the same library (v6
                                             on 2.30)
  NET/Rail tuner: this node: 2 nodes x ...   this node's shape, for explaining: decisions come
                                             from NCCL's own cost table, the same on every
                                             rank (NCCL_DEBUG_SUBSYS=TUNING: each choice)
"Using network Socket" or "Using network IB" instead means NCCL did not load it:
nccl-rail doctor says why.

When a job is slow or hangs at init:
  nccl-rail doctor                           this node, every finding with its fix
  nccl-rail doctor --serve                   on each other node, then on one node:
  nccl-rail doctor --peers HOST,HOST         reachability, NCCL's bootstrap, rail by rail
                                             throughput against line rate
To turn it off for a job: NCCL_NET_PLUGIN=none (NCCL_TUNER_PLUGIN=none keeps the net plugin).
More: docs/operations.md ("For image builders").
TEXT
