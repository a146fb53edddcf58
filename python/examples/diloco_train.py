#!/usr/bin/env python3
"""pccl.diloco against every-step DDP on one machine: the same model, data, inner optimizer and number of
processes, with one DiLoCo worker SIGKILLed mid-run and a replacement that joins late.

Task: classify 32-dimensional Gaussian inputs into 10 classes labelled by a fixed random teacher network
(learnable, synthetic, deterministic). Model: an MLP 32-512-512-10 (284,682 parameters). Inner optimizer:
AdamW. Every worker draws its own batches (seeded by its index); the held-out loss is measured on the
same 4,096 samples everywhere.

Launcher mode (no --role): for each DiLoCo variant (blocking float32, blocking int8, blocking fp4,
overlapped eager, overlapped delayed) it starts an embedded pccl master and --workers worker processes; when worker
W-1 logs round --kill-at it is SIGKILLed and a replacement (its own random init) is started: it joins at
the survivors' next outer boundary and receives the group's outer state. Then it runs DDP
(torch.nn.parallel.DistributedDataParallel, gloo, on 127.0.0.1) with the same processes and steps.
It checks that every DiLoCo worker logged the same outer-parameter hash at every round it took part in,
writes --json (the numbers, the machine and the command) and --plot (loss against inner steps and
against bytes sent), and prints a table.

    python3 python/examples/diloco_train.py                       # about 2-3 minutes on 2 cores
    python3 python/examples/diloco_train.py --rounds 10 --no-ddp  # quicker

Bytes: DiLoCo's are the communicator's counters (CommStats.tx_bytes of worker 0: every outer
all-reduce and shared-state sync); gloo does not count bytes, so DDP's are the ring all-reduce's
2 (W-1)/W x 4 bytes x parameters per step, the least any all-reduce of the gradients sends.
"""

import argparse
import json
import os
import platform
import socket
import subprocess
import sys
import threading
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))

import pccl  # noqa: E402

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
# name: (quant, overlap, outer_lr, outer_momentum). The delayed mode applies each average one round late
# to a model that has moved on, and needs a gentler outer optimizer to stay stable.
VARIANTS = {
    "blocking": (None, False, 0.7, 0.9),
    "blocking-int8": ("int8", False, 0.7, 0.9),
    "blocking-fp4": ("fp4", False, 0.7, 0.9),
    "eager": (None, "eager", 0.7, 0.9),
    "delayed": (None, "delayed", 0.5, 0.5),
}
# Streaming DiLoCo (Douillard et al., 2025): 4 fragments, the all-reduce delayed by tau inner steps, merged
# with alpha 0.5 (the paper's; 1 without a delay), fp4 on the wire (stream-tTAU) or float32 (stream32-tTAU).
FRAGMENTS = {}
for _tau in range(0, 6):
    for _name, _quant in (("stream-t%d" % _tau, "fp4"), ("stream32-t%d" % _tau, None)):
        VARIANTS[_name] = (_quant, False, 0.7, 0.9)
        FRAGMENTS[_name] = dict(fragments=4, fragment_delay=_tau, fragment_alpha=0.5 if _tau else 1.0)
DEFAULT_VARIANTS = ("blocking", "blocking-int8", "blocking-fp4", "eager", "delayed")


def fragments_of(variant):
    return FRAGMENTS.get(variant, {}).get("fragments", 1)


# ---- model and data (the same for DiLoCo and DDP) -------------------------------------------------------

def make_model(torch, seed):
    torch.manual_seed(seed)
    return torch.nn.Sequential(torch.nn.Linear(32, 512), torch.nn.ReLU(), torch.nn.Linear(512, 512), torch.nn.ReLU(),
                               torch.nn.Linear(512, 10))


class Task:
    def __init__(self, torch, index):
        self.torch = torch
        g = torch.Generator().manual_seed(4242)
        self.w1 = torch.randn(32, 64, generator=g)
        self.w2 = torch.randn(64, 10, generator=g)
        self.gen = torch.Generator().manual_seed(1000 + index)
        self.x_eval, self.y_eval = self.sample(4096, torch.Generator().manual_seed(777))

    def sample(self, n, gen):
        x = self.torch.randn(n, 32, generator=gen)
        return x, (self.torch.tanh(x @ self.w1) @ self.w2).argmax(dim=1)

    def batch(self, n):
        return self.sample(n, self.gen)

    def loss(self, model, x, y):
        return self.torch.nn.functional.cross_entropy(model(x), y)

    def evaluate(self, model):
        with self.torch.no_grad():
            return self.loss(model, self.x_eval, self.y_eval).item()


def digest(torch, t):
    import hashlib  # noqa: PLC0415

    return hashlib.sha256(t.detach().contiguous().numpy().tobytes()).hexdigest()[:16]


# ---- workers -------------------------------------------------------------------------------------------

class StandIn:
    """The compute stand-in (--compute-ms): an inner step of fixed, declared duration that holds no core
    (a sleep), then the inner optimizer's step on a fixed pseudo-random gradient, so that the model moves
    and the pseudo-gradients are real tensors of the model's size. Its loss means nothing."""

    def __init__(self, torch, model, index, ms):
        g = torch.Generator().manual_seed(5000 + index)
        self.grads = [1e-3 * torch.randn(p.shape, generator=g) for p in model.parameters()]
        self.model, self.seconds = model, ms / 1000.0

    def backward(self):
        time.sleep(self.seconds)
        for p, g in zip(self.model.parameters(), self.grads):
            p.grad = g.clone()


def diloco_worker(args, torch):
    quant, overlap, outer_lr, outer_momentum = VARIANTS[args.variant]
    fragments = FRAGMENTS.get(args.variant, {})
    task = Task(torch, args.index)
    model = make_model(torch, 1000 + args.index if args.late else 0)
    inner = torch.optim.AdamW(model.parameters(), lr=args.inner_lr)
    comm = pccl.Communicator(args.master, listen_address=args.listen, heartbeat_interval_ms=500,
                             peer_timeout_ms=5000, connect_timeout_ms=120000, op_timeout_ms=120000)
    try:
        if args.role == "wanem":  # rank 0 may still be starting the master: connect() may be retried
            deadline = time.monotonic() + 60
            while True:
                try:
                    comm.connect()
                    break
                except pccl.MasterUnreachableError:
                    if time.monotonic() > deadline:
                        raise
                    time.sleep(0.2)
        diloco = pccl.diloco.DiLoCo(model, inner, comm, inner_steps=args.H, outer_lr=outer_lr,
                                    outer_momentum=outer_momentum, quant=quant, overlap=overlap, **fragments)
        stand_in = StandIn(torch, model, args.index, args.compute_ms) if args.compute_ms > 0 else None
        if not args.late:
            diloco.wait_for_world(args.workers, timeout_s=120)
        start = time.monotonic()
        group_model = make_model(torch, 0)

        def outer_loss():
            """The held-out loss of the outer parameters (the group's model, the same on every worker;
            in overlapped mode the workers' own models are ahead of it, eager ones by their own step)."""
            offset = 0
            with torch.no_grad():
                for p in group_model.parameters():
                    p.copy_(diloco.outer_parameters[offset:offset + p.numel()].view_as(p))
                    offset += p.numel()
            return task.evaluate(group_model)

        def log(kind):
            s = diloco.stats()
            print("%s round=%d outer=%d eval=%.5f local=%.5f tx=%d rx=%d world=%d theta=%s inner_steps=%d t=%.3f "
                  "inner_s=%.3f outer_s=%.3f peak_tx=%d" % (
                      kind, diloco.round, diloco.outer_step, outer_loss(), task.evaluate(model), s.tx_bytes,
                      s.rx_bytes, comm.group_world_size, digest(torch, diloco.outer_parameters), s.inner_steps,
                      time.monotonic() - start, s.inner_time_s, s.outer_time_s, s.peak_step_tx_bytes), flush=True)

        log("start")
        last = diloco.round
        # --rounds counts outer periods of H inner steps: with P fragments, P fragment syncs each
        while diloco.round < args.rounds * diloco.fragments:  # the loop knows nothing of peers or failures
            if stand_in is not None:
                stand_in.backward()
            else:
                x, y = task.batch(args.batch)
                task.loss(model, x, y).backward()
            diloco.step()
            inner.zero_grad()
            if diloco.round != last:
                last = diloco.round
                log("round")
        diloco.flush()
        log("final")
        print("stats " + json.dumps(diloco.stats().as_dict()), flush=True)
        return 0
    finally:
        comm.close()


def ddp_worker(args, torch):
    import torch.distributed as dist  # noqa: PLC0415

    dist.init_process_group("gloo", init_method="tcp://127.0.0.1:%d" % args.port, rank=args.index,
                            world_size=args.workers)
    try:
        task = Task(torch, args.index)
        model = make_model(torch, 0)
        ddp = torch.nn.parallel.DistributedDataParallel(model)
        opt = torch.optim.AdamW(model.parameters(), lr=args.inner_lr)
        params = sum(p.numel() for p in model.parameters())
        per_step = 2 * (args.workers - 1) * 4 * params // args.workers  # ring all-reduce, per rank
        start = time.monotonic()
        for step in range(1, args.rounds * args.H + 1):
            x, y = task.batch(args.batch)
            opt.zero_grad()
            task.loss(ddp, x, y).backward()  # gradients averaged by DDP's all-reduce
            opt.step()
            if args.index == 0 and step % args.H == 0:
                print("round round=%d eval=%.5f tx=%d inner_steps=%d t=%.3f" % (
                    step // args.H, task.evaluate(model), per_step * step, step, time.monotonic() - start),
                    flush=True)
        return 0
    finally:
        dist.destroy_process_group()


def wanem_rank(args, torch):
    """One rank under pccl-wanem (docs/wanem.md): rank 0 also runs the master, on its emulated address."""
    rank, addrs = int(os.environ["PCCL_WANEM_RANK"]), os.environ["PCCL_WANEM_ADDRS"].split(",")
    args.index, args.workers = rank, len(addrs)
    args.master, args.listen = "%s:29500" % addrs[0], "%s:0" % os.environ["PCCL_WANEM_ADDR"]
    master = None
    if rank == 0:
        master = pccl.Master(listen=args.master, heartbeat_interval_ms=1000, peer_timeout_ms=30000).start()
    try:
        return diloco_worker(args, torch)
    finally:
        if master is not None:  # serve the others until they have left (their flush() may still run)
            deadline = time.monotonic() + 60
            while master.stats()["accepted"] > 0 and time.monotonic() < deadline:
                time.sleep(0.1)
            master.close()


# ---- launcher ------------------------------------------------------------------------------------------

class Child:
    """A worker process; its stdout lines are kept (and parsed) by a reader thread."""

    def __init__(self, name, argv):
        self.name, self.lines, self.cond = name, [], threading.Condition()
        self.proc = subprocess.Popen([sys.executable, "-u", os.path.abspath(__file__)] + argv,
                                     stdout=subprocess.PIPE, text=True)
        self.reader = threading.Thread(target=self._read, daemon=True)
        self.reader.start()

    def _read(self):
        for line in self.proc.stdout:
            with self.cond:
                self.lines.append(line.rstrip("\n"))
                self.cond.notify_all()
        with self.cond:
            self.lines.append(None)
            self.cond.notify_all()

    def wait_for(self, prefix, timeout):
        deadline = time.monotonic() + timeout
        with self.cond:
            while True:
                if any(line is not None and line.startswith(prefix) for line in self.lines):
                    return True
                if (self.lines and self.lines[-1] is None) or not self.cond.wait(max(0.0, deadline - time.monotonic())):
                    return False

    def records(self):
        out = []
        for line in self.lines:
            if line and line.split()[0] in ("start", "round", "final"):
                rec = {"kind": line.split()[0]}
                for word in line.split()[1:]:
                    key, value = word.split("=", 1)
                    rec[key] = value if key == "theta" else float(value)
                out.append(rec)
        return out

    def stats(self):
        return next((json.loads(line[6:]) for line in self.lines if line and line.startswith("stats ")), None)


def run_diloco(args, variant):
    print("== DiLoCo %s: %d workers, %d rounds of H=%d; worker %d killed after round %d and replaced"
          % (variant, args.workers, args.rounds, args.H, args.workers - 1, args.kill_at), flush=True)
    with pccl.Master(listen="127.0.0.1:0", heartbeat_interval_ms=500, peer_timeout_ms=5000) as master:
        common = ["--role", "diloco", "--variant", variant, "--master", master.address, "--workers",
                  str(args.workers), "--rounds", str(args.rounds), "-H", str(args.H), "--batch", str(args.batch),
                  "--inner-lr", str(args.inner_lr), "--compute-ms", str(args.compute_ms)]
        workers = [Child("w%d" % i, common + ["--index", str(i)]) for i in range(args.workers)]
        replacement = None
        try:
            victim = workers[-1]
            kill_line = "round round=%d " % (args.kill_at * fragments_of(variant))  # fragments: P lines a round
            if args.kill_at > 0 and victim.wait_for(kill_line, args.timeout_s):
                victim.proc.kill()
                victim.proc.wait()
                print("   killed w%d after round %d" % (args.workers - 1, args.kill_at), flush=True)
                replacement = Child("w%d-replacement" % (args.workers - 1),
                                    common + ["--index", str(args.workers - 1), "--late"])
            alive = workers[:-1] + ([replacement] if replacement else []) if args.kill_at > 0 else workers
            for child in alive:
                child.proc.wait(args.timeout_s)
                child.reader.join(10)
                if child.proc.returncode != 0:
                    raise SystemExit("%s exited with %s" % (child.name, child.proc.returncode))
        finally:
            for child in workers + ([replacement] if replacement else []):
                if child.proc.poll() is None:
                    child.proc.kill()
                    child.proc.wait()
    return summarize_diloco(args, variant, workers, replacement)


def summarize_diloco(args, variant, workers, replacement):
    logs = {c.name: c.records() for c in workers + ([replacement] if replacement else [])}
    late = None
    if replacement:
        start = next((r for r in logs[replacement.name] if r["kind"] == "start"), None)
        if start is not None and int(start["round"]) == 0:
            # It found no group: the others had finished before it was up (a short run on a busy machine)
            # and it trained alone. Not part of the run: left out of the comparison.
            late = logs.pop(replacement.name)
            print("   the replacement came too late: the others had finished", flush=True)
    if args.logs:
        os.makedirs(args.logs, exist_ok=True)
        for c in workers + ([replacement] if replacement else []):
            with open(os.path.join(args.logs, "%s-%s.log" % (variant, c.name)), "w") as f:
                f.write("\n".join(line for line in c.lines if line is not None) + "\n")
    hashes = {}
    for recs in logs.values():
        for r in recs:
            if r["kind"] == "round":
                hashes.setdefault(int(r["round"]), set()).add(r["theta"])
    identical = all(len(h) == 1 for h in hashes.values())
    joined = None
    if replacement and late is None:
        start = next((r for r in logs[replacement.name] if r["kind"] == "start"), None)
        joined = int(start["round"]) if start else None
    w0 = logs["w0"]
    final = next(r for r in w0 if r["kind"] == "final")
    stats = workers[0].stats()
    result = {
        "variant": variant, "quant": VARIANTS[variant][0] or "none", "overlap": VARIANTS[variant][1] or "off",
        "outer_lr": VARIANTS[variant][2], "outer_momentum": VARIANTS[variant][3],
        "fragments": FRAGMENTS.get(variant), "final_loss": final["eval"], "tx_bytes": int(final["tx"]),
        "rx_bytes": int(final["rx"]), "peak_step_tx_bytes": stats.get("peak_step_tx_bytes"),
        "wall_s": final["t"], "inner_share": stats["inner_share"], "inner_time_s": stats["inner_time_s"],
        "outer_time_s": stats["outer_time_s"], "wait_time_s": stats["wait_time_s"],
        "allreduce_retries": stats["allreduce_retries"],
        "replacement_joined_at_round": joined,
        "replacement_adopted_state": (replacement.stats() or {}).get("state_adoptions") if replacement else None,
        "identical_outer_params_every_round": identical,
        "curve": [{"inner_steps": int(r["inner_steps"]), "loss": r["eval"], "tx_bytes": int(r["tx"]),
                   "world": int(r["world"])} for r in w0 if r["kind"] in ("start", "round")],
    }
    print("   final loss %.4f, worker 0 sent %d bytes, replacement joined at round %s, identical outer "
          "parameters every round: %s, inner share %.2f" % (result["final_loss"], result["tx_bytes"], joined,
                                                            identical, result["inner_share"]), flush=True)
    return result


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def run_ddp(args):
    print("== DDP (gloo): %d processes, %d steps, gradients all-reduced every step"
          % (args.workers, args.rounds * args.H), flush=True)
    port = free_port()
    common = ["--role", "ddp", "--port", str(port), "--workers", str(args.workers), "--rounds", str(args.rounds),
              "-H", str(args.H), "--batch", str(args.batch), "--inner-lr", str(args.inner_lr)]
    children = [Child("ddp%d" % i, common + ["--index", str(i)]) for i in range(args.workers)]
    try:
        for child in children:
            child.proc.wait(args.timeout_s)
            child.reader.join(10)
            if child.proc.returncode != 0:
                raise SystemExit("%s exited with %s" % (child.name, child.proc.returncode))
    finally:
        for child in children:
            if child.proc.poll() is None:
                child.proc.kill()
                child.proc.wait()
    recs = children[0].records()
    result = {"variant": "ddp", "final_loss": recs[-1]["eval"], "tx_bytes": int(recs[-1]["tx"]),
              "tx_bytes_note": "ring all-reduce formula 2(W-1)/W x 4 B x parameters per step (gloo does not count)",
              "wall_s": recs[-1]["t"],
              "curve": [{"inner_steps": int(r["inner_steps"]), "loss": r["eval"], "tx_bytes": int(r["tx"])}
                        for r in recs]}
    print("   final loss %.4f, rank 0 sent %d bytes (formula)" % (result["final_loss"], result["tx_bytes"]), flush=True)
    return result


def launcher(args):
    import torch  # noqa: PLC0415 - for the parameter count and the versions

    started = time.time()
    results = [run_diloco(args, v) for v in args.variants.split(",")]
    if not args.no_ddp:
        results.append(run_ddp(args))
    record = {
        "command": "python3 python/examples/diloco_train.py " + " ".join(sys.argv[1:]),
        "machine": {"cpus": os.cpu_count(), "platform": platform.platform(), "python": platform.python_version(),
                    "torch": torch.__version__, "pccl": pccl.version(), "processor": platform.processor()},
        "date": time.strftime("%Y-%m-%d", time.gmtime(started)),
        "setup": {"workers": args.workers, "rounds": args.rounds, "H": args.H, "batch": args.batch,
                  "inner_optimizer": "AdamW lr=%g" % args.inner_lr, "kill_at_round": args.kill_at,
                  "parameters": sum(p.numel() for p in make_model(torch, 0).parameters())},
        "runs": results,
        "seconds": round(time.time() - started, 1),
    }
    if args.json:
        with open(args.json, "w") as f:
            json.dump(record, f, indent=1)
    if args.plot:
        from diloco_plot import plot  # noqa: PLC0415

        plot(record, args.plot)
    print("\n| run | final loss | bytes sent by worker 0 | inner share | replacement joined at round |")
    print("|---|---|---|---|---|")
    for r in results:
        print("| %s | %.4f | %d | %s | %s |" % (r["variant"], r["final_loss"], r["tx_bytes"],
                                                "%.2f" % r["inner_share"] if "inner_share" in r else "-",
                                                r.get("replacement_joined_at_round", "-")))
    bad = [r["variant"] for r in results if r.get("identical_outer_params_every_round") is False]
    if bad:
        print("outer parameters differed between workers in: %s" % ", ".join(bad))
        return 1
    return 0


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--workers", type=int, default=4)
    parser.add_argument("--rounds", type=int, default=30, help="outer rounds (default 30)")
    parser.add_argument("-H", type=int, default=20, help="inner steps per round (default 20)")
    parser.add_argument("--batch", type=int, default=128)
    parser.add_argument("--inner-lr", type=float, default=2e-3)
    parser.add_argument("--kill-at", type=int, default=8, help="round after which the last worker is killed (0: none)")
    parser.add_argument("--variants", default=",".join(DEFAULT_VARIANTS), help="DiLoCo runs, of: " + ", ".join(VARIANTS))
    parser.add_argument("--compute-ms", type=float, default=0,
                        help="a compute stand-in: each inner step sleeps this long (holding no core) and steps on a "
                        "fixed gradient, in place of the real forward and backward (loss then meaningless)")
    parser.add_argument("--no-ddp", action="store_true")
    parser.add_argument("--json", default=None, help="write the numbers here")
    parser.add_argument("--plot", default=None, help="write the plot here (.png or .svg; needs matplotlib)")
    parser.add_argument("--logs", default=None, help="write every worker's output lines to this directory")
    parser.add_argument("--timeout-s", type=float, default=300)
    parser.add_argument("--role", choices=("diloco", "ddp", "wanem"),
                        help="wanem: one DiLoCo rank of --variant under pccl-wanem (rank 0 runs the master)")
    parser.add_argument("--variant", default="blocking", help=argparse.SUPPRESS)
    parser.add_argument("--master", help=argparse.SUPPRESS)
    parser.add_argument("--index", type=int, default=0, help=argparse.SUPPRESS)
    parser.add_argument("--late", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--port", type=int, help=argparse.SUPPRESS)
    parser.add_argument("--listen", default="127.0.0.1:0", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.role is None:
        return launcher(args)
    import torch  # noqa: PLC0415

    torch.set_num_threads(1)
    return {"diloco": diloco_worker, "ddp": ddp_worker, "wanem": wanem_rank}[args.role](args, torch)


if __name__ == "__main__":
    sys.exit(main())
