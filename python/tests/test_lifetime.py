"""Lifetimes around the C handles, with real peers: each thread's exception carries its own call's
detail; close() racing Request.wait(); dropped (fire-and-forget) requests are released on later calls
and their finalizers never block; a dropped communicator is destroyed off the garbage collector's
thread; a forked child cannot use (or free) what it inherited, and the parent goes on."""

import atexit
import gc
import os
import select
import threading
import time
import traceback
import unittest
import weakref

import numpy as np

import _support
import pccl


def freed_event(obj):
    """A threading.Event set when obj is freed."""
    event = threading.Event()
    weakref.finalize(obj, event.set)
    return event


def until_all_peers_agree(cluster, done, tag_base, timeout=_support.DEADLINE_S):
    """Blocking all-reduces of a flag on every peer, until done(i, comm) holds on all of them (each round
    is a real collective, which also reaps the dropped requests); AssertionError at the deadline."""
    deadline = time.monotonic() + timeout

    def body(i, comm):
        for k in range(100000):
            flag = np.array([0.0 if done(i, comm) else 1.0])
            comm.all_reduce(flag, op="max", tag=tag_base + k)
            if flag[0] == 0.0:
                return k
            if time.monotonic() > deadline:
                raise AssertionError("peer %d: still not done after %d rounds" % (i, k))
        raise AssertionError("unreachable")

    return cluster.run(body, timeout=timeout + 10)


class ThreadDetails(unittest.TestCase):
    def test_each_thread_gets_its_own_detail(self):
        cluster = _support.Cluster(2)
        try:
            comm, other = cluster.comms
            n_threads, rounds = 4, 25
            requests = [comm.all_reduce_async(np.ones(8, np.float32), tag=700 + k) for k in range(n_threads)]
            meet = threading.Barrier(n_threads, timeout=_support.DEADLINE_S)
            wrong = []

            def body(k):
                meet.wait()
                for _ in range(rounds):
                    with self.assertRaises(pccl.InvalidArgumentError) as cm:  # fails in C, detail per thread
                        comm.all_reduce(np.ones(4, np.float32), compress=20 + k, tag=800 + k)
                    if "got %d" % (20 + k) not in cm.exception.detail:
                        wrong.append(cm.exception.detail)
                    with self.assertRaises(pccl.WaitTimeoutError) as cm:  # pcclWaitFor's own detail
                        requests[k].wait(timeout=0)
                    if "tag %d " % (700 + k) not in cm.exception.detail:
                        wrong.append(cm.exception.detail)

            _support.run_parallel([lambda k=k: body(k) for k in range(n_threads)])
            self.assertEqual(wrong, [])
            for k in range(n_threads):
                other.all_reduce(np.ones(8, np.float32), tag=700 + k)
            for r in requests:
                self.assertEqual(r.wait().world_size, 2)
                self.assertTrue(np.all(r.recv == 2))
        finally:
            cluster.close()


class CloseAndWait(unittest.TestCase):
    def test_close_racing_wait(self):
        cluster = _support.Cluster(2)
        try:
            comm, other = cluster.comms
            x = np.ones(1000, np.float32)
            request = comm.all_reduce_async(x, tag=5)
            start = threading.Barrier(3, timeout=_support.DEADLINE_S)

            def waiter():
                start.wait()
                return request.wait()

            def closer():
                start.wait()
                comm.close()
                return "closed"

            def joiner():
                start.wait()
                return other.all_reduce(np.ones(1000, np.float32), tag=5)

            info, closed, other_info = _support.run_parallel([waiter, closer, joiner])
            self.assertEqual((info.world_size, closed, other_info.world_size), (2, "closed", 2))
            self.assertTrue(np.all(x == 2))
            self.assertTrue(comm.closed and request.done)
            with self.assertRaises(pccl.InvalidUsageError):
                request.wait()
        finally:
            cluster.close()

    def test_close_ends_the_request_and_wait_hands_out_its_outcome(self):
        cluster = _support.Cluster(2)
        try:
            comm, other = cluster.comms
            x = np.full(100, 3.0)
            request = comm.all_reduce_async(x, tag=6)
            joiner = threading.Thread(target=lambda: other.all_reduce(np.ones(100), tag=6), daemon=True)
            joiner.start()
            comm.close()  # waits for the operation
            joiner.join(_support.DEADLINE_S)
            self.assertTrue(request.done)
            self.assertTrue(request.test())
            self.assertEqual(request.wait().world_size, 2)  # the outcome close() kept
            self.assertTrue(np.all(x == 4.0))
            with self.assertRaises(pccl.InvalidUsageError):
                request.wait()
        finally:
            cluster.close()


class DroppedRequests(unittest.TestCase):
    def test_fire_and_forget_releases_the_buffers(self):
        # op_timeout_ms of 10 minutes: a finalizer that waited for its operation would hang the test.
        cluster = _support.Cluster(3, op_timeout_ms=600000)
        try:
            comm, others = cluster.comms[0], cluster.comms[1:]
            # Dropped while it cannot end (the others have not called it): the finalizer returns at
            # once and the buffer stays pinned while pccl owns it.
            x = np.ones(5000, np.float32)
            ref = weakref.ref(x)
            comm.all_reduce_async(x, tag=1)
            del x
            gc.collect()
            self.assertIsNotNone(ref())
            self.assertEqual(len(comm._ops), 1)
            _support.run_parallel([lambda c=c: c.all_reduce(np.ones(5000, np.float32), tag=1) for c in others])

            refs = [[] for _ in cluster.comms]

            def drop_in_a_loop(i, c):
                for step in range(30):
                    buf = np.full(2000, float(i + step), np.float32)
                    refs[i].append(weakref.ref(buf))
                    c.all_reduce_async(buf, tag=100 + step)  # never waited on
                return True

            cluster.run(drop_in_a_loop)
            rounds = until_all_peers_agree(
                cluster, lambda i, c: all(r() is None for r in refs[i]) and (i != 0 or ref() is None), 10000)
            self.assertTrue(all(r >= 0 for r in rounds))
            for c in cluster.comms:
                self.assertEqual(len(c._ops), 0)
        finally:
            cluster.close()

    def test_dropped_communicator_is_destroyed_off_the_gc_thread(self):
        cluster = _support.Cluster(2, op_timeout_ms=600000)
        try:
            comm = cluster.comms.pop(0)
            x = np.ones(1000, np.float32)
            released = freed_event(x)
            comm.all_reduce_async(x, tag=3)  # can never end: the other peer never calls it
            del x, comm
            gc.collect()  # the finalizers return at once; the janitor destroys the communicator,
            # which ends the operation, frees the request and releases the buffer
            self.assertTrue(released.wait(_support.DEADLINE_S))
        finally:
            cluster.close()

    def test_close_waits_for_a_dropped_request_until_its_deadline(self):
        cluster = _support.Cluster(2, op_timeout_ms=1500)
        try:
            comm = cluster.comms[0]
            x = np.ones(100, np.float32)
            released = freed_event(x)
            comm.all_reduce_async(x, tag=4)  # ends with PcclTimeoutError: the other peer never calls it
            del x
            comm.close()
            self.assertTrue(released.is_set())
        finally:
            cluster.close()


def _inherited_calls(master, comm, request):
    return [("all_reduce", lambda: comm.all_reduce(np.ones(4, np.float32), tag=11)),
            ("all_reduce_async", lambda: comm.all_reduce_async(np.ones(4, np.float32), tag=12)),
            ("world_size", lambda: comm.world_size), ("stats", comm.stats), ("update_topology", comm.update_topology),
            ("Request.wait", request.wait), ("Request.test", request.test), ("Master.stats", master.stats),
            ("Master.port", lambda: master.port)]


class Fork(unittest.TestCase):
    def test_child_cannot_use_inherited_objects_and_parent_goes_on(self):
        cluster = _support.Cluster(2)
        try:
            comm, other = cluster.comms
            x = np.ones(64, np.float32)
            request = comm.all_reduce_async(x, tag=9)
            r, w = os.pipe()
            pid = os.fork()
            if pid == 0:  # the child: report on the pipe, never return into unittest
                os.close(r)
                code = 1
                try:
                    report = self._in_child(cluster.master, comm, request)
                    code = 0
                except BaseException:  # noqa: BLE001
                    report = traceback.format_exc()
                finally:
                    try:
                        os.write(w, report.encode()[:60000])
                    finally:
                        os._exit(code)
            os.close(w)
            report = self._read_all(r)
            _, status = os.waitpid(pid, 0)
            self.assertEqual(report, "ok")
            self.assertTrue(os.WIFEXITED(status) and os.WEXITSTATUS(status) == 0, status)
            # The parent's objects still work: the request started before the fork, new all-reduces.
            other.all_reduce(np.ones(64, np.float32), tag=9)
            self.assertEqual(request.wait().world_size, 2)
            self.assertTrue(np.all(x == 2))
            outs = cluster.run(lambda i, c: c.all_reduce(np.full(10, float(i)), tag=10))
            self.assertEqual([o.world_size for o in outs], [2, 2])
            self.assertEqual(cluster.master.stats()["accepted"], 2)
        finally:
            cluster.close()

    @staticmethod
    def _in_child(master, comm, request):
        problems = []
        for name, call in _inherited_calls(master, comm, request):
            try:
                call()
                problems.append("%s: no exception" % name)
            except pccl.InvalidUsageError as e:
                if "fork" not in e.detail or str(os.getpid()) not in e.detail:
                    problems.append("%s: %s" % (name, e.detail))
            except Exception as e:  # noqa: BLE001
                problems.append("%s: %r" % (name, e))
        comm.close()  # leaves the parent's handle alone
        master.close()
        del comm, master, request, call
        gc.collect()  # the finalizers: nothing either
        atexit._run_exitfuncs()  # what exiting runs (the janitor's drain)
        return "ok" if not problems else "\n".join(problems)

    @staticmethod
    def _read_all(fd):
        chunks, deadline = [], time.monotonic() + _support.DEADLINE_S
        try:
            while True:
                ready, _, _ = select.select([fd], [], [], max(0.0, deadline - time.monotonic()))
                if not ready:
                    raise AssertionError("the child did not finish within %.0f s" % _support.DEADLINE_S)
                chunk = os.read(fd, 65536)
                if not chunk:
                    return b"".join(chunks).decode()
                chunks.append(chunk)
        finally:
            os.close(fd)


if __name__ == "__main__":
    unittest.main(verbosity=2)
