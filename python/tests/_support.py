"""Helpers of the Python tests: an in-process master with peers on threads, running functions on every
peer at once with a deadline, and peer subprocesses whose output lines are read with deadlines.

Every wait here has a deadline; nothing sleeps to poll. Traffic stays on 127.0.0.1.
"""

import os
import queue
import signal
import subprocess
import sys
import tempfile
import threading
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.dirname(HERE))  # the package, when PYTHONPATH does not name it

import pccl  # noqa: E402

# Settings of every test peer: fast heartbeats, deadlines far below the ctest TIMEOUT, generous
# enough for a loaded 2-core machine.
# master_reconnect_ms=0: losing the master ends a test peer at once (test_failover.py sets it).
PEER_SETTINGS = dict(listen_address="127.0.0.1:0", heartbeat_interval_ms=200, peer_timeout_ms=5000,
                     master_reconnect_ms=0, connect_timeout_ms=20000, op_timeout_ms=20000,
                     handshake_timeout_ms=5000)
MASTER_SETTINGS = dict(listen="127.0.0.1:0", heartbeat_interval_ms=200, peer_timeout_ms=5000)
DEADLINE_S = 40.0  # how long a test waits for its threads / processes


def make_master(**overrides):
    settings = dict(MASTER_SETTINGS)
    settings.update(overrides)
    return pccl.Master(**settings).start()


def make_comm(master, **overrides):
    settings = dict(PEER_SETTINGS)
    settings.update(overrides)
    address = master if isinstance(master, str) else master.address
    return pccl.Communicator(address, **settings)


def run_parallel(fns, timeout=DEADLINE_S):
    """Runs every fn() on its own thread at once; returns their results in order. Raises the first
    exception one of them raised, or AssertionError when one is not done by the deadline."""
    results = [None] * len(fns)
    errors = [None] * len(fns)

    def body(i, fn):
        try:
            results[i] = fn()
        except BaseException as e:  # noqa: BLE001 - handed to the test thread
            errors[i] = e

    threads = [threading.Thread(target=body, args=(i, fn), daemon=True) for i, fn in enumerate(fns)]
    for t in threads:
        t.start()
    deadline = time.monotonic() + timeout
    for t in threads:
        t.join(max(0.0, deadline - time.monotonic()))
        if t.is_alive():
            raise AssertionError("a peer thread did not finish within %.0f s" % timeout)
    for e in errors:
        if e is not None:
            raise e
    return results


def connect_all(master, comms, timeout=DEADLINE_S):
    """Joins every communicator: the first connects alone, the others wait as pending until it votes."""
    comms[0].connect()
    if len(comms) == 1:
        return
    errors = []
    waiting = [threading.Thread(target=lambda c=c: errors.append(_catch(c.connect)), daemon=True)
               for c in comms[1:]]
    for t in waiting:
        t.start()
    master.wait_for_peers(1, len(comms) - 1, timeout)
    comms[0].update_topology()
    deadline = time.monotonic() + timeout
    for t in waiting:
        t.join(max(0.0, deadline - time.monotonic()))
        if t.is_alive():
            raise AssertionError("a joining peer did not finish connect() within %.0f s" % timeout)
    for e in errors:
        if e is not None:
            raise e


def _catch(fn):
    try:
        fn()
    except BaseException as e:  # noqa: BLE001
        return e
    return None


class Cluster:
    """A master and n connected communicators in this process."""

    def __init__(self, n, master_kwargs=None, **comm_kwargs):
        self.master = make_master(**(master_kwargs or {}))
        self.comms = []
        try:
            self.comms = [make_comm(self.master, **comm_kwargs) for _ in range(n)]
            connect_all(self.master, self.comms)
        except BaseException:
            self.close()
            raise

    def run(self, fn, timeout=DEADLINE_S):
        """fn(i, comm) on every communicator at once; the results in order."""
        return run_parallel([lambda i=i, c=c: fn(i, c) for i, c in enumerate(self.comms)], timeout)

    def close(self):
        for c in self.comms:
            c.close()
        self.master.close()


class PeerProcess:
    """A child process (python -u script args...) whose stdout lines are queued by a reader thread and
    whose stderr goes to a temporary file (shown when a test fails). stdin=subprocess.PIPE lets a test
    write to the child (proc.stdin)."""

    def __init__(self, name, script, args, env=None, stdin=None):
        self.name = name
        self.lines = queue.Queue()
        self.stderr = tempfile.TemporaryFile(mode="w+")
        self.output = []
        full_env = dict(os.environ)
        full_env.update(env or {})
        self.proc = subprocess.Popen([sys.executable, "-u", script] + list(args), stdout=subprocess.PIPE,
                                     stderr=self.stderr, stdin=stdin, text=True, env=full_env)
        self._reader = threading.Thread(target=self._read, daemon=True)
        self._reader.start()

    def _read(self):
        for line in self.proc.stdout:
            self.output.append(line.rstrip("\n"))
            self.lines.put(line.rstrip("\n"))
        self.lines.put(None)  # EOF

    def wait_for_line(self, predicate, timeout):
        """The first line (from now on) for which predicate(line) is true; AssertionError at EOF or
        when the deadline passes."""
        deadline = time.monotonic() + timeout
        while True:
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                raise AssertionError("%s: no expected line within %.0f s; output:\n%s" % (self.name, timeout, self.log()))
            try:
                line = self.lines.get(timeout=remaining)
            except queue.Empty:
                continue
            if line is None:
                self.lines.put(None)
                raise AssertionError("%s exited (%s) before the expected line; output:\n%s"
                                     % (self.name, self.proc.poll(), self.log()))
            if predicate(line):
                return line

    def wait(self, timeout):
        """The exit status; AssertionError when the process is still running at the deadline."""
        try:
            code = self.proc.wait(timeout)
        except subprocess.TimeoutExpired:
            raise AssertionError("%s still running after %.0f s; output:\n%s" % (self.name, timeout, self.log())) from None
        self._reader.join(timeout)
        return code

    def kill(self):
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGKILL)
        try:
            self.proc.wait(10)
        except subprocess.TimeoutExpired:
            pass

    def log(self):
        self.stderr.seek(0)
        err = self.stderr.read()
        return "--- stdout\n%s\n--- stderr\n%s" % ("\n".join(self.output), err[-4000:])

    def close(self):
        self.kill()
        if self.proc.stdout:
            self.proc.stdout.close()
        self.stderr.close()
