"""Regions (docs/algorithms.md "Regions"): three peers on threads of this process, two declaring the
same region and one none; every peer reads the same regions; bad names and the PCCL_REGION
environment variable at creation; two-level all-reduces (docs/algorithms.md §12) with algorithm=
"hierarchical" and its refusals."""

import os
import unittest

import numpy as np

import _support
import pccl


class RegionsTest(unittest.TestCase):
    def test_every_peer_reads_the_same_regions(self):
        master = _support.make_master()
        comms = []
        try:
            comms = [_support.make_comm(master, region=r) for r in ("eu-west", "eu-west", None)]
            with self.assertRaises(pccl.InvalidUsageError):  # no ring yet
                comms[0].regions()
            _support.connect_all(master, comms)
            by_rank = {c.rank: r for c, r in zip(comms, ("eu-west", "eu-west", ""))}
            expected = [by_rank[rank] for rank in range(3)]
            for c in comms:
                self.assertEqual(c.regions(), expected)
            self.assertEqual([c.region for c in comms], ["eu-west", "eu-west", ""])
        finally:
            for c in comms:
                c.close()
            master.close()

    def test_hierarchical_all_reduce_across_regions(self):
        master = _support.make_master()
        comms = []
        try:
            regions = ("a", "b", "a", "b", "b")
            comms = [_support.make_comm(master, region=r, algorithm="hierarchical") for r in regions]
            _support.connect_all(master, comms)
            self.assertTrue(all(c.hierarchical for c in comms))
            count = 50000  # above the gather limit: two levels
            outs = [np.zeros(count, dtype=np.float32) for _ in comms]
            infos = _support.run_parallel([
                (lambda c=c, o=o: c.all_reduce(np.full(count, c.rank + 1, dtype=np.float32), o))
                for c, o in zip(comms, outs)])
            for o in outs:
                np.testing.assert_array_equal(o, np.full(count, 15, dtype=np.float32))
            self.assertEqual(len(infos), 5)
        finally:
            for c in comms:
                c.close()
            master.close()

    def test_bad_algorithm_is_refused(self):
        for bad in ("tree", "", 3, b"flat"):
            with self.subTest(algorithm=bad):
                with self.assertRaises(pccl.InvalidArgumentError) as cm:
                    _support.make_comm("127.0.0.1:1", algorithm=bad)
                self.assertIn("algorithm", cm.exception.detail)
        _support.make_comm("127.0.0.1:1", algorithm="flat").close()

    def test_bad_region_names_are_refused(self):
        for bad in ("eu west", "x" * 65, "r\u00e9gion", "auto-3", "a/b", "a\0b", 7, b"eu"):
            with self.subTest(region=bad):
                with self.assertRaises(pccl.InvalidArgumentError) as cm:
                    _support.make_comm("127.0.0.1:1", region=bad)
                self.assertIn("region", cm.exception.detail)
        _support.make_comm("127.0.0.1:1", region="x" * 64).close()

    def test_environment_fills_an_empty_region(self):
        old = os.environ.get("PCCL_REGION")
        try:
            os.environ["PCCL_REGION"] = "bad region"
            with self.assertRaises(pccl.InvalidArgumentError) as cm:
                _support.make_comm("127.0.0.1:1")
            self.assertIn("PCCL_REGION", cm.exception.detail)
            _support.make_comm("127.0.0.1:1", region="from-config").close()  # the argument wins
            os.environ["PCCL_REGION"] = "from-env"
            master = _support.make_master()
            try:
                with _support.make_comm(master) as comm:
                    comm.connect()
                    self.assertEqual(comm.regions(), ["from-env"])
            finally:
                master.close()
        finally:
            if old is None:
                os.environ.pop("PCCL_REGION", None)
            else:
                os.environ["PCCL_REGION"] = old


if __name__ == "__main__":
    unittest.main()
