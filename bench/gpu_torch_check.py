#!/usr/bin/python3
"""pccl's Python layer on CUDA tensors, for a machine with an NVIDIA GPU (CI has none; docs/gpu.md).

Phase 1, pccl.Communicator: every collective (all-reduce, broadcast, all-gather, reduce-scatter; int8
where it applies) on CUDA tensors, passed as device memory through the CUDA backend module, against
the same call on host tensors: the results must be the same bytes on every rank.
Phase 2, torch.distributed with backend "pccl": all_reduce, broadcast, all_gather_into_tensor,
reduce_scatter_tensor on CUDA tensors against the same calls on CPU tensors, then 3 steps of
DistributedDataParallel on CUDA whose parameters must end identical on every rank.

    PCCL_LIBRARY=build/src/libpccl.so.0.1 PCCL_GPU_BACKEND=build-cuda/src/libpccl-gpu-cuda.so \\
        python3 bench/gpu_torch_check.py [--world 3]

Prints one "OK ..." or "FAIL ..." line per check; exits 0 when every check passed.
"""

import argparse
import datetime
import os
import socket
import subprocess
import sys
import time
import traceback

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "python"))


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def parent(args):
    import pccl

    master = pccl.Master("127.0.0.1:0")
    master.start()
    port = free_port()
    procs = []
    for r in range(args.world):
        env = dict(os.environ, MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port), RANK=str(r),
                   WORLD_SIZE=str(args.world), PYTHONUNBUFFERED="1")
        cmd = [sys.executable, __file__, "--rank", str(r), "--world", str(args.world), "--device", args.device,
               "--master", "127.0.0.1:%d" % master.port] + (["--skip-dist"] if args.skip_dist else [])
        procs.append(subprocess.Popen(cmd, env=env))
    rc = 0
    for p in procs:
        try:
            rc |= p.wait(timeout=args.timeout_s)
        except subprocess.TimeoutExpired:
            p.kill()
            rc = 1
    master.close()
    print("gpu_torch_check: %s" % ("passed" if rc == 0 else "FAILED"), flush=True)
    return rc


class Checks:
    def __init__(self, rank):
        self.rank = rank
        self.failed = 0

    def run(self, name, fn):
        try:
            detail = fn()
            print("rank %d OK %s%s" % (self.rank, name, " (%s)" % detail if detail else ""), flush=True)
        except Exception:  # noqa: BLE001 - every failure is reported and counted
            self.failed += 1
            print("rank %d FAIL %s\n%s" % (self.rank, name, traceback.format_exc()), flush=True)


def same_bytes(a, b):
    import torch

    x, y = a.detach().cpu().contiguous(), b.detach().cpu().contiguous()
    if x.shape != y.shape or x.dtype != y.dtype:
        raise AssertionError("shape/dtype differ: %s %s vs %s %s" % (x.shape, x.dtype, y.shape, y.dtype))
    if not torch.equal(x.view(torch.uint8), y.view(torch.uint8)):
        bad = int((x.view(torch.uint8) != y.view(torch.uint8)).sum())
        raise AssertionError("%d bytes differ" % bad)


def phase_communicator(args, checks):
    import torch

    import pccl

    comm = pccl.Communicator(args.master, listen_address="127.0.0.1:0", op_timeout_ms=60000)
    comm.connect()
    deadline = time.monotonic() + 60
    while comm.world_size < args.world:
        if time.monotonic() > deadline:
            raise RuntimeError("the run did not reach %d peers" % args.world)
        if comm.are_peers_pending():
            comm.update_topology()
        else:
            time.sleep(0.05)
    rank, world = comm.group_rank, comm.group_world_size
    dev = torch.device(args.device)
    gen = torch.Generator().manual_seed(1000 + rank)
    tag = [0]

    def next_tag():
        tag[0] += 1
        return tag[0]

    for n in (1000, 3 << 20):
        x = torch.rand(n * world, generator=gen) * 2 - 1

        def all_reduce(quant):
            host, cuda = x.clone(), x.to(dev)
            comm.all_reduce(host, quant=quant, tag=next_tag())
            comm.all_reduce(cuda, quant=quant, tag=next_tag())
            same_bytes(cuda, host)

        def broadcast(quant):
            host, cuda = x.clone(), x.to(dev)
            comm.broadcast(host, 1, quant=quant, tag=next_tag())
            comm.broadcast(cuda, 1, quant=quant, tag=next_tag())
            same_bytes(cuda, host)

        def all_gather(quant):
            mine = x[:n]
            host, cuda = torch.empty(n * world), torch.empty(n * world, device=dev)
            comm.all_gather(mine, host, quant=quant, tag=next_tag())
            comm.all_gather(mine.to(dev), cuda, quant=quant, tag=next_tag())
            same_bytes(cuda, host)

        def reduce_scatter(quant):
            host, cuda = torch.empty(n), torch.empty(n, device=dev)
            comm.reduce_scatter(x, host, quant=quant, tag=next_tag())
            comm.reduce_scatter(x.to(dev), cuda, quant=quant, tag=next_tag())
            same_bytes(cuda, host)
            # in place: this rank's block of the CUDA input
            inplace = x.to(dev)
            comm.reduce_scatter(inplace, inplace[rank * n:(rank + 1) * n], quant=quant, tag=next_tag())
            same_bytes(inplace[rank * n:(rank + 1) * n], host)

        for fn in (all_reduce, broadcast, all_gather, reduce_scatter):
            for quant in (None, "int8"):
                checks.run("communicator %s %s n=%d on cuda == on host" % (fn.__name__, quant or "none", n),
                           lambda fn=fn, quant=quant: fn(quant))
    comm.close()


def phase_dist(args, checks):
    import torch
    import torch.distributed as dist

    try:
        import pccl.torch  # noqa: F401 - registers the backend
        dist.init_process_group("pccl", rank=args.rank, world_size=args.world,
                                timeout=datetime.timedelta(seconds=60))
    except Exception:  # noqa: BLE001
        checks.run("torch.distributed init_process_group('pccl') with torch %s" % torch.__version__,
                   lambda: (_ for _ in ()).throw(RuntimeError(traceback.format_exc())))
        return
    dev = torch.device(args.device)
    w = args.world
    gen = torch.Generator().manual_seed(7 + args.rank)
    x = torch.rand(1 << 20, generator=gen)

    def all_reduce():
        host, cuda = x.clone(), x.to(dev)
        dist.all_reduce(host)
        dist.all_reduce(cuda)
        same_bytes(cuda, host)

    def broadcast():
        host, cuda = x.clone(), x.to(dev)
        dist.broadcast(host, src=1)
        dist.broadcast(cuda, src=1)
        same_bytes(cuda, host)

    def all_gather_into_tensor():
        host, cuda = torch.empty(x.numel() * w), torch.empty(x.numel() * w, device=dev)
        dist.all_gather_into_tensor(host, x)
        dist.all_gather_into_tensor(cuda, x.to(dev))
        same_bytes(cuda, host)

    def reduce_scatter_tensor():
        n = x.numel() // w
        host, cuda = torch.empty(n), torch.empty(n, device=dev)
        dist.reduce_scatter_tensor(host, x[:n * w])
        dist.reduce_scatter_tensor(cuda, x[:n * w].to(dev))
        same_bytes(cuda, host)

    def ddp():
        torch.manual_seed(0)
        model = torch.nn.Sequential(torch.nn.Linear(256, 512), torch.nn.ReLU(), torch.nn.Linear(512, 10)).to(dev)
        ids = [0] if dev.type == "cuda" else None
        ddp_model = torch.nn.parallel.DistributedDataParallel(model, device_ids=ids)
        opt = torch.optim.SGD(ddp_model.parameters(), lr=0.1)
        data = torch.Generator().manual_seed(args.rank)
        for _ in range(3):
            xb = torch.randn(64, 256, generator=data).to(dev)
            loss = ddp_model(xb).square().mean()
            opt.zero_grad()
            loss.backward()
            opt.step()
        flat = torch.cat([p.detach().reshape(-1) for p in model.parameters()])
        everyone = torch.empty(flat.numel() * w, device=dev)
        dist.all_gather_into_tensor(everyone, flat)
        for r in range(w):
            same_bytes(everyone[r * flat.numel():(r + 1) * flat.numel()], flat)
        return "torch %s" % torch.__version__

    for fn in (all_reduce, broadcast, all_gather_into_tensor, reduce_scatter_tensor, ddp):
        checks.run("torch.distributed %s on cuda == on cpu" % fn.__name__, fn)
    dist.destroy_process_group()


def child(args):
    checks = Checks(args.rank)
    checks.run("communicator phase", lambda: phase_communicator(args, checks))
    if not args.skip_dist:
        phase_dist(args, checks)
    return 1 if checks.failed else 0


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--world", type=int, default=3)
    parser.add_argument("--rank", type=int, default=-1)
    parser.add_argument("--master", default="")
    parser.add_argument("--timeout-s", type=float, default=240)
    parser.add_argument("--skip-dist", action="store_true")
    parser.add_argument("--device", default="cuda:0", help="cpu: the same calls on host tensors (a dry run)")
    args = parser.parse_args()
    return parent(args) if args.rank < 0 else child(args)


if __name__ == "__main__":
    sys.exit(main())
