"""The abort/retry loop across processes: three peer processes (_peer.py) all-reduce in a loop; one is
killed with SIGKILL mid-loop; the survivors get PeerLostError, call update_topology() and retry, and
finish with exact results at world size 2."""

import json
import os
import unittest

import _support

PEER = os.path.join(_support.HERE, "_peer.py")


class KilledPeerTest(unittest.TestCase):
    def setUp(self):
        self.master = _support.make_master()
        self.peers = []

    def tearDown(self):
        for p in self.peers:
            p.close()
        self.master.close()

    def spawn(self, name):
        p = _support.PeerProcess(name, PEER, ["--master", self.master.address, "--steps", "3", "--losses", "1",
                                              "--deadline-s", "45", "--world", "3"])
        self.peers.append(p)
        return p

    def test_sigkill_mid_loop_survivors_retry(self):
        peers = [self.spawn("peer%d" % i) for i in range(3)]
        self.master.wait_for_peers(3, 0, _support.DEADLINE_S)
        for p in peers:  # every peer has completed an all-reduce at world size 3: the loop is running
            p.wait_for_line(lambda line: line == "world 3", _support.DEADLINE_S)
        victim, survivors = peers[2], peers[:2]
        victim.kill()
        self.assertEqual(victim.proc.returncode, -9)
        for p in survivors:
            code = p.wait(_support.DEADLINE_S + 10)
            self.assertEqual(code, 0, p.log())
            self.assertIn("world 2", p.output, p.log())
            self.assertNotIn("WRONG", "\n".join(p.output))
            stats = json.loads(next(line for line in p.output if line.startswith("stats "))[len("stats "):])
            self.assertGreaterEqual(stats["peer_lost_seen"], 1, p.log())
            self.assertGreaterEqual(stats["allreduce_aborts"], 1, p.log())
            self.assertGreaterEqual(stats["allreduce_retries"], 1, p.log())
            self.assertGreaterEqual(stats["allreduce_ops"], 4, p.log())
            self.assertGreaterEqual(stats["topology_updates"], 2, p.log())
            self.assertGreater(stats["tx_bytes"], 0)
            self.assertGreater(stats["last_allreduce_bytes_per_s"], 0)
        # the master dropped the dead peer: the two survivors were accepted, nobody is pending
        self.master.wait_for_peers(0, 0, 1)


if __name__ == "__main__":
    unittest.main(verbosity=2)
