#!/usr/bin/python3
"""pccl-sim against the emulator: for every size and algorithm measured by bench/regions.sh (several runs),
pccl-sim's prediction on the same paths file, the same ring (each run's, from its JSON), the same K and the
same group decision (a run forced "two-level" is a two-level group: its line-ups gather in two levels too),
beside the measured medians; the error of the prediction against the median of the runs' medians, once per
TCP model (--tcp-windows 0 and 1 by default).

  bench/sim_validate.py --json OUT.json [--markdown OUT.md] MEASURED.json...
"""
import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def parse_args():
    p = argparse.ArgumentParser(
        description="pccl-sim's predictions against measured pccl-bench rows (bench/regions.sh JSON): one "
        "line per algorithm and size, every run's median and spread, the prediction and its error.")
    p.add_argument("measured", nargs="+", help="pccl-bench JSON files (bench/regions.sh --json)")
    p.add_argument("--paths", default=os.path.join(ROOT, "bench", "regions.paths"),
                   help="the scenario's pccl-wanem paths file (default bench/regions.paths)")
    p.add_argument("--build", default=os.environ.get("PCCL_BUILD_DIR", os.path.join(ROOT, "build")),
                   help="build tree with bench/pccl-sim (default $PCCL_BUILD_DIR or build/)")
    p.add_argument("--sim-flag", action="append", default=[],
                   help="an extra pccl-sim flag for every prediction (repeatable), e.g. --sim-flag=--cpu-gbps=2")
    p.add_argument("--tcp-windows", default="0,1",
                   help="pccl-sim's --tcp-windows values to predict with, comma-separated (default 0,1)")
    p.add_argument("--json", required=True, help="write the comparison here")
    p.add_argument("--markdown", help="also write the comparison as a Markdown table here")
    return p.parse_args()


def rows_of(path):
    with open(path) as f:
        return [dict(r, file=os.path.basename(path)) for r in json.load(f)["results"]]


def gather_limit(row):
    """The run's gather limit: a number, or the library's default (-1)."""
    try:
        return int(row.get("gather_bytes", -1))
    except (TypeError, ValueError):
        return -1


def levels_of(row):
    """The group's decision in the run: two-level when forced so or when it ran a two-level algorithm."""
    two = row.get("forced") == "two-level" or str(row.get("algorithm", "")).startswith("two-level")
    return "two-level" if two else "flat"


def predict(args, algorithm, ring, connections, gather_bytes, levels, windows, sizes, warmup, iters):
    """pccl-sim's times for these sizes (bytes -> seconds) on this ring, with the run's gather limit and group
    decision (which decide the line-ups' algorithm too) and TCP model."""
    with tempfile.NamedTemporaryFile(suffix=".json") as out:
        times, commands = {}, []
        for size in sizes:  # one call per size: the sizes measured need not be a geometric series
            cmd = [os.path.join(args.build, "bench", "pccl-sim"), "--paths", args.paths, "--order",
                   ",".join(str(r) for r in ring), "--connections", str(connections), "--algorithm", algorithm,
                   "--gather-bytes", str(gather_bytes), "--levels", levels, "--tcp-windows", str(windows),
                   "-b", str(size), "-e", str(size), "-w", str(warmup), "-n", str(iters), "--json", out.name]
            cmd += args.sim_flag
            subprocess.run(cmd, check=True, stdout=subprocess.DEVNULL)
            with open(out.name) as f:
                for r in json.load(f)["results"]:
                    times[r["bytes"]] = r
            commands.append(" ".join(["pccl-sim"] + [c for c in cmd[1:] if c != out.name and c != "--json"])
                            .replace(ROOT + "/", ""))
        return times, commands


def main():
    args = parse_args()
    rows = [r for path in args.measured for r in rows_of(path) if r.get("backend") == "pccl"]
    if not rows:
        sys.exit("sim_validate: no pccl rows in " + ", ".join(args.measured))
    # (algorithm, bytes) -> the runs' rows
    cells = {}
    for r in rows:
        cells.setdefault((r["algorithm"], r["bytes"]), []).append(r)
    # One prediction per (algorithm, ring, K, iterations): the runs may have installed different rings.
    wanted = {}
    for r in rows:
        key = (r["algorithm"], tuple(r["ring"]), r["connections"], gather_limit(r), levels_of(r),
               r.get("iterations", 3))
        wanted.setdefault(key, set()).add(r["bytes"])
    windows_list = [int(w) for w in args.tcp_windows.split(",")]
    predictions, commands = {}, []
    for windows in windows_list:
        for (algorithm, ring, k, gather_bytes, levels, iters), sizes in sorted(wanted.items()):
            times, cmds = predict(args, algorithm, ring, k, gather_bytes, levels, windows, sorted(sizes), 1, iters)
            commands += cmds
            for size, p in times.items():
                predictions[(windows, algorithm, ring, size)] = p
    out = []
    for (algorithm, size), runs in sorted(cells.items(), key=lambda kv: (kv[0][0], kv[0][1])):
        runs = sorted(runs, key=lambda r: r["file"])
        medians = [r["time_s"] for r in runs]
        measured = statistics.median(medians)
        by_windows = {}
        for windows in windows_list:
            preds = [predictions[(windows, algorithm, tuple(r["ring"]), size)]["time_s"] for r in runs]
            predicted = statistics.median(preds)
            by_windows[windows] = {"predicted_s": predicted, "error_pct": (predicted - measured) / measured * 100,
                                   "per_run_s": preds}
        first = predictions[(windows_list[0], algorithm, tuple(runs[0]["ring"]), size)]
        out.append({
            "algorithm": algorithm, "bytes": size, "levels": levels_of(runs[0]),
            "runs": [{"file": r["file"], "ring": r["ring"], "time_s": r["time_s"],
                      "time_min_s": r.get("time_min_s", r["time_s"]), "time_max_s": r.get("time_max_s", r["time_s"]),
                      "emulator_faithful": r.get("emulator_faithful")} for r in runs],
            "measured_s": measured,
            "tcp_windows": {str(w): v for w, v in by_windows.items()},
            "all_faithful": all(r.get("emulator_faithful") is True for r in runs),
            "link_bound_s": first.get("link_bound_s", 0),
        })
    doc = {"paths": os.path.relpath(args.paths, ROOT), "measured": [os.path.relpath(p, ROOT) for p in args.measured],
           "sim_commands": commands, "rows": out}
    with open(args.json, "w") as f:
        json.dump(doc, f, indent=1)
    head = ["algorithm", "size", "measured, per run: median (fastest–slowest)", "measured (median of runs)"]
    for w in windows_list:
        head += [f"predicted, TCP windows {'on' if w else 'off'}", "error"]
    head.append("emulator")
    lines = ["| " + " | ".join(head) + " |", "|---|---:|---|---:|" + "---:|---:|" * len(windows_list) + "---|"]
    for c in out:
        runs = "; ".join(f"{fmt(r['time_s'])} ({fmt(r['time_min_s'])}–{fmt(r['time_max_s'])})" for r in c["runs"])
        verdict = "faithful" if c["all_faithful"] else "**not all faithful**"
        cells = [c["algorithm"], size_name(c["bytes"]), runs, fmt(c["measured_s"])]
        for w in windows_list:
            v = c["tcp_windows"][str(w)]
            cells += [fmt(v["predicted_s"]), f"{v['error_pct']:+.1f} %"]
        cells.append(verdict)
        lines.append("| " + " | ".join(cells) + " |")
    table = "\n".join(lines) + "\n"
    if args.markdown:
        with open(args.markdown, "w") as f:
            f.write(table)
    sys.stdout.write(table)


def fmt(seconds):
    return f"{seconds * 1e3:.0f} ms" if seconds < 1 else f"{seconds:.2f} s"


def size_name(b):
    for unit, n in (("GiB", 1 << 30), ("MiB", 1 << 20), ("KiB", 1 << 10)):
        if b >= n and b % n == 0:
            return f"{b // n} {unit}"
    return f"{b} B"


if __name__ == "__main__":
    main()
