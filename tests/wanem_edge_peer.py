#!/usr/bin/python3
"""One rank of tests/wanem_edges.sh, inside pccl-wanem's rank namespace (PCCL_WANEM_RANK). The paths file
puts rank 1 behind a cone NAT, rank 2 behind a symmetric NAT, rank 3 behind a firewall, rank 4 behind a
cone NAT; rank 0 is open and the rendezvous. Rank 0 writes what it saw to OUT_DIR/result.json:
  - the public endpoint of each rank's two connections from one local port to two of rank 0's ports;
  - whether rank 0 could connect to each rank's listener (private and public address): it must not;
and ranks 1 and 4, told each other's public endpoint by rank 0, punch a TCP connection through both
cone NATs with a simultaneous open and exchange a line (OUT_DIR/punchR.txt).
    wanem_edge_peer.py OUT_DIR
"""

import json
import os
import socket
import sys
import threading
import time

DEADLINE_S = 90
RANK = int(os.environ["PCCL_WANEM_RANK"])
OUT = sys.argv[1]


def addr(r, public=False):
    return "10.%d.%d.2" % (202 if public else 201, r)


def bound(port):
    s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    s.bind(("0.0.0.0", port))
    return s


def dial(host, port, local_port=None, timeout=30.0):
    s = bound(local_port) if local_port else socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    s.settimeout(timeout)
    s.connect((host, port))
    return s


def dial0(port, local_port=None):
    """A connection to rank 0's port, whose listener may not be up yet: refused connections are retried
    until the deadline."""
    deadline = time.monotonic() + DEADLINE_S
    while True:
        try:
            return dial(addr(0), port, local_port=local_port)
        except ConnectionRefusedError:
            if time.monotonic() > deadline:
                raise
            time.sleep(0.05)


def line(sock):
    data = b""
    while not data.endswith(b"\n"):
        chunk = sock.recv(256)
        if not chunk:
            break
        data += chunk
    return data.decode().strip()


def rendezvous():
    """Rank 0: two listeners; records every 'map R TAG' endpoint, pairs the 'punch R' ranks, holds the
    'wait R' connections until its own checks are done."""
    seen, punch, waiting = {}, {}, []
    lock = threading.Condition()

    def serve(listener):
        while True:
            conn, peer = listener.accept()
            words = line(conn).split()
            with lock:
                if words[0] == "map":
                    seen["%s %s" % (words[1], words[2])] = list(peer)
                    conn.close()
                elif words[0] == "punch":
                    punch[words[1]] = (conn, peer)
                    if len(punch) == 2:
                        (a, (ca, pa)), (b, (cb, pb)) = sorted(punch.items())
                        ca.sendall(("%s %d\n" % pb).encode())
                        cb.sendall(("%s %d\n" % pa).encode())
                        ca.close()
                        cb.close()
                else:
                    waiting.append(conn)
                lock.notify_all()

    listeners = []
    for port in (7000, 7001):
        s = bound(port)
        s.listen(16)
        listeners.append(s)
        threading.Thread(target=serve, args=(s,), daemon=True).start()
    with lock:  # every rank has mapped its two connections and is waiting (so its listener is up)
        ok = lock.wait_for(lambda: len(seen) == 8 and len(waiting) == 3, timeout=DEADLINE_S)
    if not ok:
        raise SystemExit("rank 0: only %s and %d waiting" % (sorted(seen), len(waiting)))
    reach = {}
    for r in (1, 2, 3):
        for public in (False, True):
            key = "%d %s" % (r, "public" if public else "private")
            try:
                dial(addr(r, public), 7100, timeout=3.0).close()
                reach[key] = "connected"
            except OSError as e:
                reach[key] = "failed: %s" % e
    with open(os.path.join(OUT, "result.json"), "w") as f:
        json.dump({"seen": seen, "reach": reach}, f, indent=1)
    for conn in waiting:
        conn.sendall(b"done\n")
        conn.close()


def member():
    listener = bound(7100)  # the connections rank 0 tries: a NAT or firewall must stop them
    listener.listen(4)
    for tag, port in (("a", 7000), ("b", 7001)):  # one local port, two destinations
        s = dial0(port, local_port=7300)
        s.sendall(("map %d %s\n" % (RANK, tag)).encode())
        line(s)
        s.close()
    if RANK in (1, 4):
        s = dial0(7000, local_port=7200)
        s.sendall(("punch %d\n" % RANK).encode())
        host, port = line(s).split()
        s.close()
        deadline = time.monotonic() + DEADLINE_S
        while True:  # both dial at once; a SYN that reaches the other NAT before its own SYN left is dropped
            try:
                p = dial(host, int(port), local_port=7200, timeout=3.0)
                break
            except OSError:
                if time.monotonic() > deadline:
                    raise
        p.settimeout(30)
        p.sendall(("hello from %d\n" % RANK).encode())
        with open(os.path.join(OUT, "punch%d.txt" % RANK), "w") as f:
            f.write("%s via %s:%s, local %s\n" % (line(p), host, port, p.getsockname()))
        p.close()
    if RANK in (1, 2, 3):
        s = dial0(7000)
        s.sendall(("wait %d\n" % RANK).encode())
        s.settimeout(DEADLINE_S)
        line(s)
        s.close()


if __name__ == "__main__":
    rendezvous() if RANK == 0 else member()
