#!/usr/bin/python3
"""How long a join takes for a peer of each reachability (issue 37): one rank of a pccl-wanem run.
Rank 0 runs a pccl.Master and the first peer; every member admits whoever waits; ranks 1..N-1 join one at a
time, rank r STAGGER_S x r seconds after the start (a launcher, not a test: it sleeps), each timing its
connect() from the call to its return (admitted, its ring up). Each rank prints one JSON line:
{"rank": r, "join_s": seconds, "inbound": what the ring says of it}. The paths file decides who sits
behind a firewall or a NAT; DECLARED (comma-separated ranks) declare inbound=False.
    pccl-wanem --ranks N [--paths FILE] ... -- bench/join_time.py [--declared R,R] [--stagger-s S]
"""

import argparse
import json
import os
import sys
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "python"))
import pccl  # noqa: E402

PORT = 17500


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--declared", default="", help="ranks that declare inbound=False (comma-separated)")
    p.add_argument("--stagger-s", type=float, default=8.0, help="rank r starts r times this late")
    a = p.parse_args()
    rank, world = int(os.environ["PCCL_WANEM_RANK"]), int(os.environ["PCCL_WANEM_RANKS"])
    master_host = os.environ["PCCL_WANEM_ADDRS"].split(",")[0]
    declared = {int(r) for r in a.declared.split(",") if r}
    master = None
    if rank == 0:
        master = pccl.Master(listen="0.0.0.0:%d" % PORT)
        master.start()
    else:
        time.sleep(a.stagger_s * rank)
    comm = pccl.Communicator("%s:%d" % (master_host, PORT), connect_timeout_ms=120000, master_reconnect_ms=0,
                             inbound=False if rank in declared else None)
    try:
        t0 = time.monotonic()
        comm.connect()
        join_s = time.monotonic() - t0
        while comm.world_size < world:  # every member votes, or no update admits the next rank
            if comm.are_peers_pending():
                comm.update_topology()
        os.write(1, (json.dumps({"rank": rank, "join_s": round(join_s, 4), "inbound": comm.inbound_of()}) + "\n")
                 .encode())
        comm.barrier()  # until everyone has joined and printed
    finally:
        comm.close()
        if master is not None:
            master.close()


if __name__ == "__main__":
    main()
