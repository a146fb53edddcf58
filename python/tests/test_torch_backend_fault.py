"""The torch.distributed backend's failure and recovery loop: three torch ranks all-reduce in a loop;
rank 2 stops after its third step and is SIGKILLed. Ranks 0 and 1 see the documented exception (a
pccl.PeerLostError or another retryable pccl error, also a RuntimeError, its message naming the C code),
call pccl.torch.update_topology(), and go on as a ring of two: the retried all-reduce, all_gather in
live-rank order, broadcast, and a broadcast from the lost rank refused with InvalidArgumentError."""

import subprocess
import unittest

from test_torch_backend import DEADLINE_S, HAVE_TORCH, start_ranks


@unittest.skipUnless(HAVE_TORCH, "torch is not installed (apt-get install python3-torch)")
class TorchBackendFaultTest(unittest.TestCase):
    def test_sigkilled_rank_then_update_topology(self):
        ranks = start_ranks("fault", 3, stdin=subprocess.PIPE)
        try:
            ranks[2].wait_for_line(lambda line: line == "PAUSED", DEADLINE_S)
            ranks[2].kill()
            for p in ranks[:2]:
                caught = p.wait_for_line(lambda line: line.startswith("CAUGHT"), DEADLINE_S)
                self.assertRegex(caught, r"^CAUGHT (PeerLostError|TopologyChangedError|PcclTimeoutError) "
                                          r"pccl(PeerLost|TopologyChanged|Timeout) ")
                recovered = p.wait_for_line(lambda line: line.startswith("RECOVERED"), DEADLINE_S)
                # live world size 2, live ranks [0, 1]; torch's world size stays 3
                self.assertEqual(recovered.split(" ", 2)[1:], ["2", "[0, 1] %s 3" % p.name[-1]])
            for p in ranks[:2]:
                p.wait_for_line(lambda line: line == "DONE", DEADLINE_S)
                self.assertEqual(p.wait(DEADLINE_S), 0, p.log())
            print("\n".join(ranks[0].output))
        finally:
            for p in ranks:
                if p.proc.stdin:
                    p.proc.stdin.close()
                p.close()


if __name__ == "__main__":
    unittest.main()
