#!/usr/bin/python3
"""One rank of tests/wanem_firewall.sh inside pccl-wanem's rank namespace: four ranks in one peer group,
some behind the firewalls or NATs of the paths file. Rank 0 runs a pccl.Master on 10.201.0.2:17400 and
a peer; it joins first and opens the FIFO UP (the others wait for that), then admits the rest. Then
every rank: checks the ring's reachability (pcclGetInbound) against CLOSED, runs an all-reduce,
optimises the topology (a link survey whose probes toward closed ranks are opened by them), runs
another all-reduce, and syncs shared state (ranks 1 and 3 out of date). Each prints one result line;
rank 0 also the master's stats ("stats {...}").
    wanem_firewall_peer.py UP CLOSED DECLARED
CLOSED: comma-separated ranks that nobody can dial; DECLARED: ranks that declare inbound=False (a
rank in DECLARED but not in CLOSED declared it wrongly: it is treated as closed all the same).
"""

import json
import os
import sys

import numpy as np

import pccl

RANK = int(os.environ["PCCL_WANEM_RANK"])
WORLD = 4
MASTER = "10.201.0.2:17400"
N = 1 << 18  # 1 MiB of float32: the ring, not the gather


def say(line):
    """One line in one write: the ranks share the emulator's output."""
    os.write(1, (line + "\n").encode())


def ranks(text):
    return {int(r) for r in text.split(",") if r}


def check_ring(comm, closed):
    """Every member reads the same reachability; returns this rank's view {rank: inbound} by wanem rank."""
    size = comm.world_size
    assert size == WORLD, "ring of %d, expected %d" % (size, WORLD)
    # The ring's ranks are not wanem ranks: tell them apart by an all-gather of the wanem ranks.
    everyone = np.zeros(size, dtype=np.int32)
    comm.all_gather(np.array([RANK], dtype=np.int32), everyone)  # one group: group ranks are ring ranks
    seen = {}
    for ring_rank in range(size):
        seen[int(everyone[ring_rank])] = comm.inbound_of(ring_rank)
    expected = {r: r not in closed for r in range(WORLD)}
    assert seen == expected, "inbound by wanem rank %r, expected %r" % (seen, expected)
    return everyone


def all_reduce(comm, tag):
    x = np.full(N, float(RANK + 1), dtype=np.float32)
    comm.all_reduce(x, tag=tag)
    want = float(sum(r + 1 for r in range(WORLD)))
    assert np.all(x == want), "all-reduce %d: %r, expected %r" % (tag, x[:4], want)


def main():
    up, closed, declared = sys.argv[1], ranks(sys.argv[2]), ranks(sys.argv[3])
    master = None
    if RANK == 0:
        master = pccl.Master(listen="0.0.0.0:17400", handshake_timeout_ms=2000, probe_budget_ms=300)
        master.start()
    else:
        os.close(os.open(up, os.O_RDONLY))  # returns once rank 0 opened the FIFO: its master and peer are up
    inbound = False if RANK in declared else None
    comm = pccl.Communicator(MASTER, connect_timeout_ms=60000, master_reconnect_ms=0, inbound=inbound)
    try:
        if master is not None:
            comm.connect()  # the first member
            signal = os.open(up, os.O_RDWR)  # a writer: the others' open() returns
            master.wait_for_peers(accepted=1, pending=WORLD - 1, timeout_s=60)
            comm.update_topology()  # admits them: every ring link between a closed and an open rank turns round
            master.wait_for_peers(accepted=WORLD, timeout_s=60)
            os.close(signal)
        else:
            comm.connect()  # pending until rank 0's update_topology
        check_ring(comm, closed)
        all_reduce(comm, 1)
        comm.optimize_topology()  # measures every link that can connect, then installs the best ring
        check_ring(comm, closed)
        all_reduce(comm, 2)
        w = np.arange(N, dtype=np.float32)
        state = {"w": w.copy() if RANK in (0, 2) else np.zeros(N, np.float32)}
        info = comm.sync_shared_state(state, revision=3 if RANK in (0, 2) else 0)
        assert np.array_equal(state["w"], w), "shared state not received"
        assert info.revision == 3, "revision %d" % info.revision
        say("rank %d: ok (ring, all-reduces, optimised ring, shared state: %d bytes received)" % (RANK, info.rx_bytes))
        if master is not None:
            say("stats " + json.dumps(master.stats()))
        comm.barrier()  # nobody closes while another still syncs
    finally:
        comm.close()
        if master is not None:
            master.close()


if __name__ == "__main__":
    main()
