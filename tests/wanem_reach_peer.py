#!/usr/bin/python3
"""One rank of tests/wanem_reach.sh inside pccl-wanem's rank namespace: rank 0 runs a pccl.Master on
10.201.0.2:17400 and a peer; ranks 1 and 2 (behind a firewall and a cone NAT in the paths file) a peer
each. Every peer is in a peer group of its own, so no peer dials another: each joins, whatever its
reachability: rank 0 joins first and opens the FIFO UP (the others wait for that), then admits them.
Then every rank waits for the test to write the FIFO GO; rank 0 prints the master's stats as one JSON
line ("stats {...}") before they all close.
    wanem_reach_peer.py GO UP
"""

import json
import os
import sys

import pccl

RANK = int(os.environ["PCCL_WANEM_RANK"])
MASTER = "10.201.0.2:17400"


def say(line):
    """One line in one write: the ranks share the emulator's output (print() writes the text and the
    newline apart, so two ranks' lines could run together)."""
    os.write(1, (line + "\n").encode())


def main():
    go, up = sys.argv[1], sys.argv[2]
    master = None
    if RANK == 0:
        master = pccl.Master(listen="0.0.0.0:17400", handshake_timeout_ms=2000)
        master.start()
    else:
        os.close(os.open(up, os.O_RDONLY))  # returns once rank 0 opened the FIFO: its master and peer are up
    comm = pccl.Communicator(MASTER, peer_group=RANK, connect_timeout_ms=60000, master_reconnect_ms=0)
    try:
        if master is not None:
            comm.connect()  # the first member
            signal = os.open(up, os.O_RDWR)  # a writer: the others' open() returns
            master.wait_for_peers(accepted=1, pending=2, timeout_s=60)
            comm.update_topology()  # admits them
            master.wait_for_peers(accepted=3, timeout_s=60)
            os.close(signal)
            say("rank 0: every peer accepted")
        else:
            comm.connect()  # pending until rank 0's update_topology
            say("rank %d connected" % RANK)
        # The test holds the FIFO open and writes "go\n" once per rank when it saw the verdicts: each rank
        # takes exactly its 3 bytes (unbuffered), whenever it opens the FIFO.
        fd = os.open(go, os.O_RDONLY)
        try:
            os.read(fd, 3)
        finally:
            os.close(fd)
        if master is not None:
            say("stats " + json.dumps(master.stats()))
    finally:
        comm.close()
        if master is not None:
            master.close()


if __name__ == "__main__":
    main()
