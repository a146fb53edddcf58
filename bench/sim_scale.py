#!/usr/bin/python3
"""pccl-sim at scale: the time of a 4 KiB and a 1 GiB float32 all-reduce for 16 .. 1,024 peers in 2 .. 8
regions of equal size, per algorithm: at 4 KiB the flat ring, the flat gather and "auto" in a two-level group
(what the library picks there: the two-level gather where it applies, docs/algorithms.md §12a); at 1 GiB
the flat ring and the two-level all-reduce (§12), as JSON and a PNG (gnuplot).

The network (docs/sim.md, "Scale"): every peer's access link LAN_MBIT, LAN_DELAY_MS one way inside a
region; every pair of peers in different regions its own WAN_MBIT path; regions on a line, region i and j
20 + 60 |i - j| / (R - 1) ms apart one way (20 ms neighbours, 80 ms the two ends); the ring region by
region (what the topology optimiser picks on such links); K connections per link.

  bench/sim_scale.py --json docs/benchmarks/regions/scale.json --png docs/benchmarks/regions/scale.png
"""
import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
# (size, algorithms): "auto" is the library's choice in a two-level group (--levels two-level), the others
# forced (ring and gather in a flat group).
SIZES = [(4096, ["ring", "gather", "auto"]), (1 << 30, ["ring", "two-level"])]


def parse_args():
    p = argparse.ArgumentParser(
        description="pccl-sim's predicted all-reduce times for 16..1024 peers in 2..8 regions (4 KiB and 1 GiB), "
        "as JSON and a gnuplot PNG.")
    p.add_argument("--build", default=os.environ.get("PCCL_BUILD_DIR", os.path.join(ROOT, "build")),
                   help="build tree with bench/pccl-sim (default $PCCL_BUILD_DIR or build/)")
    p.add_argument("--peers", default="16,32,64,128,256,512,1024", help="peer counts, comma-separated")
    p.add_argument("--regions", default="2,4,8", help="region counts, comma-separated (each must divide the peers)")
    p.add_argument("--lan-mbit", type=float, default=10000)
    p.add_argument("--lan-delay-ms", type=float, default=0.25)
    p.add_argument("--wan-mbit", type=float, default=1000)
    p.add_argument("--connections", type=int, default=16)
    p.add_argument("--max-bytes", default="1G", help="the large size (default 1G)")
    p.add_argument("--large-segment-bytes", type=int, default=0,
                   help="pccl-sim --segment-bytes for the large size (default: the library's 1 MiB); recorded "
                   "in the JSON")
    p.add_argument("--json", required=True, help="write the points here")
    p.add_argument("--png", help="plot them here (needs gnuplot: bash scripts/deps.sh --bench)")
    return p.parse_args()


def delays(r):
    if r < 2:
        return ""
    return ",".join(f"{i}-{j}={20 + 60 * (j - i) / (r - 1):g}" for i in range(r) for j in range(i + 1, r))


def simulate(args, peers, regions, size, algorithm, segment_bytes):
    with tempfile.NamedTemporaryFile(suffix=".json") as out:
        cmd = [os.path.join(args.build, "bench", "pccl-sim"), "--regions", f"{regions}x{peers // regions}",
               "--lan-mbit", f"{args.lan_mbit:g}", "--lan-delay-ms", f"{args.lan_delay_ms:g}",
               "--wan-mbit", f"{args.wan_mbit:g}", "--wan-pair-delay-ms", delays(regions), "--order", "regions",
               "--connections", str(args.connections), "--algorithm", algorithm, "-b", str(size), "-e", str(size),
               "-w", "0", "-n", "1"]
        if algorithm in ("auto", "two-level", "two-level-gather"):
            cmd += ["--levels", "two-level"]
        if segment_bytes:
            cmd += ["--segment-bytes", str(segment_bytes)]
        cmd += ["--json", out.name]
        t0 = time.monotonic()
        subprocess.run(cmd, check=True, stdout=subprocess.DEVNULL)
        took = time.monotonic() - t0
        with open(out.name) as f:
            row = json.load(f)["results"][0]
    row["sim_wall_s"] = took
    row["command"] = " ".join(["pccl-sim"] + cmd[1:-2])
    return row


def plot(points, png):
    if shutil.which("gnuplot") is None:
        sys.exit("sim_scale: gnuplot is needed for --png: apt-get install gnuplot-nox (or bash scripts/deps.sh --bench)")
    tmp = tempfile.mkdtemp()
    series = []
    for size, algorithms in SIZES:
        for algorithm in algorithms:
            for regions in sorted({p["regions"] for p in points}):
                pts = sorted((p["peers"], p["time_s"]) for p in points
                             if p["bytes"] == size and p["asked"] == algorithm and p["regions"] == regions)
                if not pts:
                    continue
                name = os.path.join(tmp, f"{size}-{algorithm}-{regions}.dat")
                with open(name, "w") as f:
                    f.writelines(f"{n} {t}\n" for n, t in pts)
                series.append((size, algorithm, regions, name))
    style = {"ring": 1, "gather": 2, "auto": 3, "two-level": 3}
    names = {"ring": "flat ring", "gather": "flat gather", "auto": "two-level group (auto)", "two-level": "two-level"}
    script = [f"set terminal pngcairo size 1200,640 font ',10'", f"set output '{png}'",
              "set multiplot layout 1,2", "set logscale x 2", "set logscale y", "set xlabel 'peers'",
              "set grid", "set key below horizontal maxcols 3"]
    for size, _ in SIZES:
        label = size_name(size)
        script.append(f"set title 'pccl-sim: one {label} all-reduce, regions of equal size'")
        script.append("set ylabel 'time (s)'")
        plots = [f"'{name}' using 1:2 with linespoints lt {style[a]} pt {4 + regions} "
                 f"title '{names[a]}, {regions} regions'" for s, a, regions, name in series if s == size]
        script.append("plot " + ", ".join(plots))
    script.append("unset multiplot")
    subprocess.run(["gnuplot"], input="\n".join(script), text=True, check=True)
    shutil.rmtree(tmp)


def size_name(b):
    for unit, n in (("GiB", 1 << 30), ("MiB", 1 << 20), ("KiB", 1 << 10)):
        if b >= n and b % n == 0:
            return f"{b // n} {unit}"
    return f"{b} B"


def main():
    args = parse_args()
    peers_list = [int(x) for x in args.peers.split(",")]
    regions_list = [int(x) for x in args.regions.split(",")]
    big = {"K": 1 << 10, "M": 1 << 20, "G": 1 << 30}.get(args.max_bytes[-1:], 1)
    SIZES[1] = (int(args.max_bytes.rstrip("KMG")) * big, SIZES[1][1])
    points = []
    for size, algorithms in SIZES:
        for algorithm in algorithms:
            for regions in regions_list:
                for peers in peers_list:
                    if peers % regions:
                        continue
                    segment = args.large_segment_bytes if size > 4096 else 0
                    row = simulate(args, peers, regions, size, algorithm, segment)
                    row.update({"peers": peers, "regions": regions, "asked": algorithm,
                                "segment_bytes": segment or (1 << 20)})
                    points.append(row)
                    print(f"{algorithm:9s} {row['algorithm']:16s} {size:>11d} B  {peers:5d} peers  {regions} regions  "
                          f"{row['time_s']:10.4f} s  ({row['events']} events, simulated in {row['sim_wall_s']:.1f} s)",
                          flush=True)
    doc = {"network": {"lan_mbit": args.lan_mbit, "lan_delay_ms": args.lan_delay_ms, "wan_mbit": args.wan_mbit,
                       "wan_delay_ms": "20 + 60 |i - j| / (R - 1) between regions i and j",
                       "connections": args.connections, "ring": "region by region"},
           "algorithms": {"ring": "the flat ring (forced)", "gather": "the flat gather (forced)",
                          "auto": "the library's choice in a two-level group (chooseAlgo; the row's algorithm says "
                                  "which)", "two-level": "the two-level all-reduce (forced)"},
           "segment_bytes_large": args.large_segment_bytes or (1 << 20), "points": points}
    with open(args.json, "w") as f:
        json.dump(doc, f, indent=1)
    if args.png:
        plot(points, args.png)


if __name__ == "__main__":
    main()
