#!/usr/bin/python3
"""Checks that every C API symbol the documentation names exists in the public header.

Scans README.md, docs/**/*.md, bench/README.md, examples/**/README.md and python/**/*.md for
  - pcclSomething           (functions, types, enumerators of the C API), and
  - PCCL_ATTR_*, PCCL_VERSION_*, PCCL_CONFIG_*, PCCL_COMM_*, PCCL_MASTER_*, PCCL_REDUCE_*,
    PCCL_SHARED_* (enumerators and macros of pccl.h / version.h),
and fails, listing file:line and the symbol, for every one that is not an identifier of
include/pccl/pccl.h or include/pccl/version.h.in (comments do not count). pcclGpu* names belong to
the GPU backend module ABI (docs/gpu.md) and are looked up in src/codec/gpu/backend_abi.h. Environment variables (PCCL_SECRET,
PCCL_LOG_LEVEL, ...) are not C symbols: only the prefixes above are checked.

  python3 scripts/check_docs.py [--root DIR]     exit 0: all found; 1: missing symbols; 2: usage
Part of the test suite (ctest "docs: every pccl* symbol the docs name exists in pccl.h").
"""
import argparse
import os
import re
import sys

DOC_GLOBS = [
    ("", "README.md", False),
    ("docs", ".md", True),
    ("bench", "README.md", False),
    ("examples", "README.md", True),
    ("python", ".md", True),
]
HEADERS = ["include/pccl/pccl.h", "include/pccl/version.h.in"]
# pcclGpu*: the ABI between libpccl and a GPU backend module (docs/gpu.md), not part of libpccl's C API;
# those names are checked against the module ABI's header instead.
MODULE_ABI_PREFIX = "pcclGpu"
MODULE_ABI_HEADERS = ["src/codec/gpu/backend_abi.h"]
# A match ending in '_' ("PCCL_ATTR_*", "PCCL_VERSION_{MAJOR,MINOR}") names a family: some declared
# identifier must start with it.
SYMBOL_RE = re.compile(
    r"\b(pccl[A-Z][A-Za-z0-9_]*|PCCL_(?:ATTR|VERSION|CONFIG|COMM|MASTER|REDUCE|SHARED)_[A-Z0-9_]*)")
IDENT_RE = re.compile(r"\b[A-Za-z_][A-Za-z0-9_]*\b")


def doc_files(root):
    """The documentation files, sorted, as paths relative to root."""
    found = set()
    for base, suffix, recursive in DOC_GLOBS:
        top = os.path.join(root, base)
        if not recursive:
            if os.path.isfile(os.path.join(top, suffix)):
                found.add(os.path.normpath(os.path.join(base, suffix)))
            continue
        if not os.path.isdir(top):
            continue
        for dirpath, dirnames, filenames in os.walk(top):
            dirnames[:] = sorted(d for d in dirnames if not d.startswith("."))
            for name in filenames:
                if name.endswith(suffix) and (suffix != "README.md" or name == "README.md"):
                    found.add(os.path.relpath(os.path.join(dirpath, name), root))
    return sorted(found)


def strip_c_comments(text):
    """The header without its comments: a name only mentioned in a comment is not declared."""
    text = re.sub(r"/\*.*?\*/", " ", text, flags=re.S)
    return re.sub(r"//[^\n]*", " ", text)


def header_identifiers(root, headers):
    names = set()
    for rel in headers:
        path = os.path.join(root, rel)
        try:
            with open(path, encoding="utf-8") as f:
                names.update(IDENT_RE.findall(strip_c_comments(f.read())))
        except OSError as e:
            print(f"check_docs: cannot read {rel}: {e.strerror}", file=sys.stderr)
            sys.exit(2)
    return names


def symbols_in_line(line):
    """(symbol, is_prefix) for each C API name on the line; "PCCL_ATTR_*" names a family (a prefix)."""
    for m in SYMBOL_RE.finditer(line):
        sym = m.group(1)
        yield sym, sym.endswith("_")


def main(argv):
    here = os.path.dirname(os.path.abspath(__file__))
    parser = argparse.ArgumentParser(description="every pccl* symbol the docs name exists in pccl.h")
    parser.add_argument("--root", default=os.path.dirname(here), help="repository root (default: this script's ../)")
    args = parser.parse_args(argv)
    root = os.path.abspath(args.root)

    declared = header_identifiers(root, HEADERS)
    module_abi = header_identifiers(root, MODULE_ABI_HEADERS)
    files = doc_files(root)
    if not files:
        print(f"check_docs: no documentation found under {root}", file=sys.stderr)
        return 2
    missing = []
    checked = set()
    for rel in files:
        with open(os.path.join(root, rel), encoding="utf-8", errors="replace") as f:
            for lineno, line in enumerate(f, 1):
                for sym, is_prefix in symbols_in_line(line):
                    checked.add(sym)
                    names = module_abi if sym.startswith(MODULE_ABI_PREFIX) else declared
                    if is_prefix:
                        ok = any(name.startswith(sym) for name in names)
                    else:
                        ok = sym in names
                    if not ok:
                        where = MODULE_ABI_HEADERS[0] if names is module_abi else "include/pccl/pccl.h or version.h"
                        missing.append((rel, lineno, sym + "*" if is_prefix else sym, where))
    for rel, lineno, sym, where in missing:
        print(f"{rel}:{lineno}: {sym} is not declared in {where}")
    if missing:
        print(f"check_docs: {len(missing)} reference(s) to {len({m[2] for m in missing})} symbol(s) "
              f"missing from the header ({len(files)} files scanned)", file=sys.stderr)
        return 1
    print(f"check_docs: {len(checked)} distinct symbols named in {len(files)} files, all declared")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
