#!/usr/bin/env python3
"""Golden test of one real machine: `nccl-rail topo --input FILE --json`
checked against what tests/fixtures/topo-real/expected.json says the
machine has (its README says how those expectations were made).

    check_real.py NCCL_RAIL EXPECTED_JSON FILE

Checked: GPUs (bus ids, NUMA nodes), every NIC (bus id, NUMA node, speed,
kind, role, the GPUs a compute NIC serves), the compute-rail partition
(one of the accepted ones), GPU-NIC path types, NVLink and NVSwitch, NUMA
CPU lists, multi-node NVLink, and the topology facts the plan's shape is
made from (how many compute rails, their speed, RDMA or sockets, NVLink,
NVLS). The plan's own numbers are the tuner's (rail_tuner_shape_from_topo)
and are tested there. Exit 0 when all hold, 1 with every difference listed.
"""
import json
import os
import subprocess
import sys

# Fabrics the plugin's own transports carry without sockets (verbs).
VERBS_FABRICS = {"ib", "roce"}
# Expected roles that mean "a compute rail" (socket: one over TCP).
COMPUTE_ROLES = {"compute", "socket"}


class Check:
    def __init__(self, name):
        self.name = name
        self.errors = []

    def eq(self, what, got, want):
        if got != want:
            self.errors.append(f"{what}: got {got!r}, expected {want!r}")

    def true(self, what, cond, detail=""):
        if not cond:
            self.errors.append(f"{what}{': ' + detail if detail else ''}")


def find_nic(model, want):
    """The model's NIC for an expected one: by its name first, then by any
    alias, among name, netdev and RDMA device (a bus id may be shared by
    several interfaces of one function, so it only confirms)."""
    names = [want["name"]] + [a for a in want.get("aliases", []) if a != want["name"]]
    for alias in names:
        for nic in model["nics"]:
            if alias in (nic["name"], nic["netdev"], nic["rdma_dev"]):
                return nic
    return None


def optional(want):
    return "optional in the model" in want.get("why", "")


def check_gpus(c, model, exp):
    buses = [g["bus_id"] for g in model["gpus"]]
    c.eq("GPU count", len(buses), exp["gpus"]["count"])
    c.eq("GPU bus ids", sorted(buses), sorted(exp["gpus"]["bus_ids"]))
    for bus, numa in exp["gpus"].get("numa", {}).items():
        got = [g["numa"] for g in model["gpus"] if g["bus_id"] == bus]
        c.eq(f"GPU {bus} NUMA node", got[0] if got else None, numa)


def check_nics(c, model, exp):
    gpu_bus = [g["bus_id"] for g in model["gpus"]]
    groups = model["groups"]
    seen = set()
    for want in exp["nics"]["list"]:
        nic = find_nic(model, want)
        if nic is None:
            c.true(f"NIC {want['name']} is in the model", optional(want))
            continue
        seen.add(nic["index"])
        what = f"NIC {want['name']}"
        if want.get("bus_id"):
            c.eq(f"{what} bus id", nic["bus_id"], want["bus_id"])
        if want.get("numa") is not None and want.get("bus_id"):
            c.eq(f"{what} NUMA node", nic["numa"], want["numa"])
        if want.get("speed_mbps") is not None:
            c.eq(f"{what} speed", nic["speed_mbps"], want["speed_mbps"])
        if want.get("kind"):
            c.eq(f"{what} kind", nic["kind"], want["kind"])
        compute = want["role"] in COMPUTE_ROLES
        c.eq(f"{what} role ({want.get('why', '')})", nic["role"], "compute" if compute else "other")
        if not compute:
            c.true(f"{what} says why it is not a rail", nic["role_note"] != "")
        if compute and want.get("serves_gpus") is not None:
            served = sorted(gpu_bus[g] for g in groups[nic["group"]]["gpus"])
            c.eq(f"{what} serves", served, sorted(want["serves_gpus"]))
    count = exp["nics"]["count"]
    accepted = count if isinstance(count, list) else [count]
    c.true("NIC count", len(model["nics"]) in accepted,
           f"{len(model['nics'])} NICs, accepted {accepted}")
    c.eq("every model NIC is an expected one", sorted(seen), sorted(n["index"] for n in model["nics"]))


def expected_name(model_nic, exp):
    for want in exp["nics"]["list"]:
        if find_nic({"nics": [model_nic]}, want) is not None:
            return want["name"]
    return model_nic["name"]


def check_groups(c, model, exp):
    by_name = {n["name"]: n for n in model["nics"]}
    used = [g for g in model["groups"] if g["used"]]
    got = sorted(sorted(expected_name(by_name[n], exp) for n in g["nics"]) for g in used)
    accepted = [sorted(sorted(grp) for grp in part) for part in exp["compute_groups"]]
    c.true("compute rail partition", got in accepted, f"got {got}, accepted {accepted}")


def check_paths(c, model, exp):
    gpu_index = {g["bus_id"]: g["index"] for g in model["gpus"]}
    for bus, row in exp.get("paths", {}).items():
        for name, want in row.items():
            nic = find_nic(model, next(w for w in exp["nics"]["list"] if w["name"] == name))
            if bus not in gpu_index or nic is None:
                continue  # reported above
            got = model["paths"][gpu_index[bus]][nic["index"]]
            accepted = want if isinstance(want, list) else [want]
            c.true(f"path GPU {bus} - {name}", got in accepted, f"got {got}, accepted {accepted}")


def check_machine(c, model, exp):
    c.eq("NVLink", model["nvlink"], exp["nvlink"])
    c.eq("NVSwitch", model["nvswitches"] > 0, exp["nvswitch"])
    c.eq("multi-node NVLink", model["mnnvl"], exp.get("mnnvl", False))
    numa = {str(n["node"]): n["cpus"] for n in model["numa"]}
    for node, cpus in (exp.get("numa") or {}).items():
        c.eq(f"NUMA node {node} CPUs", numa.get(node), cpus)


def check_shape_facts(c, model, exp):
    """What the plan's shape is made from, on the topology's side."""
    plan = exp["plan"]
    used = [g for g in model["groups"] if g["used"]]
    nics = {n["name"]: n for n in model["nics"]}
    if not used:
        return  # no NIC: the tuner's own fallback, tested with the tuner
    c.true("compute rails", len(used) in plan["rails"], f"{len(used)}, accepted {plan['rails']}")
    if plan.get("rail_gbps") is not None:
        for g in used:
            c.eq(f"speed of rail {'+'.join(g['nics'])} (Gbit/s)", g["speed_mbps"] / 1000,
                 plan["rail_gbps"])
    elif plan.get("total_gbps") is not None:
        c.eq("speed of all rails (Gbit/s)", sum(g["speed_mbps"] for g in used) / 1000,
             plan["total_gbps"])
    verbs = any(nics[n]["fabric"] in VERBS_FABRICS for g in used for n in g["nics"])
    c.eq("sockets (no verbs fabric among the rails)", not verbs, plan["socket"])
    if plan.get("intra") is not None:
        c.eq("intra-node NVLink", model["nvlink"], plan["intra"] == "nvlink")
    # NVLink SHARP (NVLS) needs third-generation NVSwitches, which come with
    # Hopper (sm 90) and later GPUs: an A100 HGX has NVSwitches but no NVLS.
    hopper = all(g.get("sm", 0) >= 90 for g in model["gpus"]) and model["gpus"]
    c.eq("NVLS (NVLink, NVSwitch and Hopper or later)",
         bool(model["nvlink"] and model["nvswitches"] > 0 and hopper), plan["nvls"])


def main():
    cli, expected_json, path = sys.argv[1:4]
    name = os.path.basename(path)
    exp = next((e for e in json.load(open(expected_json)) if e["file"] == name), None)
    if exp is None:
        print(f"{name}: no entry in {expected_json}")
        return 1
    out = subprocess.run([cli, "topo", "--input", path, "--json"], capture_output=True, text=True)
    if out.returncode != 0:
        print(f"{name}: nccl-rail topo failed ({out.returncode}):\n{out.stderr}")
        return 1
    model = json.loads(out.stdout)
    c = Check(name)
    for step in (check_gpus, check_nics, check_groups, check_paths, check_machine,
                 check_shape_facts):
        try:
            step(c, model, exp)
        except KeyError as e:
            c.errors.append(f"{step.__name__}: the JSON has no field {e}")
    if c.errors:
        print(f"{name} ({exp['machine']}):")
        for e in c.errors:
            print(f"  - {e}")
        return 1
    print(f"{name}: as expected")
    return 0


if __name__ == "__main__":
    sys.exit(main())
