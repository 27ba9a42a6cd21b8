#!/usr/bin/env python3
"""Checks the nccl-rail command's pictures (tests/tools/pictures.sh).

  svg_check.py topo SVG JSON          the drawing against `topo --json` of the same input
  svg_check.py plan SVG JSON [MEAS]   the curves against `plan --json` (and the measured file)
  svg_check.py bars SVG               doctor's rail chart from tests/tools/pictures_sample.c
  svg_check.py golden SVG GOLDEN      byte for byte; RAIL_UPDATE_GOLDEN=1 rewrites GOLDEN
  svg_check.py render SVG PNG         the PNG rsvg-convert made: its size is the SVG's, it has ink

Every check is XML parsing (xml.etree), elements counted by class and labels
looked up, with the expectations computed from the command's own JSON (or
the input), never written here. Prints one line per check; exits 1 if any
fails.
"""
import difflib
import json
import os
import re
import struct
import sys
import xml.etree.ElementTree as ET
import zlib

NS = "{http://www.w3.org/2000/svg}"
failed = 0

# DejaVu Sans advance widths, thousandths of an em, ASCII 32..126 (the
# writer's own table, tools/draw/svg.c): to check that labels fit their boxes.
REG = [318, 401, 460, 838, 636, 950, 780, 275, 390, 390, 500, 838, 318, 361, 318, 337, 636, 636,
       636, 636, 636, 636, 636, 636, 636, 636, 337, 337, 838, 838, 838, 531, 1000, 684, 686, 698,
       770, 632, 575, 775, 752, 295, 295, 656, 557, 863, 748, 787, 603, 787, 695, 635, 611, 732,
       684, 989, 685, 611, 685, 390, 337, 390, 838, 500, 500, 613, 635, 550, 635, 615, 352, 635,
       634, 278, 278, 579, 278, 974, 634, 612, 635, 635, 411, 521, 392, 634, 592, 818, 592, 592,
       525, 636, 337, 636, 838]
BOLD = [348, 456, 521, 838, 696, 1002, 872, 306, 457, 457, 523, 838, 380, 415, 380, 365, 696, 696,
        696, 696, 696, 696, 696, 696, 696, 696, 400, 400, 838, 838, 838, 580, 1000, 774, 762, 734,
        830, 683, 683, 821, 837, 372, 372, 775, 637, 995, 837, 850, 733, 850, 770, 720, 682, 812,
        774, 1103, 771, 724, 725, 457, 365, 457, 838, 500, 500, 675, 716, 593, 716, 678, 435, 716,
        712, 343, 343, 665, 343, 1042, 712, 687, 716, 716, 493, 595, 478, 712, 652, 924, 645, 652,
        582, 712, 365, 712, 838]


def check(desc, ok, detail=""):
    global failed
    if ok:
        print("ok   " + desc)
    else:
        failed += 1
        print("FAIL " + desc + (": " + str(detail) if detail != "" else ""))


def classes(el):
    return (el.get("class") or "").split()


def find(root, cls, tag=None):
    return [e for e in root.iter() if cls in classes(e) and (tag is None or e.tag == NS + tag)]


def texts(el):
    return [t.text or "" for t in el.iter(NS + "text")]


def text_width(t, size, bold):
    table = BOLD if bold else REG
    return sum(table[ord(c) - 32] if 32 <= ord(c) < 127 else 838 for c in t) * size / 1000.0


def load(path):
    try:
        tree = ET.parse(path)
    except ET.ParseError as e:
        check("%s is well-formed XML" % path, False, e)
        sys.exit(1)
    root = tree.getroot()
    check("%s is an SVG document with a size" % os.path.basename(path),
          root.tag == NS + "svg" and float(root.get("width")) > 0 and float(root.get("height")) > 0)
    return root


def texts_inside_canvas(root, name):
    """No text runs off the picture's edges (by the font's advances)."""
    w, h = float(root.get("width")), float(root.get("height"))
    bad = []
    for t in root.iter(NS + "text"):
        if t.get("transform"):
            continue
        x, y, size = float(t.get("x")), float(t.get("y")), float(t.get("font-size"))
        tw = text_width(t.text or "", size, t.get("font-weight") == "bold")
        anchor = t.get("text-anchor") or "start"
        x0 = x - (tw / 2 if anchor == "middle" else tw if anchor == "end" else 0)
        if x0 < 0 or x0 + tw > w + 0.5 or y > h or y - size < 0:
            bad.append(t.text)
    check("%s: every label within the picture" % name, not bad, bad[:5])


def rect_of(el):
    return (float(el.get("x")), float(el.get("y")), float(el.get("width")),
            float(el.get("height")))


def overlap(a, b):
    return a[0] < b[0] + b[2] and b[0] < a[0] + a[2] and a[1] < b[1] + b[3] and b[1] < a[1] + a[3]


def inside(a, b):
    return a[0] >= b[0] - 0.1 and a[1] >= b[1] - 0.1 and a[0] + a[2] <= b[0] + b[2] + 0.1 and \
        a[1] + a[3] <= b[1] + b[3] + 0.1


# ---- topo ---------------------------------------------------------------------

def check_topo(svg, js):
    root = load(svg)
    j = json.load(open(js))
    name = os.path.basename(svg)
    gpus, rails, unused = find(root, "gpu", "g"), find(root, "nic-rail", "g"), \
        find(root, "nic-unused", "g")
    compute = [n for n in j["nics"] if n["role"] == "compute"]
    other = [n for n in j["nics"] if n["role"] != "compute"]
    check("%s: one box per GPU (%d)" % (name, len(j["gpus"])), len(gpus) == len(j["gpus"]),
          len(gpus))
    check("%s: one coloured box per rail NIC (%d)" % (name, len(compute)),
          len(rails) == len(compute), len(rails))
    check("%s: one grey box per NIC that is not a rail (%d)" % (name, len(other)),
          len(unused) == len(other), len(unused))
    numa = find(root, "numa", "g")
    check("%s: a box per NUMA node" % name, len(numa) >= len(j["numa"]), len(numa))
    for i, g in enumerate(gpus):
        check("%s: GPU%d named in its box" % (name, i), ("GPU%d" % i) in texts(g), texts(g))
    stroke = {}
    for n, g in zip(compute, rails):
        t = texts(g)
        check("%s: %s carries rail %d" % (name, n["name"], n["rail_id"]),
              ("rail %d" % n["rail_id"]) in t, t)
        box = find(g, "box", "rect")[0]
        stroke.setdefault(n["rail_id"] % 10, set()).add(box.get("stroke"))
    check("%s: a rail id is one colour, two ids mod 10 two colours" % name,
          all(len(s) == 1 for s in stroke.values()) and
          len({next(iter(s)) for s in stroke.values()}) == len(stroke), stroke)
    for n, g in zip(other, unused):
        t = " ".join(texts(g))
        check("%s: %s greyed with why (%s)" % (name, n["name"], n["unused"]),
              ("not used: " + n["unused"]) in t and
              n["role_note"].split()[0] in t, t)
    # The GPUs a rail serves carry its pill too.
    served = {}
    for grp in j["groups"]:
        if grp["used"] and grp["rail_id"] >= 0:
            for g in grp["gpus"]:
                served.setdefault(g, set()).add(grp["rail_id"])
    for i, g in enumerate(gpus):
        pills = {int(x[5:]) for x in texts(g) if x.startswith("rail ")}
        check("%s: GPU%d shows the rails that serve it %s" % (name, i, sorted(served.get(i, []))),
              pills == served.get(i, set()), pills)
    nv = find(root, "nvswitch", "rect")
    check("%s: NVLink drawn when the model has it (%s)" % (name, j["nvlink"]),
          (len(nv) == 1) == bool(j["nvlink"]), len(nv))
    if j["nvlink"]:
        label = " ".join(texts(root))
        if j["nvswitches"]:
            check("%s: the NVSwitch bar counts them" % name,
                  ("NVSwitch \u00d7%d" % j["nvswitches"]) in label)
        stripes = find(root, "nvlink", "rect")
        check("%s: every GPU with NVLink has its stripe" % name,
              len(stripes) == sum(1 for g in j["gpus"] if g["nvlinks"] > 0 or j["nvswitches"]),
              len(stripes))
    # Warnings: every one the text gives, in the box, in order.
    box = find(root, "warnings", "g")
    if j["warnings"]:
        lines = [t for t in texts(box[0])] if box else []
        joined = re.sub(r"\s+", " ", " ".join(l.replace("\u2022", "") for l in lines[1:]))
        check("%s: the %d warnings in their box" % (name, len(j["warnings"])),
              box and all(w in joined for w in j["warnings"]), joined)
    else:
        check("%s: no warnings box without warnings" % name, not box and
              "warnings: none" in texts(root))
    # Layout: device boxes apart from each other, inside their NUMA box,
    # their text inside them.
    dev = [(g, rect_of(find(g, "box", "rect")[0])) for g in gpus + rails + unused]
    clash = [(a[0].get("class"), b[0].get("class")) for i, a in enumerate(dev)
             for b in dev[i + 1:] if overlap(a[1], b[1])]
    check("%s: no two device boxes overlap" % name, not clash, clash[:3])
    numa_boxes = [rect_of(find(n, "box", "rect")[0]) for n in numa]
    check("%s: every device inside a NUMA node" % name,
          all(any(inside(d[1], nb) for nb in numa_boxes) for d in dev))
    spill = []
    for g, r in dev:
        for t in g.iter(NS + "text"):
            size = float(t.get("font-size"))
            tw = text_width(t.text or "", size, t.get("font-weight") == "bold")
            x = float(t.get("x")) - (tw / 2 if t.get("text-anchor") == "middle" else 0)
            if x < r[0] or x + tw > r[0] + r[2] + 0.5:
                spill.append(t.text)
    check("%s: every label inside its box" % name, not spill, spill[:5])
    texts_inside_canvas(root, name)


# ---- plan ---------------------------------------------------------------------

def size_label(b):
    units = ["B", "KiB", "MiB", "GiB", "TiB", "PiB"]
    u = 0
    while b >= 1024 and u < 5:
        b /= 1024.0
        u += 1
    return "%.0f %s" % (b, units[u]) if b == int(b) else "%.3g %s" % (b, units[u])


def norm(name):
    """An algorithm or protocol as NCCL_ALGO, the JSON and the picture spell
    it ("NVLSTree", "nvls_tree"), compared alike."""
    return (name or "").replace("_", "").lower()


def stretches(rows, key):
    out = []
    for r in rows:
        k = key(r)
        if not out or out[-1][0] != k:
            out.append([k, r["bytes"]])
    return out


def read_measured(path):
    """The rows and labels of a test input, read the simple way: a table
    starts at a header, its collective and labels come from the lines
    before it (all the test inputs are this plain)."""
    runs, coll, label, cur = [], None, "", None
    for line in open(path):
        toks = line.split()
        m = re.search(r"(all_reduce|all_gather|reduce_scatter|broadcast|reduce)_perf", line)
        if m and (not toks or not toks[0].isdigit()):
            coll = m.group(1).replace("_", "")
            lab = re.findall(r"(NCCL_(?:ALGO|PROTO|RAIL_TUNER)=\S+)", line)
            label = " ".join(lab)
        if "size" in toks and "busbw" in toks:
            cur = {"coll": coll, "label": label, "pts": {}}
            runs.append(cur)
        elif toks and toks[0].isdigit() and cur is not None:
            cur["pts"][int(toks[0])] = float(toks[7])
    return runs


def check_plan(svg, js, meas=None):
    root = load(svg)
    j = json.load(open(js))
    name = os.path.basename(svg)
    panels = find(root, "panel", "g")
    runs = read_measured(meas) if meas else []
    colls = [c for c in j["collectives"] if not meas or any(r["coll"] == c["name"] for r in runs)]
    check("%s: one panel per collective (%d)" % (name, len(colls)), len(panels) == len(colls),
          len(panels))
    for c, p in zip(colls, panels):
        rows = c["sizes"]
        n = "%s %s" % (name, c["name"])
        cand = {"%s-%s" % (x["algo"], x["proto"]) for x in rows[0]["candidates"]}
        curves = {[k for k in classes(e) if k != "candidate"][0] for e in find(p, "candidate")}
        check("%s: a curve per candidate %s" % (n, sorted(cand)), curves == cand, curves)
        tuner = stretches(rows, lambda r: (r["algo"], r["proto"]))
        band = find(p, "band-tuner", "g")[0]
        check("%s: the tuner's band has its %d stretches" % (n, len(tuner)),
              len(find(band, "band-stretch", "rect")) == len(tuner))
        labels = [t.text for t in find(band, "band-label", "text")]
        names = {(norm(a), norm(b)) for (a, b), _ in tuner}
        check("%s: the band names the picks it has room for" % n,
              all(tuple(norm(x) for x in l.split("/")) in names for l in labels), labels)
        xs = [size_label(b) for _, b in tuner[1:]]
        got = [t.text for t in find(p, "crossover-label", "text")]
        check("%s: crossovers labelled with their sizes %s" % (n, xs), got == xs, got)
        check("%s: a dashed line per crossover" % n,
              len(find(p, "crossover", "line")) == len(xs))
        check("%s: the pick drawn bold, a stroke per stretch" % n,
              len(find(p, "chosen-curve", "polyline")) == len(tuner) and
              all(float(e.get("stroke-width")) > 3 for e in find(p, "chosen-curve")))
        nccl = stretches(rows, lambda r: (r["nccl_algo"], r["nccl_proto"]))
        band = find(p, "band-nccl", "g")[0]
        check("%s: NCCL's own band has its %d stretches" % (n, len(nccl)),
              len(find(band, "band-stretch", "rect")) + len(find(band, "band-none", "rect")) ==
              len(nccl))
        differ = sum(1 for r in rows if r["nccl_algo"] is not None and
                     (r["nccl_algo"], r["nccl_proto"]) != (r["algo"], r["proto"]))
        check("%s: NCCL's pick marked at the %d sizes it differs" % (n, differ),
              len(find(p, "nccl-mark", "polygon")) == differ)
        mine = [r for r in runs if r["coll"] == c["name"]]
        npts = sum(len(r["pts"]) for r in mine)
        check("%s: the %d measured points drawn" % (n, npts),
              len(find(p, "measured-point")) == npts)
        if not mine:
            continue
        # Regret: at each size measured by two runs or more, the run that
        # stands for the tuner's pick (forced to it, else forcing nothing)
        # against the fastest.
        pick = {r["bytes"]: (r["algo"], r["proto"]) for r in rows}
        want = []
        for size in sorted({s for r in mine for s in r["pts"]}):
            have = [r for r in mine if size in r["pts"]]
            if len(have) < 2 or size not in pick:
                continue
            algo, proto = pick[size]
            forced = [dict(x.split("=") for x in r["label"].split()) for r in have]
            stand = [r for r, f in zip(have, forced) if norm(f.get("NCCL_ALGO")) == norm(algo) and
                     norm(f.get("NCCL_PROTO", proto)) == norm(proto)]
            stand = stand or [r for r, f in zip(have, forced) if not f]
            if stand:
                want.append(max(x["pts"][size] for x in have) / stand[0]["pts"][size] - 1)
        bars = find(p, "regret-bar", "rect")
        check("%s: a regret bar at each of the %d sizes it is known" % (n, len(want)),
              len(bars) == len(want), len(bars))
        got = [t.text for t in find(p, "regret-label", "text")]
        exp = ["%.0f%%" % (r * 100) for r in want if r >= 0.005]
        check("%s: regret labels %s" % (n, exp), all(g in exp for g in got) and
              (not exp or got), got)
    texts_inside_canvas(root, name)


# ---- bars -----------------------------------------------------------------------

def check_bars(svg):
    root = load(svg)
    name = os.path.basename(svg)
    rails = find(root, "rail", "g")
    check("%s: a row per rail (3)" % name, len(rails) == 3, len(rails))
    check("%s: two measured, one failed" % name,
          len(find(root, "bar-measured")) == 2 and len(find(root, "bar-failed")) == 1)
    line = [rect_of(r) for r in find(root, "bar-line")]
    meas = [rect_of(r) for r in find(root, "bar-measured")]
    # tests/tools/pictures_sample.c: 91.2 of 100 and 38.5 of 100 Gbit/s.
    check("%s: bars as long as their share of line rate" % name,
          abs(meas[0][2] / line[0][2] - 0.912) < 0.002 and
          abs(meas[1][2] / line[1][2] - 0.385) < 0.002, (meas, line))
    check("%s: the slow rail in orange, the good one in blue" % name,
          find(root, "bar-measured")[1].get("fill") != find(root, "bar-measured")[0].get("fill"))
    texts_inside_canvas(root, name)


# ---- golden and render -------------------------------------------------------------

def golden(svg, gold):
    new = open(svg, encoding="utf-8").read()
    if os.environ.get("RAIL_UPDATE_GOLDEN") == "1":
        open(gold, "w", encoding="utf-8").write(new)
        print("ok   %s rewritten (review: git diff %s)" % (gold, gold))
        return
    old = open(gold, encoding="utf-8").read() if os.path.exists(gold) else ""
    if old == new:
        check("%s matches its golden" % os.path.basename(svg), True)
        return
    diff = list(difflib.unified_diff(old.splitlines(), new.splitlines(), gold, svg, lineterm=""))
    print("\n".join(diff[:80]))
    check("%s matches its golden" % os.path.basename(svg), False,
          "%d diff lines; after a deliberate change: RAIL_UPDATE_GOLDEN=1 ctest -R "
          "'^tools.pictures$' (or scripts/pictures.sh for docs/pictures) and review the diff"
          % len(diff))


def png_pixels(path):
    data = open(path, "rb").read()
    if data[:8] != b"\x89PNG\r\n\x1a\n":
        return None
    pos, idat, w = 8, b"", 0
    while pos < len(data):
        ln, typ = struct.unpack(">I4s", data[pos:pos + 8])
        body = data[pos + 8:pos + 8 + ln]
        if typ == b"IHDR":
            w, h, depth, ctype = struct.unpack(">IIBB", body[:10])
        elif typ == b"IDAT":
            idat += body
        pos += 12 + ln
    bpp = {6: 4, 2: 3}.get(ctype)
    if depth != 8 or bpp is None:
        return w, h, None
    raw, stride, out, prev = zlib.decompress(idat), w * bpp, [], bytearray(w * bpp)
    for y in range(h):
        f, row = raw[y * (stride + 1)], bytearray(raw[y * (stride + 1) + 1:(y + 1) * (stride + 1)])
        for i in range(stride):
            a = row[i - bpp] if i >= bpp else 0
            b, c = prev[i], prev[i - bpp] if i >= bpp else 0
            if f == 1:
                row[i] = (row[i] + a) & 255
            elif f == 2:
                row[i] = (row[i] + b) & 255
            elif f == 3:
                row[i] = (row[i] + (a + b) // 2) & 255
            elif f == 4:
                p = a + b - c
                pa, pb, pc = abs(p - a), abs(p - b), abs(p - c)
                row[i] = (row[i] + (a if pa <= pb and pa <= pc else b if pb <= pc else c)) & 255
        out.append(row)
        prev = row
    return w, h, (out, bpp)


def render(svg, png):
    root = load(svg)
    want = (round(float(root.get("width"))), round(float(root.get("height"))))
    px = png_pixels(png)
    name = os.path.basename(png)
    check("%s is a PNG" % name, px is not None)
    if px is None:
        return
    w, h, img = px
    check("%s is %dx%d, the SVG's size" % (name, want[0], want[1]),
          abs(w - want[0]) <= 1 and abs(h - want[1]) <= 1, (w, h))
    if img is None:
        check("%s: 8-bit RGB(A) as rsvg-convert writes" % name, False)
        return
    rows, bpp = img
    ink = sum(1 for r in rows for i in range(0, len(r), bpp)
              if min(r[i], r[i + 1], r[i + 2]) < 200 and (bpp == 3 or r[i + 3] > 0))
    share = ink / float(w * h)
    check("%s has drawing on it (%.1f%% of pixels inked)" % (name, share * 100),
          0.02 < share < 0.8, share)
    # The title's band holds dark text: rendered glyphs, not an empty box.
    top = sum(1 for r in rows[10:34] for i in range(0, min(len(r), 400 * bpp), bpp)
              if max(r[i], r[i + 1], r[i + 2]) < 90)
    check("%s: the title is rendered as text" % name, top > 150, top)


def main():
    mode, args = sys.argv[1], sys.argv[2:]
    if mode == "topo":
        check_topo(*args)
    elif mode == "plan":
        check_plan(*args)
    elif mode == "bars":
        check_bars(*args)
    elif mode == "golden":
        golden(*args)
    elif mode == "render":
        render(*args)
    else:
        sys.exit("svg_check.py: unknown mode " + mode)
    sys.exit(1 if failed else 0)


if __name__ == "__main__":
    main()
