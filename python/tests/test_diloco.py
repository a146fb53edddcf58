"""pccl.diloco across processes with a real master (_diloco_peer.py replicas): every mode converges and
keeps the replicas' outer state bit-identical after every outer step; a SIGKILLed replica is retried
around without the training loop noticing, and a replacement joins late and receives the group's state;
bad arguments raise clear errors. Skipped when torch is not importable."""

import json
import os
import shutil
import subprocess
import tempfile
import types
import unittest

import _support
import pccl

try:
    import torch
except ImportError:  # pragma: no cover - depends on the machine
    torch = None

PEER = os.path.join(_support.HERE, "_diloco_peer.py")
DEADLINE_S = 50.0


def parse(peer):
    """{(mode, round): fields} from the 'round' lines, {mode: fields} from 'start' and 'final' lines."""
    rounds, starts, finals = {}, {}, {}
    for line in peer.output:
        words = line.split()
        if not words or words[0] not in ("round", "start", "final"):
            continue
        kv = dict(w.split("=", 1) for w in words[2:] if "=" in w and not w.startswith("stats="))
        if words[0] == "round":
            rounds[(words[1], int(words[2]))] = kv
        elif words[0] == "start":
            starts[words[1]] = kv
        else:
            kv["stats"] = json.loads(line.split("stats=", 1)[1])
            finals[words[1]] = kv
    return rounds, starts, finals


@unittest.skipIf(torch is None, "torch is not importable (apt-get install python3-torch)")
class DiLoCoProcessTest(unittest.TestCase):
    def setUp(self):
        self.master = _support.make_master()
        self.peers = []

    def tearDown(self):
        for p in self.peers:
            if p.proc.stdin:
                p.proc.stdin.close()
            p.close()
        self.master.close()

    def spawn(self, index, *args, stdin=None):
        p = _support.PeerProcess("replica%d" % index, PEER, ["--master", self.master.address, "--index", str(index)]
                                 + [str(a) for a in args], stdin=stdin)
        self.peers.append(p)
        return p

    def finish(self, peers):
        for p in peers:
            self.assertEqual(p.wait(DEADLINE_S), 0, p.log())
        return [parse(p) for p in peers]

    def test_modes_identical_replicas(self):
        modes = ["blocking", "int8", "delayed", "eager"]
        rounds = 6
        peers = [self.spawn(i, "--modes", ",".join(modes), "--rounds", rounds, "-H", 5, "--world", 3) for i in range(3)]
        results = self.finish(peers)
        for mode in modes:
            for b in range(1, rounds + 1):
                lines = [r[(mode, b)] for r, _, _ in results]
                # the outer parameters after every outer boundary: bit-identical on every replica
                self.assertEqual(len({line["theta"] for line in lines}), 1, (mode, b, lines))
                self.assertEqual({line["world"] for line in lines}, {"3"})
                if mode != "eager":  # eager: each model starts the round from its own preview
                    self.assertEqual(len({line["model"] for line in lines}), 1, (mode, b, lines))
                    self.assertEqual(lines[0]["model"], lines[0]["theta"])
            finals = [f[mode] for _, _, f in results]
            self.assertEqual(len({f["model"] for f in finals}), 1, (mode, finals))  # after flush()
            start = float(results[0][1][mode]["eval"])
            self.assertLess(float(finals[0]["eval"]), 0.5 * start, (mode, start, finals[0]))
            for f in finals:
                stats = f["stats"]
                self.assertEqual(stats["outer_steps"], rounds, stats)  # flush() applied the last one
                self.assertEqual(stats["rounds"], rounds, stats)
                self.assertEqual(stats["inner_steps"], rounds * 5, stats)
                self.assertEqual(stats["allreduce_retries"], 0, stats)
                self.assertGreater(stats["tx_bytes"], 0)
                self.assertGreater(stats["inner_time_s"], 0)
        by_mode = {m: results[0][2][m]["stats"]["tx_bytes"] for m in modes}
        self.assertLess(by_mode["int8"], 0.5 * by_mode["blocking"], by_mode)  # int8 on the wire

    def kill_and_replace(self, mode):
        """Replica 2 stops calling pccl after round 2 and is SIGKILLed while the others wait for it in
        the all-reduce of round 3 (or 4, overlapped); the survivors pause after round 5 until a replacement
        is waiting to join, then admit it at their next boundary."""
        rounds, pause = 9, 5
        survivors = [self.spawn(i, "--modes", mode, "--rounds", rounds, "--pause-at", pause, stdin=subprocess.PIPE)
                     for i in range(2)]
        victim = self.spawn(2, "--modes", mode, "--rounds", rounds, "--stall-at", 2)
        victim.wait_for_line(lambda line: line == "stalled", DEADLINE_S)
        victim.kill()
        self.assertEqual(victim.proc.returncode, -9)
        for p in survivors:
            p.wait_for_line(lambda line: line == "paused", DEADLINE_S)
        late = self.spawn(3, "--modes", mode, "--rounds", rounds, "--late")
        self.master.wait_for_peers(2, 1, DEADLINE_S)  # the replacement waits for admission
        for p in survivors:
            p.proc.stdin.write("go\n")
            p.proc.stdin.flush()
        results = self.finish(survivors + [late])
        (r0, _, f0), (r1, _, f1), (r3, s3, f3) = results
        for b in range(1, rounds + 1):
            self.assertEqual(r0[(mode, b)]["theta"], r1[(mode, b)]["theta"], (mode, b))
        self.assertEqual(r0[(mode, pause)]["world"], "2")  # the all-reduce was retried at world size 2
        for f in (f0, f1):
            self.assertGreaterEqual(f[mode]["stats"]["allreduce_retries"], 1, f)
        # the replacement: it received the group's state (its start line matches the survivors' line of
        # the round it joined at), then holds the same outer parameters after every outer step
        joined = int(s3[mode]["round"])
        self.assertGreaterEqual(joined, pause)
        self.assertEqual(s3[mode]["theta"], r0[(mode, joined)]["theta"], (s3, r0[(mode, joined)]))
        self.assertEqual(f3[mode]["stats"]["state_adoptions"], 1, f3)
        for b in range(joined + 1, rounds + 1):
            self.assertEqual(r3[(mode, b)]["theta"], r0[(mode, b)]["theta"], (mode, b))
            self.assertEqual(r3[(mode, b)]["world"], "3")
        self.assertEqual(len({f[mode]["model"] for f in (f0, f1, f3)}), 1)

    def test_checkpoint_every_replica_restarts(self):
        # Two replicas train 3 rounds and save; both stop; two new processes (new model inits, new
        # optimizers) load the checkpoints and train to round 6. The loaded outer state is the saved one,
        # the rounds go on from 4, the replicas stay bit-identical, and training goes on improving.
        tmp = tempfile.mkdtemp(prefix="pccl-diloco-ckpt-")
        self.addCleanup(shutil.rmtree, tmp, True)
        for mode in ("blocking", "eager"):
            saves = [os.path.join(tmp, "%s-%d.pt" % (mode, i)) for i in range(2)]
            first = self.finish([self.spawn(i, "--world", 2, "--rounds", 3, "--modes", mode, "--save", saves[i])
                                 for i in range(2)])
            saved = [next(line for line in p.output if line.startswith("saved ")) for p in self.peers[-2:]]
            self.assertEqual(saved[0], saved[1])  # the same outer state on both
            self.assertIn("round=3 outer=3", saved[0])
            second = self.finish([self.spawn(i + 10, "--world", 2, "--rounds", 6, "--modes", mode, "--load",
                                             saves[i]) for i in range(2)])
            loaded = [next(line for line in p.output if line.startswith("loaded ")) for p in self.peers[-2:]]
            self.assertEqual(loaded[0].replace("loaded", "saved"), saved[0])
            rounds = [r for r, _, _ in second]
            self.assertEqual(sorted(b for (m, b) in rounds[0]), [4, 5, 6])
            for b in (4, 5, 6):
                self.assertEqual(rounds[0][(mode, b)]["theta"], rounds[1][(mode, b)]["theta"], (mode, b))
                if mode == "blocking":  # overlapped, the outer step lags the round by the one in flight
                    self.assertEqual(rounds[0][(mode, b)]["outer"], str(b))
            before = float(first[0][0][(mode, 3)]["eval"])
            self.assertLess(float(rounds[0][(mode, 6)]["eval"]), before * 1.5, (mode, before))

    def test_sigkill_and_late_joiner_blocking(self):
        self.kill_and_replace("blocking")

    def test_sigkill_and_late_joiner_eager(self):
        self.kill_and_replace("eager")


@unittest.skipIf(torch is None, "torch is not importable (apt-get install python3-torch)")
class DiLoCoArgumentTest(unittest.TestCase):
    def test_bad_arguments(self):
        import pccl.diloco as diloco

        comm = pccl.Communicator("127.0.0.1:9", listen_address="127.0.0.1:0")  # never connected
        model = torch.nn.Linear(4, 2)
        opt = torch.optim.SGD(model.parameters(), lr=0.1)
        good = dict(model=model, inner_optimizer=opt, comm=comm, inner_steps=10)
        cases = [
            (dict(model="net"), "model must be a torch.nn.Module"),
            (dict(model=torch.nn.ReLU()), "no parameters"),
            (dict(inner_optimizer=None), "inner_optimizer must be a torch.optim.Optimizer"),
            (dict(inner_optimizer=torch.optim.SGD([torch.zeros(3, requires_grad=True)], lr=1)), "not a parameter"),
            (dict(comm="127.0.0.1:1"), "comm must be a pccl.Communicator"),
            (dict(inner_steps=0), "inner_steps"),
            (dict(inner_steps=2.5), "inner_steps"),
            (dict(outer_lr=0), "outer_lr"),
            (dict(outer_momentum=1.0), "outer_momentum"),
            (dict(quant="int4"), "quant"),
            (dict(overlap=True), "ambiguous"),
            (dict(overlap="streaming"), "overlap"),
            (dict(tag=-1), "tag"),
            (dict(max_retries=-1), "max_retries"),
        ]
        int_model = _IntModel()
        cases.append((dict(model=int_model, inner_optimizer=torch.optim.SGD(int_model.parameters(), lr=1)), "dtype"))
        try:
            for change, words in cases:
                kwargs = dict(good)
                kwargs.update(change)
                with self.assertRaises(pccl.InvalidArgumentError, msg=str(change)) as cm:
                    diloco.DiLoCo(**kwargs)
                self.assertIn(words, cm.exception.detail, change)
                self.assertIsInstance(cm.exception, ValueError)
            self.assertEqual(comm.world_size, 0)  # nothing reached the network
        finally:
            comm.close()
        # Checkpoints that do not fit are refused before anything changes.
        outer = types.SimpleNamespace(count=10, dtype=torch.float32)
        fine = dict(format=diloco.STATE_FORMAT, outer_parameters=torch.zeros(10), outer_momentum=torch.zeros(10),
                    outer_step=2, round=2)
        self.assertEqual(diloco._check_state(fine, outer)[2:], (2, 2))
        for change, words in [(dict(format="torch"), "not a pccl.diloco checkpoint"),
                              (dict(outer_parameters=torch.zeros(9)), "another model"),
                              (dict(outer_momentum=torch.zeros(10, dtype=torch.float64)), "another model"),
                              (dict(outer_momentum=[0.0] * 10), "not a tensor"),
                              (dict(round=-1), "round"), (dict(outer_step=True), "outer_step")]:
            state = dict(fine)
            state.update(change)
            with self.assertRaises(pccl.InvalidArgumentError, msg=str(change)) as cm:
                diloco._check_state(state, outer)
            self.assertIn(words, cm.exception.detail, change)
        with self.assertRaises(pccl.InvalidArgumentError):
            diloco._check_state([1, 2], outer)


class _IntModel(torch.nn.Module if torch is not None else object):
    def __init__(self):
        super().__init__()
        self.table = torch.nn.Parameter(torch.zeros(3, dtype=torch.int64), requires_grad=False)


if __name__ == "__main__":
    unittest.main(verbosity=2)
