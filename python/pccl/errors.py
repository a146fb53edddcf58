"""Exceptions: one class per pcclResult_t code, all subclasses of :class:`PcclError`.

Every failing pccl call raises the subclass of its result code. The exception carries the code
(``.code``), the library's name for it (``.name``, from ``pcclGetErrorString``) and the detail the
library recorded (``.detail``, from ``pcclGetLastError``: which peer, which setting, which limit).
Errors the Python layer detects before calling into C (a non-contiguous array, an unknown op name)
raise the same classes, with a detail written here.
"""

from . import _lib
from ._lib import Result

# Names of the codes as pcclGetErrorString returns them, for when the library is not loaded.
_STATIC_NAMES = {
    Result.SUCCESS: "success",
    Result.INVALID_ARGUMENT: "invalid argument",
    Result.INVALID_USAGE: "invalid usage",
    Result.MASTER_UNREACHABLE: "master unreachable",
    Result.AUTH_FAILED: "authentication failed",
    Result.VERSION_MISMATCH: "protocol version mismatch",
    Result.PEER_LOST: "peer lost",
    Result.TOO_FEW_PEERS: "too few peers",
    Result.TIMEOUT: "timeout",
    Result.MISMATCH: "collective mismatch between peers",
    Result.KICKED: "kicked by the master",
    Result.UNSUPPORTED: "unsupported",
    Result.SYSTEM_ERROR: "system error",
    Result.INTERNAL_ERROR: "internal error",
    Result.PROTOCOL_ERROR: "protocol error",
    Result.TOPOLOGY_CHANGED: "topology changed",
}


def error_string(code):
    """pcclGetErrorString(code) when the library is loaded, else the same text from a table here."""
    lib = _lib.loaded()
    if lib is not None:
        return lib.pcclGetErrorString(int(code)).decode("utf-8", "replace")
    return _STATIC_NAMES.get(code, "unknown pcclResult_t value")


class PcclError(Exception):
    """A pccl call failed.

    Attributes:
        code (int): the pcclResult_t value.
        name (str): pcclGetErrorString(code), e.g. ``"peer lost"``.
        detail (str): pcclGetLastError() right after the failure ("" when the library gave none).
        retryable (bool): True for the codes of the abort/retry loop (peer lost, topology changed,
            timeout): call ``update_topology()`` on every peer, then retry the operation.
        fatal (bool): True when the communicator is dead (master unreachable, kicked): close it and
            create a new one to rejoin.
    """

    code = -1
    retryable = False
    fatal = False

    def __init__(self, code=None, detail="", name=None):
        if code is None:
            code = type(self).code
        self.code = int(code)
        self.name = name if name is not None else error_string(self.code)
        self.detail = detail or ""
        message = self.name + (": " + self.detail if self.detail else "")
        super().__init__(message)

    def __reduce__(self):  # picklable (e.g. across multiprocessing)
        return (_rebuild, (type(self), self.code, self.detail, self.name))


def _rebuild(cls, code, detail, name):
    return cls(code, detail, name)


class InvalidArgumentError(PcclError, ValueError):
    """pcclInvalidArgument: a NULL pointer, bad handle, out-of-range value, wrong array (fix the call)."""

    code = Result.INVALID_ARGUMENT


class InvalidUsageError(PcclError):
    """pcclInvalidUsage: a call not allowed now (not connected, closed, tag in flight, ...)."""

    code = Result.INVALID_USAGE


class MasterUnreachableError(PcclError, ConnectionError):
    """pcclMasterUnreachable: the master cannot be reached or stopped answering; the communicator is
    dead: close it and create a new one."""

    code = Result.MASTER_UNREACHABLE
    fatal = True


class AuthFailedError(PcclError, PermissionError):
    """pcclAuthFailed: wrong or missing secret, or encryption on one side only."""

    code = Result.AUTH_FAILED


class VersionMismatchError(PcclError):
    """pcclVersionMismatch: the remote speaks another protocol version."""

    code = Result.VERSION_MISMATCH


class PeerLostError(PcclError):
    """pcclPeerLost: a peer died or left; call update_topology() on every peer, then retry."""

    code = Result.PEER_LOST
    retryable = True


class TooFewPeersError(PcclError):
    """pcclTooFewPeers: reserved; no call returns it today."""

    code = Result.TOO_FEW_PEERS


class PcclTimeoutError(PcclError, TimeoutError):
    """pcclTimeout: the call's deadline passed (also an instance of the built-in TimeoutError)."""

    code = Result.TIMEOUT
    retryable = True


class WaitTimeoutError(PcclError, TimeoutError):
    """``Request.wait(timeout=...)`` gave up (pcclWaitFor's pcclTimeout with the request still valid):
    the operation has not ended and goes on; nothing was aborted. Wait again (or test) later; the
    buffers still belong to pccl. Not retryable in the abort/retry sense, and not a PcclTimeoutError
    (that one is the operation's own failure): catch TimeoutError to handle both."""

    code = Result.TIMEOUT


class MismatchError(PcclError):
    """pcclMismatch: peers call a collective differently (count, dtype, op, quant, compress,
    segment_bytes, or tags that diverge), or fetched shared-state bytes failed their digest check.
    A bug in the calls: retrying the same calls fails the same way, so it is not retryable."""

    code = Result.MISMATCH


class TopologyChangedError(PcclError):
    """pcclTopologyChanged: the ring changed or is changing under the call (a peer is in
    update_topology(), or this peer is an epoch behind); call update_topology(), then retry."""

    code = Result.TOPOLOGY_CHANGED
    retryable = True


class KickedError(PcclError):
    """pcclKicked: the master removed this peer; close the communicator and rejoin with a new one."""

    code = Result.KICKED
    fatal = True


class UnsupportedError(PcclError, NotImplementedError):
    """pcclUnsupported: not available in this build (e.g. device buffers without a GPU backend)."""

    code = Result.UNSUPPORTED


class PcclSystemError(PcclError, OSError):
    """pcclSystemError: an operating-system or network error (e.g. cannot listen or bind)."""

    code = Result.SYSTEM_ERROR


class InternalError(PcclError):
    """pcclInternalError: a bug in pccl; please report it with the detail."""

    code = Result.INTERNAL_ERROR


class ProtocolError(PcclError):
    """pcclProtocolError: the remote sent malformed or unexpected data."""

    code = Result.PROTOCOL_ERROR


class LibraryNotFoundError(PcclError, OSError):
    """libpccl could not be loaded; set PCCL_LIBRARY to its path. ``.code`` is -1."""

    code = -1

    def __init__(self, detail="", code=-1, name="library not found"):
        super().__init__(code, detail, name)

    def __reduce__(self):
        return (LibraryNotFoundError, (self.detail,))


_BY_CODE = {cls.code: cls for cls in (
    InvalidArgumentError, InvalidUsageError, MasterUnreachableError, AuthFailedError, VersionMismatchError,
    PeerLostError, TooFewPeersError, PcclTimeoutError, MismatchError, KickedError, UnsupportedError,
    PcclSystemError, InternalError, ProtocolError, TopologyChangedError)}


def error_class(code):
    """The exception class of a pcclResult_t value (PcclError for an unknown one)."""
    return _BY_CODE.get(int(code), PcclError)


def make_error(code, detail=""):
    """An exception instance for `code` with `detail`."""
    return error_class(code)(code, detail)


def last_error(comm_handle=None):
    """pcclGetLastError(comm_handle) as str (comm_handle None: this thread's last failure)."""
    lib = _lib.loaded()
    if lib is None:
        return ""
    raw = lib.pcclGetLastError(comm_handle)
    return raw.decode("utf-8", "replace") if raw else ""


def check(result, comm_handle=None):
    """Raises the exception of a pcclResult_t value unless it is pcclSuccess. The detail is read at once
    with pcclGetLastError(comm_handle) (the caller passes None for calls without a communicator)."""
    if result == Result.SUCCESS:
        return
    raise make_error(result, last_error(comm_handle))


def load_library():
    """Loads libpccl (see pccl._lib.load), turning a failure into LibraryNotFoundError."""
    try:
        return _lib.load()
    except _lib.LibraryLoadError as e:
        raise LibraryNotFoundError(str(e)) from None
