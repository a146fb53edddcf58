#!/usr/bin/env python3
"""pccl.diloco checkpoints: a run stops and every worker restarts without losing the outer state.

Launcher mode (no --master): starts an embedded master on 127.0.0.1 and --workers worker processes of
this script that train a small regression model for --rounds rounds, each saving ``diloco.state_dict()``
(with the model's and the inner optimizer's state) to --dir/worker-I.pt after every --every rounds.
Then every worker is stopped (SIGKILL, after the checkpoint of round --stop-at was written), and new
worker processes, with new models and optimizers, load their checkpoints and train on to --rounds:
the first round after the restart is the one after the checkpoint, and the replicas end with the same
outer parameters. Exit 0 when both runs finished and agreed.

Worker mode (--master HOST:PORT): one worker, resuming from --dir/worker-I.pt when it exists.

    python3 diloco_checkpoint.py --workers 2 --rounds 8 --stop-at 4
"""

import argparse
import hashlib
import os
import signal
import subprocess
import sys
import tempfile
import threading

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))

import torch  # noqa: E402

import pccl  # noqa: E402
import pccl.diloco  # noqa: E402


def digest(t):
    return hashlib.sha256(t.detach().contiguous().numpy().tobytes()).hexdigest()[:16]


def run_worker(args):
    path = os.path.join(args.dir, "worker-%d.pt" % args.index)
    torch.manual_seed(args.index + (100 if os.path.exists(path) else 0))  # a restart's own init differs
    model = torch.nn.Sequential(torch.nn.Linear(16, 32), torch.nn.Tanh(), torch.nn.Linear(32, 1))
    inner = torch.optim.AdamW(model.parameters(), lr=0.01)
    comm = pccl.Communicator(args.master, listen_address="127.0.0.1:0", heartbeat_interval_ms=200,
                             peer_timeout_ms=5000, connect_timeout_ms=30000, op_timeout_ms=30000)
    with comm:
        diloco = pccl.diloco.DiLoCo(model, inner, comm, inner_steps=args.H, outer_lr=0.7, outer_momentum=0.5)
        diloco.wait_for_world(args.workers, timeout_s=60)
        if os.path.exists(path):
            # Every worker restarted: each loads its checkpoint (a collective: the group agrees on it).
            diloco.load_state_dict(torch.load(path))
            print("worker%d resumed at round %d (outer step %d), theta %s" % (
                args.index, diloco.round, diloco.outer_step, digest(diloco.outer_parameters)), flush=True)
        w_true = torch.linspace(-1, 1, 16).unsqueeze(1)
        gen = torch.Generator().manual_seed(1000 * args.index + diloco.round)
        last = diloco.round
        while diloco.round < args.rounds:
            x = torch.randn(32, 16, generator=gen)
            loss = torch.nn.functional.mse_loss(model(x), torch.tanh(x @ w_true))
            loss.backward()
            diloco.step()
            inner.zero_grad()
            if diloco.round == last:
                continue
            last = diloco.round
            print("worker%d round %d loss %.5f theta %s" % (args.index, last, loss.item(),
                                                          digest(diloco.outer_parameters)), flush=True)
            if last % args.every == 0:
                torch.save(diloco.state_dict(), path + ".tmp")  # then renamed: a kill never leaves half a file
                os.replace(path + ".tmp", path)
                print("worker%d saved round %d" % (args.index, last), flush=True)
        diloco.flush()
        print("worker%d done at round %d, theta %s" % (args.index, diloco.round, digest(diloco.outer_parameters)),
              flush=True)
    return 0


def launch(args, master, lines, stop_at=None):
    """Starts the workers; with stop_at, SIGKILLs them all once each saved that round."""
    saved = threading.Semaphore(0)
    procs = []

    def pump(proc):
        for line in proc.stdout:
            sys.stdout.write(line)
            sys.stdout.flush()
            lines.append(line.strip())
            if stop_at is not None and line.strip().endswith("saved round %d" % stop_at):
                saved.release()

    for i in range(args.workers):
        cmd = [sys.executable, "-u", os.path.abspath(__file__), "--master", master.address, "--index", str(i),
               "--workers", str(args.workers), "--rounds", str(args.rounds), "-H", str(args.H), "--every",
               str(args.every), "--dir", args.dir]
        proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, text=True)
        threading.Thread(target=pump, args=(proc,), daemon=True).start()
        procs.append(proc)
    if stop_at is not None:
        for _ in procs:
            if not saved.acquire(timeout=args.timeout_s):
                raise RuntimeError("the workers did not all save round %d in time" % stop_at)
        for p in procs:
            p.send_signal(signal.SIGKILL)  # the run stops: every worker at once
        print("launcher: every worker stopped after round %d" % stop_at, flush=True)
    codes = [p.wait(timeout=args.timeout_s) for p in procs]
    return codes


def run_launcher(args):
    own_dir = args.dir is None
    args.dir = args.dir or tempfile.mkdtemp(prefix="pccl-diloco-ckpt-")
    try:
        with pccl.Master(listen="127.0.0.1:0", heartbeat_interval_ms=200, peer_timeout_ms=3000) as master:
            first, second = [], []
            launch(args, master, first, stop_at=args.stop_at)
            codes = launch(args, master, second)
        resumed = [line for line in second if " resumed at round " in line]
        done = {line.split()[-1] for line in second if " done at round %d" % args.rounds in line}
        ok = (all(c == 0 for c in codes) and len(resumed) == args.workers
              and all(" resumed at round %d " % args.stop_at in line for line in resumed) and len(done) == 1)
        print("launcher: %s (resumed: %d workers at round %d; final outer parameters %s)"
              % ("ok" if ok else "FAILED", len(resumed), args.stop_at, ", ".join(sorted(done))), flush=True)
        return 0 if ok else 1
    finally:
        if own_dir:
            for name in os.listdir(args.dir):
                os.remove(os.path.join(args.dir, name))
            os.rmdir(args.dir)


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--rounds", type=int, default=8, help="outer rounds in all (default 8)")
    parser.add_argument("--stop-at", type=int, default=4, help="the run stops after this round's checkpoint")
    parser.add_argument("--every", type=int, default=2, help="a checkpoint every this many rounds (default 2)")
    parser.add_argument("-H", type=int, default=10, help="inner steps per round (default 10)")
    parser.add_argument("--dir", help="where the checkpoints go (default: a temporary directory)")
    parser.add_argument("--timeout-s", type=float, default=120)
    parser.add_argument("--master", help=argparse.SUPPRESS)
    parser.add_argument("--index", type=int, default=0, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.workers < 1 or args.rounds < 2 or args.every < 1 or not 0 < args.stop_at < args.rounds:
        parser.error("need --workers >= 1, --every >= 1 and 0 < --stop-at < --rounds")
    if args.stop_at % args.every:
        parser.error("--stop-at must be a round with a checkpoint (a multiple of --every)")
    torch.set_num_threads(1)
    return run_worker(args) if args.master else run_launcher(args)


if __name__ == "__main__":
    sys.exit(main())
