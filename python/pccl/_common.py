"""Small helpers shared by the Master and Communicator wrappers: argument parsing and the guard that
keeps a handle from being destroyed while another thread is inside a call on it."""

import ctypes
import math
import threading

from . import _lifetime
from ._lib import Quant, RedOp, SyncStrategy
from .errors import InvalidArgumentError, InvalidUsageError

U32_MAX = 0xFFFFFFFF
U64_MAX = 0xFFFFFFFFFFFFFFFF


def to_bytes_or_none(value, what):
    """str -> UTF-8 bytes; bytes-like -> bytes; None -> None."""
    if value is None:
        return None
    if isinstance(value, str):
        return value.encode("utf-8")
    if isinstance(value, (bytes, bytearray, memoryview)):
        return bytes(value)
    raise InvalidArgumentError(detail="%s must be str or bytes, got %s" % (what, type(value).__name__))


def address(value, what):
    """'HOST:PORT' or (host, port) -> b'HOST:PORT' (IPv6 hosts of a tuple get brackets)."""
    if isinstance(value, tuple) and len(value) == 2:
        host, port = value
        host = str(host)
        if ":" in host and not host.startswith("["):
            host = "[%s]" % host
        value = "%s:%d" % (host, int(port))
    if not isinstance(value, str) or not value:
        raise InvalidArgumentError(detail="%s must be 'HOST:PORT' or (host, port), got %r" % (what, value))
    return value.encode("utf-8")


def u32(value, what):
    """A uint32_t config field; None -> None (keep the _INIT default)."""
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int) or not 0 <= value <= U32_MAX:
        raise InvalidArgumentError(detail="%s must be an int in 0..%d, got %r" % (what, U32_MAX, value))
    return value


def set_credentials(cfg, secret, encrypt):
    """Puts the secret (str/bytes/None) and the encrypt switch into a config struct. Returns the buffer
    cfg.secret points to: keep it alive until the create call has copied it."""
    secret_b = to_bytes_or_none(secret, "secret")
    secret_buf = None
    if secret_b:
        secret_buf = ctypes.create_string_buffer(secret_b, len(secret_b))
        cfg.secret = ctypes.cast(secret_buf, ctypes.c_void_p)
        cfg.secret_len = len(secret_b)
    cfg.encrypt = 1 if encrypt else 0
    return secret_buf


def set_fields(struct, fields):
    """Sets the struct fields whose value is not None."""
    for name, value in fields.items():
        if value is not None:
            setattr(struct, name, value)


def _by_name(value, enum_cls, names, what):
    if isinstance(value, enum_cls):
        return value
    if isinstance(value, str):
        key = value.strip().lower().replace("-", "_")
        if key in names:
            return names[key]
    elif isinstance(value, int) and not isinstance(value, bool):
        try:
            return enum_cls(value)
        except ValueError:
            pass
    raise InvalidArgumentError(detail="unknown %s %r (one of: %s)" % (what, value, ", ".join(sorted(names))))


_OPS = {"sum": RedOp.SUM, "avg": RedOp.AVG, "mean": RedOp.AVG, "prod": RedOp.PROD, "min": RedOp.MIN,
        "max": RedOp.MAX}
_QUANTS = {"none": Quant.NONE, "fp16": Quant.FP16, "bf16": Quant.BF16, "int8": Quant.INT8, "fp4": Quant.FP4}
_STRATEGIES = {"enforce_popular": SyncStrategy.ENFORCE_POPULAR, "receive_only": SyncStrategy.RECEIVE_ONLY,
               "send_only": SyncStrategy.SEND_ONLY}


def red_op(value):
    """'sum', 'avg', 'prod', 'min', 'max' (or a RedOp) -> RedOp."""
    return _by_name(value, RedOp, _OPS, "reduction op")


def quant(value):
    """None, 'none', 'fp16', 'bf16', 'int8', 'fp4' (or a Quant) -> Quant."""
    return Quant.NONE if value is None else _by_name(value, Quant, _QUANTS, "quantization")


def strategy(value):
    """'enforce_popular', 'receive_only', 'send_only' (or a SyncStrategy) -> SyncStrategy."""
    return _by_name(value, SyncStrategy, _STRATEGIES, "sync strategy")


def timeout_ms(seconds):
    """A timeout in seconds (int or float >= 0) -> whole milliseconds for the C API, rounded up (so a
    positive timeout never becomes 0) and capped at the uint32_t maximum (about 49 days)."""
    if isinstance(seconds, bool) or not isinstance(seconds, (int, float)) or not seconds >= 0:
        raise InvalidArgumentError(detail="timeout must be None or a number of seconds >= 0, got %r" % (seconds,))
    if math.isinf(seconds):
        return U32_MAX
    return min(U32_MAX, math.ceil(seconds * 1000))


def int_in(value, lo, hi, what):
    if isinstance(value, bool) or not isinstance(value, int) or not lo <= value <= hi:
        raise InvalidArgumentError(detail="%s must be an int in %d..%d, got %r" % (what, lo, hi, value))
    return value


class HandleGuard:
    """Owns a C handle: counts the calls in flight on it so that close() refuses while another thread is
    inside a call (the C API would let that call finish and free the handle only as it returns, so the
    leave would happen later than close() suggests), refuses calls after close, and refuses every call
    in a child process that inherited the handle through fork() (checked before taking any lock: the
    lock may have been held by a parent thread at the fork)."""

    def __init__(self, handle, kind):
        self._lock = threading.Lock()
        self._handle = handle
        self._active = 0
        self._kind = kind
        self.origin = _lifetime.Origin(kind)

    def enter(self):
        """Marks a call in flight and returns the live handle; InvalidUsageError when closed or inherited
        through fork()."""
        self.origin.check()
        with self._lock:
            if self._handle is None:
                raise InvalidUsageError(detail="the %s is closed" % self._kind)
            self._active += 1
            return self._handle

    def leave(self):
        with self._lock:
            self._active -= 1

    def __enter__(self):
        return self.enter()

    def __exit__(self, *exc):
        self.leave()
        return False

    @property
    def closed(self):
        return self._handle is None

    @property
    def inherited(self):
        return self.origin.inherited

    def detach(self):
        """Takes the handle away for freeing (None when already closed, and in a process that inherited
        it through fork(): there it is leaked on purpose); InvalidUsageError while other threads are inside
        calls on it."""
        if self.origin.inherited:
            self._handle = None  # never freed here: its threads and sockets are the parent's
            return None
        with self._lock:
            if self._handle is None:
                return None
            if self._active:
                raise InvalidUsageError(detail="close() while %d call(s) are still running on this %s in "
                                        "other threads; wait for them first" % (self._active, self._kind))
            handle, self._handle = self._handle, None
            return handle

    def detach_for_finalizer(self):
        """detach() for a finalizer: never raises, never blocks (nobody else can be inside a call on an
        object being finalized). None when closed or inherited."""
        if self.origin.inherited:
            self._handle = None
            return None
        handle, self._handle = self._handle, None
        return handle

    def peek(self):
        return self._handle


class OwnedHandle:
    """The lifecycle Communicator and Master share: a HandleGuard in ``_guard`` (None until made), a
    ``close()`` that frees the handle, ``closed``, ``with`` closing on exit, and a finalizer that never
    raises, never blocks and never calls into C itself: it detaches the handle and hands
    ``_destroy_job(handle)`` to the janitor thread (pccl._lifetime). In a process that inherited the
    object through fork(), close() and the finalizer leave the C handle alone."""

    _guard = None

    @property
    def closed(self):
        """True after :meth:`close`."""
        return self._guard is None or self._guard.closed

    def __exit__(self, *exc):
        self.close()
        return False

    def _destroy_job(self, handle):
        """A callable freeing `handle` (and what belongs to it) that holds no reference to self."""
        raise NotImplementedError

    def __del__(self):
        guard = self._guard
        if guard is None:
            return
        try:
            handle = guard.detach_for_finalizer()
            if handle is not None:
                _lifetime.defer(self._destroy_job(handle))
        except Exception:  # noqa: BLE001 - never raise from a finalizer (e.g. at interpreter exit)
            pass
