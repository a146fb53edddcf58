#!/usr/bin/python3
"""Marks every row of a pccl-bench JSON file with the emulator's verdict over that row's timed phases.

  bench/wanem_mark.py STATS_JSON BENCH_JSON

STATS_JSON is what `pccl-wanem --stats FILE` wrote. Its "phases" list has one entry per label
"ROW:BACKEND:ALGORITHM:BYTES" (the lines pccl-bench appends to $PCCL_WANEM_PHASES, merged over ranks
and iterations) with "faithful", "late_p99_us" and "emulator_drops". Row i of BENCH_JSON's "results"
gets "emulator_faithful" from the phase labelled "i:...", plus "emulator_late_p99_us",
"emulator_late_max_us", "emulator_drops" and, when not faithful, "emulator_why" (the emulator's
reasons); a row without its phase (or whose phase names another backend, algorithm or size) is marked
false and named on stderr. A stats file without "phases" (an older pccl-wanem) gives every
row the whole-run "faithful". BENCH_JSON is rewritten in place, one row per line as pccl-bench writes
it (bench/plot.sh reads rows line by line).

Exit status: 0 rows marked (faithful or not); 1 the stats file is missing or unreadable (every row is
then marked false); 2 bad usage or an unreadable BENCH_JSON.
"""
import argparse
import json
import os
import sys


def phase_verdicts(stats):
    """{row index: phase} from the stats' "phases", or None when the stats have no per-phase verdicts."""
    phases = stats.get("phases")
    if phases is None:
        return None
    by_row = {}
    for p in phases:
        label = str(p.get("label", ""))
        head = label.split(":", 1)[0]
        if head.isdigit():
            by_row.setdefault(int(head), []).append(p)
    return by_row


def row_label(i, row):
    return f"{i}:{row.get('backend')}:{row.get('algorithm')}:{row.get('bytes')}"


def with_marks(row, marks):
    """The row with `marks` set: new keys go before "wrong" (where the scenario scripts always put them)."""
    out = {}
    for key, value in row.items():
        if key == "wrong":
            out.update(marks)
        if key not in marks:
            out[key] = value
    out.update(marks)  # no "wrong" key: at the end
    return out


def mark(rows, stats, name):
    """Marks rows in place from stats (None: unreadable); returns how many rows are faithful."""
    by_row = phase_verdicts(stats) if stats is not None else None
    faithful = 0
    for i, row in enumerate(rows):
        for key in ("emulator_late_p99_us", "emulator_late_max_us", "emulator_drops", "emulator_why"):
            # nothing kept from an earlier marking
            row.pop(key, None)
        if stats is None:
            marks = {"emulator_faithful": False}
        elif by_row is None:
            marks = {"emulator_faithful": stats.get("faithful") is True}
        else:
            want = row_label(i, row)
            found = [p for p in by_row.get(i, []) if p.get("label") == want]
            if not found:
                got = ", ".join(str(p.get("label")) for p in by_row.get(i, [])) or "none"
                print(f"wanem_mark: {name}: row {i} ({want}): no phase with its label in the stats "
                      f"(phases for row {i}: {got}): marked not faithful", file=sys.stderr)
                marks = {"emulator_faithful": False}
            else:
                p = found[0]
                marks = {"emulator_faithful": p.get("faithful") is True,
                         "emulator_late_p99_us": p.get("late_p99_us"),
                         "emulator_late_max_us": p.get("late_max_us"),
                         "emulator_drops": p.get("emulator_drops")}
                if p.get("why"):
                    marks["emulator_why"] = p.get("why")
        rows[i] = with_marks(row, marks)
        faithful += rows[i]["emulator_faithful"]
    return faithful


def write_rows(path, rows):
    """{"results": [...]} with one row per line, as pccl-bench writes it; replaced atomically."""
    tmp = path + ".wanem_mark.tmp"
    with open(tmp, "w", encoding="utf-8") as f:
        f.write("{\"results\": [")
        f.write(",".join("\n  " + json.dumps(r) for r in rows))
        f.write("\n]}\n")
    os.replace(tmp, path)


def main():
    parser = argparse.ArgumentParser(
        prog="wanem_mark.py",
        usage="bench/wanem_mark.py [-h] STATS_JSON BENCH_JSON",
        description="Sets each pccl-bench row's emulator_faithful (and emulator_late_p99_us, "
                    "emulator_late_max_us, emulator_drops, emulator_why) "
                    "from the pccl-wanem --stats verdict of that row's timed phases; rewrites BENCH_JSON in place.")
    parser.add_argument("stats", metavar="STATS_JSON", help="what pccl-wanem --stats wrote")
    parser.add_argument("bench", metavar="BENCH_JSON", help="what pccl-bench --json wrote (rewritten)")
    args = parser.parse_args()
    try:
        with open(args.bench, encoding="utf-8") as f:
            doc = json.load(f)
        rows = doc["results"]
        if not isinstance(rows, list):
            raise ValueError("\"results\" is not a list")
    except (OSError, ValueError, KeyError, TypeError) as e:
        print(f"wanem_mark: cannot read the rows of {args.bench}: {e}", file=sys.stderr)
        return 2
    status = 0
    stats = None
    try:
        with open(args.stats, encoding="utf-8") as f:
            stats = json.load(f)
        if not isinstance(stats, dict):
            raise ValueError("not a JSON object")
    except (OSError, ValueError) as e:
        print(f"wanem_mark: cannot read the emulator's stats {args.stats} ({e}): every row marked not faithful",
              file=sys.stderr)
        stats, status = None, 1
    faithful = mark(rows, stats, args.bench)
    how = "no stats" if stats is None else "per-phase verdicts" if "phases" in stats else "the whole-run verdict"
    print(f"wanem_mark: {args.bench}: {faithful} of {len(rows)} rows faithful ({how})", file=sys.stderr)
    try:
        write_rows(args.bench, rows)
    except OSError as e:
        print(f"wanem_mark: cannot rewrite {args.bench}: {e}", file=sys.stderr)
        return 2
    return status


if __name__ == "__main__":
    sys.exit(main())
