#!/usr/bin/python3
"""Checks that no file under src/ includes from a higher layer.

The layer order is read from docs/architecture.md §1, the line "Each layer includes only the layers
before it: `util → wire → ... → apps`": layers are separated by '→', and the layers of one step
(", "-separated, e.g. "master, peer") are siblings, which may not include each other either. A file's
layer is its first folder under src/ (src/codec/gpu/engine.cpp is in codec). Every #include "..."
whose first folder is a layer is checked: a file may include its own layer and the layers before it.
Includes of anything else (<...>, "pccl/...", the public headers) are not layers and are not checked.

  python3 scripts/check_layers.py [--root DIR]     exit 0: clean; 1: upward includes; 2: usage
Part of the test suite (ctest "layers: no file includes from a higher layer").
"""
import argparse
import os
import re
import sys

ORDER_RE = re.compile(r"Each layer includes only the layers before it:\s*`([^`]*)`")
INCLUDE_RE = re.compile(r'^\s*#\s*include\s+"([^"]+)"')
SOURCE_SUFFIXES = (".hpp", ".cpp", ".h", ".c", ".inc", ".cu", ".hip")


def layer_ranks(root):
    """{layer: rank} from docs/architecture.md; siblings share a rank."""
    path = os.path.join(root, "docs", "architecture.md")
    try:
        with open(path, encoding="utf-8") as f:
            text = " ".join(f.read().split())  # the order may wrap over lines
    except OSError as e:
        print(f"check_layers: cannot read {path}: {e.strerror}", file=sys.stderr)
        sys.exit(2)
    m = ORDER_RE.search(text)
    if not m:
        print(f"check_layers: no layer order ('Each layer includes only the layers before it: `...`') in {path}",
              file=sys.stderr)
        sys.exit(2)
    ranks = {}
    for rank, step in enumerate(m.group(1).split("→")):
        for name in step.split(","):
            name = name.strip()
            if name:
                ranks[name] = rank
    return ranks


def source_files(src):
    for dirpath, dirnames, filenames in os.walk(src):
        dirnames.sort()
        for name in sorted(filenames):
            if name.endswith(SOURCE_SUFFIXES):
                yield os.path.join(dirpath, name)


def upward_includes(root, ranks):
    """(file, line, its layer, the included path, that layer) for every include from a higher or sibling layer."""
    src = os.path.join(root, "src")
    found = []
    unlayered = set()
    for path in source_files(src):
        rel = os.path.relpath(path, src)
        layer = rel.split(os.sep)[0]
        if layer not in ranks:
            if os.sep in rel:
                unlayered.add(layer)
            continue
        with open(path, encoding="utf-8", errors="replace") as f:
            for lineno, line in enumerate(f, 1):
                m = INCLUDE_RE.match(line)
                if not m or "/" not in m.group(1):
                    continue
                target = m.group(1).split("/")[0]
                if target not in ranks or target == layer:
                    continue
                if ranks[target] >= ranks[layer]:
                    found.append((os.path.relpath(path, root), lineno, layer, m.group(1), target))
    return found, unlayered


REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def main(argv):
    parser = argparse.ArgumentParser(description="no file under src/ includes from a higher layer")
    parser.add_argument("--root", default=REPO, help="repository root (default: this script's ../)")
    root = os.path.abspath(parser.parse_args(argv).root)
    ranks = layer_ranks(root)
    found, unlayered = upward_includes(root, ranks)
    status = 0
    for folder in sorted(unlayered):
        print(f"src/{folder}/: not a layer of docs/architecture.md §1 (add it to the order)")
        status = 1
    for rel, lineno, layer, included, target in found:
        how = "a sibling" if ranks[target] == ranks[layer] else "a higher"
        print(f"{rel}:{lineno}: {layer} includes \"{included}\" from {how} layer ({target})")
        status = 1
    if status:
        print(f"check_layers: {len(found)} include(s) against the layer order", file=sys.stderr)
        return status
    steps = {}
    for name, rank in ranks.items():
        steps.setdefault(rank, []).append(name)
    order = " → ".join(", ".join(sorted(steps[r])) for r in sorted(steps))
    print(f"check_layers: every include under src/ follows {order}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
