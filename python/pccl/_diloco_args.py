"""The argument and checkpoint checks of pccl.diloco: every bad argument is refused with an
InvalidArgumentError naming it, before anything reaches the network. Needs torch."""

import torch

from .communicator import Communicator
from .errors import InvalidArgumentError

OVERLAP_MODES = ("delayed", "eager")
QUANT_MODES = (None, "fp16", "bf16", "int8", "fp4")
FRAGMENT_SPLITS = ("balanced", "strided")
STATE_FORMAT = "pccl.diloco/1"


def _int(value, low):
    return not isinstance(value, bool) and isinstance(value, int) and value >= low


def check_state(state, outer):
    """(theta, momentum, step, round, phase) of a checkpoint that fits `outer`, else InvalidArgumentError."""
    def bad(text):
        return InvalidArgumentError(detail="load_state_dict: " + text)
    if not isinstance(state, dict) or state.get("format") != STATE_FORMAT:
        raise bad("not a pccl.diloco checkpoint (a dict from DiLoCo.state_dict() with format %r)" % STATE_FORMAT)
    tensors = []
    for key in ("outer_parameters", "outer_momentum"):
        t = state.get(key)
        if not isinstance(t, torch.Tensor):
            raise bad("%s is not a tensor" % key)
        if t.numel() != outer.count or t.dtype != outer.dtype:
            raise bad("%s holds %d %s elements; this model has %d %s parameters (another model's checkpoint?)"
                      % (key, t.numel(), t.dtype, outer.count, outer.dtype))
        tensors.append(t)
    counters = []
    for key in ("outer_step", "round", "fragment_phase"):
        v = state.get(key, 0)  # fragment_phase: absent from checkpoints of the whole-model modes
        if not _int(v, 0):
            raise bad("%s must be an int >= 0, got %r" % (key, v))
        counters.append(v)
    return tensors[0], tensors[1], counters[0], counters[1], counters[2]


def check_fragments(params, inner_steps, overlap, fragments, fragment_delay, fragment_alpha, fragment_split):
    """(fragments, delay, alpha, split) checked; alpha None becomes 1.0 without delay, else 0.5."""
    def bad(text):
        return InvalidArgumentError(detail=text)

    if not _int(fragments, 1):
        raise bad("fragments must be an int >= 1, got %r" % (fragments,))
    if fragments > inner_steps:
        raise bad("fragments (%d) must not exceed inner_steps (%d): each fragment needs an inner step of its own"
                  % (fragments, inner_steps))
    if fragment_split not in FRAGMENT_SPLITS:
        raise bad("fragment_split must be 'balanced' or 'strided', got %r" % (fragment_split,))
    if fragment_split == "strided" and fragments > len(params):
        raise bad("fragment_split='strided' puts whole parameter tensors in fragments: %d fragments need at least "
                  "%d tensors, the model has %d" % (fragments, fragments, len(params)))
    if fragment_split == "balanced" and fragments > sum(p.numel() for p in params):
        raise bad("fragments (%d) exceeds the model's parameter count" % fragments)
    spacing = inner_steps // fragments
    if not _int(fragment_delay, 0):
        raise bad("fragment_delay must be an int >= 0, got %r" % (fragment_delay,))
    if fragment_delay > 0 and fragment_delay >= spacing:
        raise bad("fragment_delay (%d) must be below inner_steps // fragments (%d): a fragment's all-reduce ends "
                  "before the next fragment's starts" % (fragment_delay, spacing))
    if fragment_alpha is None:
        fragment_alpha = 1.0 if fragment_delay == 0 else 0.5
    if (isinstance(fragment_alpha, bool) or not isinstance(fragment_alpha, (int, float))
            or not 0 <= fragment_alpha <= 1):
        raise bad("fragment_alpha must be a number in [0, 1], got %r" % (fragment_alpha,))
    streaming = fragments > 1 or fragment_delay > 0 or fragment_alpha != 1
    if streaming and overlap is not None:
        raise bad("fragments, fragment_delay and fragment_alpha replace overlap: pass overlap=False with them "
                  "(fragment_delay is the overlap of Streaming DiLoCo)")
    if streaming:
        for i, p in enumerate(params):
            if not p.is_contiguous():
                raise bad("model parameter %d is not contiguous: fragments write parts of parameters in place" % i)
    return fragments, fragment_delay, float(fragment_alpha), fragment_split


def check_args(model, inner_optimizer, comm, inner_steps, outer_lr, outer_momentum, quant, overlap, tag,
               max_retries):
    """(parameters, quant, overlap) of checked arguments (quant "none" -> None, overlap False -> None)."""
    def bad(text):
        return InvalidArgumentError(detail=text)

    if not isinstance(model, torch.nn.Module):
        raise bad("model must be a torch.nn.Module, got %s" % type(model).__name__)
    params = [p for p in model.parameters()]
    if not params:
        raise bad("the model has no parameters")
    if not isinstance(inner_optimizer, torch.optim.Optimizer):
        raise bad("inner_optimizer must be a torch.optim.Optimizer, got %s" % type(inner_optimizer).__name__)
    known = {id(p) for p in params}
    for group in inner_optimizer.param_groups:
        for p in group["params"]:
            if id(p) not in known:
                raise bad("inner_optimizer holds a tensor that is not a parameter of the model (shape %s)"
                          % (tuple(p.shape),))
    if not isinstance(comm, Communicator):
        raise bad("comm must be a pccl.Communicator, got %s" % type(comm).__name__)
    if not _int(inner_steps, 1):
        raise bad("inner_steps must be an int >= 1, got %r" % (inner_steps,))
    if isinstance(outer_lr, bool) or not isinstance(outer_lr, (int, float)) or not outer_lr > 0:
        raise bad("outer_lr must be a number > 0, got %r" % (outer_lr,))
    if (isinstance(outer_momentum, bool) or not isinstance(outer_momentum, (int, float))
            or not 0 <= outer_momentum < 1):
        raise bad("outer_momentum must be a number in [0, 1), got %r" % (outer_momentum,))
    if quant == "none":
        quant = None
    if quant not in QUANT_MODES:
        raise bad("quant must be None, 'fp16', 'bf16', 'int8' or 'fp4', got %r" % (quant,))
    if overlap is True:
        raise bad("overlap=True is ambiguous: pass overlap='delayed' or overlap='eager' (False: blocking)")
    if overlap in (False, None, "none"):
        overlap = None
    elif overlap not in OVERLAP_MODES:
        raise bad("overlap must be False, 'delayed' or 'eager', got %r" % (overlap,))
    if not _int(tag, 0) or tag >= 2 ** 64 - 1:
        raise bad("tag must be an int in 0..2**64-2 (DiLoCo uses tag and tag + 1), got %r" % (tag,))
    if not _int(max_retries, 0):
        raise bad("max_retries must be an int >= 0, got %r" % (max_retries,))
    return params, quant, overlap
