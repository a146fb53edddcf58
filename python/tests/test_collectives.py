"""Broadcast, all-gather, reduce-scatter and barrier of numpy arrays and torch tensors: a master and three
peers on threads of this process. Exact results for every dtype, in place and out of place, async forms,
agreement (a different root fails everyone with MismatchError) and argument errors. Ranks are group ranks."""

import unittest

import numpy as np

import _support
import pccl

N_PEERS = 3
DTYPES = (np.float32, np.float64, np.float16, np.int8, np.uint8, np.int16, np.uint16, np.int32, np.uint32,
          np.int64, np.uint64)


def block(rank, n, dtype, seed=0):
    return ((np.arange(n) * (rank + 3) + seed) % 97).astype(dtype)


class CollectivesTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.cluster = _support.Cluster(N_PEERS)
        cls.comms = cls.cluster.comms

    @classmethod
    def tearDownClass(cls):
        cls.cluster.close()

    def run_all(self, fn):
        return self.cluster.run(fn)

    def test_broadcast_every_dtype_and_root(self):
        for k, dtype in enumerate(DTYPES):
            root = k % N_PEERS
            with self.subTest(dtype=np.dtype(dtype).name, root=root):
                def body(i, comm):
                    r = comm.group_rank
                    x = block(r, 1001, dtype)
                    out = np.zeros(1001, dtype=dtype)
                    if k % 2:
                        comm.broadcast(x, root)  # in place
                        return r, x
                    comm.broadcast(x, root, recv=out)
                    return r, out

                for _, got in self.run_all(body):
                    np.testing.assert_array_equal(got, block(root, 1001, dtype))

    def test_all_gather_every_dtype_in_and_out_of_place(self):
        for k, dtype in enumerate(DTYPES):
            with self.subTest(dtype=np.dtype(dtype).name):
                n = 333

                def body(i, comm):
                    r = comm.group_rank
                    out = np.zeros(n * N_PEERS, dtype=dtype)
                    if k % 2:
                        out[r * n:(r + 1) * n] = block(r, n, dtype)
                        comm.all_gather(out[r * n:(r + 1) * n], out)  # in place: this rank's block
                    else:
                        comm.all_gather(block(r, n, dtype), out)
                    return out

                want = np.concatenate([block(r, n, dtype) for r in range(N_PEERS)])
                for got in self.run_all(body):
                    np.testing.assert_array_equal(got, want)

    def test_reduce_scatter_every_dtype_and_op(self):
        for dtype in DTYPES:
            for op in ("sum", "max", "min"):
                with self.subTest(dtype=np.dtype(dtype).name, op=op):
                    n = 250

                    def body(i, comm):
                        r = comm.group_rank
                        send = block(r, n * N_PEERS, dtype, seed=5)
                        out = np.zeros(n, dtype=dtype)
                        comm.reduce_scatter(send, out, op=op)
                        return r, out

                    inputs = [block(r, n * N_PEERS, dtype, seed=5) for r in range(N_PEERS)]
                    wide = np.float64 if np.dtype(dtype).kind == "f" else np.int64  # integers wrap, as pccl's
                    full = {"sum": sum(x.astype(wide) for x in inputs),
                            "max": np.maximum.reduce(inputs), "min": np.minimum.reduce(inputs)}[op].astype(dtype)
                    for r, got in self.run_all(body):
                        np.testing.assert_array_equal(got, full[r * n:(r + 1) * n])

    def test_async_forms_and_barrier(self):
        def body(i, comm):
            r = comm.group_rank
            b = block(r, 4096, np.float32)
            g = np.zeros(100 * N_PEERS, dtype=np.float32)
            s = np.zeros(50, dtype=np.float32)
            reqs = [comm.broadcast_async(b, 1, tag=1),
                    comm.all_gather_async(np.full(100, r, dtype=np.float32), g, tag=2),
                    comm.reduce_scatter_async(np.ones(50 * N_PEERS, dtype=np.float32), s, tag=3),
                    comm.barrier_async(tag=4)]
            for q in reqs:
                q.wait()
            comm.barrier(tag=5)
            return r, b, g, s

        for r, b, g, s in self.run_all(body):
            np.testing.assert_array_equal(b, block(1, 4096, np.float32))
            np.testing.assert_array_equal(g, np.repeat(np.arange(N_PEERS, dtype=np.float32), 100))
            np.testing.assert_array_equal(s, np.full(50, N_PEERS, dtype=np.float32))

    def test_torch_tensors(self):
        try:
            import torch
        except ImportError:
            self.skipTest("torch is not installed")

        def body(i, comm):
            r = comm.group_rank
            t = torch.arange(64, dtype=torch.bfloat16) + r
            comm.broadcast(t, 2)
            g = torch.zeros(8 * N_PEERS, dtype=torch.float32)
            comm.all_gather(torch.full((8,), float(r)), g)
            s = torch.zeros(4, dtype=torch.int64)
            comm.reduce_scatter(torch.ones(4 * N_PEERS, dtype=torch.int64), s)
            return t, g, s

        for t, g, s in self.run_all(body):
            self.assertTrue(torch.equal(t, torch.arange(64, dtype=torch.bfloat16) + 2))
            self.assertTrue(torch.equal(g, torch.arange(N_PEERS, dtype=torch.float32).repeat_interleave(8)))
            self.assertTrue(torch.equal(s, torch.full((4,), N_PEERS, dtype=torch.int64)))

    def test_different_roots_fail_everyone_with_mismatch(self):
        def body(i, comm):
            x = np.ones(100, dtype=np.float32)
            try:
                comm.broadcast(x, 0 if comm.group_rank else 1, tag=9)
            except pccl.MismatchError as e:
                return e
            return None

        for e in self.run_all(body):
            self.assertIsInstance(e, pccl.MismatchError)
            self.assertIn("root=", str(e))
        # The ring is still up.
        self.run_all(lambda i, comm: comm.barrier(tag=10))

    def test_bad_arguments(self):
        c = self.comms[0]
        with self.assertRaises(pccl.InvalidArgumentError) as cm:
            c.broadcast(np.ones(4, dtype=np.float32), N_PEERS)
        self.assertIn("root", str(cm.exception))
        with self.assertRaises(pccl.InvalidArgumentError):
            c.all_gather(np.ones(4, dtype=np.float32), np.ones(4 * N_PEERS + 1, dtype=np.float32))
        with self.assertRaises(pccl.InvalidArgumentError):
            c.reduce_scatter(np.ones(4 * N_PEERS, dtype=np.float32), np.ones(4, dtype=np.float64))
        with self.assertRaises(pccl.InvalidArgumentError):
            c.broadcast(np.ones(4, dtype=np.float32), -1)


if __name__ == "__main__":
    unittest.main()
