"""torch tensors: float32 and bfloat16 all-reduces (exact results), in place and out of place, async,
gradient averaging of a model, shared state of parameters, and the tensor argument checks. Skipped
when torch is not importable (the test command installs python3-torch)."""

import contextlib
import unittest
import warnings

import _support
import pccl

try:
    import torch
except ImportError:  # pragma: no cover - depends on the machine
    torch = None

N_PEERS = 2


@unittest.skipIf(torch is None, "torch is not importable (apt-get install python3-torch)")
class TorchTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        torch.set_num_threads(1)
        cls.cluster = _support.Cluster(N_PEERS)

    @classmethod
    def tearDownClass(cls):
        cls.cluster.close()

    def test_float32_in_place_and_out_of_place(self):
        def body(i, comm):
            x = torch.arange(1000, dtype=torch.float32) * (i + 1)
            comm.all_reduce(x)
            y = torch.full((10, 10), float(i), dtype=torch.float32)
            out = torch.empty(100, dtype=torch.float32)
            comm.all_reduce(y, out, op="max", tag=1)
            return x, y, out

        for i, (x, y, out) in enumerate(self.cluster.run(body)):
            self.assertTrue(torch.equal(x, torch.arange(1000, dtype=torch.float32) * 3))
            self.assertTrue(torch.all(y == i))
            self.assertTrue(torch.all(out == 1.0))

    def test_bfloat16(self):
        def body(i, comm):
            # small integers and halves are exact in bfloat16: the sums are exact too
            x = (torch.arange(512) % 16).to(torch.bfloat16) * 0.5 + i
            comm.all_reduce(x, tag=2)
            avg = torch.full((64,), 2.0 * (i + 1), dtype=torch.bfloat16)
            comm.all_reduce(avg, op="avg", tag=3)
            return x, avg

        results = self.cluster.run(body)
        expected = (torch.arange(512) % 16).to(torch.float32) + 1.0
        for x, avg in results:
            self.assertEqual(x.dtype, torch.bfloat16)
            self.assertTrue(torch.equal(x.float(), expected))
            self.assertTrue(torch.all(avg.float() == 3.0))
        self.assertTrue(torch.equal(results[0][0], results[1][0]))

    def test_other_dtypes_and_quant(self):
        def body(i, comm):
            a = torch.full((33,), i + 1, dtype=torch.int64)
            b = torch.full((33,), 0.25 * (i + 1), dtype=torch.float16)
            c = torch.linspace(-1, 1, 9000) * (i + 1)
            comm.all_reduce(a, op="prod", tag=4)
            comm.all_reduce(b, tag=5)
            comm.all_reduce(c, quant="bf16", tag=6)
            return a, b, c

        results = self.cluster.run(body)
        for a, b, c in results:
            self.assertTrue(torch.all(a == 2))
            self.assertTrue(torch.all(b == 0.75))
            self.assertLess(float((c - torch.linspace(-1, 1, 9000) * 3).abs().max()), 0.05)
        self.assertTrue(torch.equal(results[0][2], results[1][2]))

    def test_async_tensors(self):
        def body(i, comm):
            reqs = [comm.all_reduce_async(torch.full((100,), float(i + k)), tag=10 + k) for k in range(4)]
            return [r.wait() and r.recv for r in reqs]

        for outs in self.cluster.run(body):
            for k, out in enumerate(outs):
                self.assertTrue(torch.all(out == 2 * k + 1))

    def test_gradient_averaging(self):
        import copy

        torch.manual_seed(0)  # same initial model on every peer (built here: torch's RNG is global)
        initial = torch.nn.Sequential(torch.nn.Linear(8, 16), torch.nn.Tanh(), torch.nn.Linear(16, 1))

        def body(i, comm):
            model = copy.deepcopy(initial)
            opt = torch.optim.SGD(model.parameters(), lr=0.1)
            gen = torch.Generator().manual_seed(100 + i)  # different data on every peer
            for step in range(3):
                x = torch.randn(32, 8, generator=gen)
                loss = (model(x) - x.sum(dim=1, keepdim=True)).pow(2).mean()
                opt.zero_grad()
                loss.backward()
                for k, p in enumerate(model.parameters()):
                    comm.all_reduce(p.grad, op="avg", tag=100 * step + k)
                opt.step()
            return torch.cat([p.detach().reshape(-1) for p in model.parameters()])

        results = self.cluster.run(body)
        self.assertTrue(torch.equal(results[0], results[1]))  # bit-identical models

    def test_shared_state_of_parameters(self):
        models = []
        for i in range(N_PEERS):  # different models; peer 0 is ahead
            torch.manual_seed(i)
            models.append(torch.nn.Linear(32, 4))

        def body(i, comm):
            model = models[i]
            with torch.no_grad():
                state = pccl.SharedState({name: p.data for name, p in model.named_parameters()},
                                         revision=10 if i == 0 else 0)
                state["step"] = torch.tensor([10 * (i == 0)], dtype=torch.int64)
                info = comm.sync_shared_state(state)
            return model, state, info

        results = self.cluster.run(body)
        (m0, s0, _), (m1, s1, info1) = results
        self.assertTrue(torch.equal(m0.weight, m1.weight))
        self.assertTrue(torch.equal(m0.bias, m1.bias))
        self.assertEqual(int(s1["step"][0]), 10)
        self.assertEqual((s0.revision, s1.revision), (10, 10))
        self.assertEqual(info1.keys_received, 3)

    def test_tensor_argument_checks(self):
        c = self.cluster.comms[0]
        t = torch.ones(4, 4)
        for bad, word in ((t.t(), "contiguous"), (t[:, 1], "contiguous"), (torch.ones(3, dtype=torch.bool), "bool"),
                          (torch.ones(3, dtype=torch.complex64), "complex64"),
                          (torch.ones(3).to_sparse(), "sparse")):
            with self.assertRaises(pccl.InvalidArgumentError) as cm:
                c.all_reduce(bad)
            self.assertIn(word, cm.exception.detail)
        with self.assertRaises(pccl.InvalidArgumentError) as cm:
            c.all_reduce(torch.ones(4), torch.ones(4, dtype=torch.float64))
        self.assertIn("dtype", cm.exception.detail)
        with self.assertRaises(pccl.InvalidArgumentError) as cm:
            c.sync_shared_state({"w": t.t()})
        self.assertIn("contiguous", cm.exception.detail)

    def test_numpy_and_torch_mix(self):
        import numpy as np

        def body(i, comm):
            send = torch.full((5,), float(i + 1))
            recv = np.empty(5, np.float32)
            comm.all_reduce(send, recv, tag=20)
            return recv

        for recv in self.cluster.run(body):
            self.assertTrue(np.all(recv == 3.0))


@unittest.skipIf(torch is None, "torch is not importable (apt-get install python3-torch)")
class TorchSafetyTest(unittest.TestCase):
    """What a torch in-place op would do: the version counter is bumped (backward then raises), what
    torch refuses to write is refused (nothing written), and a Request holds the tensors' storage."""

    @classmethod
    def setUpClass(cls):
        torch.set_num_threads(1)
        cls.cluster = _support.Cluster(N_PEERS)

    @classmethod
    def tearDownClass(cls):
        cls.cluster.close()

    def test_backward_raises_after_pccl_wrote_a_saved_tensor(self):
        def body(i, comm):
            w = torch.ones(8, requires_grad=True)
            y = w.sigmoid()  # saves its output for backward
            version = y._version
            comm.all_reduce(y.detach() if i else y, tag=30)  # a non-leaf: torch allows in-place on it
            self.assertGreater(y._version, version)
            with self.assertRaisesRegex(RuntimeError, "modified by an inplace operation"):
                y.sum().backward()
            p = torch.ones(4, requires_grad=True)
            q = p.sigmoid()
            request = comm.all_reduce_async(q, tag=31)
            with self.assertRaisesRegex(RuntimeError, "modified by an inplace operation"):
                q.sum().backward()  # bumped when the operation started
            request.wait()
            return True

        self.assertEqual(self.cluster.run(body), [True, True])

    def test_refused_tensors_are_not_written(self):
        import mmap
        import tempfile

        import numpy as np

        c = self.cluster.comms[0]
        leaf = torch.ones(4, requires_grad=True)
        blob = bytes(range(16))
        with tempfile.TemporaryFile() as f:
            f.write(bytes(4096))
            f.flush()
            mapped = mmap.mmap(f.fileno(), 4096, access=mmap.ACCESS_READ)
            with warnings_ignored():
                cases = [
                    (leaf, "leaf tensor that requires grad"),
                    (leaf[1:], "view of a leaf"),
                    (torch.frombuffer(blob, dtype=torch.float32), "bytes object"),
                    (torch.from_numpy(np.frombuffer(blob, np.float32)), "bytes object"),
                    (torch.frombuffer(mapped, dtype=torch.float32), "read-only memory mapping"),
                ]
                with torch.inference_mode():
                    inference = torch.ones(3)
                cases.append((inference, "inference tensor"))
            for t, words in cases:
                before = t.detach().clone()
                for call in (lambda: c.all_reduce(t), lambda: c.all_reduce_async(t, tag=32),
                             lambda: c.all_reduce(torch.ones(t.numel()), t),
                             lambda: c.broadcast(t, 0), lambda: c.sync_shared_state({"t": t})):
                    with self.assertRaises(pccl.InvalidArgumentError) as cm:
                        call()
                    self.assertIsInstance(cm.exception, ValueError)
                    self.assertIn(words, cm.exception.detail)
                self.assertTrue(torch.equal(t.detach(), before))
            cases = t = None  # the tensors over the mapping go first
            mapped.close()

    def test_allowed_where_torch_allows_it(self):
        def body(i, comm):
            w = torch.ones(4, requires_grad=True)
            with torch.no_grad():
                comm.all_reduce(w, tag=33)  # a parameter under no_grad, as an optimizer step
            with warnings_ignored():
                send = torch.frombuffer(bytes(16), dtype=torch.float32) + 1  # read-only send is fine out of place
                ro = torch.frombuffer(bytes(16), dtype=torch.float32)
            out = torch.empty(4)
            comm.all_reduce(ro, out, tag=34)
            comm.all_reduce(send, out, tag=35)
            with torch.inference_mode():
                t = torch.ones(2)
                comm.all_reduce(t, tag=36)
            return w.detach(), out, t

        for w, out, t in self.cluster.run(body):
            self.assertTrue(torch.all(w == 2) and torch.all(out == 2) and torch.all(t == 2))

    def test_storage_held_and_checked_during_a_request(self):
        first, other = self.cluster.comms
        # set_(): the storage stays alive (the request holds it), pccl writes there, wait() says so.
        x = torch.ones(1000)
        old = torch.empty(0).set_(x.storage())
        request = first.all_reduce_async(x, tag=37)
        x.set_(torch.zeros(10))
        other.all_reduce(torch.ones(1000), tag=37)
        with self.assertRaises(pccl.InvalidUsageError) as cm:
            request.wait()
        self.assertIn("other memory", cm.exception.detail)
        self.assertTrue(torch.all(old == 2))
        # A send tensor (only read) whose storage is resized or freed meanwhile: detected at wait().
        for mutate in (lambda t: t.resize_(100000), lambda t: t.storage().resize_(0)):
            send, recv = torch.ones(64), torch.empty(64)
            request = first.all_reduce_async(send, recv, tag=38)
            mutate(send)
            other.all_reduce(torch.ones(64), tag=38)
            with self.assertRaises(pccl.InvalidUsageError) as cm:
                request.wait()
            self.assertIn("resized or freed", cm.exception.detail)


@contextlib.contextmanager
def warnings_ignored():
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # torch warns about tensors over non-writable buffers
        yield

if __name__ == "__main__":
    unittest.main(verbosity=2)
