"""Errors become exceptions of the result code's class carrying pcclGetLastError's detail: argument
checks before C, failures in C, authentication, an unreachable master, wrong call order, mismatches."""

import ctypes
import socket
import threading
import time
import unittest

import numpy as np

import _support
import pccl


def closed_port():
    """A port on 127.0.0.1 nothing listens on (bound, then closed)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class CreateAndConnectErrors(unittest.TestCase):
    def test_wrong_secret_is_auth_failed_with_detail(self):
        with _support.make_master(secret="right secret") as master:
            for secret in ("wrong secret", b"\x00\x01"):
                with _support.make_comm(master, secret=secret) as comm:
                    with self.assertRaises(pccl.AuthFailedError) as cm:
                        comm.connect()
                    e = cm.exception
                    self.assertEqual(e.code, pccl.Result.AUTH_FAILED)
                    self.assertEqual(e.name, "authentication failed")
                    self.assertTrue(e.detail, "no detail from pcclGetLastError")
                    self.assertIn(e.detail, str(e))
            with _support.make_comm(master, secret="right secret") as comm:  # the right one works
                comm.connect()
                self.assertEqual(comm.world_size, 1)

    def test_encryption_on_one_side_only(self):
        with _support.make_master(secret="s", encrypt=True) as master:
            with _support.make_comm(master, secret="s") as comm:
                with self.assertRaises(pccl.AuthFailedError):
                    comm.connect()
            with _support.make_comm(master, secret="s", encrypt=True) as comm:
                comm.connect()
                self.assertIn(comm.cipher, ("ChaCha20-Poly1305", "AES-256-GCM"))

    def test_closed_port_is_master_unreachable(self):
        with _support.make_comm("127.0.0.1:%d" % closed_port()) as comm:
            start = time.monotonic()
            with self.assertRaises(pccl.MasterUnreachableError) as cm:
                comm.connect()
            self.assertTrue(cm.exception.detail)
            self.assertTrue(cm.exception.fatal)
            self.assertIsInstance(cm.exception, ConnectionError)
            self.assertLess(time.monotonic() - start, 15.0)

    def test_bad_settings_at_create(self):
        with self.assertRaises(pccl.InvalidArgumentError) as cm:
            pccl.Communicator("127.0.0.1:1", segment_bytes=1)
        self.assertIn("segment", cm.exception.detail)  # read with pcclGetLastError(NULL)
        with self.assertRaises(pccl.InvalidArgumentError) as cm:
            pccl.Communicator("127.0.0.1:1", encrypt=True)  # no secret (unless PCCL_SECRET is set)
        self.assertTrue(cm.exception.detail)
        with self.assertRaises(pccl.InvalidArgumentError):
            pccl.Communicator("127.0.0.1:1", connections_per_peer=-1)  # checked in Python
        with self.assertRaises(pccl.InvalidArgumentError):
            pccl.Communicator(12345)
        with self.assertRaises(pccl.InvalidArgumentError) as cm:
            pccl.Master(encrypt=True)
        self.assertTrue(cm.exception.detail)

    def test_port_in_use_is_system_error(self):
        with _support.make_master() as first:
            second = pccl.Master(listen="127.0.0.1:%d" % first.port)
            try:
                with self.assertRaises(pccl.PcclSystemError) as cm:
                    second.start()
                self.assertIsInstance(cm.exception, OSError)
                self.assertTrue(cm.exception.detail)
                with self.assertRaises(pccl.InvalidUsageError):
                    _ = second.port  # not started
            finally:
                second.close()

    def test_master_wait_for_peers_times_out_with_counts(self):
        with _support.make_master() as master:
            start = time.monotonic()
            with self.assertRaises(pccl.PcclTimeoutError) as cm:
                master.wait_for_peers(2, timeout_s=0.05)
            self.assertLess(time.monotonic() - start, 5.0)
            self.assertIn("0 accepted", cm.exception.detail)
            self.assertIsInstance(cm.exception, TimeoutError)


class CallOrderErrors(unittest.TestCase):
    def setUp(self):
        self.master = _support.make_master()
        self.comm = _support.make_comm(self.master)

    def tearDown(self):
        self.comm.close()
        self.master.close()

    def test_before_connect_is_invalid_usage(self):
        x = np.ones(4, np.float32)
        for call in (lambda: self.comm.all_reduce(x), lambda: self.comm.all_reduce_async(x),
                     self.comm.update_topology, self.comm.are_peers_pending,
                     lambda: self.comm.sync_shared_state({"x": x})):
            with self.assertRaises(pccl.InvalidUsageError) as cm:
                call()
            self.assertTrue(cm.exception.detail)
        self.assertEqual(self.comm.world_size, 0)
        self.assertEqual(self.comm.epoch, 0)
        self.comm.connect()
        with self.assertRaises(pccl.InvalidUsageError):  # connect twice
            self.comm.connect()

    def test_closed_communicator(self):
        self.comm.close()
        self.comm.close()  # idempotent
        self.assertTrue(self.comm.closed)
        with self.assertRaises(pccl.InvalidUsageError) as cm:
            self.comm.connect()
        self.assertIn("closed", cm.exception.detail)
        with self.assertRaises(pccl.InvalidUsageError):
            _ = self.comm.rank

    def test_close_while_another_thread_is_inside_a_call(self):
        self.comm.connect()
        late = _support.make_comm(self.master)
        try:
            t = threading.Thread(target=late.connect, daemon=True)  # pending until self.comm votes
            t.start()
            self.master.wait_for_peers(1, 1, 20)
            with self.assertRaises(pccl.InvalidUsageError) as cm:
                late.close()
            self.assertIn("other threads", cm.exception.detail)
            self.assertTrue(self.comm.are_peers_pending())
            self.comm.update_topology()
            t.join(30)
            self.assertFalse(t.is_alive())
            self.assertEqual(late.world_size, 2)
        finally:
            late.close()

    def test_master_stopped_is_master_unreachable(self):
        self.comm.connect()
        self.master.stop()
        self.master.stop()  # idempotent
        with self.assertRaises(pccl.MasterUnreachableError):
            self.comm.are_peers_pending()


class ThreadErrors(unittest.TestCase):
    """pcclGetLastError(comm) is per thread: threads failing on one communicator at once each see their own
    detail, in the exception and when they read it later."""

    def setUp(self):
        self.master = _support.make_master()
        self.comm = _support.make_comm(self.master)

    def tearDown(self):
        self.comm.close()
        self.master.close()

    def test_concurrent_failures_keep_their_own_detail(self):
        lib = pccl._lib.loaded()
        meet = threading.Barrier(2, timeout=_support.DEADLINE_S)
        wrong = []

        def fail_repeatedly(attr):
            mine = "unknown attribute %d" % attr
            value = ctypes.c_int64(0)
            for _ in range(100):
                with self.assertRaises(pccl.InvalidArgumentError) as cm:  # read at once by the binding
                    self.comm.attribute(attr)
                if mine not in cm.exception.detail:
                    wrong.append(cm.exception.detail)
                with self.comm._guard as h:  # the raw calls: both fail before either reads
                    r = lib.pcclGetAttribute(h, attr, ctypes.byref(value))
                    meet.wait()
                    detail = pccl.errors.last_error(h)
                    meet.wait()
                if r != pccl.Result.INVALID_ARGUMENT or detail != mine:
                    wrong.append(detail)

        _support.run_parallel([lambda: fail_repeatedly(98), lambda: fail_repeatedly(99)])
        self.assertEqual(wrong, [])


class ArgumentErrors(unittest.TestCase):
    """Refused in Python before any C call (no cluster needed beyond a connected single peer)."""

    @classmethod
    def setUpClass(cls):
        cls.master = _support.make_master()
        cls.comm = _support.make_comm(cls.master)
        cls.comm.connect()

    @classmethod
    def tearDownClass(cls):
        cls.comm.close()
        cls.master.close()

    def assert_invalid(self, fn, *words):
        with self.assertRaises(pccl.InvalidArgumentError) as cm:
            fn()
        for w in words:
            self.assertIn(w, cm.exception.detail)
        return cm.exception

    def test_bad_arrays(self):
        c = self.comm
        x = np.arange(10, dtype=np.float32)
        self.assert_invalid(lambda: c.all_reduce(x[::2]), "contiguous")
        self.assert_invalid(lambda: c.all_reduce(np.asfortranarray(np.ones((3, 4), np.float32))), "contiguous")
        ro = np.ones(4, np.float32)
        ro.setflags(write=False)
        self.assert_invalid(lambda: c.all_reduce(ro), "read-only")
        self.assert_invalid(lambda: c.all_reduce(x, ro), "read-only")
        self.assert_invalid(lambda: c.all_reduce(np.ones(3, np.complex64)), "complex64")
        self.assert_invalid(lambda: c.all_reduce(np.ones(3, bool)), "bool")
        self.assert_invalid(lambda: c.all_reduce(np.ones(3, object)), "object")
        self.assert_invalid(lambda: c.all_reduce(np.ones(3, ">f4")), "byte order")
        self.assert_invalid(lambda: c.all_reduce(x, np.empty(10, np.float64)), "dtype")
        self.assert_invalid(lambda: c.all_reduce(x, np.empty(9, np.float32)), "elements")
        self.assert_invalid(lambda: c.all_reduce([1.0, 2.0]), "list")
        self.assert_invalid(lambda: c.all_reduce(None), "None")
        self.assert_invalid(lambda: c.all_reduce(b"abc"), "bytes")
        self.assert_invalid(lambda: c.all_reduce_async(x[::2]), "contiguous")
        np.testing.assert_array_equal(x, np.arange(10, dtype=np.float32))

    def test_bad_options(self):
        c = self.comm
        x = np.ones(4, np.float32)
        self.assert_invalid(lambda: c.all_reduce(x, op="median"), "median")
        self.assert_invalid(lambda: c.all_reduce(x, quant="int4"), "int4")
        self.assert_invalid(lambda: c.all_reduce(x, tag=-1), "tag")
        self.assert_invalid(lambda: c.all_reduce(x, tag=2 ** 64), "tag")
        # These pass Python's checks and are refused by the C library, with its detail.
        self.assert_invalid(lambda: c.all_reduce(np.ones(4, np.int32), quant="int8"), "int8")
        self.assert_invalid(lambda: c.all_reduce(x, compress=20))
        y = np.ones(8, np.float32)
        e = self.assert_invalid(lambda: c.all_reduce(y[:4], y[2:6]))  # overlapping: C checks it
        self.assertTrue(e.detail)
        self.assert_invalid(lambda: c.sync_shared_state({"x": x}, strategy="popular"), "popular")
        self.assert_invalid(lambda: c.sync_shared_state([x]), "dict")
        self.assert_invalid(lambda: c.sync_shared_state({"x": x[::2]}), "contiguous")
        self.assert_invalid(lambda: c.sync_shared_state({"": x}))  # C: empty name
        with self.assertRaises(pccl.InvalidArgumentError):
            self.master.wait_for_peers(-1)


class MismatchErrors(unittest.TestCase):
    def test_different_counts_same_tag(self):
        cluster = _support.Cluster(2)
        try:
            def body(i, comm):
                with self.assertRaises(pccl.MismatchError) as cm:
                    comm.all_reduce(np.ones(10 + i, np.float32), tag=9)
                self.assertFalse(cm.exception.retryable)  # the same calls would fail the same way
                return cm.exception.detail

            for detail in cluster.run(body):
                self.assertTrue(detail)
            # nothing is left behind: after an update, matching calls succeed
            cluster.run(lambda i, comm: comm.update_topology())
            outs = cluster.run(lambda i, comm: comm.all_reduce(np.ones(10, np.float32), tag=9))
            self.assertTrue(all(info.world_size == 2 for info in outs))
            self.assertTrue(all(c.stats().allreduce_aborts >= 1 for c in cluster.comms))
            self.assertTrue(all(c.stats().allreduce_retries >= 1 for c in cluster.comms))
        finally:
            cluster.close()


if __name__ == "__main__":
    unittest.main(verbosity=2)
