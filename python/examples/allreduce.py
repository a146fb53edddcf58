#!/usr/bin/env python3
"""All-reduce numpy arrays with pccl, with the abort/retry loop a trainer runs.

Launcher mode (no --master): starts an embedded master on 127.0.0.1, runs --peers peer processes of
this script against it, prints their output, and exits non-zero when one of them failed. With
--kill-one it kills one peer with SIGKILL once every peer has completed a step at full size, to show
the survivors recovering (PeerLostError -> update_topology() -> retry).

Peer mode (--master HOST:PORT): one peer. It joins, then runs --steps steps; each step admits waiting
peers (are_peers_pending -> update_topology), sums a float32 array across the group (every peer
contributes arange(count) + 1, so the result must be world_size * (arange(count) + 1)) and checks it.
A retryable error (peer lost, topology changed, timeout) leads to update_topology() and a retry of the same
step. At the end it prints the communicator's stats() counters.

    python3 allreduce.py --peers 3 --steps 20
    python3 allreduce.py --peers 3 --kill-one
    pccl-master --listen 0.0.0.0:5000 &   python3 allreduce.py --master 127.0.0.1:5000   (on every host)

The library is found through PCCL_LIBRARY (a path) or the installed tree (docs/python.md); the secret
through --secret or PCCL_SECRET.
"""

import argparse
import os
import signal
import subprocess
import sys
import threading
import time

# Run from a source checkout without installing: the package is ../pccl.
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))

import numpy as np  # noqa: E402

import pccl  # noqa: E402


def run_peer(args):
    name = args.name
    comm = pccl.Communicator(args.master, listen_address=args.listen, secret=args.secret,
                             heartbeat_interval_ms=500, peer_timeout_ms=5000,
                             connect_timeout_ms=int(args.timeout_s * 1000), op_timeout_ms=int(args.timeout_s * 1000))
    with comm:
        comm.connect()
        print("%s connected: world=%d rank=%d epoch=%d" % (name, comm.world_size, comm.rank, comm.epoch), flush=True)
        base = np.arange(args.count, dtype=np.float32) + 1.0
        grad = np.empty_like(base)
        # Steps count once the world has reached --full-world (launcher mode: every peer admitted).
        step, recoveries, full, world = 0, 0, args.full_world == 0, 0
        deadline = time.monotonic() + args.timeout_s
        while step < args.steps or (args.expect_loss and recoveries == 0):
            if time.monotonic() > deadline:
                print("%s: deadline passed" % name, flush=True)
                return 2
            try:
                if comm.are_peers_pending():  # the trainer's check once per step
                    comm.update_topology()
                    print("%s ring: world=%d rank=%d epoch=%d" % (name, comm.world_size, comm.rank, comm.epoch),
                          flush=True)
                grad[:] = base  # a trainer would compute its gradient here
                info = comm.all_reduce(grad, op="sum", tag=0)
            except pccl.PcclError as e:
                if not e.retryable:
                    raise  # MasterUnreachableError, KickedError: the communicator is dead
                # grad still holds our input (pccl restores an in-place buffer on failure)
                print("%s step %d: %s: %s -> update_topology and retry" % (name, step, type(e).__name__, e.detail),
                      flush=True)
                try:
                    comm.update_topology()
                    print("%s ring: world=%d rank=%d epoch=%d" % (name, comm.world_size, comm.rank, comm.epoch),
                          flush=True)
                except pccl.PcclError as e2:
                    if not e2.retryable:
                        raise
                    print("%s update_topology: %s (will retry)" % (name, type(e2).__name__), flush=True)
                continue
            if info.world_size < world:
                recoveries += 1  # a peer was lost, and the loop carried on without it
            world = info.world_size
            wrong = int(np.count_nonzero(grad != base * info.world_size))
            if wrong:
                print("%s step %d: %d WRONG elements" % (name, step, wrong), flush=True)
                return 1
            if not full and info.world_size >= args.full_world:
                full = True
                print("%s full world reached" % name, flush=True)
            if full and step < args.steps:
                step += 1
                print("%s step %d ok: world=%d %.2f ms %.1f MB/s" % (
                    name, step, info.world_size, info.time_s * 1e3, grad.nbytes / max(info.time_s, 1e-9) / 1e6),
                    flush=True)
        stats = comm.stats()
        print("%s stats: %s" % (name, " ".join("%s=%s" % kv for kv in stats.as_dict().items())), flush=True)
    print("%s left" % name, flush=True)
    return 0


def run_launcher(args):
    secret = args.secret
    with pccl.Master(listen="127.0.0.1:0", secret=secret, heartbeat_interval_ms=500, peer_timeout_ms=5000) as master:
        print("master listening on %s" % master.address, flush=True)
        children = []
        lock = threading.Lock()
        full = threading.Event()
        full_count = [0]

        def pump(i, proc):
            for line in proc.stdout:
                sys.stdout.write(line)
                sys.stdout.flush()
                if line.startswith("peer%d full world reached" % i):
                    with lock:
                        full_count[0] += 1
                        if full_count[0] == args.peers:
                            full.set()

        try:
            for i in range(args.peers):
                victim = args.kill_one and i == args.peers - 1
                cmd = [sys.executable, "-u", os.path.abspath(__file__), "--master", master.address, "--name",
                       "peer%d" % i, "--count", str(args.count), "--timeout-s", str(args.timeout_s),
                       "--full-world", str(args.peers),
                       "--steps", str(10 ** 9 if victim else args.steps)]
                if args.kill_one and not victim:
                    cmd.append("--expect-loss")
                env = dict(os.environ)
                if secret:
                    env["PCCL_SECRET"] = secret  # not on the command line, where ps shows it
                proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, text=True, env=env)
                reader = threading.Thread(target=pump, args=(i, proc), daemon=True)
                reader.start()
                children.append((proc, reader))
            master.wait_for_peers(args.peers, 0, args.timeout_s)
            print("master: %d peers accepted" % args.peers, flush=True)
            if args.kill_one:
                if not full.wait(args.timeout_s):
                    print("launcher: the peers did not all reach the full world in time", flush=True)
                    return 1
                proc = children[-1][0]
                proc.send_signal(signal.SIGKILL)
                print("launcher: killed peer%d (pid %d) with SIGKILL" % (args.peers - 1, proc.pid), flush=True)
            status = 0
            deadline = time.monotonic() + args.timeout_s + 10
            for i, (proc, reader) in enumerate(children):
                code = proc.wait(max(1.0, deadline - time.monotonic()))
                reader.join(5)
                if args.kill_one and i == args.peers - 1:
                    continue
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
    parser.add_argument("--peers", type=int, default=3, help="launcher mode: peer processes to run (default 3)")
    parser.add_argument("--kill-one", action="store_true", help="launcher mode: SIGKILL the last peer mid-run")
    parser.add_argument("--steps", type=int, default=10, help="all-reduces each peer completes (default 10)")
    parser.add_argument("--count", type=int, default=1 << 18, help="float32 elements per all-reduce")
    parser.add_argument("--listen", default="127.0.0.1:0", help="peer mode: ring listen address (default "
                        "127.0.0.1:0; use 0.0.0.0:0 across machines)")
    parser.add_argument("--secret", default=None, help="shared secret (default: PCCL_SECRET, else an open run)")
    parser.add_argument("--timeout-s", type=float, default=60.0, help="deadline of the whole run")
    parser.add_argument("--name", default="peer", help=argparse.SUPPRESS)
    parser.add_argument("--expect-loss", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--full-world", type=int, default=0, help=argparse.SUPPRESS)
    args = parser.parse_args()
    try:
        if args.master:
            return run_peer(args)
        return run_launcher(args)
    except pccl.PcclError as e:
        print("%s: %s (%s)" % (args.name if args.master else "launcher", e, type(e).__name__), flush=True)
        return 3 if e.fatal else 1


if __name__ == "__main__":
    sys.exit(main())
