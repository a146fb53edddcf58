"""A peer process of test_fault.py: joins the run and all-reduces in a loop (every peer contributes
arange(n) + 1 in float64, so each element must come back as world_size * (k + 1)), with the
abort/retry loop: on a retryable error it calls update_topology() and tries again.

Prints one line per event: "world N" when the world size changes, "retry CLASS" for every retryable
error, "stats {json}" at the end. Exits 0 once it has survived --losses peer losses and completed
--steps all-reduces after the last one; 3 when the master is lost; 2 when --deadline-s passes.

    _peer.py --master HOST:PORT --world W [--count N] [--steps S] [--losses L] [--deadline-s T]

It admits waiting peers (are_peers_pending -> update_topology) only until the world has reached W;
after that it only all-reduces, so a peer's death always surfaces as an error of the all-reduce
(the test asserts PeerLostError) rather than as a quiet update.
"""

import argparse
import json
import os
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

import numpy as np  # noqa: E402

import pccl  # noqa: E402


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--master", required=True)
    parser.add_argument("--count", type=int, default=100000)
    parser.add_argument("--steps", type=int, default=3)
    parser.add_argument("--losses", type=int, default=1)
    parser.add_argument("--deadline-s", type=float, default=40.0)
    parser.add_argument("--world", type=int, required=True)
    args = parser.parse_args()

    deadline = time.monotonic() + args.deadline_s
    comm = pccl.Communicator(args.master, listen_address="127.0.0.1:0", heartbeat_interval_ms=200,
                             peer_timeout_ms=5000, connect_timeout_ms=20000, op_timeout_ms=20000)
    try:
        comm.connect()
        base = np.arange(args.count, dtype=np.float64) + 1.0
        x = np.empty_like(base)
        world, lost, steps_after = 0, 0, 0
        peer_lost_seen = 0
        admitting = True
        while lost < args.losses or steps_after < args.steps:
            if time.monotonic() > deadline:
                print("deadline", flush=True)
                return 2
            try:
                if admitting and comm.are_peers_pending():
                    comm.update_topology()
                x[:] = base
                info = comm.all_reduce(x, op="sum")
            except pccl.PcclError as e:
                if not e.retryable:
                    raise
                print("retry %s %s" % (type(e).__name__, e.detail), flush=True)
                if isinstance(e, pccl.PeerLostError):
                    peer_lost_seen += 1
                try:
                    comm.update_topology()
                except pccl.PcclError as e2:
                    if not e2.retryable:
                        raise
                    print("retry update %s" % type(e2).__name__, flush=True)
                continue
            if not np.array_equal(x, base * info.world_size):
                print("WRONG result at world %d" % info.world_size, flush=True)
                return 1
            if info.world_size < world:
                lost += 1
                steps_after = 0
            elif lost:
                steps_after += 1
            if info.world_size >= args.world:
                admitting = False
            if info.world_size != world:
                world = info.world_size
                print("world %d" % world, flush=True)
        stats = comm.stats().as_dict()
        stats["peer_lost_seen"] = peer_lost_seen
        print("stats " + json.dumps(stats), flush=True)
        return 0
    except (pccl.MasterUnreachableError, pccl.KickedError) as e:
        print("fatal %s" % e, flush=True)
        return 3
    finally:
        comm.close()


if __name__ == "__main__":
    sys.exit(main())
