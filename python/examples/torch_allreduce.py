#!/usr/bin/env python3
"""Data-parallel training of a small torch model with pccl: every peer computes gradients on its own
data, the gradients are averaged with an all-reduce (abort/retry loop included), and the model's
parameters are kept equal with shared state (a joining peer receives them).

Launcher mode (no --master): starts an embedded master on 127.0.0.1, runs --peers peer processes of
this script, and at the end every peer checks that all models are bit-identical.
Peer mode (--master HOST:PORT): one peer.

Each peer:
  1. joins (connect), then syncs the shared state {parameters, step} -- every peer does so right after
     every epoch change (connect, update_topology), so a joiner, starting from its own random init at
     revision 0, receives the parameters of the peers that are ahead;
  2. per step: forward/backward on a local batch, flattens the gradients into one tensor (float32, or
     bfloat16 with --grad-dtype bfloat16), all_reduce(op="avg"), unflattens, optimizer step;
     a retryable error (PeerLostError, TopologyChangedError, PcclTimeoutError) -> update_topology(), sync,
     retry the same all-reduce;
  3. prints its loss now and then, and stats() at the end.

    python3 torch_allreduce.py --peers 2 --steps 30
    python3 torch_allreduce.py --peers 3 --grad-dtype bfloat16 --quant int8

Needs torch (Debian: python3-torch). CUDA tensors would be passed as device memory, which needs a pccl
GPU backend module (docs/gpu.md); this example trains on the CPU.
"""

import argparse
import os
import subprocess
import sys
import threading
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))

import pccl  # noqa: E402


def make_model(torch):
    return torch.nn.Sequential(torch.nn.Linear(16, 64), torch.nn.Tanh(), torch.nn.Linear(64, 1))


class Peer:
    def __init__(self, args, torch):
        self.args, self.torch = args, torch
        torch.manual_seed(1000 + args.index)  # every peer starts from its own init: the sync equalises
        self.model = make_model(torch)
        self.params = list(self.model.parameters())
        # Plain SGD: its only state is the parameters, which the shared state covers (momentum buffers
        # would have to be shared too, or a joiner would diverge).
        self.opt = torch.optim.SGD(self.params, lr=0.2)
        self.step_t = torch.zeros(1, dtype=torch.int64)  # optimizer steps taken: the revision
        with torch.no_grad():
            tensors = {name: p.data for name, p in self.model.named_parameters()}
        tensors["step"] = self.step_t
        self.state = pccl.SharedState(tensors, revision=0)
        self.comm = pccl.Communicator(args.master, listen_address=args.listen, secret=args.secret,
                                      heartbeat_interval_ms=500, peer_timeout_ms=5000,
                                      connect_timeout_ms=int(args.timeout_s * 1000),
                                      op_timeout_ms=int(args.timeout_s * 1000))
        self.need_sync = False

    def log(self, text):
        print("%s %s" % (self.args.name, text), flush=True)

    def sync(self):
        self.state.revision = int(self.step_t[0])
        info = self.comm.sync_shared_state(self.state)
        self.need_sync = False
        self.log("synced: revision=%d received %d tensors (%d bytes) epoch=%d world=%d"
                 % (info.revision, info.keys_received, info.rx_bytes, self.comm.epoch, self.comm.world_size))

    def collective(self, fn):
        """fn() with the abort/retry loop; syncs after every epoch change (every peer does the same)."""
        while True:
            try:
                if self.need_sync:
                    self.sync()
                if self.comm.are_peers_pending():
                    self.comm.update_topology()
                    self.need_sync = True
                    self.sync()
                return fn()
            except pccl.PcclError as e:
                if not e.retryable:
                    raise  # MasterUnreachableError, KickedError: this communicator is dead
                self.log("%s: %s -> update_topology, sync, retry" % (type(e).__name__, e.detail))
                try:
                    self.comm.update_topology()
                    self.need_sync = True
                except pccl.PcclError as e2:
                    if not e2.retryable:
                        raise
                    self.log("update_topology: %s (will retry)" % type(e2).__name__)

    def train(self):
        torch, args = self.torch, self.args
        self.comm.connect()
        self.log("connected: world=%d rank=%d" % (self.comm.world_size, self.comm.rank))
        self.need_sync = True
        gen = torch.Generator().manual_seed(args.index)
        w_true = torch.linspace(-1, 1, 16).unsqueeze(1)
        grad_dtype = getattr(torch, args.grad_dtype)
        full = args.full_world == 0
        done = 0
        deadline = time.monotonic() + args.timeout_s
        while done < args.steps:
            if time.monotonic() > deadline:
                self.log("deadline passed")
                return 2
            x = torch.randn(64, 16, generator=gen)
            y = torch.tanh(x @ w_true) + 0.01 * torch.randn(64, 1, generator=gen)
            loss = torch.nn.functional.mse_loss(self.model(x), y)
            self.opt.zero_grad()
            loss.backward()
            flat = torch.cat([p.grad.reshape(-1) for p in self.params]).to(grad_dtype)
            quant = None if args.quant == "none" else args.quant
            info = self.collective(lambda: self.comm.all_reduce(flat, op="avg", quant=quant))
            offset = 0
            with torch.no_grad():
                for p in self.params:
                    n = p.numel()
                    p.grad.copy_(flat[offset:offset + n].view_as(p.grad).to(p.grad.dtype))
                    offset += n
            self.opt.step()
            self.step_t += 1
            if not full and info.world_size >= args.full_world:
                full = True
                self.log("full world (%d peers) reached at step %d" % (info.world_size, int(self.step_t[0])))
            if full:
                done += 1
                if done % args.log_every == 0 or done == args.steps:
                    self.log("step %d: loss %.5f world=%d %.2f ms" % (done, loss.item(), info.world_size,
                                                                       info.time_s * 1e3))
        if args.check:
            self.check_identical()
        stats = self.comm.stats()
        self.log("stats: %s" % " ".join("%s=%s" % kv for kv in stats.as_dict().items()))
        return 0

    def check_identical(self):
        """Every peer's parameters are bit-identical: the elementwise max and min across peers agree."""
        torch = self.torch
        flat = torch.cat([p.detach().reshape(-1) for p in self.params])
        hi, lo = flat.clone(), flat.clone()
        self.collective(lambda: self.comm.all_reduce(hi, op="max", tag=1))
        self.collective(lambda: self.comm.all_reduce(lo, op="min", tag=2))
        same = torch.equal(hi, lo) and torch.equal(hi, flat)
        self.log("models identical across peers: %s" % same)
        if not same:
            raise SystemExit(1)

    def close(self):
        self.comm.close()


def run_launcher(args):
    with pccl.Master(listen="127.0.0.1:0", secret=args.secret, heartbeat_interval_ms=500,
                     peer_timeout_ms=5000) as master:
        print("master listening on %s" % master.address, flush=True)
        children = []

        def pump(proc):
            for line in proc.stdout:
                sys.stdout.write(line)
                sys.stdout.flush()

        try:
            for i in range(args.peers):
                cmd = [sys.executable, "-u", os.path.abspath(__file__), "--master", master.address,
                       "--index", str(i), "--name", "peer%d" % i, "--steps", str(args.steps),
                       "--grad-dtype", args.grad_dtype, "--quant", args.quant, "--timeout-s", str(args.timeout_s),
                       "--log-every", str(args.log_every), "--full-world", str(args.peers), "--check"]
                env = dict(os.environ)
                if args.secret:
                    env["PCCL_SECRET"] = args.secret
                proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, text=True, env=env)
                reader = threading.Thread(target=pump, args=(proc,), daemon=True)
                reader.start()
                children.append((proc, reader))
            status = 0
            deadline = time.monotonic() + args.timeout_s + 30  # + torch's import time
            for i, (proc, reader) in enumerate(children):
                code = proc.wait(max(1.0, deadline - time.monotonic()))
                reader.join(5)
                if code != 0:
                    print("launcher: peer%d exited with %d" % (i, code), flush=True)
                    status = 1
            print("launcher: %s" % ("all peers finished" if status == 0 else "FAILED"), flush=True)
            return status
        except subprocess.TimeoutExpired:
            print("launcher: a peer did not finish in time", flush=True)
            return 1
        finally:
            for proc, _ in children:
                if proc.poll() is None:
                    proc.kill()
                    proc.wait()


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--master", help="HOST:PORT of a running master: run one peer (peer mode)")
    parser.add_argument("--peers", type=int, default=2, help="launcher mode: peer processes (default 2)")
    parser.add_argument("--steps", type=int, default=30, help="training steps at full world size (default 30)")
    parser.add_argument("--grad-dtype", choices=("float32", "bfloat16"), default="float32")
    parser.add_argument("--quant", choices=("none", "fp16", "bf16", "int8"), default="none",
                        help="wire format of the gradient all-reduce (fp16/bf16 need float32 gradients)")
    parser.add_argument("--listen", default="127.0.0.1:0", help="peer mode: ring listen address")
    parser.add_argument("--secret", default=None, help="shared secret (default: PCCL_SECRET, else an open run)")
    parser.add_argument("--timeout-s", type=float, default=60.0, help="deadline of the whole run")
    parser.add_argument("--log-every", type=int, default=10)
    parser.add_argument("--index", type=int, default=0, help="peer mode: this peer's seed index")
    parser.add_argument("--name", default="peer", help=argparse.SUPPRESS)
    parser.add_argument("--full-world", type=int, default=0, help=argparse.SUPPRESS)
    parser.add_argument("--check", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if not args.master:
        return run_launcher(args)
    import torch

    torch.set_num_threads(1)
    peer = Peer(args, torch)
    try:
        return peer.train()
    except pccl.PcclError as e:
        print("%s: %s (%s)" % (args.name, e, type(e).__name__), flush=True)
        return 3 if e.fatal else 1
    finally:
        peer.close()


if __name__ == "__main__":
    sys.exit(main())
