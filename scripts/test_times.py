#!/usr/bin/python3
"""Where a ctest run's time went: the slowest tests and each one's share of its timeout.

  scripts/test_times.py BUILD_DIR [--junit FILE] [--timeout S] [--top N] [--json OUT]

Reads the run's JUnit file (ctest --output-junit; default BUILD_DIR/ctest-junit.xml) and the tests'
TIMEOUT properties (ctest --show-only=json-v1; S is the ctest --timeout default for tests without one,
default 1500 as ctest's own). Prints the N slowest tests (default 25) with time, timeout and ratio, the
sum of test times, and the tightest ratio over every test: a test that takes more than half its timeout
on a busy machine is one a busier machine fails (docs/testing.md). --json writes the same as JSON.
Then, for every failed test, the lines of its output that say why (assertions, sanitizer reports) and
its last --tail lines (default 40): printed last, so that a log cut to its end still shows the cause.
Reports only: the exit status is 0 unless the files cannot be read.
"""
import argparse
import json
import os
import re
import subprocess
import sys
import xml.etree.ElementTree as ET


def timeouts(build_dir, default):
    out = subprocess.run(["ctest", "--test-dir", build_dir, "--show-only=json-v1"], check=True,
                         capture_output=True, text=True).stdout
    result = {}
    for test in json.loads(out).get("tests", []):
        limit = default
        for prop in test.get("properties", []):
            if prop.get("name") == "TIMEOUT":
                limit = float(prop["value"])
        result[test["name"]] = limit
    return result


# Lines that say why a test failed: Catch2's failed assertions and warnings, sanitizer and UBSan
# reports, ctest's own verdicts.
CAUSE = re.compile(r"FAILED|failed|with expansion|REQUIRE|CHECK|ERROR: |WARNING: ThreadSanitizer|warning:|"
                   r"AddressSanitizer|LeakSanitizer|runtime error|Timeout|Segmentation|Assertion")


def print_failures(junit_root, tail):
    for case in junit_root.iter("testcase"):
        if case.get("status", "") not in ("fail", "failed", "timeout") and case.find("failure") is None:
            continue
        out = case.findtext("system-out") or ""
        lines = out.splitlines()
        shown = set()  # each line that matches, with the two after it (an expansion, a warning's text)
        for i, l in enumerate(lines):
            if CAUSE.search(l):
                shown.update(range(i, min(i + 3, len(lines))))
        print(f"pccl: FAILED: {case.get('name', '')}")
        for i in sorted(shown)[:60]:
            print(f"  why| {lines[i][:240]}")
        for l in lines[-tail:]:
            print(f"  end| {l[:240]}")


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("build_dir")
    parser.add_argument("--junit")
    parser.add_argument("--timeout", type=float, default=1500.0)
    parser.add_argument("--top", type=int, default=25)
    parser.add_argument("--json")
    parser.add_argument("--tail", type=int, default=40)
    args = parser.parse_args()
    junit = args.junit or os.path.join(args.build_dir, "ctest-junit.xml")
    try:
        root = ET.parse(junit).getroot()
        cases = root.iter("testcase")
        limits = timeouts(args.build_dir, args.timeout)
    except (OSError, ET.ParseError, subprocess.CalledProcessError, ValueError) as e:
        print(f"test_times.py: cannot read the run in {args.build_dir}: {e}", file=sys.stderr)
        return 1
    rows = []
    for case in cases:
        name = case.get("name", "")
        seconds = float(case.get("time", "0"))
        limit = limits.get(name, args.timeout)
        rows.append({"name": name, "seconds": round(seconds, 2), "timeout": limit,
                     "ratio": round(seconds / limit, 3) if limit > 0 else 0.0,
                     "status": case.get("status", "")})
    if not rows:
        print(f"test_times.py: no tests in {junit}")
        return 0
    slowest = sorted(rows, key=lambda r: -r["seconds"])[: args.top]
    tightest = max(rows, key=lambda r: r["ratio"])
    total = sum(r["seconds"] for r in rows)
    print(f"pccl: {len(rows)} tests, {total:.0f} s of test time; the {len(slowest)} slowest:")
    for r in slowest:
        print(f"  {r['seconds']:8.2f} s  {r['ratio'] * 100:5.1f} % of {r['timeout']:.0f} s  {r['name'][:110]}")
    print(f"pccl: tightest: {tightest['ratio'] * 100:.1f} % of its timeout ({tightest['seconds']:.2f} s of "
          f"{tightest['timeout']:.0f} s): {tightest['name'][:110]}")
    if args.json:
        with open(args.json, "w", encoding="utf-8") as f:
            json.dump({"build_dir": os.path.abspath(args.build_dir), "tests": len(rows), "total_seconds": total,
                       "tightest": tightest, "slowest": slowest, "all": rows}, f, indent=1)
    print_failures(root, args.tail)
    return 0


if __name__ == "__main__":
    sys.exit(main())
