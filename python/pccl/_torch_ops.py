"""Tensors and reduce ops of torch.distributed, turned into what pccl's collectives take.

pccl takes dense, contiguous tensors of int8, uint8, int16, int32, int64, float16, bfloat16, float32 and
float64 (torch 1.13 has no uint16..uint64), in host memory or, with a pccl GPU backend module, in the
memory of one GPU (docs/gpu.md). Here:

- bool is reduced as uint8 (a view, no copy): SUM is logical or (MAX), PRODUCT logical and (MIN), as
  torch's NCCL backend does; AVG is refused;
- complex64/complex128 travel as float32/float64 pairs (torch.view_as_real): SUM, AVG and the copies
  of broadcast/all_gather/scatter; MIN, MAX and PRODUCT are refused;
- a non-contiguous tensor (and a CUDA tensor when no pccl GPU backend module loads) is staged: the
  collective runs on a contiguous (host) copy, copied back once it succeeded.
"""

import torch
import torch.distributed as dist

from ._torch_errors import invalid

_DIRECT = {torch.float16, torch.bfloat16, torch.float32, torch.float64, torch.int8, torch.uint8, torch.int16,
           torch.int32, torch.int64}
_COMPLEX = {torch.complex64, torch.complex128}
_FLOATS = {torch.float32, torch.float64}
_HALVES = {torch.float16, torch.bfloat16}

SUPPORTED = ("float16, bfloat16, float32, float64, int8, uint8, int16, int32, int64, bool, complex64, "
             "complex128")

_RED = dist.ReduceOp.RedOpType if hasattr(dist.ReduceOp, "RedOpType") else dist.ReduceOp
_OPS = {_RED.SUM: "sum", _RED.AVG: "avg", _RED.PRODUCT: "prod", _RED.MIN: "min", _RED.MAX: "max"}


def op_name(op, dtype):
    """pccl's op name for a torch ReduceOp (or its RedOpType) applied to tensors of `dtype`."""
    kind = getattr(op, "op", op)
    name = _OPS.get(kind)
    if name is None:
        raise invalid("ReduceOp.%s is not supported by the pccl backend (SUM, AVG, PRODUCT, MIN, MAX)"
                      % getattr(kind, "name", kind))
    if dtype == torch.bool:
        if name == "avg":
            raise invalid("ReduceOp.AVG of bool tensors is not defined (SUM is logical or, PRODUCT logical and)")
        return {"sum": "max", "prod": "min"}.get(name, name)
    if dtype in _COMPLEX and name not in ("sum", "avg"):
        raise invalid("ReduceOp.%s of %s tensors is not supported (SUM and AVG are)" % (kind.name, dtype))
    return name


def quant_for(dtype, quant):
    """The group's quantization where it applies to `dtype` (the dtype pccl sees), else None."""
    if quant is None:
        return None
    if dtype in _FLOATS:
        return quant
    if dtype in _HALVES and quant in ("int8", "fp4"):
        return quant
    return None


def check_tensor(t, what):
    if not isinstance(t, torch.Tensor):
        raise invalid("%s: expected a torch.Tensor, got %s" % (what, type(t).__name__))
    if t.layout != torch.strided:
        raise invalid("%s: %s tensors are not supported by the pccl backend (dense tensors only)" % (what, t.layout))
    if t.dtype not in _DIRECT and t.dtype != torch.bool and t.dtype not in _COMPLEX:
        raise invalid("%s: dtype %s is not supported by the pccl backend (supported: %s)" % (what, t.dtype, SUPPORTED))
    if t.device.type not in ("cpu", "cuda"):
        raise invalid("%s: device %s is not supported by the pccl backend (cpu, cuda)" % (what, t.device))


def wire_view(x):
    """The view pccl reads and writes of a contiguous tensor x (same memory): bool as uint8, complex
    as real pairs, flattened to 1-d."""
    if x.dtype == torch.bool:
        x = x.view(torch.uint8)
    elif x.dtype in _COMPLEX:
        if x.is_conj():
            raise invalid("a conjugate view cannot be written in place; call resolve_conj() first")
        x = torch.view_as_real(x)
    return x.reshape(-1)


class Staged:
    """Tensor t as pccl sees it: ``wire`` (1-d, contiguous, a supported dtype, host memory unless
    `device_ok`) and ``copy_back()`` (None when wire is t's own memory)."""

    __slots__ = ("tensor", "wire", "copy", "staged")

    def __init__(self, t, what, device_ok=False, read=True):
        check_tensor(t, what)
        x = t.detach()
        if x.is_cuda and not device_ok:
            x = x.to("cpu") if read else torch.empty(x.shape, dtype=x.dtype)
        if not x.is_contiguous() or (x.dtype in _COMPLEX and x.is_conj()):
            x = x.resolve_conj().contiguous() if read else torch.empty(x.shape, dtype=x.dtype, device=x.device)
        self.tensor = t
        self.copy = x
        self.staged = x.data_ptr() != t.data_ptr() or x.device != t.device or not t.is_contiguous()
        self.wire = wire_view(x)

    def copy_back(self):
        if self.staged:
            with torch.no_grad():
                self.tensor.copy_(self.copy)


def flat_like(t, count, device="cpu"):
    """A contiguous 1-d tensor of `count` elements of t's dtype (the staging buffer of blocks)."""
    return torch.empty(count, dtype=t.dtype, device=device)


def same_blocks(tensors, like, what):
    """Checks that every tensor of a list has `like`'s dtype and element count."""
    for i, x in enumerate(tensors):
        check_tensor(x, "%s[%d]" % (what, i))
        if x.dtype != like.dtype or x.numel() != like.numel():
            raise invalid("%s[%d] is %s with %d elements; every block must be %s with %d elements"
                          % (what, i, x.dtype, x.numel(), like.dtype, like.numel()))
