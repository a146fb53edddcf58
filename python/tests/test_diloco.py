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
        modes = ["blocking", "int8", "delayed", "eager", "stream0", "stream", "stream-fp4"]
        rounds = 6
        peers = [self.spawn(i, "--modes", ",".join(modes), "--rounds", rounds, "-H", 5, "--world", 3) for i in range(3)]
        results = self.finish(peers)
        for mode in modes:
            fragments = 2 if mode.startswith("stream") else 1
            for b in range(1, rounds + 1):
                lines = [r[(mode, b)] for r, _, _ in results]
                # the outer parameters after every outer boundary: bit-identical on every replica
                self.assertEqual(len({line["theta"] for line in lines}), 1, (mode, b, lines))
                self.assertEqual({line["world"] for line in lines}, {"3"})
                if fragments == 1 and mode != "eager":  # eager: each model starts the round from its own
                    # preview; fragments: the fragments not synced at this boundary are the replica's own
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
                self.assertEqual(stats["inner_steps"], rounds * 5 // fragments, stats)  # sync k: step k H / P
                self.assertEqual(stats["allreduce_retries"], 0, stats)
                self.assertGreater(stats["tx_bytes"], 0)
                self.assertGreater(stats["inner_time_s"], 0)
        by_mode = {m: results[0][2][m]["stats"]["tx_bytes"] for m in modes}
        self.assertLess(by_mode["int8"], 0.5 * by_mode["blocking"], by_mode)  # int8 on the wire
        self.assertLess(by_mode["stream-fp4"], 0.5 * by_mode["stream"], by_mode)
        # Fragments: each sync sends half the model, so the most bytes sent in one step halves
        peak = {m: results[0][2][m]["stats"]["peak_step_tx_bytes"] for m in modes}
        self.assertLess(peak["stream"], 0.75 * peak["blocking"], peak)
        self.assertLess(peak["stream0"], 0.75 * peak["blocking"], peak)

    def test_fragment_path_equals_blocking(self):
        # One fragment without delay through the fragment code (pseudo-gradient by pieces, the outer step
        # over a view, the merge) gives the same bits as blocking DiLoCo, round after round.
        peers = [self.spawn(i, "--modes", "blocking,stream1", "--rounds", 4, "-H", 5, "--world", 2, "--same-data")
                 for i in range(2)]
        results = self.finish(peers)
        for rounds, _, finals in results:
            for b in range(1, 5):
                self.assertEqual(rounds[("blocking", b)]["theta"], rounds[("stream1", b)]["theta"], b)
                self.assertEqual(rounds[("blocking", b)]["model"], rounds[("stream1", b)]["model"], b)
            self.assertEqual(finals["blocking"]["model"], finals["stream1"]["model"])

    def test_fragment_schedule_mismatch(self):
        # A joiner with another fragment count adopts the group's state and finds its schedule differs:
        # a clear error for it; the group trains on.
        group = [self.spawn(i, "--modes", "stream0", "--rounds", 8, "--world", 2, "--pause-at", 2,
                            stdin=subprocess.PIPE) for i in range(2)]
        for p in group:
            p.wait_for_line(lambda line: line == "paused", DEADLINE_S)
        odd = self.spawn(2, "--modes", "stream3", "--rounds", 8, "--late")
        self.master.wait_for_peers(2, 1, DEADLINE_S)
        for p in group:
            p.proc.stdin.write("go\n")
            p.proc.stdin.flush()
        self.assertNotEqual(odd.wait(DEADLINE_S), 0)
        self.assertIn("differ from the group's (5, 2, 0)", odd.log())
        self.finish(group)

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
        # a delayed fragment's outer step lands tau steps after its round's line: the joiner's state is
        # the survivors' at their next line
        seen = r0[(mode, joined + 1 if mode == "stream" else joined)]
        self.assertEqual(s3[mode]["theta"], seen["theta"], (s3, seen))
        self.assertEqual(f3[mode]["stats"]["state_adoptions"], 1, f3)
        for b in range(joined + 1, rounds + 1):
            self.assertEqual(r3[(mode, b)]["theta"], r0[(mode, b)]["theta"], (mode, b))
            self.assertEqual(r3[(mode, b)]["world"], "3")
        self.assertEqual(len({f[mode]["model"] for f in (f0, f1, f3)}), 1)
        return r0

    def test_checkpoint_every_replica_restarts(self):
        # Two replicas train 3 rounds and save; both stop; two new processes (new model inits, new
        # optimizers) load the checkpoints and train to round 6. The loaded outer state is the saved one,
        # the rounds go on from 4, the replicas stay bit-identical, and training goes on improving.
        tmp = tempfile.mkdtemp(prefix="pccl-diloco-ckpt-")
        self.addCleanup(shutil.rmtree, tmp, True)
        for mode in ("blocking", "eager", "stream"):
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
                if mode == "blocking":  # overlapped or delayed, the outer step lags by the one in flight
                    self.assertEqual(rounds[0][(mode, b)]["outer"], str(b))
            before = float(first[0][0][(mode, 3)]["eval"])
            self.assertLess(float(rounds[0][(mode, 6)]["eval"]), before * 1.5, (mode, before))

    def test_sigkill_and_late_joiner_blocking(self):
        self.kill_and_replace("blocking")

    def test_sigkill_and_late_joiner_eager(self):
        self.kill_and_replace("eager")

    def test_sigkill_and_late_joiner_fragments(self):
        # Replica 2 stalls right after starting round 2's fragment all-reduce (in flight for one step);
        # the survivors' wait for round 3's fails, they re-form the ring and skip that fragment's outer
        # step, and the replacement joins mid-schedule, tau steps after a sync point.
        r0 = self.kill_and_replace("stream")
        self.assertLess(int(r0[("stream", 9)]["outer"]), 9)  # the failed fragment took no outer step


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
            (dict(fragments=0), "fragments must be"),
            (dict(fragments=11), "must not exceed inner_steps"),
            (dict(fragments=3, fragment_split="strided"), "at least 3 tensors"),
            (dict(fragments=2, fragment_split="layers"), "fragment_split"),
            (dict(fragments=2, fragment_delay=5), "below inner_steps // fragments (5)"),
            (dict(fragment_delay=-1), "fragment_delay"),
            (dict(fragments=2, fragment_alpha=1.5), "fragment_alpha"),
            (dict(fragments=2, overlap="eager"), "replace overlap"),
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
        self.assertEqual(diloco._check_state(fine, outer)[2:], (2, 2, 0))
        for change, words in [(dict(format="torch"), "not a pccl.diloco checkpoint"),
                              (dict(outer_parameters=torch.zeros(9)), "another model"),
                              (dict(outer_momentum=torch.zeros(10, dtype=torch.float64)), "another model"),
                              (dict(outer_momentum=[0.0] * 10), "not a tensor"),
                              (dict(round=-1), "round"), (dict(outer_step=True), "outer_step"),
                              (dict(fragment_phase=-2), "fragment_phase")]:
            state = dict(fine)
            state.update(change)
            with self.assertRaises(pccl.InvalidArgumentError, msg=str(change)) as cm:
                diloco._check_state(state, outer)
            self.assertIn(words, cm.exception.detail, change)
        with self.assertRaises(pccl.InvalidArgumentError):
            diloco._check_state([1, 2], outer)


@unittest.skipIf(torch is None, "torch is not importable (apt-get install python3-torch)")
class FragmentScheduleTest(unittest.TestCase):
    """The fragment schedule, the splits and one fragment's arithmetic, in one process."""

    def test_schedule(self):
        from pccl._diloco_stream import Schedule

        for H, P in [(10, 4), (5, 2), (20, 1), (7, 7), (100, 4)]:
            s = Schedule(H, P, 0)
            points = []
            t = 0
            for r in range(3 * P):
                t += s.interval(r)
                points.append((t, s.fragment(r)))
            self.assertEqual([t for t, _ in points], [k * H // P for k in range(1, 3 * P + 1)], (H, P))
            for p in range(P):  # every fragment is synced every H inner steps
                at = [t for t, f in points if f == p]
                self.assertEqual([b - a for a, b in zip(at, at[1:])], [H, H], (H, P, p))
        self.assertEqual([Schedule(10, 4, 0).interval(r) for r in range(4)], [2, 3, 2, 3])

    def test_splits(self):
        from pccl._diloco_stream import split

        params = [torch.zeros(6), torch.zeros(2), torch.zeros(5), torch.zeros(1)]
        self.assertEqual(split(params, 3, "balanced"), [[(0, 4)], [(4, 9)], [(9, 14)]])
        self.assertEqual(split(params, 2, "strided"), [[(0, 6), (8, 13)], [(6, 8), (13, 14)]])
        self.assertEqual(split(params, 1, "balanced"), [[(0, 14)]])

    def test_fragment_arithmetic(self):
        from pccl._diloco_outer import OuterState
        from pccl._diloco_stream import Fragments

        torch.manual_seed(3)
        model = torch.nn.Linear(3, 2)  # weight 6 + bias 2: the balanced cut [2, 5) crosses no tensor, [5, 8) does
        lr, mom = 0.7, 0.5
        outer = OuterState(list(model.parameters()), lr, mom, False, [0, 6, 3, 0])
        frags = Fragments(outer, 3, "balanced", lr, mom)
        self.assertEqual(frags.sizes, [2, 3, 3])
        theta0 = outer.theta.clone()
        with torch.no_grad():
            for p in model.parameters():
                p.add_(torch.randn_like(p))
        local = torch.cat([p.detach().reshape(-1) for p in model.parameters()])
        pg = frags.pseudo_gradient(2).clone()
        self.assertTrue(torch.equal(pg, theta0[5:8] - local[5:8]))
        avg = pg * 0.5
        frags.apply(2, avg)
        m = avg.clone()  # the momentum started at zero: m = g, step = g + mom * m
        expect = theta0[5:8] - lr * (avg + mom * m)
        self.assertTrue(torch.allclose(outer.theta[5:8], expect))
        self.assertTrue(torch.equal(outer.theta[:5], theta0[:5]))  # the other fragments' outer state unchanged
        self.assertTrue(torch.allclose(outer.momentum[5:8], m))
        self.assertEqual(outer.step, 1)
        frags.merge(2, 0.25)
        now = torch.cat([p.detach().reshape(-1) for p in model.parameters()])
        self.assertTrue(torch.allclose(now[5:8], 0.25 * outer.theta[5:8] + 0.75 * local[5:8]))
        self.assertTrue(torch.equal(now[:5], local[:5]))  # the model outside the fragment: untouched
        frags.merge(0, 1.0)
        now = torch.cat([p.detach().reshape(-1) for p in model.parameters()])
        self.assertTrue(torch.equal(now[:2], outer.theta[:2]))


class _IntModel(torch.nn.Module if torch is not None else object):
    def __init__(self):
        super().__init__()
        self.table = torch.nn.Parameter(torch.zeros(3, dtype=torch.int64), requires_grad=False)


if __name__ == "__main__":
    unittest.main(verbosity=2)
