"""All-reduce of numpy arrays: a master and three peers on threads of this process (ctypes releases the
GIL during every call). Exact results for every dtype, in place and out of place, every op, async
operations with distinct tags, int8 quantization, attributes and stats counters."""

import array
import unittest

import numpy as np

import _support
import pccl

N_PEERS = 3


class AllReduceTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.cluster = _support.Cluster(N_PEERS)
        cls.comms = cls.cluster.comms

    @classmethod
    def tearDownClass(cls):
        cls.cluster.close()

    def run_all(self, fn):
        return self.cluster.run(fn)

    def test_attributes(self):
        ranks = sorted(c.rank for c in self.comms)
        self.assertEqual(ranks, list(range(N_PEERS)))
        for c in self.comms:
            self.assertEqual(c.world_size, N_PEERS)
            self.assertEqual(c.group_world_size, N_PEERS)
            self.assertEqual(c.peer_group, 0)
            self.assertGreater(c.listen_port, 0)
            self.assertEqual(c.ring_connections, 1)  # loopback: same_host_connections
            self.assertEqual(c.cipher, "none")
            self.assertEqual(c.epoch, self.comms[0].epoch)
            self.assertFalse(c.are_peers_pending())
        self.assertEqual(self.comms[0].attribute(pccl.Attribute.RANK), self.comms[0].rank)
        with self.assertRaises(pccl.InvalidArgumentError):
            self.comms[0].attribute(99)

    def test_master_stats(self):
        s = self.cluster.master.stats()
        self.assertEqual(s["accepted"], N_PEERS)
        self.assertEqual(s["pending"], 0)
        self.assertFalse(s["building"])
        self.assertEqual(s["epoch"], self.comms[0].epoch)
        self.assertEqual(s["connections"], N_PEERS)

    def test_sum_every_dtype_in_place(self):
        for dtype in (np.float32, np.float64, np.int32, np.float16, np.int8, np.uint8, np.int16, np.uint16,
                      np.uint32, np.int64, np.uint64):
            with self.subTest(dtype=np.dtype(dtype).name):
                n = 1001  # not divisible by the world size

                def body(i, comm):
                    x = ((np.arange(n) % 7) + i).astype(dtype)
                    info = comm.all_reduce(x)  # in place
                    return x, info

                results = self.run_all(body)
                expected = (3 * (np.arange(n) % 7) + 0 + 1 + 2).astype(dtype)
                for x, info in results:
                    np.testing.assert_array_equal(x, expected)
                    self.assertEqual(x.dtype, np.dtype(dtype))
                    self.assertEqual(info.world_size, N_PEERS)
                    self.assertGreater(info.tx_bytes, 0)

    def test_out_of_place_keeps_the_input(self):
        def body(i, comm):
            send = np.full((4, 25), float(i + 1), dtype=np.float64)
            send.setflags(write=False)  # out of place: send may be read-only
            recv = np.empty(100, dtype=np.float64)  # same count, other shape
            comm.all_reduce(send, recv)
            return send, recv

        for i, (send, recv) in enumerate(self.run_all(body)):
            self.assertTrue(np.all(send == i + 1))
            self.assertTrue(np.all(recv == 6.0))

    def test_ops(self):
        cases = {
            "avg": (lambda i: np.array([3.0 * i, 1.5, -6.0 * i], np.float32), np.array([3.0, 1.5, -6.0], np.float32)),
            "min": (lambda i: np.array([i, -i, 5], np.int32), np.array([0, -2, 5], np.int32)),
            "max": (lambda i: np.array([i, -i, 5], np.float64), np.array([2, 0, 5], np.float64)),
            "prod": (lambda i: np.array([i + 1, 2, -1], np.int64), np.array([6, 8, -1], np.int64)),
            "sum": (lambda i: np.array([0.5, i], np.float16), np.array([1.5, 3], np.float16)),
        }
        for op, (make, expected) in cases.items():
            with self.subTest(op=op):
                def body(i, comm, make=make, op=op):
                    x = make(i)
                    out = np.empty_like(x)
                    comm.all_reduce(x, out, op=op, tag=7)
                    return out

                for out in self.run_all(body):
                    np.testing.assert_array_equal(out, expected)

    def test_async_with_distinct_tags(self):
        def body(i, comm):
            a = np.full(5000, i, dtype=np.float32)
            b = np.full(3, 10 * i, dtype=np.int64)
            c = np.full(7, float(i), dtype=np.float64)
            # started in another order on each peer: peers match operations by tag
            order = [(100, a, "sum"), (101, b, "max"), (102, c, "min")]
            order = order[i:] + order[:i]
            requests = [comm.all_reduce_async(x, op=op, tag=tag) for tag, x, op in order]
            infos = [r.wait() for r in requests]
            self.assertTrue(all(r.done for r in requests))
            with self.assertRaises(pccl.InvalidUsageError):
                requests[0].wait()
            with self.assertRaises(pccl.InvalidUsageError):
                requests[0].test()
            return a, b, c, infos

        for a, b, c, infos in self.run_all(body):
            self.assertTrue(np.all(a == 3.0))
            self.assertTrue(np.all(b == 20))
            self.assertTrue(np.all(c == 0.0))
            self.assertTrue(all(info.world_size == N_PEERS for info in infos))

    def test_tag_in_flight_and_test(self):
        first, others = self.comms[0], self.comms[1:]
        x = np.ones(10, np.float32)
        request = first.all_reduce_async(x, tag=150)  # cannot finish before the others call it
        self.assertFalse(request.test())
        with self.assertRaises(pccl.InvalidUsageError) as cm:
            first.all_reduce_async(np.ones(10, np.float32), tag=150)
        self.assertTrue(cm.exception.detail)
        with self.assertRaises(pccl.InvalidUsageError):  # no topology update with collectives in flight
            first.update_topology()
        _support.run_parallel([lambda c=c: c.all_reduce(np.ones(10, np.float32), tag=150) for c in others])
        self.assertEqual(request.wait().world_size, N_PEERS)
        self.assertTrue(np.all(x == N_PEERS))

    def test_wait_with_timeout_leaves_the_request_usable(self):
        first, others = self.comms[0], self.comms[1:]
        x = np.ones(10, np.float32)
        request = first.all_reduce_async(x, tag=160)  # cannot finish before the others call it
        for timeout in (0, 0.02):
            with self.assertRaises(pccl.WaitTimeoutError) as cm:
                request.wait(timeout=timeout)
            e = cm.exception
            self.assertIsInstance(e, TimeoutError)
            self.assertNotIsInstance(e, pccl.PcclTimeoutError)  # not the operation's own timeout
            self.assertFalse(e.retryable)
            self.assertEqual(e.code, pccl.Result.TIMEOUT)
            self.assertIn("tag 160 has not ended", e.detail)
            self.assertFalse(request.done)
        for bad in (-1, "1", True, float("nan")):
            with self.assertRaises(pccl.InvalidArgumentError):
                request.wait(timeout=bad)
        self.assertFalse(request.test())  # still valid: the operation was not aborted
        _support.run_parallel([lambda c=c: c.all_reduce(np.ones(10, np.float32), tag=160) for c in others])
        info = request.wait(timeout=_support.DEADLINE_S)
        self.assertEqual(info.world_size, N_PEERS)
        self.assertTrue(request.done)
        self.assertTrue(np.all(x == N_PEERS))
        with self.assertRaises(pccl.InvalidUsageError):
            request.wait(timeout=1)

    def test_async_keeps_the_buffers_alive(self):
        import gc
        import weakref

        def body(i, comm):
            x = np.full(20000, 1.0, np.float32)
            ref = weakref.ref(x)
            request = comm.all_reduce_async(x, tag=200)
            del x
            gc.collect()
            self.assertIsNotNone(ref())  # the request holds it while pccl owns it
            request.wait()
            self.assertIs(request.recv, ref())
            result = request.recv.copy()
            del request
            gc.collect()
            self.assertIsNone(ref())  # released once waited on
            return result

        for result in self.run_all(body):
            self.assertTrue(np.all(result == N_PEERS))

    def test_quantized_int8_bounded_and_identical(self):
        n = 20000
        rng = np.random.default_rng(1234)
        inputs = [rng.standard_normal(n).astype(np.float32) for _ in range(N_PEERS)]
        exact = sum(x.astype(np.float64) for x in inputs)

        def body(i, comm):
            x = inputs[i].copy()
            comm.all_reduce(x, op="sum", quant="int8", tag=300)
            return x

        results = self.run_all(body)
        for x in results[1:]:
            self.assertEqual(x.tobytes(), results[0].tobytes())  # bit-identical on every peer
        error = float(np.max(np.abs(results[0] - exact)))
        # docs/algorithms.md section 7: |result - exact| <= (N/255 + 4N*2^-24) * A, A the largest sum of
        # |inputs| within a block; loose here: A over the whole buffer.
        a = float(np.max(sum(np.abs(x.astype(np.float64)) for x in inputs)))
        self.assertLessEqual(error, (N_PEERS / 255.0 + 4 * N_PEERS * 2.0 ** -24) * a)
        self.assertGreater(error, 0.0)  # it was quantized
        self.assertGreater(np.corrcoef(results[0], exact)[0, 1], 0.999)

    def test_quantized_fp4_bounded_identical_and_small(self):
        n = 20000
        rng = np.random.default_rng(4321)
        inputs = [rng.standard_normal(n).astype(np.float32) for _ in range(N_PEERS)]
        exact = sum(x.astype(np.float64) for x in inputs)

        def body(i, comm):
            plain = inputs[i].copy()
            before = comm.stats().tx_bytes
            comm.all_reduce(plain, op="sum", tag=303)
            x = inputs[i].copy()
            middle = comm.stats().tx_bytes
            comm.all_reduce(x, op="sum", quant="fp4", tag=302)
            return x, (comm.stats().tx_bytes - middle, middle - before)

        results = self.run_all(body)
        for x, _ in results[1:]:
            self.assertEqual(x.tobytes(), results[0][0].tobytes())  # bit-identical on every peer
        error = float(np.max(np.abs(results[0][0] - exact)))
        # docs/algorithms.md section 7: |result - exact| <= (N/6 + 4N*2^-24) * A (fp4: half the widest gap
        # of a scale amax / 6 per quantization), A over the whole buffer here.
        a = float(np.max(sum(np.abs(x.astype(np.float64)) for x in inputs)))
        self.assertLessEqual(error, (N_PEERS / 6.0 + 4 * N_PEERS * 2.0 ** -24) * a)
        self.assertGreater(np.corrcoef(results[0][0], exact)[0, 1], 0.98)
        # About 7x fewer bytes than the same call in float32 sent.
        for _, (sent, plain) in results:
            self.assertLess(sent * 6.5, plain, (sent, plain))

    def test_fp16_wire_and_zstd(self):
        def body(i, comm):
            x = np.linspace(0, 1, 4096, dtype=np.float32) * (i + 1)
            comm.all_reduce(x, quant="fp16", compress=3, tag=301)
            return x

        results = self.run_all(body)
        expected = np.linspace(0, 1, 4096) * 6
        for x in results:
            self.assertEqual(x.tobytes(), results[0].tobytes())
            self.assertLess(np.max(np.abs(x - expected)), 0.02)

    def test_empty_and_buffer_protocol(self):
        def body(i, comm):
            empty = np.empty(0, np.float32)
            info = comm.all_reduce(empty, tag=400)
            buf = array.array("i", [i, 1, 2])
            comm.all_reduce(buf, tag=401)
            return info, list(buf)

        for info, buf in self.run_all(body):
            self.assertEqual(info.world_size, N_PEERS)
            self.assertEqual(buf, [3, 3, 6])

    def test_stats_counters_increase(self):
        before = [c.stats() for c in self.comms]

        def body(i, comm):
            x = np.ones(1 << 16, np.float32)
            for k in range(3):
                comm.all_reduce(x, tag=500 + k)
            return x

        self.run_all(body)
        for c, b in zip(self.comms, before):
            after = c.stats()
            self.assertEqual(after.allreduce_ops, b.allreduce_ops + 3)
            self.assertGreater(after.tx_bytes, b.tx_bytes)
            self.assertGreater(after.rx_bytes, b.rx_bytes)
            self.assertGreater(after.last_allreduce_bytes_per_s, 0.0)
            self.assertGreater(after.last_allreduce_time_s, 0.0)
            self.assertGreaterEqual(after.topology_updates, 1)
            self.assertEqual(after.epoch, c.epoch)
            self.assertEqual(after.allreduce_aborts, 0)
            self.assertIn("allreduce_ops", after.as_dict())

    def test_update_topology_with_nothing_to_change(self):
        epoch = self.comms[0].epoch
        stats = [c.stats().topology_updates for c in self.comms]
        self.run_all(lambda i, comm: comm.update_topology())
        for c, before in zip(self.comms, stats):
            self.assertEqual(c.epoch, epoch + 1)
            self.assertEqual(c.stats().topology_updates, before + 1)


class OptimizeTopologyTest(unittest.TestCase):
    def test_optimize_topology_measures_links_and_installs_a_ring(self):
        cluster = _support.Cluster(3, master_kwargs={"probe_budget_ms": 300, "probe_bytes": 4 << 20})
        try:
            epoch = cluster.comms[0].epoch
            cluster.run(lambda i, comm: comm.optimize_topology())
            s = cluster.master.stats()
            self.assertEqual(s["topology_surveys"], 1)
            self.assertEqual(s["links_measured"], 6)
            self.assertFalse(s["measuring"])
            self.assertGreater(s["predicted_bottleneck"], 0)
            for c in cluster.comms:
                self.assertEqual(c.epoch, epoch + 1)
                links = c.links()
                self.assertEqual(sorted((l["from_rank"], l["to_rank"]) for l in links),
                                 [(a, b) for a in range(3) for b in range(3) if a != b])
                for l in links:
                    self.assertGreater(l["bandwidth"], 0)
                    self.assertGreater(l["rtt_s"], 0)
            bufs = [np.full(1000, i + 1, np.float32) for i in range(3)]
            cluster.run(lambda i, comm: comm.all_reduce(bufs[i]))
            for x in bufs:
                self.assertTrue(np.all(x == 6))
            # Mismatched calls: a clear MismatchError on every peer, then a retry works.
            errors = cluster.run(lambda i, comm: _support._catch(
                comm.update_topology if i == 0 else comm.optimize_topology))
            for e in errors:
                self.assertIsInstance(e, pccl.MismatchError)
                self.assertIn("pcclOptimizeTopology", str(e))
            cluster.run(lambda i, comm: comm.optimize_topology())
        finally:
            cluster.close()

    def test_master_probe_settings_are_checked(self):
        with self.assertRaises(pccl.InvalidArgumentError):
            pccl.Master(probe_budget_ms=0)
        with self.assertRaises(pccl.InvalidArgumentError):
            pccl.Master(auto_optimize="yes")


class PeerGroupTest(unittest.TestCase):
    def test_collectives_run_within_a_group(self):
        master = _support.make_master()
        comms = []
        try:
            comms = [_support.make_comm(master, peer_group=g) for g in (0, 1, 0, 1)]
            _support.connect_all(master, comms)
            for g, c in zip((0, 1, 0, 1), comms):
                self.assertEqual((c.world_size, c.group_world_size, c.peer_group), (4, 2, g))
            xs = [np.full(5, 10.0 ** i) for i in range(4)]
            _support.run_parallel([lambda x=x, c=c: c.all_reduce(x, tag=1) for x, c in zip(xs, comms)])
            self.assertTrue(np.all(xs[0] == 101.0) and np.all(xs[2] == 101.0))   # group 0: peers 0 and 2
            self.assertTrue(np.all(xs[1] == 1010.0) and np.all(xs[3] == 1010.0))  # group 1: peers 1 and 3
        finally:
            for c in comms:
                c.close()
            master.close()


class GatherBytesTest(unittest.TestCase):
    def test_gather_bytes_zero_sends_ring_bytes(self):
        """A small all-reduce gathers by default ((N-1) x its bytes); gather_bytes=0 puts it on the ring
        (2(N-1)/N x); a value out of range is refused at creation."""
        n = 4096  # 16 KiB of float32: gathered by default on one host

        def sent(**settings):
            master = _support.make_master()
            comms = []
            try:
                comms = [_support.make_comm(master, **settings) for _ in range(3)]
                _support.connect_all(master, comms)
                xs = [np.full(n, float(i + 1), dtype=np.float32) for i in range(3)]
                infos = _support.run_parallel([lambda x=x, c=c: c.all_reduce(x, tag=7) for x, c in zip(xs, comms)])
                for x in xs:
                    self.assertTrue(np.all(x == 6.0))
                return infos[0].tx_bytes
            finally:
                for c in comms:
                    c.close()
                master.close()

        gathered, ring = sent(), sent(gather_bytes=0)
        payload = 4 * n
        self.assertGreaterEqual(gathered, 2 * payload)          # to both other peers
        self.assertLess(ring, 1.5 * payload)                    # 2(N-1)/N = 4/3 of it, and headers
        self.assertGreaterEqual(ring, 4 * payload // 3)
        for bad in (-2, 4194305, True, 1.5):
            with self.subTest(gather_bytes=bad):
                with self.assertRaises(pccl.InvalidArgumentError):
                    _support.make_comm("127.0.0.1:1", gather_bytes=bad)


class InboundTest(unittest.TestCase):
    def test_inbound_declared_and_reported(self):
        """A peer that declares inbound=False is reported so by every member (loopback still reaches
        it: same host); the other's port answered the master's dial-back. Bad values are refused."""
        master = _support.make_master()
        comms = []
        try:
            comms = [_support.make_comm(master), _support.make_comm(master, inbound=False)]
            _support.connect_all(master, comms)
            closed_rank = comms[1].rank
            for c in comms:
                self.assertEqual(c.inbound_of(closed_rank), False)
                self.assertEqual(c.inbound_of(1 - closed_rank), True)
            self.assertFalse(comms[1].inbound_of())
            self.assertTrue(comms[0].inbound_of())
            xs = [np.full(1000, float(i + 1), dtype=np.float32) for i in range(2)]
            _support.run_parallel([lambda x=x, c=c: c.all_reduce(x, tag=3) for x, c in zip(xs, comms)])
            for x in xs:
                self.assertTrue(np.all(x == 3.0))
            with self.assertRaises(pccl.InvalidArgumentError):
                comms[0].inbound_of(2)
        finally:
            for c in comms:
                c.close()
            master.close()
        for bad in (0, 1, "no", 2):
            with self.subTest(inbound=bad):
                with self.assertRaises(pccl.InvalidArgumentError):
                    _support.make_comm("127.0.0.1:1", inbound=bad)


if __name__ == "__main__":
    unittest.main(verbosity=2)
