#!/usr/bin/env python3
"""Draws the house from the code: who uses whom inside one folder of the repo.

  scripts/house.py [options] FOLDER        e.g. tools, net, net/socket

The graph's nodes are the .c and .h files under FOLDER. A file uses
another when it
  - names it in `#include "..."`, or
  - names a function or variable defined in the other .c file: a call, a
    function passed by name (a dispatch table, a callback), a global read;
    a macro or a header's inline function (under FOLDER) counts where it
    is expanded, as the names in its body (so a macro of log.h that calls
    into log.c is a use of log.c by the file that calls the macro, and no
    circle between log.h and log.c).
Definitions are found by a regex over the top level of every .c file under
FOLDER, so no build is needed: text outside braces that ends in `name(...)`
just before a `{` is a function, `T name[...] = ...;` or `T name;` a
variable. `static` ones are the file's own and never an edge. Only the
bodies of functions and the initializers of variables are searched for
uses: prototypes, declarations and struct definitions name what they
declare. Names after `.` or `->` (members) or after struct/union/enum
(tags) are not uses, nor are comments and strings. Checked against `nm` on
the built objects of every folder of the repo: the same edges between .c
files. Headers outside FOLDER count as folder arrows only, with --outside
(an include of "tuner/score.h" is an arrow to [tuner]).

Prints
  - the folder-level arrows: each folder under FOLDER (files directly in
    FOLDER are "./") and the folders it uses (with -v, the files behind
    each arrow, and every file's uses); with --outside, arrows leaving
    FOLDER too;
  - every circle: a strongly connected component of more than one file,
    with the edges inside it and what each edge uses;
  - the checks asked for, one line each, and exits 1 if one fails (2 on a
    bad command line).

Checks (any number):
  --max-circle N          no circle of more than N files (1: no circle at all)
  --max-folder-circle N   the same over the folder-level arrows
  --apart A,B,...         these folders (relative to FOLDER) never use one
                          another; may be given more than once
  --never A,B:C,D         no folder of the first list uses one of the second
                          (shared parts never use a command: "." is FOLDER's
                          own files); may be given more than once
  --only A:B,C            folder A uses no folder of FOLDER but B and C ("-"
                          for none); may be given more than once

Examples
  scripts/house.py tools --max-circle 1 --max-folder-circle 1 \\
      --apart topo,plan,doctor,bench,env,collperf \\
      --never cli,draw,read,drive:.,topo,plan,doctor,bench,env,collperf
      (tests/tools/house.sh, ctest tools.house)
  scripts/house.py net --max-circle 2
  scripts/house.py net/socket --max-circle 1 -v       (-v: every file's edges)
"""
import argparse
import os
import re
import sys

SRC_EXT = (".c", ".h")
IDENT = re.compile(r"[A-Za-z_]\w*")
KEYWORDS = {"if", "for", "while", "switch", "return", "sizeof", "do", "else",
            "case", "goto", "typeof", "__typeof__", "_Alignof", "_Static_assert",
            "__attribute__", "defined"}


def strip_code(text):
    """Comments and string/char literals blanked (newlines kept), and the
    preprocessor lines split off: returns (code, [directive lines])."""
    out = []
    i, n = 0, len(text)
    while i < n:
        c = text[i]
        if c == "/" and i + 1 < n and text[i + 1] == "*":
            j = text.find("*/", i + 2)
            j = n if j < 0 else j + 2
            out.append("".join(ch if ch == "\n" else " " for ch in text[i:j]))
            i = j
        elif c == "/" and i + 1 < n and text[i + 1] == "/":
            j = text.find("\n", i)
            j = n if j < 0 else j
            out.append(" " * (j - i))
            i = j
        elif c in "\"'":
            j = i + 1
            while j < n and text[j] != c and text[j] != "\n":
                j += 2 if text[j] == "\\" else 1
            j = min(j + 1, n)
            out.append(c + " " * max(0, j - i - 2) + c)
            i = j
        else:
            out.append(c)
            i += 1
    code_lines, directives = [], []
    cont = False
    for line in "".join(out).split("\n"):
        if cont:
            directives[-1] = directives[-1][:-1] + " " + line
        elif line.lstrip().startswith("#"):
            directives.append(line.rstrip())
        else:
            code_lines.append(line)
            continue
        cont = line.rstrip().endswith("\\")
        code_lines.append("")
    return "\n".join(code_lines), directives


def top_level(code):
    """Splits code at brace depth 0: yields (head, body) for each top-level
    braced block (head: the text since the last ';' or '}' at depth 0) and
    (rest, None) for text between them."""
    depth, start, i = 0, 0, 0
    head = ""
    n = len(code)
    while i < n:
        c = code[i]
        if c == "{":
            if depth == 0:
                head = code[start:i]
                body_start = i
            depth += 1
        elif c == "}":
            depth -= 1
            if depth == 0:
                yield head, code[body_start:i + 1]
                start = i + 1
        elif c == ";" and depth == 0:
            yield code[start:i + 1], None
            start = i + 1
        i += 1
    if start < n:
        yield code[start:], None


FUNC_HEAD = re.compile(
    r"([A-Za-z_]\w*)\s*\(([^()]|\([^()]*\))*\)\s*(__attribute__\s*\(\(.*\)\)\s*)?$", re.S)
NOT_FUNC = re.compile(r"^\s*typedef\b|=")


def data_name(stmt):
    """The variable a top-level statement defines (`T name[..] = ...;`,
    `T name;`), or None: prototypes, typedefs, extern declarations and
    forward declarations define none."""
    decl = stmt.split("=")[0]
    if "(" in decl or re.match(r"\s*(typedef|extern)\b", decl):
        return None
    idents = IDENT.findall(re.sub(r"\[[^\]]*\]", " ", decl))
    if len(idents) < 2 or (idents[-2] in ("struct", "union", "enum") and "=" not in stmt):
        return None
    return idents[-1]


def definitions(code):
    """The functions and variables a file defines at top level,
    {name: is_static}; the text where it uses names: the functions' bodies
    and the variables' initializers (not prototypes, declarations or struct
    definitions, which name members and types); {function: names used}."""
    defs, used, bodies = {}, [], {}
    for head, body in top_level(code):
        static = bool(re.search(r"\bstatic\b", head))
        m = FUNC_HEAD.search(head.strip()) if body is not None else None
        # `= {`: data, not a function, even where the declarator has a
        # parameter list (a table of function pointers).
        if m and not NOT_FUNC.search(head.split("(")[0]):
            defs[m.group(1)] = static
            bodies[m.group(1)] = used_names(body)
            used.append(body)
            continue
        stmt = head.rstrip().rstrip(";")
        name = data_name(stmt) if body is None or "=" in head else None
        if name:
            defs[name] = static
        if "=" in head:
            used.append(head.split("=", 1)[1] + (body or ""))
    return defs, "\n".join(used), bodies


def used_names(text):
    """Identifiers named in text that are not members (after `.` or `->`)
    nor tags (after struct, union or enum)."""
    names = set()
    prev, prev_end = "", -1
    for m in IDENT.finditer(text):
        before = text[:m.start()].rstrip()
        member = before.endswith(".") or before.endswith("->")
        tag = prev in ("struct", "union", "enum") and text[prev_end:m.start()].isspace()
        if not member and not tag:
            names.add(m.group(0))
        prev, prev_end = m.group(0), m.end()
    return names - KEYWORDS


MACRO = re.compile(r"\s*#\s*define\s+([A-Za-z_]\w*)(\([^)]*\))?(.*)", re.S)


class File:
    def __init__(self, rel, text):
        self.rel = rel  # relative to the repo root
        code, directives = strip_code(text)
        self.includes = re.findall(r'^\s*#\s*include\s*"([^"]+)"', text, re.M)
        self.defs, used, bodies = definitions(code)
        self.uses = used_names(used)
        # Macros, and a header's inline functions, are used where they are
        # expanded: {name: the names in its body}.
        self.expands = {}
        for d in directives:
            m = MACRO.match(d)
            if m:
                self.expands[m.group(1)] = used_names(m.group(3))
        if rel.endswith(".h"):
            # A header defines nothing another file links to, and uses
            # nothing of its own: its includers do, through its macros and
            # inline functions (so log.h's macros, which call into log.c,
            # make no circle between log.h and log.c).
            self.expands.update(bodies)
            self.uses = set()
            self.defs = {}

def load(repo, folder):
    files = {}
    for dirpath, dirnames, filenames in os.walk(os.path.join(repo, folder)):
        dirnames.sort()
        for fn in sorted(filenames):
            if fn.endswith(SRC_EXT):
                path = os.path.join(dirpath, fn)
                rel = os.path.relpath(path, repo)
                with open(path, encoding="utf-8", errors="replace") as f:
                    files[rel] = File(rel, f.read())
    return files


def resolve_include(repo, src, inc):
    """Where `#include "inc"` in src lands: beside src first, then from the
    repo root (the project's include path), as the compiler looks."""
    beside = os.path.normpath(os.path.join(os.path.dirname(src), inc))
    if os.path.exists(os.path.join(repo, beside)):
        return beside
    if os.path.exists(os.path.join(repo, inc)):
        return os.path.normpath(inc)
    return None


def expand(names, expands):
    """names, with the names in the bodies of the macros and inline
    functions among them, and so on."""
    out, todo = set(), list(names)
    while todo:
        n = todo.pop()
        if n not in out:
            out.add(n)
            todo.extend(expands.get(n, ()))
    return out


def build_graph(repo, files):
    """edges[a][b] = set of reasons ('#include' or the names used);
    outside[a][path]: the includes of files beyond FOLDER."""
    definers, expands = {}, {}
    for f in files.values():
        for name, static in f.defs.items():
            if not static:
                definers.setdefault(name, []).append(f.rel)
        for name, body in f.expands.items():
            expands.setdefault(name, set()).update(body)
    edges = {rel: {} for rel in files}
    outside = {rel: {} for rel in files}
    for f in files.values():
        for inc in f.includes:
            tgt = resolve_include(repo, f.rel, inc)
            if tgt is None or tgt == f.rel:
                continue
            (edges if tgt in files else outside)[f.rel].setdefault(tgt, set()).add("#include")
        for name in expand(f.uses, expands):
            for tgt in definers.get(name, ()):
                if tgt != f.rel and f.defs.get(name) is None:
                    edges[f.rel].setdefault(tgt, set()).add(name)
    return edges, outside


def sccs(nodes, edges):
    """Tarjan's strongly connected components, iterative."""
    index, low, on, stack, out = {}, {}, set(), [], []
    counter = [0]
    for root in sorted(nodes):
        if root in index:
            continue
        work = [(root, iter(sorted(edges.get(root, ()))))]
        index[root] = low[root] = counter[0]
        counter[0] += 1
        stack.append(root)
        on.add(root)
        while work:
            v, it = work[-1]
            advanced = False
            for w in it:
                if w not in index:
                    index[w] = low[w] = counter[0]
                    counter[0] += 1
                    stack.append(w)
                    on.add(w)
                    work.append((w, iter(sorted(edges.get(w, ())))))
                    advanced = True
                    break
                if w in on:
                    low[v] = min(low[v], index[w])
            if advanced:
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[v])
            if low[v] == index[v]:
                comp = []
                while True:
                    w = stack.pop()
                    on.discard(w)
                    comp.append(w)
                    if w == v:
                        break
                out.append(sorted(comp))
    return out


def folder_of(folder, rel):
    d = os.path.relpath(os.path.dirname(rel), folder)
    return "." if d == "." else d.split(os.sep)[0]


def reasons(r):
    names = sorted(x for x in r if x != "#include")
    text = ["#include"] if "#include" in r else []
    if names:
        text.append(", ".join(names[:4]) + (" ..." if len(names) > 4 else ""))
    return "; ".join(text)


def folder_arrows(folder, edges, outside, with_outside):
    """{A: {B: [(file in A, file in B), ...]}} for each folder-level arrow;
    folders outside FOLDER, when asked for, as "[path]"."""
    farrows = {}
    for a, tgts in edges.items():
        fa = folder_of(folder, a)
        for b in tgts:
            fb = folder_of(folder, b)
            if fa != fb:
                farrows.setdefault(fa, {}).setdefault(fb, []).append((a, b))
    if with_outside:
        for a, tgts in outside.items():
            for b in tgts:
                fb = "[" + (os.path.dirname(b) or ".") + "]"
                farrows.setdefault(folder_of(folder, a), {}).setdefault(fb, []).append((a, b))
    return farrows


def print_house(folders, farrows, edges, comps, fcomps, verbose):
    print("\nfolders (A -> B: a file in A uses one in B):")
    for fa in folders:
        tgts = farrows.get(fa, {})
        print(f"  {fa + '/':<14} -> " + (" ".join(t + "/" for t in sorted(tgts)) or "(nothing)"))
        for fb in sorted(tgts) if verbose else ():
            for a, b in sorted(tgts[fb]):
                print(f"      {a} -> {b}")
    if verbose:
        print("\nfiles:")
        for a in sorted(edges):
            for b in sorted(edges[a]):
                print(f"  {a} -> {b}  ({reasons(edges[a][b])})")
    print("\ncircles between files (strongly connected, more than one file):")
    if not comps:
        print("  none")
    for i, comp in enumerate(comps, 1):
        print(f"  {i}. {len(comp)} files: " + " ".join(comp))
        for a in comp:
            for b in sorted(edges[a]):
                if b in comp:
                    print(f"       {a} -> {b}  ({reasons(edges[a][b])})")
    print("\ncircles between folders:")
    if not fcomps:
        print("  none")
    for comp in fcomps:
        print(f"  {len(comp)} folders: " + " ".join(c + "/" for c in comp))


def folder_list(text):
    """"a,b/,." -> ["a", "b", "."]; "-" is the empty list."""
    return [g.strip().strip("/") or "." for g in text.split(",") if g.strip() and g.strip() != "-"]


def run_checks(args, folders, fedges, comps, fcomps):
    """[(ok, line)] for every check asked for on the command line."""
    checks = []
    if args.max_circle is not None:
        worst = max((len(c) for c in comps), default=1)
        checks.append((worst <= args.max_circle,
                       f"largest circle between files: {worst} file(s), at most {args.max_circle}"))
    if args.max_folder_circle is not None:
        worst = max((len(c) for c in fcomps), default=1)
        checks.append((worst <= args.max_folder_circle, f"largest circle between folders: "
                       f"{worst}, at most {args.max_folder_circle}"))
    rules = [("apart", g, g) for g in map(folder_list, args.apart)]
    for rule in args.never:
        src, _, dst = rule.partition(":")
        rules.append(("never", folder_list(src), folder_list(dst)))
    for kind, srcs, dsts in rules:
        missing = [f"no folder {m}/" for m in dict.fromkeys(srcs + dsts) if m not in folders]
        bad = [f"{a}/ -> {b}/" for a in srcs for b in dsts if a != b and b in fedges.get(a, ())]
        what = (f"apart {','.join(srcs)}" if kind == "apart" else
                f"never {','.join(srcs)} -> {','.join(dsts)}")
        checks.append((not bad and not missing,
                       f"{what}: " + ("; ".join(bad + missing) or "no such arrow")))
    for rule in args.only:
        src, _, allowed = rule.partition(":")
        src = (folder_list(src) or ["."])[0]
        allow = set(folder_list(allowed))
        bad = sorted(t for t in fedges.get(src, ()) if t not in allow)
        text = (f"no folder {src}/" if src not in folders else
                "uses " + ", ".join(b + "/" for b in bad) if bad else "yes")
        checks.append((src in folders and not bad,
                       f"{src}/ uses only {','.join(sorted(allow)) or 'nothing'}: {text}"))
    return checks


def main(argv):
    ap = argparse.ArgumentParser(usage="%(prog)s [options] FOLDER", description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("folder", help=argparse.SUPPRESS)
    ap.add_argument("--repo", default=os.path.dirname(os.path.dirname(os.path.abspath(__file__))),
                    help="the repository's root (default: this script's)")
    ap.add_argument("--max-circle", type=int)
    ap.add_argument("--max-folder-circle", type=int)
    ap.add_argument("--apart", action="append", default=[])
    ap.add_argument("--never", action="append", default=[])
    ap.add_argument("--only", action="append", default=[])
    ap.add_argument("--outside", action="store_true", help="show arrows leaving FOLDER")
    ap.add_argument("-v", "--verbose", action="store_true", help="every file's edges")
    args = ap.parse_args(argv)

    folder = os.path.normpath(args.folder)
    if not os.path.isdir(os.path.join(args.repo, folder)):
        print(f"house: no folder {folder} in {args.repo}", file=sys.stderr)
        return 2
    files = load(args.repo, folder)
    edges, outside = build_graph(args.repo, files)
    print(f"house of {folder}/: {len(files)} files, "
          f"{sum(len(e) for e in edges.values())} uses between them")
    farrows = folder_arrows(folder, edges, outside, args.outside)
    folders = sorted({folder_of(folder, r) for r in files})
    fedges = {fa: {fb for fb in t if not fb.startswith("[")} for fa, t in farrows.items()}
    comps = sorted((c for c in sccs(files, edges) if len(c) > 1), key=lambda c: (-len(c), c))
    fcomps = [c for c in sccs(folders, fedges) if len(c) > 1]
    print_house(folders, farrows, edges, comps, fcomps, args.verbose)

    checks = run_checks(args, folders, fedges, comps, fcomps)
    if checks:
        print("\nchecks:")
    for ok, text in checks:
        print(f"  {'ok  ' if ok else 'FAIL'} {text}")
    return 0 if all(ok for ok, _ in checks) else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
