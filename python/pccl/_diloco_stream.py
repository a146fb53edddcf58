"""The fragments of Streaming DiLoCo (Douillard et al., 2025): the schedule that says which fragment is
synced at which inner step, and the fragments themselves, each a set of ranges of the flat outer
parameters with its own outer optimizer, its send buffer, and the copies between it and the model.

Schedule. With H inner steps per outer period and P fragments, the k-th sync point (k = 1, 2, ...)
after the start of a schedule is inner step floor(k H / P); round r (0-based, the group's counter)
syncs fragment r mod P. So every fragment is synced every H inner steps, fragment p first after
floor((p + 1) H / P) steps, and P = 1 syncs the whole model every H steps as blocking DiLoCo does.

Splits. "balanced": the flat parameter vector (model.parameters() order) cut into P contiguous ranges
of floor(N / P) or one more elements, cutting through tensors where it must: the fragments' bytes
differ by at most one element. "strided": parameter tensor i goes to fragment i mod P (whole
tensors, spread over the depth of the model, as the paper strides layers across fragments); the
fragments' sizes then follow the tensors'.

All arithmetic is element-wise torch on the CPU in a fixed order, so replicas that feed in the same
all-reduced bits hold the same outer parameters.
"""

import threading

import torch


class Schedule:
    """Where the sync points of H inner steps in P fragments fall, and the delay tau of each."""

    def __init__(self, inner_steps, fragments, delay):
        self.H, self.P, self.tau = inner_steps, fragments, delay

    def interval(self, r):
        """Inner steps from the sync point before round r to round r's own."""
        k = r % self.P
        return (k + 1) * self.H // self.P - k * self.H // self.P

    def fragment(self, r):
        return r % self.P

    def as_list(self, phase):
        """The schedule as the shared state holds it: [phase, H, P, tau]."""
        return [phase, self.H, self.P, self.tau]


def split(params, fragments, how):
    """The flat ranges [(start, end), ...] of each fragment."""
    sizes = [p.numel() for p in params]
    if how == "balanced":
        total = sum(sizes)
        cuts = [k * total // fragments for k in range(fragments + 1)]
        return [[(cuts[k], cuts[k + 1])] for k in range(fragments)]
    ranges = [[] for _ in range(fragments)]
    offset = 0
    for i, n in enumerate(sizes):
        ranges[i % fragments].append((offset, offset + n))
        offset += n
    return ranges


class Fragments:
    """The P fragments of an OuterState's theta and momentum (views, so the shared state stays one)."""

    def __init__(self, outer, fragments, how, lr, momentum):
        self.outer = outer
        self.ranges = split(outer.params, fragments, how)
        self.sizes = [sum(e - s for s, e in rs) for rs in self.ranges]
        self.buffers = [torch.empty(n, dtype=outer.dtype) for n in self.sizes]
        self.pieces = [self._pieces(rs) for rs in self.ranges]
        self._momentum_factor = momentum
        self._views, self._opts = [], []
        for rs in self.ranges:
            whole = len(rs) == 1 and rs[0] == (0, outer.count)
            views = [(outer.theta if whole else outer.theta[s:e], outer.momentum if whole else outer.momentum[s:e])
                     for s, e in rs]
            opt = torch.optim.SGD([v for v, _ in views], lr=lr, momentum=momentum, nesterov=momentum > 0)
            if momentum > 0:
                for v, m in views:  # the momentum lives in the shared state: registered up front (zeros)
                    opt.state[v]["momentum_buffer"] = m
            self._views.append(views)
            self._opts.append(opt)

    def _pieces(self, ranges):
        """(parameter, offset in it, flat offset, count, offset in the fragment's buffer) covering `ranges`."""
        out, buf_off = [], 0
        for s, e in ranges:
            flat = 0
            for p in self.outer.params:
                n = p.numel()
                lo, hi = max(s, flat), min(e, flat + n)
                if lo < hi:
                    out.append((p, lo - flat, lo, hi - lo, buf_off + lo - s))
                flat += n
            buf_off += e - s
        return out

    def pseudo_gradient(self, f):
        """buffer f := theta - model over fragment f (what the replica's inner steps moved it since it was
        last synced); returns the buffer."""
        buf = self.buffers[f]
        with torch.no_grad():
            for p, p_off, flat, n, b in self.pieces[f]:
                out = buf[b:b + n]
                out.copy_(p.detach().reshape(-1)[p_off:p_off + n])
                torch.sub(self.outer.theta[flat:flat + n], out, out=out)
        return buf

    def apply(self, f, average):
        """One outer step of fragment f's slice of theta with the averaged pseudo-gradient `average`."""
        views, opt = self._views[f], self._opts[f]
        offset = 0
        for v, _ in views:
            v.grad = average[offset:offset + v.numel()]
            offset += v.numel()
        try:
            opt.step()
        finally:
            for v, _ in views:
                v.grad = None
        if self._momentum_factor > 0:
            for v, m in views:
                buf = opt.state[v]["momentum_buffer"]
                if buf is not m:  # an implementation that replaced the buffer: keep the shared one
                    m.copy_(buf)
                    opt.state[v]["momentum_buffer"] = m
        self.outer.step_t += 1

    def merge(self, f, alpha):
        """The model's fragment f := alpha * theta + (1 - alpha) * model (alpha 1: theta itself)."""
        theta = self.outer.theta
        with torch.no_grad():
            for p, p_off, flat, n, _ in self.pieces[f]:
                outer = theta[flat:flat + n]
                if alpha == 1.0:
                    value = outer
                else:
                    value = p.detach().reshape(-1)[p_off:p_off + n].to(device="cpu", dtype=theta.dtype, copy=True)
                    value.mul_(1.0 - alpha).add_(outer, alpha=alpha)
                if n == p.numel():
                    p.copy_(value.view_as(p))
                else:
                    p.data.view(-1)[p_off:p_off + n].copy_(value)


class PendingProbe:
    """comm.are_peers_pending() asked in a background thread during the inner steps, so that a sync point
    does not wait one round trip to the master for it (on a WAN, 4 of them per H steps with 4
    fragments): start() after a fragment's finish, take() at the next sync point. The answer is then
    up to one sync interval old, so a peer that asks to join is admitted at most one sync point later.
    are_peers_pending may be called from any thread at any time (docs/concurrency.md)."""

    def __init__(self, comm):
        self.comm = comm
        self._thread = None
        self._result = None

    def start(self):
        if self._thread is not None:
            return
        self._result = None

        def ask():
            try:
                self._result = (True, self.comm.are_peers_pending())
            except BaseException as e:  # handed to take(): raised on the training thread
                self._result = (False, e)

        self._thread = threading.Thread(target=ask, name="pccl-diloco-probe", daemon=True)
        self._thread.start()

    def take(self):
        """The answer of the probe started last (waiting for it), or of a direct call when none runs."""
        if self._thread is None:
            return self.comm.are_peers_pending()
        self._thread.join()
        self._thread = None
        ok, value = self._result
        if ok:
            return value
        raise value

    def cancel(self):
        """Waits for a probe that runs and drops its answer (before a vote or a sync)."""
        if self._thread is not None:
            self._thread.join()
            self._thread = None
