#!/usr/bin/python3
"""The torch.distributed backend's overhead: dist.all_reduce of one float32 tensor through the "pccl"
backend, against pccl's own Python API (Communicator.all_reduce on the very communicator under the
backend: the same ring, the same C library) and against gloo, in the same processes and run.

    PCCL_LIBRARY=/path/libpccl.so PYTHONPATH=python /usr/bin/python3 bench/torch_backend_bench.py \
        --ranks 4 --mib 64 --iterations 15 --json docs/benchmarks/torch-backend-loopback-4ranks-64M-run1.json

Each iteration runs the three, in rotating order, each after a gloo barrier; an operation's time is the
slowest rank's (all-gathered through gloo). Prints the median, min, max and quartiles per path and the
backend's overhead over the C library's Python API (median ratio - 1). Loopback only.
"""

import argparse
import json
import multiprocessing
import os
import platform
import socket
import statistics
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(os.path.dirname(HERE), "python"))

API_TAG = 2 ** 62  # the direct calls' tags, far from the backend's counter


def rank_main(rank, args, port, queue):
    os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port), RANK=str(rank), WORLD_SIZE=str(args.ranks))
    import torch
    import torch.distributed as dist

    import pccl.torch

    torch.set_num_threads(1)
    dist.init_process_group("pccl")
    gloo = dist.new_group(backend="gloo")
    comm = pccl.torch.communicator()
    n = args.mib * (1 << 20) // 4
    x = torch.ones(n, dtype=torch.float32)
    paths = {
        "backend": lambda i: dist.all_reduce(x),
        "pccl_api": lambda i: comm.all_reduce(x, op="sum", tag=API_TAG + i),
        "gloo": lambda i: dist.all_reduce(x, group=gloo),
    }
    names = list(paths)
    times = {k: [] for k in names}
    for i in range(args.warmup + args.iterations):
        order = names[i % 3:] + names[:i % 3]
        for name in order:
            x.fill_(1.0)
            dist.barrier(group=gloo)
            t0 = time.perf_counter()
            paths[name](i)
            dt = torch.tensor([time.perf_counter() - t0], dtype=torch.float64)
            every = [torch.zeros(1, dtype=torch.float64) for _ in range(args.ranks)]
            dist.all_gather(every, dt, group=gloo)
            if x[0].item() != float(args.ranks):
                raise AssertionError("%s: wrong result %s" % (name, x[0].item()))
            if i >= args.warmup:
                times[name].append(max(float(t) for t in every))
    if rank == 0:
        queue.put(times)
    dist.barrier(group=gloo)


def summary(ts):
    q = statistics.quantiles(ts, n=4) if len(ts) >= 2 else [ts[0]] * 3
    return {"median_s": statistics.median(ts), "min_s": min(ts), "max_s": max(ts), "q1_s": q[0], "q3_s": q[2],
            "times_s": ts}


def machine():
    model = ""
    try:
        with open("/proc/cpuinfo") as f:
            model = next((line.split(":", 1)[1].strip() for line in f if line.startswith("model name")), "")
    except OSError:
        pass
    try:
        import torch  # noqa: PLC0415

        torch_version = torch.__version__
    except ImportError:
        torch_version = None
    load = os.getloadavg()
    return {"nproc": os.cpu_count(), "cpu_model": model, "kernel": platform.release(), "python": sys.version.split()[0],
            "torch": torch_version, "loadavg_at_start": list(load)}


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--ranks", type=int, default=4)
    ap.add_argument("--mib", type=int, default=64)
    ap.add_argument("--iterations", type=int, default=15)
    ap.add_argument("--warmup", type=int, default=2)
    ap.add_argument("--json", help="write the results here")
    ap.add_argument("--note", default="", help="conditions of the run, stored in the JSON")
    args = ap.parse_args()
    info = machine()
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    ctx = multiprocessing.get_context("spawn")
    queue = ctx.Queue()
    procs = [ctx.Process(target=rank_main, args=(r, args, port, queue)) for r in range(args.ranks)]
    for p in procs:
        p.start()
    try:
        times = queue.get(timeout=600)
    finally:
        for p in procs:
            p.join(60)
            if p.is_alive():
                p.kill()
    results = {k: summary(v) for k, v in times.items()}
    overhead = results["backend"]["median_s"] / results["pccl_api"]["median_s"] - 1.0
    out = {"benchmark": "torch_backend_allreduce", "ranks": args.ranks, "bytes": args.mib << 20, "dtype": "float32",
           "op": "sum", "iterations": args.iterations, "warmup": args.warmup, "results": results,
           "backend_overhead_vs_pccl_api": overhead, "machine": info,
           "command": " ".join([os.path.basename(sys.executable)] + sys.argv), "note": args.note,
           "git": subprocess.run(["git", "-C", HERE, "rev-parse", "--short", "HEAD"], capture_output=True,
                                 text=True).stdout.strip(),
           "date": time.strftime("%Y-%m-%d %H:%M:%S")}
    for k, r in results.items():
        print("%-9s median %.3f s  min %.3f  q1 %.3f  q3 %.3f  max %.3f  (%.2f GB/s algbw)"
              % (k, r["median_s"], r["min_s"], r["q1_s"], r["q3_s"], r["max_s"], (args.mib << 20) / r["median_s"] / 1e9))
    print("backend overhead over pccl's Python API: %+.1f %%" % (100 * overhead))
    if args.json:
        with open(args.json, "w") as f:
            json.dump(out, f, indent=1)
            f.write("\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
