"""The exceptions of the torch.distributed backend (pccl.torch): each pccl error class, also a RuntimeError.

torch code catches RuntimeError from collectives (gloo and NCCL raise it); pccl code catches
pccl.PcclError and its subclasses and reads ``.retryable``. An error of the backend is an instance of
both: ``pccl._torch_errors.PeerLostError`` subclasses ``pccl.PeerLostError`` and ``RuntimeError``, so
``except pccl.PeerLostError``, ``except pccl.PcclError`` and ``except RuntimeError`` all catch it. Its
message starts with the C name of the code (``"pcclPeerLost (peer lost): ..."``).
"""

from . import errors as _errors
from ._lib import Result


def c_name(code):
    """The pcclResult_t enumerator of a code: Result.PEER_LOST -> "pcclPeerLost"."""
    try:
        words = Result(int(code)).name.split("_")
    except ValueError:
        return "pcclResult(%d)" % int(code)
    return "pccl" + "".join(w.capitalize() for w in words)


class _TorchMixin:
    """str(): "<pcclName> (<error string>): <detail>"."""

    def __str__(self):
        return "%s (%s)%s" % (c_name(self.code), self.name, ": " + self.detail if self.detail else "")


_BY_BASE = {}


def _define(base):
    cls = type(base.__name__, (_TorchMixin, base, RuntimeError), {
        "__module__": __name__,
        "__doc__": "%s raised by the torch.distributed backend (also a RuntimeError)." % base.__name__})
    globals()[base.__name__] = cls  # picklable by name (PcclError.__reduce__ rebuilds type(self))
    _BY_BASE[base] = cls
    return cls


for _base in (_errors.PcclError, _errors.InvalidArgumentError, _errors.InvalidUsageError,
              _errors.MasterUnreachableError, _errors.AuthFailedError, _errors.VersionMismatchError,
              _errors.PeerLostError, _errors.TooFewPeersError, _errors.PcclTimeoutError, _errors.WaitTimeoutError,
              _errors.MismatchError, _errors.KickedError, _errors.UnsupportedError, _errors.PcclSystemError,
              _errors.InternalError, _errors.ProtocolError, _errors.TopologyChangedError,
              _errors.LibraryNotFoundError):
    _define(_base)


def torch_error(error):
    """The backend's form of a pccl exception (the same code, name and detail; also a RuntimeError).
    Anything that is not a PcclError, or is already a backend error, is returned as it is."""
    if isinstance(error, _TorchMixin) or not isinstance(error, _errors.PcclError):
        return error
    cls = _BY_BASE.get(type(error))
    if cls is None:
        cls = next((c for b, c in _BY_BASE.items() if b is not _errors.PcclError and isinstance(error, b)),
                   _BY_BASE[_errors.PcclError])
    if cls.__name__ == "LibraryNotFoundError":
        wrapped = cls(error.detail)
    else:
        wrapped = cls(error.code, error.detail, error.name)
    wrapped.__cause__ = error.__cause__
    return wrapped


def invalid(detail):
    """An InvalidArgumentError of the backend (a ValueError and a RuntimeError)."""
    return globals()["InvalidArgumentError"](detail=detail)


def unsupported(detail):
    """An UnsupportedError of the backend (a NotImplementedError and a RuntimeError)."""
    return globals()["UnsupportedError"](detail=detail)


def usage(detail):
    """An InvalidUsageError of the backend."""
    return globals()["InvalidUsageError"](detail=detail)
