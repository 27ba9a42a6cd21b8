#!/usr/bin/env python3
"""scale.py: the cost of a job as it grows, through real NCCL 2.28.9's host
code (tests/nccl, build.sh) on one host, every rank a node of its own
(NCCL_HOSTID), over loopback (issue 45).

Each rank (nccl_rank --alltoall) waits for all the others, times
ncclCommInitRank, then times an all-to-all connect: ncclSend and ncclRecv
to every peer in one group (ncclGroupEnd returns once NCCL has connected
every peer), and counts its own fds by kind, threads, listening sockets
and resident memory after each step.

  scale.py check socket|verbs NRANKS [--fds-per-peer F]
      The CI run: the all-to-all, then communicator 2 (the same
      all-to-all, then ncclCommAbort) and communicator 3 (init,
      ncclCommFinalize, ncclCommDestroy: no all-to-all, since without a GPU
      the sends and receives NCCL's proxy holds never finish and destroy
      would wait for them for ever), each of which must give back every fd
      and thread; F bounds the fds the all-to-all adds per peer (nccl_rank
      fails above it). It checks NCCL's INFO lines too: the
      plugin loaded, its channels via NET/Rail, and over verbs when asked.
  scale.py bench [--ranks 8,16,32] [--rounds 3] [--transports T,...]
      The benchmark: for each round, each N, each transport in turn
      (alternated, so a slow spell of the shared host falls on all of
      them), one run; then the medians over the rounds, as a markdown
      table with nccl-rail's ratios against NCCL's own Socket transport.
      Transports: socket (nccl-rail over TCP), verbs (nccl-rail over the
      fake verbs provider, tests/fakeverbs), ncclsocket (NCCL's built-in
      Socket transport, NCCL_NET_PLUGIN=none).

Times: init is from the moment every rank is ready to the slowest rank's
return from ncclCommInitRank ("Init COMPLETE"); the all-to-all connect is
from every rank being ready to the slowest rank's ncclGroupEnd. Counts are
per process, the median over the ranks.

No kernel runs (the host-only CUDA runtime stands in): device and pinned
buffers are calloc'd and never touched, so resident memory is host-side
state only (NCCL's and the plugin's), not NCCL_BUFFSIZE's buffers.

Environment (ctest sets all but the first): RAIL_REFERENCE_DIR (unset:
skip, exit 77), RAIL_NCCL_RANK, RAIL_NCCL_STANDINS, RAIL_NCCL_PLUGIN,
RAIL_NCCL_FAKEVERBS; RAIL_NCCL_KEEP keeps every rank's output and log.
"""
import argparse
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
GPU = "0000:03:00.0"
COUNTS = ["fds", "tcp", "unix", "eventfd", "other", "listen", "threads", "rss_kb"]
NAMES = {"socket": "nccl-rail sockets", "verbs": "nccl-rail fake verbs",
         "ncclsocket": "NCCL Socket"}


def need_env():
    if not os.environ.get("RAIL_REFERENCE_DIR"):
        print("SKIP: RAIL_REFERENCE_DIR is unset: no NCCL source to build (.ci/run sets it)")
        sys.exit(77)
    missing = [v for v in ("RAIL_NCCL_RANK", "RAIL_NCCL_STANDINS", "RAIL_NCCL_PLUGIN",
                           "RAIL_NCCL_FAKEVERBS") if not os.environ.get(v)]
    if missing:
        print("FAIL: %s unset (ctest sets them; see tests/nccl/CMakeLists.txt)" % ", ".join(missing))
        sys.exit(2)
    p = subprocess.run(["sh", os.path.join(HERE, "build.sh")], stdout=subprocess.PIPE, text=True)
    if p.returncode == 77:
        sys.exit(77)
    if p.returncode != 0:
        print("FAIL: NCCL 2.28.9 could not be built (tests/nccl/build.sh)")
        sys.exit(1)
    return p.stdout.strip().splitlines()[-1]


def transport_env(transport, root, debug):
    """The environment of every rank of one run, and the fake /sys it reads."""
    sysfs = os.path.join(HERE, "..", "fakeverbs", "sysfs.sh")
    devs = ["lo", "fake0"] if transport == "verbs" else ["lo"]
    subprocess.run(["sh", sysfs, "--gpu", GPU, "0", root] + devs, check=True,
                   stdout=subprocess.DEVNULL)
    env = dict(os.environ)
    env.update({
        "NCCL_DEBUG": debug, "NCCL_DEBUG_SUBSYS": "INIT,NET,ENV", "NCCL_SOCKET_IFNAME": "lo",
        "LD_LIBRARY_PATH": "%s:%s" % (os.environ["RAIL_NCCL_STANDINS"],
                                      os.path.dirname(os.environ["RAIL_NCCL_PLUGIN"])),
        "NCCL_RAIL_SYSFS_ROOT": root, "FAKE_CUDA_SYSFS_ROOT": root,
    })
    if transport == "ncclsocket":
        env["NCCL_NET_PLUGIN"] = "none"
    else:
        env.update({"NCCL_NET_PLUGIN": "rail", "NCCL_RAIL_IFNAMES": "lo"})
    if transport == "verbs":
        env.update({"NCCL_RAIL_TRANSPORT": "verbs", "FAKEVERBS_DEVICES": "fake0",
                    "NCCL_RAIL_VERBS_LIB": os.environ["RAIL_NCCL_FAKEVERBS"]})
    return env


def run_once(nccl_dir, transport, nranks, limit, close_checks, fds_per_peer, debug):
    """One run of nranks ranks. Returns (ok, per-rank SCALE records, tmp dir
    holding the outputs; the caller removes it)."""
    tmp = tempfile.mkdtemp(prefix="rail-scale.")
    env = transport_env(transport, os.path.join(tmp, "root"), debug)
    procs = []
    for r in range(nranks):
        renv = dict(env, NCCL_HOSTID="rail-scale-node%d" % r,
                    NCCL_DEBUG_FILE=os.path.join(tmp, "nccl.%d.log" % r))
        out = open(os.path.join(tmp, "rank%d.out" % r), "w")
        cmd = ["timeout", "-k", "5", str(limit), os.environ["RAIL_NCCL_RANK"],
               "--nccl", os.path.join(nccl_dir, "lib", "libnccl.so.2"), "--rank", str(r),
               "--nranks", str(nranks), "--id-dir", tmp, "--alltoall", "4096",
               "--close-checks", str(close_checks), "--fds-per-peer", str(fds_per_peer)]
        procs.append(subprocess.Popen(cmd, env=renv, stdout=out, stderr=subprocess.STDOUT))
        out.close()
    ok = True
    for r, p in enumerate(procs):
        rc = p.wait()
        if rc != 0:
            print("FAIL: rank %d exited %d%s" % (r, rc, " (killed at its %d s limit)" % limit
                                                  if rc == 124 else ""))
            ok = False
    records = []
    for r in range(nranks):
        with open(os.path.join(tmp, "rank%d.out" % r)) as f:
            for line in f:
                if line.startswith("SCALE "):
                    w = line.split()
                    records.append({w[i]: w[i + 1] for i in range(1, len(w) - 1, 2)})
    return ok, records, tmp


def summarize(records, nranks):
    """Times (s) and median per-process counts of one run, by step."""
    out = {}
    for step in ("init", "alltoall"):
        rs = [x for x in records if x["step"] == step]
        if len(rs) != nranks:
            return None
        start = min(float(x["start"]) for x in rs)
        end = max(float(x["end"]) for x in rs)
        out[step] = {"time": end - start}
        for c in COUNTS:
            out[step][c] = statistics.median(float(x[c]) for x in rs)
    out["per_peer"] = (out["alltoall"]["fds"] - out["init"]["fds"]) / max(nranks - 1, 1)
    return out


def keep(tmp, name):
    dest = os.environ.get("RAIL_NCCL_KEEP")
    if dest:
        d = os.path.join(dest, name)
        shutil.copytree(tmp, d, ignore=shutil.ignore_patterns("root"), dirs_exist_ok=True)


def grep_count(path, text):
    try:
        with open(path, errors="replace") as f:
            return sum(text in line for line in f)
    except OSError:
        return 0


def check(args):
    nccl_dir = need_env()
    print("NCCL %d ranks, loopback, %s: all-to-all connect, then abort and destroy must give back"
          " every fd and thread; at most %.2f fds per peer" % (args.nranks, args.transport,
                                                               args.fds_per_peer))
    t = time.time()
    ok, records, tmp = run_once(nccl_dir, args.transport, args.nranks, args.limit, 1,
                                args.fds_per_peer, "INFO")
    fails = 0
    for r in range(args.nranks):
        log, out = os.path.join(tmp, "nccl.%d.log" % r), os.path.join(tmp, "rank%d.out" % r)
        checks = [("nccl_rank passed (fds and threads back after abort and destroy, the bound)",
                   grep_count(out, "rank %d: PASS" % r) == 1),
                  ("NET/Plugin: Loaded net plugin Rail",
                   grep_count(log, "NET/Plugin: Loaded net plugin Rail") >= 1),
                  ("the three communicators' Init COMPLETE", grep_count(log, "Init COMPLETE") >= 3),
                  ("connections via NET/Rail", grep_count(log, "via NET/Rail/") >= 1),
                  ("none via NCCL's own transports",
                   grep_count(log, "via NET/Socket") + grep_count(log, "via NET/IB") == 0)]
        if args.transport == "verbs":
            checks.append(("connections over verbs", grep_count(log, " over verbs: ") >= 1))
        for what, good in checks:
            if not good:
                print("FAIL: rank %d: %s" % (r, what))
                fails += 1
    summary = summarize(records, args.nranks)
    for r in range(min(args.nranks, 2)):
        with open(os.path.join(tmp, "rank%d.out" % r)) as f:
            print("--- rank %d:\n%s" % (r, f.read().rstrip()))
    if summary:
        print("init %.2f s, all-to-all connect %.2f s; per process after the all-to-all: %d fds"
              " (%d TCP, %d Unix), %d threads; %.2f fds per peer" %
              (summary["init"]["time"], summary["alltoall"]["time"], summary["alltoall"]["fds"],
               summary["alltoall"]["tcp"], summary["alltoall"]["unix"],
               summary["alltoall"]["threads"], summary["per_peer"]))
    if not ok or fails:
        for r in range(args.nranks):
            with open(os.path.join(tmp, "rank%d.out" % r)) as f:
                print("--- rank %d:\n%s" % (r, "".join(f.readlines()[-15:])))
        keep(tmp, "check")
        shutil.rmtree(tmp)
        print("FAIL: %d checks failed (%d s)" % (fails + (not ok), time.time() - t))
        return 1
    keep(tmp, "check")
    shutil.rmtree(tmp)
    print("PASS: %d ranks, %s, all-to-all, abort and destroy gave everything back, in %d s" %
          (args.nranks, args.transport, time.time() - t))
    return 0


def fmt_ratio(a, b):
    return "%.2fx" % (a / b) if b else "-"


def bench(args):
    nccl_dir = need_env()
    ranks = [int(x) for x in args.ranks.split(",")]
    transports = args.transports.split(",")
    results = {}  # (n, transport) -> [summary, ...]
    for rnd in range(args.rounds):
        for n in ranks:
            # Rotate the order each round: none always goes first.
            order = transports[rnd % len(transports):] + transports[:rnd % len(transports)]
            for tr in order:
                t = time.time()
                ok, records, tmp = run_once(nccl_dir, tr, n, args.limit, 0, 0, "WARN")
                s = summarize(records, n) if ok else None
                keep(tmp, "r%d.n%d.%s" % (rnd, n, tr))
                shutil.rmtree(tmp)
                if s is None:
                    print("round %d, %d ranks, %s: FAILED (%.0f s)" % (rnd + 1, n, tr,
                                                                      time.time() - t))
                    continue
                results.setdefault((n, tr), []).append(s)
                a = s["alltoall"]
                print("round %d, %d ranks, %-10s init %6.2f s  all-to-all %6.2f s  fds %d->%d"
                      " (tcp %d unix %d eventfd %d other %d listen %d)  threads %d->%d"
                      "  rss %d->%d MiB  fds/peer %.2f  (%.0f s)" %
                      (rnd + 1, n, tr, s["init"]["time"], a["time"], s["init"]["fds"], a["fds"],
                       a["tcp"], a["unix"], a["eventfd"], a["other"], a["listen"],
                       s["init"]["threads"], a["threads"], s["init"]["rss_kb"] / 1024,
                       a["rss_kb"] / 1024, s["per_peer"], time.time() - t), flush=True)
    med = {}
    for key, ss in results.items():
        m = {"rounds": len(ss), "per_peer": statistics.median(s["per_peer"] for s in ss)}
        for step in ("init", "alltoall"):
            m[step] = {k: statistics.median(s[step][k] for s in ss) for k in ss[0][step]}
        med[key] = m
    print("\nMedians of the rounds; per process, the median over the ranks; ratios against NCCL"
          " Socket (ncclsocket) at the same N.\n")
    print("| N | transport | rounds | init s | a2a connect s | init/NCCL | a2a/NCCL | fds after"
          " init | fds after a2a (TCP/Unix/eventfd/other) | listening | fds per peer | threads"
          " init/a2a | RSS MiB init/a2a |")
    print("|---|---|---|---|---|---|---|---|---|---|---|---|---|")
    for n in ranks:
        ref = med.get((n, "ncclsocket"))
        for tr in transports:
            m = med.get((n, tr))
            if m is None:
                print("| %d | %s | 0 | failed | | | | | | | | | |" % (n, NAMES.get(tr, tr)))
                continue
            i, a = m["init"], m["alltoall"]
            ri = fmt_ratio(i["time"], ref["init"]["time"]) if ref else "-"
            ra = fmt_ratio(a["time"], ref["alltoall"]["time"]) if ref else "-"
            print("| %d | %s | %d | %.2f | %.2f | %s | %s | %d | %d (%d/%d/%d/%d) | %d | %.2f |"
                  " %d/%d | %.0f/%.0f |" %
                  (n, NAMES.get(tr, tr), m["rounds"], i["time"], a["time"], ri, ra, i["fds"],
                   a["fds"], a["tcp"], a["unix"], a["eventfd"], a["other"], a["listen"],
                   m["per_peer"], i["threads"], a["threads"], i["rss_kb"] / 1024,
                   a["rss_kb"] / 1024))
    expected = len(ranks) * len(transports) * args.rounds
    got = sum(len(v) for v in results.values())
    return 0 if got == expected else 1


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    sub = ap.add_subparsers(dest="cmd", required=True)
    c = sub.add_parser("check")
    c.add_argument("transport", choices=["socket", "verbs"])
    c.add_argument("nranks", type=int)
    c.add_argument("--fds-per-peer", type=float, default=0)
    c.add_argument("--limit", type=int, default=240, help="seconds per rank")
    b = sub.add_parser("bench")
    b.add_argument("--ranks", default="8,16,32")
    b.add_argument("--rounds", type=int, default=3)
    b.add_argument("--transports", default="socket,verbs,ncclsocket")
    b.add_argument("--limit", type=int, default=900, help="seconds per rank")
    args = ap.parse_args()
    sys.exit(check(args) if args.cmd == "check" else bench(args))


if __name__ == "__main__":
    main()
