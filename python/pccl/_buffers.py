"""Turns numpy arrays, torch tensors and writable buffer-protocol objects into (pointer, count, dtype,
location) for the C API, checking everything the C side cannot see (contiguity, writability, dtype).

numpy and torch are never imported here: an object can only be an ndarray or a tensor when its
module is already in sys.modules, so ``import pccl`` works without either installed.
"""

import ctypes
import sys

from ._lib import BufferLocation, DataType, DTYPE_SIZES
from .errors import InvalidArgumentError

# dtype names (numpy's dtype.name, torch's str(dtype) without "torch.") -> pcclDataType_t.
_BY_NAME = {
    "int8": DataType.INT8, "uint8": DataType.UINT8, "int16": DataType.INT16, "uint16": DataType.UINT16,
    "int32": DataType.INT32, "uint32": DataType.UINT32, "int64": DataType.INT64, "uint64": DataType.UINT64,
    "float16": DataType.FLOAT16, "bfloat16": DataType.BFLOAT16, "float32": DataType.FLOAT32,
    "float64": DataType.FLOAT64,
}

# struct-module format characters of the buffer protocol (native sizes) -> pcclDataType_t.
_BY_FORMAT = {"b": DataType.INT8, "B": DataType.UINT8, "h": DataType.INT16, "H": DataType.UINT16,
              "e": DataType.FLOAT16, "f": DataType.FLOAT32, "d": DataType.FLOAT64}
for _c in "iIlLqQ":
    _size = ctypes.sizeof({"i": ctypes.c_int, "I": ctypes.c_uint, "l": ctypes.c_long, "L": ctypes.c_ulong,
                           "q": ctypes.c_longlong, "Q": ctypes.c_ulonglong}[_c])
    _BY_FORMAT[_c] = {(4, False): DataType.INT32, (4, True): DataType.UINT32,
                      (8, False): DataType.INT64, (8, True): DataType.UINT64}[(_size, _c.isupper())]

SUPPORTED = "int8, uint8, int16, uint16, int32, uint32, int64, uint64, float16, bfloat16, float32, float64"


class Buffer:
    """One contiguous buffer: ``ptr`` (int address), ``count`` (elements), ``dtype`` (DataType),
    ``location`` (BufferLocation), ``device`` (torch device string or None), ``nbytes``, ``owner`` (the
    object it came from, kept alive with this Buffer) and ``keep`` (ctypes objects that pin it)."""

    __slots__ = ("ptr", "count", "dtype", "location", "device", "owner", "keep", "kind")

    def __init__(self, ptr, count, dtype, location, device, owner, keep, kind):
        self.ptr = ptr
        self.count = count
        self.dtype = dtype
        self.location = location
        self.device = device
        self.owner = owner
        self.keep = keep
        self.kind = kind

    @property
    def nbytes(self):
        return self.count * DTYPE_SIZES[self.dtype]


def _is_tensor(obj):
    torch = sys.modules.get("torch")
    return torch is not None and isinstance(obj, torch.Tensor)


def _is_ndarray(obj):
    np = sys.modules.get("numpy")
    return np is not None and isinstance(obj, np.ndarray)


def _from_tensor(t, what, writable):
    if t.layout != sys.modules["torch"].strided:
        raise InvalidArgumentError(detail="%s: a %s torch tensor; only dense (strided) tensors are supported"
                                   % (what, t.layout))
    name = str(t.dtype)
    name = name[len("torch."):] if name.startswith("torch.") else name
    dtype = _BY_NAME.get(name)
    if dtype is None:
        raise InvalidArgumentError(detail="%s: torch dtype %s is not supported (supported: %s)"
                                   % (what, t.dtype, SUPPORTED))
    if not t.is_contiguous():
        raise InvalidArgumentError(detail="%s: the torch tensor is not contiguous (shape %s, stride %s); "
                                   "pass t.contiguous() and copy the result back"
                                   % (what, tuple(t.shape), tuple(t.stride())))
    if (hasattr(t, "is_conj") and t.is_conj()) or (hasattr(t, "is_neg") and t.is_neg()):
        raise InvalidArgumentError(detail="%s: the torch tensor has a lazy conj/neg bit; resolve it first" % what)
    device = t.device
    if device.type == "cpu":
        location = BufferLocation.HOST
    elif device.type in ("cuda", "hip"):
        location = BufferLocation.DEVICE
    else:
        raise InvalidArgumentError(detail="%s: torch device %s is not supported (cpu, or cuda with a pccl GPU "
                                   "backend module)" % (what, device))
    count = t.numel()
    ptr = t.data_ptr() if count else 0
    return Buffer(ptr, count, dtype, location, str(device) if location == BufferLocation.DEVICE else None,
                  t, None, "torch")


def _from_ndarray(a, what, writable):
    dt = a.dtype
    dtype = _BY_NAME.get(dt.name)
    if dtype is None or dt.fields is not None or dt.subdtype is not None:
        raise InvalidArgumentError(detail="%s: numpy dtype %s is not supported (supported: %s; bfloat16 "
                                   "through torch)" % (what, dt, SUPPORTED))
    if dt.itemsize != DTYPE_SIZES[dtype]:
        raise InvalidArgumentError(detail="%s: numpy dtype %s has item size %d, expected %d"
                                   % (what, dt, dt.itemsize, DTYPE_SIZES[dtype]))
    if not dt.isnative:
        raise InvalidArgumentError(detail="%s: numpy dtype %s is not in native byte order; use "
                                   "a.astype(a.dtype.newbyteorder('='))" % (what, dt.str))
    if not a.flags.c_contiguous:
        raise InvalidArgumentError(detail="%s: the numpy array is not C-contiguous (shape %s, strides %s); "
                                   "pass np.ascontiguousarray(a) and copy the result back"
                                   % (what, a.shape, a.strides))
    if writable and not a.flags.writeable:
        raise InvalidArgumentError(detail="%s: the numpy array is read-only, but pccl writes into it" % what)
    count = int(a.size)
    ptr = a.__array_interface__["data"][0] if count else 0
    return Buffer(ptr, count, dtype, BufferLocation.HOST, None, a, None, "numpy")


def _from_buffer(obj, what, writable):
    try:
        mv = memoryview(obj)
    except TypeError:
        raise InvalidArgumentError(
            detail="%s: expected a numpy array, a torch tensor or a writable buffer (bytearray, array.array), "
            "got %s" % (what, type(obj).__name__)) from None
    fmt = mv.format[1:] if mv.format.startswith("@") else mv.format  # native formats only
    dtype = _BY_FORMAT.get(fmt)
    if dtype is None or mv.itemsize != DTYPE_SIZES[dtype]:
        raise InvalidArgumentError(detail="%s: buffer format %r is not supported (supported: %s)"
                                   % (what, mv.format, SUPPORTED))
    if not mv.c_contiguous:
        raise InvalidArgumentError(detail="%s: the buffer is not C-contiguous" % what)
    if mv.readonly:
        raise InvalidArgumentError(detail="%s: the buffer is read-only; pass a writable one (bytearray, "
                                   "array.array, or a numpy array)" % what)
    count = mv.nbytes // mv.itemsize
    if count == 0:
        return Buffer(0, 0, dtype, BufferLocation.HOST, None, obj, mv, "buffer")
    pinned = (ctypes.c_char * mv.nbytes).from_buffer(mv.cast("B"))  # holds an export: no resize meanwhile
    return Buffer(ctypes.addressof(pinned), count, dtype, BufferLocation.HOST, None, obj, pinned, "buffer")


def as_buffer(obj, what, writable):
    """The Buffer of `obj` (an ndarray, tensor or buffer), or InvalidArgumentError naming `what`."""
    if obj is None:
        raise InvalidArgumentError(detail="%s: None is not a buffer" % what)
    if _is_tensor(obj):
        return _from_tensor(obj, what, writable)
    if _is_ndarray(obj):
        return _from_ndarray(obj, what, writable)
    if isinstance(obj, (list, tuple, int, float, str, bytes)):
        raise InvalidArgumentError(detail="%s: expected a numpy array or a torch tensor, got %s"
                                   % (what, type(obj).__name__))
    return _from_buffer(obj, what, writable)


def reduce_buffers(send, recv):
    """(send Buffer, recv Buffer) for an all-reduce; recv None or recv is send: in place."""
    in_place = recv is None or recv is send
    if in_place:
        buf = as_buffer(send, "send", writable=True)
        return buf, buf
    sbuf = as_buffer(send, "send", writable=False)
    rbuf = as_buffer(recv, "recv", writable=True)
    if sbuf.dtype != rbuf.dtype:
        raise InvalidArgumentError(detail="send is %s but recv is %s: they must have the same dtype"
                                   % (sbuf.dtype.name.lower(), rbuf.dtype.name.lower()))
    if sbuf.count != rbuf.count:
        raise InvalidArgumentError(detail="send has %d elements but recv has %d: they must match"
                                   % (sbuf.count, rbuf.count))
    if sbuf.location != rbuf.location or sbuf.device != rbuf.device:
        raise InvalidArgumentError(detail="send is on %s but recv is on %s: both must be host memory or both "
                                   "memory of the same GPU" % (sbuf.device or "cpu", rbuf.device or "cpu"))
    return sbuf, rbuf


def host_buffer(obj, what, writable):
    """A Buffer in host memory (shared-state tensors): device tensors are refused."""
    buf = as_buffer(obj, what, writable)
    if buf.location != BufferLocation.HOST:
        raise InvalidArgumentError(detail="%s: shared-state tensors must be host (CPU) memory, got %s"
                                   % (what, buf.device))
    return buf
