"""The outer state of pccl.diloco: one flat copy of the model's parameters (the outer parameters), the
outer optimizer over it (torch.optim.SGD with Nesterov momentum, as DiLoCo does), the outer step
counter, and the copies between the flat vector and the model. Needs torch.

Everything here is plain element-wise torch arithmetic in a fixed order on the CPU, so replicas that
feed it the same bits (the all-reduce's results are bit-identical on every peer) hold the same bits.
"""

import torch

from .errors import InvalidArgumentError
from .types import SharedState

# The shared-state names (docs/python.md "DiLoCo"): every replica of a run registers the same five.
THETA, MOMENTUM, STEP, ROUND = "diloco.outer_params", "diloco.outer_momentum", "diloco.outer_step", "diloco.round"
SCHEDULE = "diloco.schedule"  # int64 [phase, inner_steps, fragments, fragment_delay]

_FLOATS = (torch.float16, torch.bfloat16, torch.float32, torch.float64)


def flat_dtype(params):
    """float64 when every parameter is float64, else float32 (the outer copy of float16/bfloat16
    parameters is kept in float32, as master weights)."""
    for i, p in enumerate(params):
        if p.dtype not in _FLOATS:
            raise InvalidArgumentError(detail="model parameter %d has dtype %s: DiLoCo averages floating-point "
                                       "parameters only (float16, bfloat16, float32, float64)" % (i, p.dtype))
        if p.is_sparse:
            raise InvalidArgumentError(detail="model parameter %d is sparse: DiLoCo needs dense parameters" % i)
    return torch.float64 if all(p.dtype == torch.float64 for p in params) else torch.float32


class OuterState:
    """theta (the outer parameters), the outer optimizer's momentum and the outer step counter, all in
    host memory and registered as a pccl.SharedState (revision = outer steps applied)."""

    def __init__(self, params, lr, momentum, eager, schedule):
        self.params = list(params)
        self.dtype = flat_dtype(self.params)
        self.count = sum(p.numel() for p in self.params)
        self.theta = torch.empty(self.count, dtype=self.dtype)
        self.read_model(self.theta)
        self.momentum = torch.zeros(self.count, dtype=self.dtype)
        self.step_t = torch.zeros(1, dtype=torch.int64)  # outer steps applied to theta
        self.round_t = torch.zeros(1, dtype=torch.int64)  # outer all-reduces the group has issued
        # Inner steps since the last sync point (the same on every replica at every sync), and the settings
        # that make the schedule: a joiner resumes the schedule where the group is, or finds it differs.
        self.schedule_t = torch.tensor(schedule, dtype=torch.int64)
        self._momentum_factor = momentum
        self._opt = self._sgd(self.theta, self.momentum, lr, momentum)
        # Eager mode: the model starts each round from a preview, the outer step taken with this
        # replica's own pseudo-gradient in place of the round's average (computed on scratch copies).
        self.preview = self.theta.clone() if eager else None
        self._preview_momentum = torch.zeros_like(self.momentum) if eager else None
        self._preview_opt = self._sgd(self.preview, self._preview_momentum, lr, momentum) if eager else None
        self.shared = SharedState({THETA: self.theta, MOMENTUM: self.momentum, STEP: self.step_t,
                                   ROUND: self.round_t, SCHEDULE: self.schedule_t}, revision=0)

    @staticmethod
    def _sgd(param, momentum_buffer, lr, momentum):
        opt = torch.optim.SGD([param], lr=lr, momentum=momentum, nesterov=momentum > 0)
        if momentum > 0:
            # Registered up front so that it exists (zeros) for the shared state before the first step;
            # SGD's first step with a zero buffer computes the same bits as with none (0 * m + g == g).
            opt.state[param]["momentum_buffer"] = momentum_buffer
        return opt

    @property
    def step(self):
        """Outer steps applied to theta (the shared counter)."""
        return int(self.step_t[0])

    @property
    def round(self):
        """Outer all-reduces issued (blocking: done; overlapped: started), the group's round counter."""
        return int(self.round_t[0])

    @property
    def start(self):
        """Where the model's current round started: theta, or the preview in eager mode."""
        return self.theta if self.preview is None else self.preview

    def new_buffer(self):
        return torch.empty(self.count, dtype=self.dtype)

    # ---- model <-> flat vector ---------------------------------------------------------------------

    def read_model(self, out):
        """out := the model's parameters, flattened (converted to the flat dtype, copied to the CPU)."""
        offset = 0
        with torch.no_grad():
            for p in self.params:
                n = p.numel()
                out[offset:offset + n].copy_(p.detach().reshape(-1))
                offset += n
        return out

    def write_model(self, flat):
        """The model's parameters := flat (converted to each parameter's dtype and device)."""
        offset = 0
        with torch.no_grad():
            for p in self.params:
                n = p.numel()
                p.copy_(flat[offset:offset + n].view_as(p))
                offset += n

    # ---- the outer step ----------------------------------------------------------------------------

    def pseudo_gradient(self, out):
        """out := start - model parameters: what this replica's inner steps of the round moved."""
        self.read_model(out)
        torch.sub(self.start, out, out=out)
        return out

    def apply(self, average):
        """One outer step on theta with the averaged pseudo-gradient; the counter advances."""
        self._step_sgd(self._opt, self.theta, self.momentum, average)
        self.step_t += 1

    def predict(self, local):
        """Eager mode: preview := the outer step theta would take if `local` were the round's average."""
        self.preview.copy_(self.theta)
        self._preview_momentum.copy_(self.momentum)
        self._step_sgd(self._preview_opt, self.preview, self._preview_momentum, local)

    def load(self, theta, momentum, step, round_, phase):
        """The outer state := a checkpoint's (DiLoCo.load_state_dict checked the shapes)."""
        with torch.no_grad():
            self.theta.copy_(theta.reshape(-1))
            self.momentum.copy_(momentum.reshape(-1))
        self.step_t[0] = step
        self.round_t[0] = round_
        self.schedule_t[0] = phase
        self.reset_start()

    def reset_start(self):
        """The next round starts from theta itself (blocking and delayed modes always do)."""
        if self.preview is not None:
            self.preview.copy_(self.theta)

    def _step_sgd(self, opt, param, momentum_buffer, grad):
        param.grad = grad
        try:
            opt.step()
        finally:
            param.grad = None
        if self._momentum_factor > 0:
            buf = opt.state[param]["momentum_buffer"]
            if buf is not momentum_buffer:  # an implementation that replaced the buffer: keep ours shared
                momentum_buffer.copy_(buf)
                opt.state[param]["momentum_buffer"] = momentum_buffer
