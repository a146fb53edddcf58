"""Shared state: out-of-date peers and late joiners receive the elected tensors, the revision is elected,
strategies, and a peer whose key set differs fails alone."""

import threading
import unittest

import numpy as np

import _support
import pccl

N = 50000


def weights(seed):
    return np.random.default_rng(seed).standard_normal(N).astype(np.float32)


class SharedStateTest(unittest.TestCase):
    def setUp(self):
        self.cluster = _support.Cluster(3)

    def tearDown(self):
        self.cluster.close()

    def test_out_of_date_peer_receives_the_tensors(self):
        w = weights(1)

        def body(i, comm):
            if i < 2:  # up to date at revision 5
                state = pccl.SharedState({"weights": w.copy(), "step": np.array([7], np.int64)}, revision=5)
            else:  # new: revision 0, zeros
                state = pccl.SharedState({"weights": np.zeros(N, np.float32), "step": np.zeros(1, np.int64)})
            info = comm.sync_shared_state(state)
            return state, info

        results = self.cluster.run(body)
        for i, (state, info) in enumerate(results):
            np.testing.assert_array_equal(state["weights"], w)
            self.assertEqual(int(state["step"][0]), 7)
            self.assertEqual(state.revision, 5)
            self.assertEqual(info.revision, 5)
            if i < 2:
                self.assertEqual((info.rx_bytes, info.keys_received), (0, 0))
            else:
                self.assertEqual(info.keys_received, 2)
                self.assertGreaterEqual(info.rx_bytes, w.nbytes + 8)
        self.assertEqual(sum(info.tx_bytes for _, info in results[:2]), results[2][1].rx_bytes)
        for c in self.cluster.comms:
            self.assertEqual(c.stats().sync_ops, 1)

    def test_newer_revision_wins_over_a_majority(self):
        old, new = weights(2), weights(3)

        def body(i, comm):
            if i == 2:  # a trusted source at revision 9: offers, never takes
                state = {"w": new.copy()}
                info = comm.sync_shared_state(state, revision=9, strategy="send_only", compress=1)
            else:
                state = {"w": old.copy()}
                info = comm.sync_shared_state(state, revision=8, compress=3)
            return state, info

        for state, info in self.cluster.run(body):
            np.testing.assert_array_equal(state["w"], new)
            self.assertEqual(info.revision, 9)

    def test_receive_only_never_counts(self):
        w = weights(4)

        def body(i, comm):
            # the receive-only peer claims a high revision, but is not a candidate
            state = pccl.SharedState({"w": w.copy() if i == 0 else np.zeros(N, np.float32)}, revision=1)
            if i == 1:
                state.revision = 100
                info = comm.sync_shared_state(state, strategy=pccl.SyncStrategy.RECEIVE_ONLY)
            elif i == 2:
                info = comm.sync_shared_state(state, strategy="receive_only")
            else:
                info = comm.sync_shared_state(state)
            return state, info

        for state, info in self.cluster.run(body):
            np.testing.assert_array_equal(state["w"], w)
            self.assertEqual(state.revision, 1)

    def test_late_joiner_receives_the_state(self):
        w = weights(5)
        late = _support.make_comm(self.cluster.master)
        try:
            joined = threading.Thread(target=late.connect, daemon=True)
            joined.start()
            self.cluster.master.wait_for_peers(3, 1, _support.DEADLINE_S)
            self.cluster.run(lambda i, comm: comm.are_peers_pending() and comm.update_topology())
            joined.join(_support.DEADLINE_S)
            self.assertFalse(joined.is_alive())
            self.assertEqual(late.world_size, 4)
            comms = self.cluster.comms + [late]

            # the members are at revision 3; the joiner says 0 and holds zeros
            fns = [lambda c=c: _synced(c, w.copy(), 3) for c in comms[:3]]
            fns.append(lambda: _synced(late, np.zeros(N, np.float32), 0))
            results = _support.run_parallel(fns)
            for state, info in results:
                np.testing.assert_array_equal(state["weights"], w)
                self.assertEqual(state.revision, 3)
            self.assertEqual(results[3][1].keys_received, 2)
            self.assertGreater(results[3][1].rx_bytes, 0)
            self.assertEqual(late.stats().sync_ops, 1)
        finally:
            late.close()

    def test_different_key_set_fails_alone(self):
        w = weights(6)

        def body(i, comm):
            tensors = {"w": w.copy()}
            if i == 2:
                tensors["extra"] = np.zeros(4, np.float32)
            try:
                return comm.sync_shared_state(tensors, revision=1 if i < 2 else 0)
            except pccl.InvalidArgumentError as e:
                return e

        results = self.cluster.run(body)
        self.assertIsInstance(results[2], pccl.InvalidArgumentError)
        self.assertTrue(results[2].detail)
        self.assertIsInstance(results[0], pccl.SyncInfo)
        self.assertIsInstance(results[1], pccl.SyncInfo)


def _synced(comm, mine, revision):
    """Syncs {"weights": mine, "step": [revision]} at `revision`; (state, info)."""
    state = pccl.SharedState({"weights": mine, "step": np.array([revision], np.int64)}, revision=revision)
    return state, comm.sync_shared_state(state)


if __name__ == "__main__":
    unittest.main(verbosity=2)
