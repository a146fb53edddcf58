"""Turns numpy arrays, torch tensors and writable buffer-protocol objects into (pointer, count, dtype,
location) for the C API, checking everything the C side cannot see (contiguity, writability, dtype).

numpy and torch are never imported here: an object can only be an ndarray or a tensor when its
module is already in sys.modules, so ``import pccl`` works without either installed.
"""

import ctypes
import os
import sys
import threading

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
    object it came from, kept alive with this Buffer), ``keep`` (what pins the memory: ctypes objects,
    a torch tensor's storage) and ``written`` (pccl writes into it)."""

    __slots__ = ("ptr", "count", "dtype", "location", "device", "owner", "keep", "kind", "written",
                 "storage_ptr", "storage_nbytes")

    def __init__(self, ptr, count, dtype, location, device, owner, keep, kind):
        self.ptr = ptr
        self.count = count
        self.dtype = dtype
        self.location = location
        self.device = device
        self.owner = owner
        self.keep = keep
        self.kind = kind
        self.written = False
        self.storage_ptr = self.storage_nbytes = 0

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
    if writable:
        _refuse_unwritable_tensor(t, what)
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
    storage = t.storage() if count else None  # holds the StorageImpl: set_() cannot free the memory
    buf = Buffer(ptr, count, dtype, location, str(device) if location == BufferLocation.DEVICE else None,
                 t, storage, "torch")
    if storage is not None:
        buf.storage_ptr, buf.storage_nbytes = storage.data_ptr(), storage.nbytes()
        if writable and location == BufferLocation.HOST:
            reason = _readonly_host_memory(ptr, buf.nbytes)
            if reason:
                raise InvalidArgumentError(detail="%s: the torch tensor's memory is read-only (%s), but pccl "
                                           "writes into it; pass a writable copy (t.clone())" % (what, reason))
    return buf


def _refuse_unwritable_tensor(t, what):
    """What torch itself refuses for an in-place write."""
    torch = sys.modules["torch"]
    if t.requires_grad and torch.is_grad_enabled():
        base = t._base if t._is_view() else None
        if t.is_leaf or (base is not None and base.is_leaf and base.requires_grad):
            raise InvalidArgumentError(
                detail="%s: %s leaf tensor that requires grad; pccl writes into it, which torch refuses for an "
                "in-place operation: write parameters under torch.no_grad(), or pass p.grad or p.data"
                % (what, "a view of a" if not t.is_leaf else "a"))
    if hasattr(t, "is_inference") and t.is_inference() and not torch.is_inference_mode_enabled():
        raise InvalidArgumentError(detail="%s: an inference tensor outside torch.inference_mode(); torch refuses "
                                   "in-place updates to it (pass a clone, or call inside inference_mode)" % what)


# Writability of host memory, asked of the kernel without writing anything new: a byte of the buffer
# is copied through a pipe onto itself (read() into a read-only page fails with EFAULT instead of a
# SIGSEGV in pccl's io thread).
_probe_lock = threading.Lock()
_probe_pipe = None


def _after_fork_in_child():
    global _probe_lock, _probe_pipe
    _probe_lock = threading.Lock()
    _probe_pipe = None  # the parent's pipe would mix bytes with the parent's probes


os.register_at_fork(after_in_child=_after_fork_in_child)


def _page_writable(addr):
    global _probe_pipe
    cell = (ctypes.c_char * 1).from_address(addr)
    with _probe_lock:
        if _probe_pipe is None:
            _probe_pipe = os.pipe()
        r, w = _probe_pipe
        os.write(w, bytes(cell))
        try:
            return os.readv(r, [memoryview(cell)]) == 1
        except OSError:
            os.read(r, 1)  # the byte is still in the pipe
            return False


_BYTES_HEADER = sys.getsizeof(b"") - 1  # offset of a bytes object's payload (CPython)


def _bytes_payload(addr, nbytes):
    """True when addr is the payload of a live Python bytes object (torch.frombuffer(b)): its header is
    read only when it lies in the same page as addr (so it is mapped)."""
    if addr % 4096 < _BYTES_HEADER or _BYTES_HEADER != 32 or ctypes.sizeof(ctypes.c_void_p) != 8:
        return False
    start = addr - _BYTES_HEADER
    return (ctypes.c_void_p.from_address(start + 8).value == id(bytes)
            and ctypes.c_ssize_t.from_address(start).value > 0
            and ctypes.c_ssize_t.from_address(start + 16).value >= nbytes)


def _readonly_host_memory(ptr, nbytes):
    """Why host memory at ptr cannot be written, or None."""
    if _bytes_payload(ptr, nbytes):
        return "it is the contents of an immutable bytes object"
    if not (_page_writable(ptr) and _page_writable(ptr + nbytes - 1)):
        return "a read-only memory mapping"
    return None


def storage_problems(buffers):
    """After an operation: what moved under the torch tensors pccl used (resize_(), set_(),
    storage().resize_()), as messages; [] when nothing did."""
    problems = []
    for buf in buffers or ():
        if buf.kind != "torch" or buf.keep is None:
            continue
        storage, t = buf.keep, buf.owner
        if storage.data_ptr() != buf.storage_ptr or storage.nbytes() < buf.storage_nbytes:
            problems.append("the storage of a torch tensor pccl used was resized or freed during the operation "
                            "(tensor.resize_() or storage().resize_()): pccl may have read or written freed memory")
        elif t.data_ptr() != buf.ptr:
            problems.append("a torch tensor pccl used was given other memory during the operation (set_() or "
                            "resize_()): the result is in the memory it had, not in the tensor")
    return problems


def bump_versions(buffers):
    """Bumps the autograd version counter of every torch tensor pccl wrote into, as a torch in-place op
    does: a tensor saved for backward then makes backward raise instead of using the new values."""
    done = set()
    for buf in buffers:
        if buf.kind == "torch" and buf.written and id(buf.owner) not in done:
            done.add(id(buf.owner))
            buf.owner.detach().reshape(-1)[:0].zero_()  # an empty in-place op: shares the version counter


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
        buf = _from_tensor(obj, what, writable)
    elif _is_ndarray(obj):
        buf = _from_ndarray(obj, what, writable)
    elif isinstance(obj, (list, tuple, int, float, str, bytes)):
        raise InvalidArgumentError(detail="%s: expected a numpy array or a torch tensor, got %s"
                                   % (what, type(obj).__name__))
    else:
        buf = _from_buffer(obj, what, writable)
    buf.written = bool(writable)
    return buf


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
