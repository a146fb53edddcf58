"""The run survives its master (docs/concepts.md "When the master dies"), from Python: peers given a
primary and a standby master keep all-reducing when the primary stops, the standby takes the run over
(pccl.Master(standby=True)), and the peers' counters and the masters' stats say so."""

import unittest

import numpy as np

import _support


class StandbyTakesOver(unittest.TestCase):
    def test_primary_stops_standby_takes_the_run_and_collectives_go_on(self):
        primary = _support.make_master()
        standby = _support.make_master(standby=True, rebuild_window_ms=20000)
        try:
            self.assertEqual(standby.stats()["role"], "standby")
            self.assertEqual(primary.stats()["role"], "leader")
            masters = "%s,%s" % (primary.address, standby.address)
            comms = [_support.make_comm(masters, master_reconnect_ms=20000) for _ in range(3)]
            try:
                _support.connect_all(primary, comms)

                def reduce_on(c, value):
                    x = np.full(4096, value, dtype=np.float32)
                    c.all_reduce(x)
                    return x

                for out in _support.run_parallel([lambda c=c: reduce_on(c, 1.5) for c in comms]):
                    np.testing.assert_array_equal(out, np.full(4096, 4.5, dtype=np.float32))
                term = primary.stats()["term"]
                primary.stop()
                # Without a master the ring goes on.
                for out in _support.run_parallel([lambda c=c: reduce_on(c, 2.0) for c in comms]):
                    np.testing.assert_array_equal(out, np.full(4096, 6.0, dtype=np.float32))
                # A vote waits for a master: the standby, once the three came back to it.
                _support.run_parallel([c.update_topology for c in comms])
                for c in comms:
                    s = c.stats()
                    self.assertEqual(s.master_losses, 1)
                    self.assertEqual(s.master_returns, 1)
                    self.assertEqual(c.world_size, 3)
                st = standby.stats()
                self.assertEqual(st["role"], "leader")
                self.assertEqual(st["takeovers"], 1)
                self.assertGreater(st["term"], term)
                self.assertEqual(st["accepted"], 3)
                for out in _support.run_parallel([lambda c=c: reduce_on(c, 1.0) for c in comms]):
                    np.testing.assert_array_equal(out, np.full(4096, 3.0, dtype=np.float32))
            finally:
                for c in comms:
                    c.close()
        finally:
            standby.close()
            primary.close()


if __name__ == "__main__":
    unittest.main()
