"""The torch.distributed backend (pccl.torch) in real processes: three torch ranks with an env://
TCPStore rendezvous; the default group is pccl's, a gloo group of the same processes is the reference.
Every collective x dtype x op against gloo, async works, argument errors, int8 through pg_options and
through PCCL_TORCH_QUANT, and DistributedDataParallel losses equal to gloo's."""

import os
import socket
import unittest

import _support

HERE = os.path.dirname(os.path.abspath(__file__))
PEER = os.path.join(HERE, "_torch_backend_peer.py")
DEADLINE_S = 90.0

try:
    import torch  # noqa: F401

    HAVE_TORCH = True
except ImportError:
    HAVE_TORCH = False


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def start_ranks(scenario, world, env=None, stdin=None):
    """world rank processes of _torch_backend_peer.py SCENARIO, rendezvous on a fresh port."""
    port = free_port()
    ranks = []
    for rank in range(world):
        full = {"MASTER_ADDR": "127.0.0.1", "MASTER_PORT": str(port), "RANK": str(rank), "WORLD_SIZE": str(world),
                "PCCL_TORCH_PEER_TIMEOUT_MS": "5000", "OMP_NUM_THREADS": "1"}
        full.update(env or {})
        ranks.append(_support.PeerProcess("rank %d" % rank, PEER, [scenario], env=full, stdin=stdin))
    return ranks


def finish(test, ranks, timeout=DEADLINE_S):
    try:
        for p in ranks:
            p.wait_for_line(lambda line: line == "DONE", timeout)
        for p in ranks:
            test.assertEqual(p.wait(timeout), 0, p.log())
    finally:
        for p in ranks:
            p.close()


@unittest.skipUnless(HAVE_TORCH, "torch is not installed (apt-get install python3-torch)")
class TorchBackendTest(unittest.TestCase):
    def test_collectives_against_gloo(self):
        finish(self, start_ranks("collectives", 3))

    def test_ddp_losses_equal_gloo(self):
        ranks = start_ranks("ddp", 3)
        try:
            lines = [p.wait_for_line(lambda line: line.startswith("LOSSES"), DEADLINE_S) for p in ranks]
        except BaseException:
            for p in ranks:
                p.close()
            raise
        finish(self, ranks)
        print("\n".join(lines))

    def test_quant_from_the_environment(self):
        finish(self, start_ranks("quant", 2, env={"PCCL_TORCH_QUANT": "int8", "PCCL_TORCH_COMPRESS": "1"}))


if __name__ == "__main__":
    unittest.main()
