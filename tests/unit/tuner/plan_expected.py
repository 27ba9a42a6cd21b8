#!/usr/bin/env python3
"""`nccl-rail plan --input F` against the plan block of a real machine's
expected.json entry (tests/fixtures/topo-real): rails (any listed count),
per-rail and total Gbit/s (within 5%, where given), sockets or RDMA, NVLink
or PCIe, NVLS. A null expectation is not scored.

usage: plan_expected.py NCCL_RAIL EXPECTED_JSON FILE
Exit status: 0 the shape matches, 1 it does not (each difference printed),
2 usage or a fixture that cannot be read."""
import json
import os
import subprocess
import sys


def near(got, want):
    return want is None or (got is not None and abs(got - want) <= 0.05 * want)


def main():
    if len(sys.argv) != 4:
        print(__doc__, file=sys.stderr)
        return 2
    tool, expected_path, name = sys.argv[1:]
    with open(expected_path) as f:
        entries = {e["file"]: e for e in json.load(f)}
    if name not in entries:
        print(f"{name}: not in {expected_path}", file=sys.stderr)
        return 2
    want = entries[name]["plan"]
    fixture = os.path.join(os.path.dirname(expected_path), name)
    env = dict(os.environ)
    env.pop("NCCL_RAIL_TUNER_FILE", None)
    run = subprocess.run([tool, "plan", "--input", fixture, "--nodes", "16", "--collective",
                          "broadcast", "--json"], capture_output=True, text=True, env=env)
    if run.returncode != 0:
        print(f"{name}: nccl-rail plan exited {run.returncode}:\n{run.stderr}", file=sys.stderr)
        return 1
    got = json.loads(run.stdout)["shape"]
    bad = []
    if got["rails"] not in want["rails"]:
        bad.append(f"rails {got['rails']}, expected one of {want['rails']}")
    if not near(got["rail_gbps"], want.get("rail_gbps")):
        bad.append(f"rail_gbps {got['rail_gbps']}, expected {want['rail_gbps']}")
    if not near(got["total_gbps"], want.get("total_gbps")):
        bad.append(f"total_gbps {got['total_gbps']}, expected {want['total_gbps']}")
    for key in ("socket", "intra", "nvls"):
        if want.get(key) is not None and got[key] != want[key]:
            bad.append(f"{key} {json.dumps(got[key])}, expected {json.dumps(want[key])}")
    for b in bad:
        print(f"{name}: {b}", file=sys.stderr)
    print(f"{'ok  ' if not bad else 'FAIL'} {name}: {json.dumps(got)}")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
