#!/usr/bin/python3
"""One rank of tests/wanem_faults.sh, run by pccl-wanem in its namespace. Rank 1 echoes every connection;
rank 0 writes faults into pccl-wanem's --control FIFO and checks what each does to a real TCP connection,
waiting on events with deadlines (never on the machine's speed):
  down 1 for 2s        a round trip held by the blackout, then the connection goes on, bytes intact
  burst 0 -> 1 ...     bulk echoes through a 50 % loss burst arrive intact
  path 0 1 delay=100   round trips of at least the new 200 ms (a busy machine only adds to them)
  reset 0 -> 1         the connection fails with ECONNRESET; a new one works
and then marks the start of a "timed operation" in PCCL_WANEM_PHASES as pccl-bench does, which the
scheduled `at phase+300ms down 0 -> 1 for 2s` (tests/wanem_faults.sh's --faults file) must follow: a
round trip held by that blackout.
Exit 0 when every check passed; a message and exit 1 otherwise.
  wanem_faults_peer.py CONTROL_FIFO PORT
"""
import errno
import os
import socket
import sys
import threading
import time

DEADLINE_S = 60


def fail(msg):
    print(f"wanem_faults_peer: FAIL: {msg}", flush=True)
    sys.exit(1)


def recv_exact(s, n):
    out = bytearray()
    while len(out) < n:
        b = s.recv(n - len(out))
        if not b:
            raise ConnectionError("closed by the peer")
        out += b
    return bytes(out)


def echo_server(port):
    srv = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    srv.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    srv.bind(("0.0.0.0", port))
    srv.listen(8)

    def serve(c):
        try:
            while True:
                b = c.recv(1 << 16)
                if not b:
                    break
                c.sendall(b)
        except OSError:
            pass  # a reset connection: the client's check, not ours
        c.close()

    while True:
        c, _ = srv.accept()
        if c.recv(1, socket.MSG_PEEK) == b"q":
            return
        threading.Thread(target=serve, args=(c,), daemon=True).start()


def connect(addr, port):
    deadline = time.monotonic() + DEADLINE_S
    while True:
        try:
            return socket.create_connection((addr, port), timeout=DEADLINE_S)
        except OSError:
            if time.monotonic() > deadline:
                raise
            time.sleep(0.1)  # the server's namespace may not listen yet


def round_trip(s, payload):
    t = time.monotonic()
    s.sendall(payload)
    if recv_exact(s, len(payload)) != payload:
        fail("an echo came back altered")
    return time.monotonic() - t


def control(fifo, line):
    with open(fifo, "w") as f:
        f.write(line + "\n")


def client(fifo, addr, port):
    s = connect(addr, port)
    base = min(round_trip(s, b"x") for _ in range(5))
    print(f"round trip before the faults: {base * 1000:.1f} ms", flush=True)

    control(fifo, "down 1 for 2s")
    deadline = time.monotonic() + DEADLINE_S
    while round_trip(s, b"d" * 100) < 1.5:
        if time.monotonic() > deadline:
            fail("no round trip was held by the 2 s blackout")
    round_trip(s, b"after the blackout")
    print("blackout: a round trip was held, the connection went on", flush=True)

    control(fifo, "burst 0 -> 1 loss=50 for 2s")
    block = os.urandom(1 << 16)
    end = time.monotonic() + 3
    n = 0
    while time.monotonic() < end:
        round_trip(s, block)
        n += 1
    print(f"burst: {n} echoes of 64 KiB intact", flush=True)

    control(fifo, "path 0 1 delay=100")
    deadline = time.monotonic() + DEADLINE_S
    while round_trip(s, b"p") < 0.19:
        if time.monotonic() > deadline:
            fail("the route change never showed")
    rtts = [round_trip(s, b"p") for _ in range(3)]
    if min(rtts) < 0.19:
        fail(f"round trips of {min(rtts) * 1000:.1f} ms after the route change to 200 ms")
    print(f"route change: round trips {min(rtts) * 1000:.1f} ms and up", flush=True)

    control(fifo, "reset 0 -> 1")
    deadline = time.monotonic() + DEADLINE_S
    try:
        while True:
            round_trip(s, b"r")
            if time.monotonic() > deadline:
                fail("the connection was never reset")
    except ConnectionResetError:
        pass
    except OSError as e:
        if e.errno != errno.ECONNRESET:
            fail(f"the reset connection failed with {e!r}, not ECONNRESET")
    s.close()
    s = connect(addr, port)
    round_trip(s, b"a new connection after the reset")
    s.close()
    print("reset: ECONNRESET, and a new connection works", flush=True)

    s = connect(addr, port)
    with open(os.environ["PCCL_WANEM_PHASES"], "a") as f:
        f.write(f"begin test:0:1:0 {time.monotonic_ns()}\n")
    deadline = time.monotonic() + DEADLINE_S
    while round_trip(s, b"m") < 1.5:
        if time.monotonic() > deadline:
            fail("no round trip was held by the blackout scheduled at phase+300ms")
    s.close()
    print("phase mark: the scheduled blackout followed it", flush=True)
    q = connect(addr, port)
    q.sendall(b"q")
    q.close()


def main():
    fifo, port = sys.argv[1], int(sys.argv[2])
    rank = int(os.environ["PCCL_WANEM_RANK"])
    addrs = os.environ["PCCL_WANEM_ADDRS"].split(",")
    if rank == 1:
        echo_server(port)
    else:
        client(fifo, addrs[1], port)


if __name__ == "__main__":
    main()
