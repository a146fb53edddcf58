"""pccl.diloco: DiLoCo (Douillard et al., 2023) over a pccl Communicator, for torch models.

Wraps a model and its inner optimizer. Every ``inner_steps`` inner steps it averages the replicas'
pseudo-gradients (outer parameters - current parameters) with one all-reduce, takes the outer step
(torch.optim.SGD with Nesterov momentum over a flat copy of the parameters) and loads the result into
the model. Peer loss is retried and joiners are admitted inside :meth:`DiLoCo.step`, and a late joiner
or a replacement receives the group's outer state through the shared-state sync, so the training loop
changes by a few lines::

    comm = pccl.Communicator(master_address); comm.connect()
    diloco = pccl.diloco.DiLoCo(model, inner_opt, comm, inner_steps=50, outer_lr=0.7, outer_momentum=0.9)
    for x, y in data:
        loss_fn(model(x), y).backward()
        diloco.step()              # inner_opt.step(), and every 50th call the outer step
        inner_opt.zero_grad()
    diloco.flush()                 # overlapped mode: apply the last all-reduce; replicas are identical

``overlap="delayed"`` or ``"eager"`` runs each outer all-reduce in the background during the next
round's inner steps. ``fragments=P, fragment_delay=tau, fragment_alpha=alpha`` is Streaming DiLoCo
(Douillard et al., 2025): P fragments synced at staggered steps, each all-reduce hidden behind tau inner
steps, merged back with alpha (_diloco_stream.py). Failure behaviour, counters and the semantics of
joins: docs/python.md, "DiLoCo".
Needs torch (python3-torch); ``import pccl`` alone never imports it.
"""

import dataclasses
import time

import torch

from . import _diloco_outer, _diloco_stream
from ._diloco_args import (FRAGMENT_SPLITS, OVERLAP_MODES, QUANT_MODES, STATE_FORMAT, check_args, check_fragments,
                           check_state)
from .errors import InvalidArgumentError, InvalidUsageError, PcclError, PcclTimeoutError

_check_state = check_state  # the tests check checkpoints through it


@dataclasses.dataclass(frozen=True)
class DiLoCoStats:
    """Counters of one :class:`DiLoCo` since it was created.

    outer_steps: outer steps applied to the outer parameters (the group's counter: a late joiner
    receives it); inner_steps: inner optimizer steps of this replica; rounds: outer all-reduces the group
    has issued (:attr:`DiLoCo.round`, shared too); allreduce_retries: outer all-reduce attempts
    that failed with a retryable error and were retried; topology_updates / syncs: update_topology()
    and sync_shared_state() calls that succeeded; state_adoptions: syncs that replaced this replica's
    outer state (a joiner's first); world_size: peers in the last outer all-reduce; tx_bytes /
    rx_bytes: the communicator's byte counters (all-reduces and syncs) since this object was created;
    inner_time_s: wall time outside DiLoCo's outer work (the loop's forward, backward, inner steps and
    anything else it does); outer_time_s: wall time in it (pseudo-gradient, all-reduce, outer step,
    joins, syncs); wait_time_s: the part of outer_time_s blocked in pccl calls; peak_step_tx_bytes: the
    most bytes the communicator sent between two consecutive step() calls, less those of shared-state
    syncs (the outer all-reduces' peak per inner step: what fragments divide by P)."""

    outer_steps: int
    inner_steps: int
    rounds: int
    allreduce_retries: int
    topology_updates: int
    syncs: int
    state_adoptions: int
    world_size: int
    tx_bytes: int
    rx_bytes: int
    inner_time_s: float
    outer_time_s: float
    wait_time_s: float
    peak_step_tx_bytes: int = 0

    @property
    def inner_share(self):
        """inner_time_s / (inner_time_s + outer_time_s): the share of wall time spent training."""
        total = self.inner_time_s + self.outer_time_s
        return self.inner_time_s / total if total > 0 else 0.0

    def as_dict(self):
        """The counters as a plain dict (with inner_share)."""
        d = dataclasses.asdict(self)
        d["inner_share"] = self.inner_share
        return d


class DiLoCo:
    """DiLoCo over ``comm`` for ``model`` trained by ``inner_optimizer`` (docs/python.md, "DiLoCo").

    Arguments:
        model: a torch.nn.Module; every parameter (floating point, any device) is averaged. Buffers
            (e.g. BatchNorm statistics) stay local.
        inner_optimizer: a torch.optim.Optimizer over (some of) the model's parameters; :meth:`step`
            calls its step(). Its state is local to the replica and never shared.
        comm: a pccl.Communicator, connected or not (then the constructor connects it). DiLoCo owns its
            membership from now on: do not call update_topology() or sync_shared_state() on it yourself,
            nor all-reduce with ``tag`` or ``tag + 1``.
        inner_steps: H, inner steps per outer step.
        outer_lr, outer_momentum: the outer optimizer, torch.optim.SGD(lr, momentum, nesterov=True)
            (plain SGD when outer_momentum is 0; outer_lr=1, outer_momentum=0 is model averaging).
        quant: wire format of the outer all-reduce: None (float32), "fp16", "bf16", "int8" or "fp4"
            (e2m1 with a scale per 64 elements: 4.5 bits an element, 7x fewer bytes than float32).
        overlap: False (blocking, the default), "delayed" (the round's all-reduce runs during the next
            round's inner steps and is applied one round late) or "eager" (as delayed, but each replica
            starts the next round from the outer step taken with its own pseudo-gradient; the average
            corrects it one round later).
        fragments: P, Streaming DiLoCo's fragments (default 1: the whole model at once). The parameters
            are split into P fragments by ``fragment_split``; fragment p is synced every inner_steps inner
            steps, first after floor((p + 1) * inner_steps / P) of them: one fragment every H / P steps.
        fragment_delay: tau, the inner steps each fragment's all-reduce runs behind (default 0: blocking);
            below inner_steps // fragments. The fragment's outer step and merge happen tau steps after
            its sync point, so at most one fragment is in flight.
        fragment_alpha: the merge, model := alpha * outer + (1 - alpha) * local for the synced fragment
            (default None: 1.0, plain replacement, without delay; 0.5, the paper's, with one).
        fragment_split: "balanced" (contiguous ranges of the flat parameters, equal sizes to one element)
            or "strided" (parameter tensor i in fragment i mod P).
        tag: the all-reduce tags DiLoCo uses are tag and (overlapped or delayed fragments) tag + 1.
        max_retries: how often one operation (an all-reduce, a vote, a sync) is retried after a
            retryable failure before the last error is raised (default 10).

    The constructor joins (if needed) and syncs the shared state: a late joiner or a replacement leaves
    it holding the group's outer parameters, outer momentum and outer step counter, loaded into its
    model. Call it right after connect(), on every replica, before anything slow (the members wait for
    a joiner in that sync).

    Raises InvalidArgumentError for bad arguments, and what :meth:`step` raises.
    """

    def __init__(self, model, inner_optimizer, comm, inner_steps, outer_lr=0.7, outer_momentum=0.9, quant=None,
                 overlap=False, tag=0, max_retries=10, fragments=1, fragment_delay=0, fragment_alpha=None,
                 fragment_split="balanced", _streaming=None):
        params, quant, overlap = check_args(model, inner_optimizer, comm, inner_steps, outer_lr, outer_momentum,
                                            quant, overlap, tag, max_retries)
        fragments, fragment_delay, fragment_alpha, fragment_split = check_fragments(
            params, inner_steps, overlap, fragments, fragment_delay, fragment_alpha, fragment_split)
        self.model, self.inner_optimizer, self.comm = model, inner_optimizer, comm
        self.inner_steps, self.outer_lr, self.outer_momentum = inner_steps, float(outer_lr), float(outer_momentum)
        self.quant, self.overlap, self.tag, self.max_retries = quant, overlap, tag, max_retries
        self.fragments, self.fragment_delay, self.fragment_alpha = fragments, fragment_delay, fragment_alpha
        self.fragment_split = fragment_split
        # Streaming: the fragment schedule. P = 1, tau = 0, alpha = 1 is blocking DiLoCo and takes its path
        # (_streaming=True forces the fragment path there: the test compares the two bit for bit).
        self._streaming = (fragments > 1 or fragment_delay > 0 or fragment_alpha != 1) if _streaming is None \
            else bool(_streaming) and overlap is None
        self._schedule = _diloco_stream.Schedule(inner_steps, fragments, fragment_delay)
        self._outer = _diloco_outer.OuterState(params, self.outer_lr, self.outer_momentum, overlap == "eager",
                                               self._schedule.as_list(0))
        self._frags = (_diloco_stream.Fragments(self._outer, fragments, fragment_split, self.outer_lr,
                                                self.outer_momentum) if self._streaming else None)
        self._probe = _diloco_stream.PendingProbe(comm)
        self._buffers = [self._outer.new_buffer()] + ([self._outer.new_buffer()] if overlap else [])
        self._pending = None  # overlapped mode: (request, buffer, flag request, flag) of the last round
        self._pending_fragment = None  # fragments with a delay: the fragment of _pending
        self._round_steps = 0
        self._broken = None
        self._counts = dict(inner_steps=0, allreduce_retries=0, topology_updates=0, syncs=0,
                            state_adoptions=0, world_size=0)
        self._times = dict(inner=0.0, outer=0.0, wait=0.0)
        self._sync_tx = 0  # bytes the syncs sent (SyncInfo.tx_bytes), left out of the step peak
        self._mark = time.monotonic()
        base = comm.stats()
        self._bytes0 = (base.tx_bytes, base.rx_bytes)
        with self._outer_work():
            if comm.world_size == 0:
                self._connect()
            self._sync()
            self._outer.write_model(self._outer.theta)  # every replica starts from the group's theta
            self._counts["world_size"] = comm.group_world_size
        self._last_tx, self._peak_tx = comm.stats().tx_bytes - self._sync_tx, 0

    # ---- the public interface --------------------------------------------------------------------------

    def step(self, closure=None):
        """One inner step: ``inner_optimizer.step(closure)``; every ``inner_steps``-th call also the outer
        step, which (blocking mode) averages the pseudo-gradients, applies the outer optimizer and loads
        the outer parameters into the model; admits peers waiting to join at that boundary; retries
        the all-reduce after update_topology() when a peer is lost. Returns what the inner step returned.

        Raises the non-retryable pccl errors: MasterUnreachableError and KickedError (the communicator
        is dead), MismatchError (replicas call differently: another inner_steps, quant, or model size),
        InvalidArgumentError from a sync (this replica's model differs from the group's), and the last
        retryable error when max_retries retries of one operation all failed. After any of these the
        object is unusable (InvalidUsageError), the model holds this replica's local parameters."""
        self._check_usable()
        result = self.inner_optimizer.step() if closure is None else self.inner_optimizer.step(closure)
        self._counts["inner_steps"] += 1
        self._round_steps += 1
        if self._streaming:
            if self._pending is not None and self._round_steps == self.fragment_delay:
                with self._outer_work():
                    self._finish_fragment()
            if self._round_steps >= self._schedule.interval(self._outer.round):
                with self._outer_work():
                    self._sync_point()
        elif self._round_steps >= self.inner_steps:
            with self._outer_work():
                self._outer_round()
        tx = self.comm.stats().tx_bytes - self._sync_tx
        self._peak_tx = max(self._peak_tx, tx - self._last_tx)
        self._last_tx = tx
        return result

    def flush(self):
        """Ends the round structure: in overlapped mode waits for (retrying as in :meth:`step`) and applies
        the outer all-reduce still in flight; in every mode loads the outer parameters into the model,
        so that every replica holds bit-identical parameters (inner steps taken since the last outer
        step are dropped). A collective: every replica calls it at the same point, e.g. at the end of
        training; call it before closing the communicator (with fragment_delay > 0 a question to the
        master runs in the background between a fragment's finish and the next sync point: flush() waits
        for it). The object stays usable."""
        self._check_usable()
        with self._outer_work():
            self._round_steps = 0  # before a sync in the finish: a joiner it admits starts the schedule anew too
            if self._pending is not None:
                self._finish_fragment() if self._streaming else self._finish_pending()
            self._probe.cancel()  # nothing of DiLoCo's runs on the communicator after flush(): close() may follow
            self._outer.reset_start()
            self._outer.write_model(self._outer.theta)
            self._round_steps = 0

    def wait_for_world(self, world_size, timeout_s=60.0):
        """Admits joiners (update_topology() and a sync whenever the master reports waiting peers) until
        at least ``world_size`` peers are in the group, asking the master every 10 ms; every member
        calls it. For the start of a run, so that the first round is trained by every replica. Raises
        PcclTimeoutError when the deadline passes, InvalidArgumentError for a bad world_size."""
        if isinstance(world_size, bool) or not isinstance(world_size, int) or world_size < 1:
            raise InvalidArgumentError(detail="world_size must be an int >= 1, got %r" % (world_size,))
        self._check_usable()
        if self._pending is not None:
            raise InvalidUsageError(detail="wait_for_world() with an outer all-reduce in flight: call flush() first")
        deadline = time.monotonic() + timeout_s
        with self._outer_work():
            while self.comm.group_world_size < world_size and time.monotonic() <= deadline:
                if not self._admit_if_pending():
                    time.sleep(0.01)  # no pccl call blocks until a peer is pending: ask again shortly
            self._counts["world_size"] = self.comm.group_world_size
        if self.comm.group_world_size < world_size:  # the object stays usable: call it again, or go on
            raise PcclTimeoutError(detail="only %d of %d peers joined within %.1f s"
                                   % (self.comm.group_world_size, world_size, timeout_s))

    @property
    def outer_step(self):
        """Outer steps applied to the outer parameters so far (with fragments: fragment outer steps): the
        group's counter (shared state)."""
        return self._outer.step

    @property
    def round(self):
        """Outer all-reduces the group has issued (in blocking mode equal to outer_step; overlapped, one
        more while a round is in flight; with fragments, one per fragment sync, P per inner_steps): the
        same on every replica at every boundary, a joiner's included, so ``while diloco.round < rounds:``
        ends every replica's loop at the same boundary."""
        return self._outer.round

    @property
    def inner_step(self):
        """Inner steps taken in the current round (0 right after an outer step; with fragments, since the
        last fragment's sync point)."""
        return self._round_steps

    @property
    def outer_parameters(self):
        """The outer parameters as one flat CPU tensor (float32, or float64 for a float64 model), in
        model.parameters() order: bit-identical on every replica after each outer step. Do not write it."""
        return self._outer.theta

    @property
    def outer_momentum_buffer(self):
        """The outer optimizer's momentum, flat like outer_parameters (shared state too)."""
        return self._outer.momentum

    def state_dict(self):
        """A checkpoint of the outer state, for ``torch.save``: the outer parameters and momentum (copies),
        the outer step and round counters, the settings they were made with (inner_steps, quant, overlap,
        outer_lr, outer_momentum: informational), and the inner optimizer's ``state_dict()`` (torch's: by
        reference). The model's own parameters are not in it: loading restarts the round from the outer
        parameters. Take it at a boundary (right after an outer step, or after :meth:`flush`); in
        overlapped mode only after flush() (an all-reduce in flight is not part of any state:
        InvalidUsageError). Local: no pccl call."""
        self._check_usable()
        if self._pending is not None:
            raise InvalidUsageError(detail="state_dict() with an outer all-reduce in flight: call flush() first")
        return {"format": STATE_FORMAT, "outer_parameters": self._outer.theta.clone(),
                "outer_momentum": self._outer.momentum.clone(), "outer_step": self._outer.step,
                "round": self._outer.round, "fragment_phase": self._round_steps if self._streaming else 0,
                "inner_steps": self.inner_steps, "quant": self.quant, "overlap": self.overlap,
                "outer_lr": self.outer_lr, "outer_momentum_factor": self.outer_momentum, "fragments": self.fragments,
                "fragment_delay": self.fragment_delay, "fragment_alpha": self.fragment_alpha,
                "fragment_split": self.fragment_split, "inner_optimizer": self.inner_optimizer.state_dict()}

    def load_state_dict(self, state):
        """Resumes from :meth:`state_dict`'s checkpoint: a collective of the whole group, for a run whose
        every replica restarted (each creates its DiLoCo, then loads; the replicas may load the same file
        or each its own). The outer state and counters become the checkpoint's, the inner optimizer's
        state too (when the checkpoint has it), the group agrees on it in a shared-state sync (a replica
        whose checkpoint differs from the group's adopts the group's), and the model is loaded with the
        outer parameters. A single replica that restarts into a running group needs no checkpoint: it
        receives the group's state when it joins. Raises InvalidArgumentError for a checkpoint of another
        model (parameter count or dtype) or that is not one, InvalidUsageError with an all-reduce in
        flight (flush() first), and what a sync raises."""
        self._check_usable()
        if self._pending is not None:
            raise InvalidUsageError(detail="load_state_dict() with an outer all-reduce in flight: call flush() first")
        theta, momentum, step, round_, phase = check_state(state, self._outer)
        phase = phase if self._streaming else 0
        if phase >= self._schedule.interval(round_):
            raise InvalidArgumentError(detail="load_state_dict: fragment_phase %d lies beyond round %d's sync point "
                                       "(a checkpoint of another schedule?)" % (phase, round_))
        with self._outer_work():
            self._outer.load(theta, momentum, step, round_, phase)
            if state.get("inner_optimizer") is not None:
                self.inner_optimizer.load_state_dict(state["inner_optimizer"])
            self._round_steps = phase
            self._sync()
            self._outer.reset_start()
            self._outer.write_model(self._outer.theta)

    def stats(self):
        """A :class:`DiLoCoStats` of the counters so far. Never blocks."""
        s = self.comm.stats()
        c, t = self._counts, self._times
        inner = t["inner"] + (0.0 if self._broken else max(0.0, time.monotonic() - self._mark))
        return DiLoCoStats(outer_steps=self._outer.step, inner_steps=c["inner_steps"], rounds=self._outer.round,
                           allreduce_retries=c["allreduce_retries"], topology_updates=c["topology_updates"],
                           syncs=c["syncs"], state_adoptions=c["state_adoptions"], world_size=c["world_size"],
                           tx_bytes=s.tx_bytes - self._bytes0[0], rx_bytes=s.rx_bytes - self._bytes0[1],
                           inner_time_s=inner, outer_time_s=t["outer"], wait_time_s=t["wait"],
                           peak_step_tx_bytes=self._peak_tx)

    def __repr__(self):
        return "<pccl.diloco.DiLoCo H=%d overlap=%s quant=%s fragments=%d delay=%d outer_step=%d>" % (
            self.inner_steps, self.overlap or "off", self.quant or "none", self.fragments, self.fragment_delay,
            self._outer.step)

    # ---- one outer round ---------------------------------------------------------------------------

    def _outer_round(self):
        self._round_steps = 0
        pg = self._buffers[0]
        if self._pending is not None and self._pending[1] is pg:
            pg = self._buffers[1]
        self._outer.pseudo_gradient(pg)
        if self.overlap is None:
            self._reduce(pg)
            self._issued()
            self._outer.apply(pg)
            self._outer.write_model(self._outer.theta)
            self._admit_if_pending()
            return
        # Overlapped: the last round's average, applied one round late. It carries the replicas' agreed
        # answer to "are peers pending?" (asked at the last boundary), so that all of them decide alike.
        admit = self._finish_pending(fold_into=pg) if self._pending is not None else False
        if admit:
            # A join or a departure: this round is averaged at once, so that nothing is in flight when
            # the ring changes and a joiner starts from the outer state every member holds.
            epoch = self.comm.epoch
            try:
                self._all_reduce(pg)
            except PcclError as e:
                if not e.retryable:
                    raise
                self._counts["allreduce_retries"] += 1
                self._recover()  # the ring changed with nothing in flight: go on as in any round
            else:
                self._issued()
                self._outer.apply(pg)
                if self.comm.epoch == epoch:
                    self._update_topology()
                    self._sync()
                self._outer.reset_start()
                self._outer.write_model(self._outer.theta)
                return
        if self.overlap == "eager":
            self._outer.predict(pg)  # read before the all-reduce owns pg
            self._outer.write_model(self._outer.preview)
        else:
            self._outer.write_model(self._outer.theta)
        self._issue(pg, self._timed(self.comm.are_peers_pending))

    def _issued(self):
        self._outer.round_t += 1

    def _issue(self, pg, pending):
        """pg's all-reduce in the background, with this replica's answer to "are peers pending?" beside it
        (max over the replicas, so that every one of them decides alike): self._pending."""
        flag = torch.tensor([1.0 if pending else 0.0])
        request = self.comm.all_reduce_async(pg, op="avg", tag=self.tag, quant=self.quant)
        try:
            flag_request = self.comm.all_reduce_async(flag, op="max", tag=self.tag + 1)
        except BaseException:
            try:  # the pseudo-gradient's all-reduce is waited on before the error is raised
                request.wait()
            except PcclError:
                pass
            raise
        self._issued()
        self._pending = (request, pg, flag_request, flag)

    def _wait_pending(self):
        """Waits for both requests of self._pending (before anything else is called) and clears it; returns
        (buffer, any replica saw peers pending). A retryable failure is counted and recovered from (a new
        ring and a sync) and returns (buffer holding its input again, None); any other is raised."""
        request, buf, flag_request, flag = self._pending
        self._pending = None
        failure = None
        for req in (request, flag_request):
            try:
                info = self._timed(req.wait)
                if req is request:
                    self._counts["world_size"] = info.world_size
            except PcclError as e:
                failure = failure or e
        if failure is None:
            return buf, bool(flag[0] > 0)
        if not failure.retryable:
            raise failure
        self._counts["allreduce_retries"] += 1
        self._recover()
        return buf, None

    def _finish_pending(self, fold_into=None):
        """Waits for the round in flight and applies its average; returns True when some replica saw
        peers pending at that round's boundary. When it failed (retryably): a new ring and a sync (which
        admit the pending peers), then its pseudo-gradient is added to fold_into (the next round's: both
        rounds are averaged together), or, without fold_into (flush), all-reduced again at once."""
        buf, admit = self._wait_pending()
        if admit is None:  # failed: buf holds its input again
            if fold_into is not None:
                fold_into.add_(buf)
                return False
            self._reduce(buf)
            self._outer.apply(buf)
            return False
        self._outer.apply(buf)
        return admit

    # ---- Streaming DiLoCo: one fragment at a time --------------------------------------------------------

    def _sync_point(self):
        """Round r's sync point: fragment r mod P's pseudo-gradient is all-reduced, at once (tau = 0: the
        outer step and merge follow, then joins) or in the background until _finish_fragment, tau inner
        steps later, with the replicas' answer to "are peers pending?" beside it (as overlapped mode)."""
        self._round_steps = 0
        f = self._schedule.fragment(self._outer.round)
        pg = self._frags.pseudo_gradient(f)
        if self.fragment_delay == 0:
            self._reduce(pg)
            self._issued()
            self._frags.apply(f, pg)
            self._frags.merge(f, self.fragment_alpha)
            self._admit_if_pending()
            return
        self._issue(pg, self._timed(self._probe.take))
        self._pending_fragment = f

    def _finish_fragment(self):
        """tau steps after the sync point: waits for the fragment's all-reduce, takes its outer step and merges
        it into the model, then admits joiners if some replica saw them pending (nothing is in flight). A
        retryable failure re-forms the ring (and syncs); the fragment then takes no outer step this time and
        keeps its local progress, which its next sync, H steps later, sends along with the next H steps'."""
        f = self._pending_fragment
        buf, admit = self._wait_pending()
        if admit is not None:
            self._frags.apply(f, buf)
            self._frags.merge(f, self.fragment_alpha)
            if admit:
                self._update_topology()
                self._sync()
        self._probe.start()  # the next sync point's "are peers pending?", asked during the inner steps

    # ---- pccl calls with the abort/retry loop ------------------------------------------------------------

    def _all_reduce(self, buf):
        info = self._timed(lambda: self.comm.all_reduce(buf, op="avg", tag=self.tag, quant=self.quant))
        self._counts["world_size"] = info.world_size
        return info

    def _reduce(self, buf):
        """Blocking all-reduce (avg) of buf in place; on a retryable failure: update_topology(), sync, retry."""
        for attempt in range(self.max_retries + 1):
            try:
                return self._all_reduce(buf)
            except PcclError as e:
                if not e.retryable or attempt == self.max_retries:
                    raise
                self._counts["allreduce_retries"] += 1
                self._recover()
        raise AssertionError("unreachable")

    def _recover(self):
        """After a retryable failure: a new ring, then the sync every member makes after an epoch change
        (a joiner admitted by this vote is syncing right now)."""
        self._update_topology()
        self._sync()

    def _update_topology(self):
        self._probe.cancel()
        for attempt in range(self.max_retries + 1):
            try:
                self._timed(self.comm.update_topology)
                self._counts["topology_updates"] += 1
                return
            except PcclError as e:
                if not e.retryable or attempt == self.max_retries:
                    raise

    def _admit_if_pending(self):
        if not self._timed(self.comm.are_peers_pending):
            return False
        self._update_topology()
        self._sync()
        return True

    def _sync(self):
        """sync_shared_state of the outer state; on a retryable failure: update_topology(), sync again."""
        state = self._outer.shared
        self._probe.cancel()
        self._outer.schedule_t[0] = self._round_steps
        for attempt in range(self.max_retries + 1):
            # A replica that has synced before offers rounds + 1, a new one 0: the group's state wins over
            # a joiner's whatever its content, and replicas that start together elect the most common one.
            revision = self._outer.round + 1 if self._counts["syncs"] else 0
            try:
                info = self._timed(lambda: self.comm.sync_shared_state(state, revision=revision))
                break
            except PcclError as e:
                if not e.retryable or attempt == self.max_retries:
                    raise
                self._update_topology()
        self._counts["syncs"] += 1
        self._sync_tx += info.tx_bytes
        if info.keys_received > 0:
            # This replica was behind (a joiner): adopt the group's state. The inner optimizer's state
            # belonged to other weights: it restarts, as a joiner's would.
            self._counts["state_adoptions"] += 1
            self._check_schedule()
            self._round_steps = int(self._outer.schedule_t[0])  # where the group is in its schedule
            self._outer.reset_start()
            self._outer.write_model(self._outer.theta)
            self.inner_optimizer.state.clear()
        return info

    def _check_schedule(self):
        group = [int(v) for v in self._outer.schedule_t[1:]]
        mine = self._schedule.as_list(0)[1:]
        if group != mine:
            raise InvalidArgumentError(detail="this replica's inner_steps, fragments, fragment_delay (%d, %d, %d) differ "
                                       "from the group's (%d, %d, %d)" % tuple(mine + group))

    def _connect(self):
        try:
            self._timed(self.comm.connect)
        except PcclError as e:
            if not e.retryable:
                raise
            self._update_topology()  # admitted, but the ring build failed: the members vote again

    # ---- bookkeeping -------------------------------------------------------------------------------------

    def _timed(self, fn):
        start = time.monotonic()
        try:
            return fn()
        finally:
            self._times["wait"] += time.monotonic() - start

    def _outer_work(self):
        return _OuterWork(self)

    def _check_usable(self):
        if self._broken is not None:
            raise InvalidUsageError(detail="this DiLoCo failed earlier (%s: %s); create a new Communicator and "
                                    "DiLoCo to rejoin" % (type(self._broken).__name__, self._broken))


class _OuterWork:
    """Times a stretch of outer work, and marks the DiLoCo unusable when it raises."""

    def __init__(self, diloco):
        self.d = diloco

    def __enter__(self):
        now = time.monotonic()
        self.d._times["inner"] += max(0.0, now - self.d._mark)
        self.start = now

    def __exit__(self, kind, value, tb):
        now = time.monotonic()
        self.d._times["outer"] += now - self.start
        self.d._mark = now
        if value is not None:  # the round stopped half-way: this object cannot go on
            self.d._broken = value
        return False


__all__ = ["DiLoCo", "DiLoCoStats", "FRAGMENT_SPLITS", "OVERLAP_MODES", "QUANT_MODES"]
