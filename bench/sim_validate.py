#!/usr/bin/python3
"""pccl-sim against the emulator: for every size and algorithm measured by bench/regions.sh (several runs),
pccl-sim's prediction on the same paths file, the same ring (each run's, from its JSON) and the same K,
beside the measured medians; the error of the prediction against the median of the runs' medians.

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
    p.add_argument("--json", required=True, help="write the comparison here")
    p.add_argument("--markdown", help="also write the comparison as a Markdown table here")
    return p.parse_args()


def rows_of(path):
    with open(path) as f:
        return [dict(r, file=os.path.basename(path)) for r in json.load(f)["results"]]


def predict(args, algorithm, ring, connections, gather_bytes, sizes, warmup, iters):
    """pccl-sim's times for these sizes (bytes -> seconds) on this ring, with the run's gather limit (which
    decides the line-ups' algorithm too)."""
    with tempfile.NamedTemporaryFile(suffix=".json") as out:
        times, commands = {}, []
        for size in sizes:  # one call per size: the sizes measured need not be a geometric series
            cmd = [os.path.join(args.build, "bench", "pccl-sim"), "--paths", args.paths, "--order",
                   ",".join(str(r) for r in ring), "--connections", str(connections), "--algorithm", algorithm,
                   "--gather-bytes", str(gather_bytes),
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
        key = (r["algorithm"], tuple(r["ring"]), r["connections"], int(r.get("gather_bytes", -1)),
               r.get("iterations", 3))
        wanted.setdefault(key, set()).add(r["bytes"])
    predictions, commands = {}, []
    for (algorithm, ring, k, gather_bytes, iters), sizes in sorted(wanted.items()):
        times, cmds = predict(args, algorithm, ring, k, gather_bytes, sorted(sizes), 1, iters)
        commands += cmds
        for size, p in times.items():
            predictions[(algorithm, ring, size)] = p
    out = []
    for (algorithm, size), runs in sorted(cells.items(), key=lambda kv: (kv[0][0], kv[0][1])):
        runs = sorted(runs, key=lambda r: r["file"])
        medians = [r["time_s"] for r in runs]
        measured = statistics.median(medians)
        preds = [predictions[(algorithm, tuple(r["ring"]), size)]["time_s"] for r in runs]
        predicted = statistics.median(preds)
        out.append({
            "algorithm": algorithm, "bytes": size,
            "runs": [{"file": r["file"], "ring": r["ring"], "time_s": r["time_s"],
                      "time_min_s": r.get("time_min_s", r["time_s"]), "time_max_s": r.get("time_max_s", r["time_s"]),
                      "emulator_faithful": r.get("emulator_faithful"), "predicted_s": p}
                     for r, p in zip(runs, preds)],
            "measured_s": measured, "predicted_s": predicted,
            "error_pct": (predicted - measured) / measured * 100,
            "all_faithful": all(r.get("emulator_faithful") is True for r in runs),
            "link_bound_s": predictions[(algorithm, tuple(runs[0]["ring"]), size)].get("link_bound_s", 0),
        })
    doc = {"paths": os.path.relpath(args.paths, ROOT), "measured": [os.path.relpath(p, ROOT) for p in args.measured],
           "sim_commands": commands, "rows": out}
    with open(args.json, "w") as f:
        json.dump(doc, f, indent=1)
    lines = ["| algorithm | size | measured, per run: median (fastest–slowest) | measured (median of runs) | "
             "predicted | error | emulator |", "|---|---:|---|---:|---:|---:|---|"]
    for c in out:
        runs = "; ".join(f"{fmt(r['time_s'])} ({fmt(r['time_min_s'])}–{fmt(r['time_max_s'])})" for r in c["runs"])
        verdict = "faithful" if c["all_faithful"] else "**not all faithful**"
        lines.append(f"| {c['algorithm']} | {size_name(c['bytes'])} | {runs} | {fmt(c['measured_s'])} | "
                     f"{fmt(c['predicted_s'])} | {c['error_pct']:+.1f} % | {verdict} |")
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
