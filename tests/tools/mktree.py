#!/usr/bin/env python3
"""Builds a fake /sys tree from a manifest (tests/fixtures/sysfs/README.md)."""
import os
import sys

manifest, root = sys.argv[1], sys.argv[2]
with open(manifest) as f:
    for line in f:
        line = line.strip()
        if not line or line.startswith("#"):
            continue
        if " -> " in line:
            path, target = (x.strip() for x in line.split(" -> ", 1))
            full = os.path.join(root, path)
            os.makedirs(os.path.dirname(full), exist_ok=True)
            os.symlink(target, full)
        elif " = " in line:
            path, content = line.split(" = ", 1)
            full = os.path.join(root, path.strip())
            os.makedirs(os.path.dirname(full), exist_ok=True)
            with open(full, "w") as out:
                out.write(content + "\n")
        elif line.endswith("/"):
            os.makedirs(os.path.join(root, line), exist_ok=True)
