"""pccl: fault-tolerant all-reduce over wide-area networks, from Python.

A thin ctypes layer over the C API (include/pccl/pccl.h); no compiled extension. The library
(libpccl.so) is loaded on first use, looked up in this order:

1. the environment variable ``PCCL_LIBRARY`` (a path);
2. a ``libpccl.so*`` in this package's directory (``pip install .`` puts it there);
3. a ``libpccl.so*`` of the installed tree this package sits in (``<prefix>/lib*/`` and
   ``<prefix>/lib/<multiarch>/`` for a package in ``<prefix>/lib/python3/dist-packages/pccl``);
4. ``ctypes.util.find_library("pccl")``;
5. ``libpccl.so.0.1`` through the dynamic loader's search path.

When none loads, the first use raises :class:`LibraryNotFoundError` (a PcclError and an OSError) saying
how to set PCCL_LIBRARY; ``import pccl`` itself never fails for that reason. numpy and torch are
optional: arrays and tensors are recognised without importing either.

Quick start::

    import numpy as np, pccl
    with pccl.Master() as master:                       # or run pccl-master elsewhere
        with pccl.Communicator(master.address, listen_address="127.0.0.1:0") as comm:
            comm.connect()
            x = np.ones(1024, dtype=np.float32)
            comm.all_reduce(x, op="sum")                 # in place; x == world size

See docs/python.md.
"""

from ._lib import Attribute, BufferLocation, DataType, Quant, RedOp, Result, SyncStrategy
from .communicator import Communicator, Request
from .errors import (AuthFailedError, InternalError, InvalidArgumentError, InvalidUsageError, KickedError,
                     LibraryNotFoundError, MasterUnreachableError, MismatchError, PcclError, PcclSystemError,
                     PcclTimeoutError, PeerLostError, ProtocolError, TooFewPeersError, TopologyChangedError,
                     UnsupportedError, VersionMismatchError, WaitTimeoutError, error_class, error_string)
from .master import Master
from .types import CommStats, ReduceInfo, SharedState, SyncInfo

# The version of this package; it speaks the C API of the same major.minor version (checked against
# the library's pcclGetVersion on load). pccl.version() is the loaded library's version.
__version__ = "0.1.0"

# The exceptions of the abort/retry loop: update_topology() on every peer, then retry.
RETRYABLE_ERRORS = (PeerLostError, TopologyChangedError, PcclTimeoutError)


def version_info():
    """(major, minor, patch) of the loaded libpccl, from pcclGetVersion (loads the library).

    Raises LibraryNotFoundError when libpccl cannot be loaded or its major.minor differs from this
    package's."""
    from . import _lib, errors

    errors.load_library()
    return _lib.library_version()


def version():
    """The loaded libpccl's version as ``"MAJOR.MINOR.PATCH"`` (pcclGetVersion). See version_info()."""
    return "%d.%d.%d" % version_info()


def library_path():
    """The path (or name) libpccl was loaded from (loads it; LibraryNotFoundError when it cannot)."""
    from . import _lib, errors

    errors.load_library()
    return _lib.library_path()


def __getattr__(name):
    """``pccl.diloco`` (DiLoCo for torch models) is imported on first use: it needs torch, which
    ``import pccl`` never imports."""
    if name == "diloco":
        import importlib  # noqa: PLC0415

        return importlib.import_module(".diloco", __name__)
    raise AttributeError("module 'pccl' has no attribute %r" % (name,))


__all__ = [
    "Attribute", "AuthFailedError", "BufferLocation", "CommStats", "Communicator", "DataType", "InternalError",
    "InvalidArgumentError", "InvalidUsageError", "KickedError", "LibraryNotFoundError", "Master",
    "MasterUnreachableError", "MismatchError", "PcclError", "PcclSystemError", "PcclTimeoutError",
    "PeerLostError", "ProtocolError", "Quant", "RETRYABLE_ERRORS", "RedOp", "ReduceInfo", "Request", "Result",
    "SharedState", "SyncInfo", "SyncStrategy", "TooFewPeersError", "TopologyChangedError", "UnsupportedError",
    "VersionMismatchError", "WaitTimeoutError", "error_class", "error_string", "library_path", "version", "version_info", "__version__",
]
