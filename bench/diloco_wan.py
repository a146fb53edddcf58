#!/usr/bin/python3
"""Compute that never waits: pccl.diloco's share of wall time in inner steps on the emulated
transatlantic WAN, blocking against Streaming DiLoCo, side by side in one run.

For each variant and repetition it starts pccl-wanem (4 rank namespaces, 80 ms RTT, 250 Mbit/s, 0.01 %
loss, cubic: bench/transatlantic.sh's scenario) with one python/examples/diloco_train.py --role wanem per
rank (rank 0 also runs the master), then reads every rank's log: the share of its wall time in inner
steps (DiLoCoStats inner_time_s / (inner_time_s + outer_time_s)) over the rounds after --skip rounds
(the joins and the first round), without the final flush; seconds per round; bytes; the emulator's
verdict. The inner step is either the real MLP training step or, with --compute-ms, the compute stand-in
of diloco_train.py (a sleep of that many ms that holds no core, then an AdamW step on a fixed gradient):
4 real trainers on 2 cores starve each other, the stand-in does not.

    bench/diloco_wan.py --variants blocking,stream-t5 --compute-ms 100 -H 40 --rounds 22 --runs 2 \\
        --json docs/benchmarks/v3/streaming/wan.json

Needs root (network namespaces) and build/bench/pccl-wanem, build/src/libpccl.so (PCCL_BUILD_DIR).
"""

import argparse
import json
import os
import platform
import subprocess
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
SCENARIO = ["--ranks", "4", "--delay-ms", "40", "--loss-pct", "0.01", "--rate-mbit", "250", "--cc", "cubic",
            "--min-tso-segs", "16"]


def records(path):
    out = []
    with open(path) as f:
        for line in f:
            words = line.split()
            if words and words[0] in ("start", "round", "final"):
                rec = {"kind": words[0]}
                for w in words[1:]:
                    k, _, v = w.partition("=")
                    rec[k] = v if k == "theta" else float(v)
                out.append(rec)
    return out


def fragments_of(variant):
    sys.path.insert(0, os.path.join(ROOT, "python", "examples"))
    import diloco_train  # noqa: PLC0415

    return diloco_train.fragments_of(variant)


def share(recs, first_round):
    """(inner share, seconds per sync point, rounds measured) over the 'round' lines from first_round on."""
    rounds = [r for r in recs if r["kind"] == "round" and r["round"] >= first_round]
    if len(rounds) < 2:
        return None, None, 0
    a, b = rounds[0], rounds[-1]
    inner, outer = b["inner_s"] - a["inner_s"], b["outer_s"] - a["outer_s"]
    return inner / (inner + outer), (b["t"] - a["t"]) / (b["round"] - a["round"]), int(b["round"] - a["round"])


def run_one(args, variant, rep, build):
    work = tempfile.mkdtemp(prefix="pccl-diloco-wan-")
    stats_path = os.path.join(work, "wanem.json")
    trainer = ("/usr/bin/python3 %s/python/examples/diloco_train.py --role wanem --variant %s --rounds %d -H %d "
               "--kill-at 0 --compute-ms %g > %s/rank$PCCL_WANEM_RANK.log 2>&1"
               % (ROOT, variant, args.rounds, args.H, args.compute_ms, work))
    env = dict(os.environ, PCCL_LIBRARY=os.path.join(build, "src", "libpccl.so"),
               PYTHONPATH=os.path.join(ROOT, "python"))
    cmd = [os.path.join(build, "bench", "pccl-wanem")] + SCENARIO + ["--stats", stats_path, "--", "sh", "-c", trainer]
    started = time.monotonic()
    proc = subprocess.run(cmd, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                          timeout=args.timeout_s)
    wall = time.monotonic() - started
    if proc.returncode not in (0, 3):  # 3: the run completed, the emulator was not faithful (recorded)
        sys.stderr.write(proc.stdout[-4000:])
        for r in range(4):
            p = os.path.join(work, "rank%d.log" % r)
            if os.path.exists(p):
                sys.stderr.write("---- rank %d\n%s\n" % (r, open(p).read()[-3000:]))
        raise SystemExit("%s run %d failed (rc %d); logs in %s" % (variant, rep, proc.returncode, work))
    P = fragments_of(variant)
    first = args.skip * P
    ranks = []
    for r in range(4):
        recs = records(os.path.join(work, "rank%d.log" % r))
        s, per_sync, measured = share(recs, first)
        final = next(x for x in recs if x["kind"] == "final")
        ranks.append({"rank": r, "inner_share": s, "s_per_round": per_sync * P if per_sync else None,
                      "rounds_measured": measured / P, "tx_bytes": int(final["tx"]),
                      "peak_step_tx_bytes": int(final.get("peak_tx", 0)), "final_loss": final["eval"]})
    verdict = None
    if os.path.exists(stats_path):
        with open(stats_path) as f:
            verdict = "faithful" if json.load(f).get("faithful") else "not faithful"
    thetas = {}
    for r in range(4):
        for x in records(os.path.join(work, "rank%d.log" % r)):
            if x["kind"] == "round":
                thetas.setdefault(int(x["round"]), set()).add(x["theta"])
    return {"variant": variant, "run": rep, "fragments": P, "wall_s": round(wall, 1), "ranks": ranks,
            "min_inner_share": min(x["inner_share"] for x in ranks),
            "identical_outer_params_every_round": all(len(v) == 1 for v in thetas.values()),
            "emulator_verdict": verdict, "logs": work}


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--variants", default="blocking,stream-t5")
    parser.add_argument("--runs", type=int, default=2)
    parser.add_argument("--compute-ms", type=float, default=100.0, help="0: real training steps")
    parser.add_argument("-H", type=int, default=40)
    parser.add_argument("--rounds", type=int, default=22, help="outer periods of H inner steps")
    parser.add_argument("--skip", type=int, default=2, help="periods left out at the start (the joins)")
    parser.add_argument("--timeout-s", type=float, default=900)
    parser.add_argument("--json")
    args = parser.parse_args()
    build = os.environ.get("PCCL_BUILD_DIR", os.path.join(ROOT, "build"))
    results = []
    for rep in range(1, args.runs + 1):
        for variant in args.variants.split(","):  # interleaved: both see the same machine over time
            r = run_one(args, variant, rep, build)
            results.append(r)
            print("%-14s run %d: inner share per rank %s, s/round %s, verdict %s, identical %s" % (
                variant, rep, " ".join("%.3f" % x["inner_share"] for x in r["ranks"]),
                " ".join("%.2f" % x["s_per_round"] for x in r["ranks"][:1]), r["emulator_verdict"],
                r["identical_outer_params_every_round"]), flush=True)
    record = {"command": "bench/diloco_wan.py " + " ".join(sys.argv[1:]),
              "scenario": "pccl-wanem " + " ".join(SCENARIO),
              "inner_step": ("compute stand-in: sleep %g ms (holds no core) + AdamW step on a fixed gradient"
                             % args.compute_ms) if args.compute_ms > 0 else "real training step (MLP 284,682 params)",
              "H": args.H, "rounds": args.rounds, "measured_after_periods": args.skip,
              "machine": {"cpus": os.cpu_count(), "platform": platform.platform(),
                          "load_avg_at_end": os.getloadavg()},
              "date": time.strftime("%Y-%m-%d"), "runs": results}
    if args.json:
        os.makedirs(os.path.dirname(os.path.abspath(args.json)), exist_ok=True)
        with open(args.json, "w") as f:
            json.dump(record, f, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
