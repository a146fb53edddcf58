"""ctypes declarations of the pccl C API (include/pccl/pccl.h): library lookup, enums, struct mirrors,
and the argtypes/restype of every function.

Nothing here is public API; use the classes of the ``pccl`` package. The library is loaded lazily, on
the first call of :func:`lib`, so ``import pccl`` works even where libpccl is missing.
"""

import ctypes
import ctypes.util
import enum
import glob
import os
import threading

# The C API version this package was written against (include/pccl/version.h, PCCL_CONFIG_VERSION).
# The struct layouts below are those of config version 2; a library of another major.minor version
# may lay them out differently, so load() refuses it.
EXPECTED_VERSION = (0, 1)
CONFIG_VERSION = 2
MAX_REGION_LEN = 64  # PCCL_MAX_REGION_LEN
DEFAULT_SONAME = "libpccl.so.0.1"

# ---- enums (pcclResult_t, pcclDataType_t, ...) ------------------------------------------------------


class Result(enum.IntEnum):
    """pcclResult_t."""

    SUCCESS = 0
    INVALID_ARGUMENT = 1
    INVALID_USAGE = 2
    MASTER_UNREACHABLE = 3
    AUTH_FAILED = 4
    VERSION_MISMATCH = 5
    PEER_LOST = 6
    TOO_FEW_PEERS = 7
    TIMEOUT = 8
    MISMATCH = 9
    KICKED = 10
    UNSUPPORTED = 11
    SYSTEM_ERROR = 12
    INTERNAL_ERROR = 13
    PROTOCOL_ERROR = 14
    TOPOLOGY_CHANGED = 15


class DataType(enum.IntEnum):
    """pcclDataType_t."""

    INT8 = 0
    UINT8 = 1
    INT16 = 2
    UINT16 = 3
    INT32 = 4
    UINT32 = 5
    INT64 = 6
    UINT64 = 7
    FLOAT16 = 8
    BFLOAT16 = 9
    FLOAT32 = 10
    FLOAT64 = 11


# Element sizes in bytes, by DataType.
DTYPE_SIZES = {
    DataType.INT8: 1, DataType.UINT8: 1, DataType.INT16: 2, DataType.UINT16: 2,
    DataType.INT32: 4, DataType.UINT32: 4, DataType.INT64: 8, DataType.UINT64: 8,
    DataType.FLOAT16: 2, DataType.BFLOAT16: 2, DataType.FLOAT32: 4, DataType.FLOAT64: 8,
}


class RedOp(enum.IntEnum):
    """pcclRedOp_t."""

    SUM = 0
    AVG = 1
    PROD = 2
    MIN = 3
    MAX = 4


class Quant(enum.IntEnum):
    """pcclQuant_t."""

    NONE = 0
    FP16 = 1
    BF16 = 2
    INT8 = 3
    FP4 = 4


class BufferLocation(enum.IntEnum):
    """pcclBufferLocation_t."""

    HOST = 0
    DEVICE = 1


class Attribute(enum.IntEnum):
    """pcclAttribute_t."""

    WORLD_SIZE = 0
    RANK = 1
    GROUP_WORLD_SIZE = 2
    GROUP_RANK = 3
    EPOCH = 4
    PEER_GROUP = 5
    LISTEN_PORT = 6
    RING_CONNECTIONS = 7
    CIPHER = 8
    HIERARCHICAL = 9


class SyncStrategy(enum.IntEnum):
    """pcclSyncStrategy_t."""

    ENFORCE_POPULAR = 0
    RECEIVE_ONLY = 1
    SEND_ONLY = 2


# ---- struct mirrors ---------------------------------------------------------------------------------

u32 = ctypes.c_uint32
u64 = ctypes.c_uint64
c_enum = ctypes.c_int  # C enums are int-sized on every ABI pccl supports


class CommConfig(ctypes.Structure):
    """pcclCommConfig_t. Make it with :func:`comm_config_init` (PCCL_COMM_CONFIG_INIT)."""

    _fields_ = [
        ("struct_size", u32),
        ("config_version", u32),
        ("master_address", ctypes.c_char_p),
        ("listen_address", ctypes.c_char_p),
        ("advertise_host", ctypes.c_char_p),
        ("peer_group", u32),
        ("connections_per_peer", u32),
        ("heartbeat_interval_ms", u32),
        ("peer_timeout_ms", u32),
        ("connect_timeout_ms", u32),
        ("handshake_timeout_ms", u32),
        ("secret", ctypes.c_void_p),
        ("secret_len", ctypes.c_size_t),
        ("encrypt", ctypes.c_int),
        ("op_timeout_ms", u32),
        ("segment_bytes", u32),
        ("same_host_connections", u32),
        ("max_concurrent_ops", u32),
        ("master_reconnect_ms", ctypes.c_int64),
        ("region", ctypes.c_char_p),
        ("algorithm", ctypes.c_char_p),
        ("gather_bytes", ctypes.c_int64),
        ("inbound", ctypes.c_int32),
    ]


class ReduceOptions(ctypes.Structure):
    """pcclReduceOptions_t. Make it with :func:`reduce_options_init` (PCCL_REDUCE_OPTIONS_INIT)."""

    _fields_ = [
        ("struct_size", u32),
        ("tag", u64),
        ("quant", c_enum),
        ("compress", ctypes.c_int),
        ("location", c_enum),
    ]


class ReduceInfo(ctypes.Structure):
    """pcclReduceInfo_t."""

    _fields_ = [
        ("tx_bytes", u64),
        ("rx_bytes", u64),
        ("world_size", u32),
        ("time_s", ctypes.c_double),
    ]


class TensorInfo(ctypes.Structure):
    """pcclTensorInfo_t."""

    _fields_ = [
        ("name", ctypes.c_char_p),
        ("dtype", c_enum),
        ("count", ctypes.c_size_t),
        ("data", ctypes.c_void_p),
    ]


class SharedStateC(ctypes.Structure):
    """pcclSharedState_t. Make it with :func:`shared_state_init` (PCCL_SHARED_STATE_INIT)."""

    _fields_ = [
        ("struct_size", u32),
        ("revision", u64),
        ("count", ctypes.c_size_t),
        ("infos", ctypes.POINTER(TensorInfo)),
        ("compress", ctypes.c_int),
    ]


class SyncInfo(ctypes.Structure):
    """pcclSyncInfo_t."""

    _fields_ = [
        ("tx_bytes", u64),
        ("rx_bytes", u64),
        ("keys_received", u32),
        ("revision", u64),
        ("time_s", ctypes.c_double),
    ]


class MasterConfig(ctypes.Structure):
    """pcclMasterConfig_t. Make it with :func:`master_config_init` (PCCL_MASTER_CONFIG_INIT)."""

    _fields_ = [
        ("struct_size", u32),
        ("config_version", u32),
        ("listen_address", ctypes.c_char_p),
        ("secret", ctypes.c_void_p),
        ("secret_len", ctypes.c_size_t),
        ("heartbeat_interval_ms", u32),
        ("peer_timeout_ms", u32),
        ("handshake_timeout_ms", u32),
        ("max_peers", u32),
        ("max_pending_handshakes", u32),
        ("max_concurrent_ops", u32),
        ("encrypt", ctypes.c_int),
        ("announce_window_ms", u32),
        ("probe_budget_ms", u32),
        ("probe_bytes", u64),
        ("auto_optimize", ctypes.c_int),
        ("standby", ctypes.c_int),
        ("rebuild_window_ms", u32),
        ("state_file", ctypes.c_char_p),
        ("etcd_url", ctypes.c_char_p),
        ("etcd_prefix", ctypes.c_char_p),
        ("etcd_lease_ms", u32),
        ("advertise_address", ctypes.c_char_p),
    ]


class CommStats(ctypes.Structure):
    """pcclCommStats_t. Make it with :func:`comm_stats_init` (PCCL_COMM_STATS_INIT)."""

    _fields_ = [
        ("struct_size", u32),
        ("allreduce_ops", u64),
        ("allreduce_aborts", u64),
        ("allreduce_retries", u64),
        ("sync_ops", u64),
        ("sync_aborts", u64),
        ("topology_updates", u64),
        ("tx_bytes", u64),
        ("rx_bytes", u64),
        ("epoch", u64),
        ("last_allreduce_time_s", ctypes.c_double),
        ("last_allreduce_bytes_per_s", ctypes.c_double),
        ("same_host_read_bytes", u64),
        ("master_losses", u64),
        ("master_returns", u64),
        ("master_away_ms", u64),
        ("ring_reconnects", u64),
        ("ring_resent_bytes", u64),
        ("ring_stalled_ms", u64),
        ("ring_active_connections", u64),
        ("ring_connection_changes", u64),
        ("relayed_bytes", u64),
    ]


class MasterStats(ctypes.Structure):
    """pcclMasterStats_t. Make it with :func:`master_stats_init` (PCCL_MASTER_STATS_INIT)."""

    _fields_ = [
        ("struct_size", u32),
        ("accepted", u32),
        ("pending", u32),
        ("building", ctypes.c_int),
        ("epoch", u64),
        ("connections", u64),
        ("collectives", u64),
        ("measuring", ctypes.c_int),
        ("topology_surveys", u64),
        ("links_measured", u64),
        ("links_known", u64),
        ("predicted_bottleneck", ctypes.c_double),
        ("join_order_bottleneck", ctypes.c_double),
        ("role", ctypes.c_int),
        ("term", u64),
        ("takeovers", u64),
        ("step_downs", u64),
        ("unreachable", u32),
    ]


class Link(ctypes.Structure):
    """pcclLink_t: a link the master measured (pcclGetLinks)."""

    _fields_ = [
        ("from_rank", u32),
        ("to_rank", u32),
        ("bandwidth", ctypes.c_double),
        ("rtt_s", ctypes.c_double),
    ]


# Every struct mirrored here, by its C name (the struct-size test compares them with a C program).
STRUCTS = {
    "pcclCommConfig_t": CommConfig,
    "pcclReduceOptions_t": ReduceOptions,
    "pcclReduceInfo_t": ReduceInfo,
    "pcclTensorInfo_t": TensorInfo,
    "pcclSharedState_t": SharedStateC,
    "pcclSyncInfo_t": SyncInfo,
    "pcclMasterConfig_t": MasterConfig,
    "pcclCommStats_t": CommStats,
    "pcclMasterStats_t": MasterStats,
    "pcclLink_t": Link,
}

# ---- the _INIT macros -------------------------------------------------------------------------------


def comm_config_init():
    """PCCL_COMM_CONFIG_INIT."""
    return CommConfig(ctypes.sizeof(CommConfig), CONFIG_VERSION, None, None, None, 0, 0, 1000, 10000,
                      120000, 5000, None, 0, 0, 1800000, 1048576, 1, 1024, -1, None, None, -1, -1)


def reduce_options_init():
    """PCCL_REDUCE_OPTIONS_INIT."""
    return ReduceOptions(ctypes.sizeof(ReduceOptions), 0, Quant.NONE, 0, BufferLocation.HOST)


def shared_state_init():
    """PCCL_SHARED_STATE_INIT."""
    return SharedStateC(ctypes.sizeof(SharedStateC), 0, 0, None, 0)


def master_config_init():
    """PCCL_MASTER_CONFIG_INIT."""
    return MasterConfig(ctypes.sizeof(MasterConfig), CONFIG_VERSION, None, None, 0, 1000, 10000, 5000,
                        1024, 64, 4096, 0, 30000, 2000, 268435456, -1, 0, 10000, None, None, None, 5000, None)


def comm_stats_init():
    """PCCL_COMM_STATS_INIT."""
    return CommStats(ctypes.sizeof(CommStats), 0, 0, 0, 0, 0, 0, 0, 0, 0, 0.0, 0.0, 0, 0, 0, 0, 0, 0, 0)


def master_stats_init():
    """PCCL_MASTER_STATS_INIT."""
    return MasterStats(ctypes.sizeof(MasterStats), 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0.0, 0.0, 0, 0, 0, 0, 0)


# ---- function prototypes ----------------------------------------------------------------------------

comm_t = ctypes.c_void_p
master_t = ctypes.c_void_p
request_t = ctypes.c_void_p
P = ctypes.POINTER

# name: (restype, argtypes), in the order of pccl.h.
PROTOTYPES = {
    "pcclGetVersion": (c_enum, [P(ctypes.c_int)]),
    "pcclCommCreate": (c_enum, [P(CommConfig), P(comm_t)]),
    "pcclConnect": (c_enum, [comm_t]),
    "pcclUpdateTopology": (c_enum, [comm_t]),
    "pcclOptimizeTopology": (c_enum, [comm_t]),
    "pcclGetLinks": (c_enum, [comm_t, P(Link), ctypes.c_size_t, P(ctypes.c_size_t)]),
    "pcclGetRegion": (c_enum, [comm_t, u32, ctypes.c_char_p, ctypes.c_size_t, P(ctypes.c_size_t)]),
    "pcclGetInbound": (c_enum, [comm_t, u32, P(ctypes.c_int)]),
    "pcclArePeersPending": (c_enum, [comm_t, P(ctypes.c_int)]),
    "pcclGetAttribute": (c_enum, [comm_t, c_enum, P(ctypes.c_int64)]),
    "pcclGetStats": (c_enum, [comm_t, P(CommStats)]),
    "pcclAllReduce": (c_enum, [ctypes.c_void_p, ctypes.c_void_p, ctypes.c_size_t, c_enum, c_enum,
                               P(ReduceOptions), comm_t, P(ReduceInfo)]),
    "pcclAllReduceAsync": (c_enum, [ctypes.c_void_p, ctypes.c_void_p, ctypes.c_size_t, c_enum, c_enum,
                                    P(ReduceOptions), comm_t, P(request_t)]),
    "pcclBroadcast": (c_enum, [ctypes.c_void_p, ctypes.c_void_p, ctypes.c_size_t, c_enum, u32,
                               P(ReduceOptions), comm_t, P(ReduceInfo)]),
    "pcclBroadcastAsync": (c_enum, [ctypes.c_void_p, ctypes.c_void_p, ctypes.c_size_t, c_enum, u32,
                                    P(ReduceOptions), comm_t, P(request_t)]),
    "pcclAllGather": (c_enum, [ctypes.c_void_p, ctypes.c_void_p, ctypes.c_size_t, c_enum,
                               P(ReduceOptions), comm_t, P(ReduceInfo)]),
    "pcclAllGatherAsync": (c_enum, [ctypes.c_void_p, ctypes.c_void_p, ctypes.c_size_t, c_enum,
                                    P(ReduceOptions), comm_t, P(request_t)]),
    "pcclReduceScatter": (c_enum, [ctypes.c_void_p, ctypes.c_void_p, ctypes.c_size_t, c_enum, c_enum,
                                   P(ReduceOptions), comm_t, P(ReduceInfo)]),
    "pcclReduceScatterAsync": (c_enum, [ctypes.c_void_p, ctypes.c_void_p, ctypes.c_size_t, c_enum, c_enum,
                                        P(ReduceOptions), comm_t, P(request_t)]),
    "pcclBarrier": (c_enum, [P(ReduceOptions), comm_t]),
    "pcclBarrierAsync": (c_enum, [P(ReduceOptions), comm_t, P(request_t)]),
    "pcclWait": (c_enum, [request_t, P(ReduceInfo)]),
    "pcclWaitFor": (c_enum, [P(request_t), u32, P(ReduceInfo)]),
    "pcclTest": (c_enum, [request_t, P(ctypes.c_int)]),
    "pcclSyncSharedState": (c_enum, [comm_t, P(SharedStateC), c_enum, P(SyncInfo)]),
    "pcclCommDestroy": (c_enum, [comm_t]),
    "pcclGetErrorString": (ctypes.c_char_p, [c_enum]),
    "pcclGetLastError": (ctypes.c_char_p, [comm_t]),
    "pcclMasterCreate": (c_enum, [P(MasterConfig), P(master_t)]),
    "pcclMasterStart": (c_enum, [master_t]),
    "pcclMasterGetPort": (c_enum, [master_t, P(ctypes.c_uint16)]),
    "pcclMasterWaitForPeers": (c_enum, [master_t, u32, u32, u32]),
    "pcclMasterGetStats": (c_enum, [master_t, P(MasterStats)]),
    "pcclMasterStop": (c_enum, [master_t]),
    "pcclMasterDestroy": (c_enum, [master_t]),
}

# ---- loading ----------------------------------------------------------------------------------------

_lock = threading.Lock()
_lib = None
_path = None
_version = None


class LibraryLoadError(OSError):
    """Raised (as pccl.LibraryNotFoundError) when libpccl cannot be found or is unusable."""


def _installed_candidates():
    """libpccl.so* of the installed tree this package sits in: the package is installed to
    <prefix>/lib/python3/dist-packages/pccl (or .../site-packages/pccl), the library to
    <prefix>/lib*/ or <prefix>/lib/<multiarch>/."""
    pkg = os.path.dirname(os.path.abspath(__file__))
    packages_dir = os.path.dirname(pkg)
    python_dir = os.path.dirname(packages_dir)
    lib_dir = os.path.dirname(python_dir)
    if os.path.basename(packages_dir) not in ("dist-packages", "site-packages"):
        return []
    if not os.path.basename(python_dir).startswith("python"):
        return []
    if not os.path.basename(lib_dir).startswith("lib"):
        return []
    prefix = os.path.dirname(lib_dir)
    found = []
    for pattern in ("lib*/libpccl.so*", "lib/*/libpccl.so*"):
        found.extend(sorted(glob.glob(os.path.join(prefix, pattern))))
    # Prefer the soname this package expects, then the unversioned link, then anything else.
    def rank(p):
        base = os.path.basename(p)
        return (0 if base == DEFAULT_SONAME else 1 if base == "libpccl.so" else 2, p)
    return sorted(set(found), key=rank)


def _package_candidates():
    """libpccl.so* inside the package directory: where ``pip install .`` puts the library it built."""
    pkg = os.path.dirname(os.path.abspath(__file__))
    found = glob.glob(os.path.join(pkg, "libpccl.so*"))
    return sorted(found, key=lambda p: (os.path.basename(p) != DEFAULT_SONAME, p))


def _candidates():
    """(description, path-or-name) pairs in lookup order; PCCL_LIBRARY alone when it is set."""
    env = os.environ.get("PCCL_LIBRARY")
    if env:
        return [("PCCL_LIBRARY", env)]
    out = [("next to the package", p) for p in _package_candidates()]
    out += [("installed tree", p) for p in _installed_candidates()]
    name = ctypes.util.find_library("pccl")
    if name:
        out.append(("ctypes.util.find_library('pccl')", name))
    out.append(("default soname", DEFAULT_SONAME))
    return out


def _declare(handle):
    for name, (restype, argtypes) in PROTOTYPES.items():
        fn = getattr(handle, name)  # AttributeError when the library lacks it: reported by load()
        fn.restype = restype
        fn.argtypes = argtypes


def load():
    """Loads libpccl once (thread-safe) and returns the ctypes.CDLL. Raises LibraryLoadError."""
    global _lib, _path, _version
    if _lib is not None:
        return _lib
    with _lock:
        if _lib is not None:
            return _lib
        tried = []
        for what, path in _candidates():
            try:
                handle = ctypes.CDLL(path)
            except OSError as e:
                tried.append("%s (%s): %s" % (path, what, e))
                continue
            try:
                _declare(handle)
            except AttributeError as e:
                tried.append("%s (%s): not a pccl C API library: %s" % (path, what, e))
                continue
            code = ctypes.c_int(0)
            if handle.pcclGetVersion(ctypes.byref(code)) != Result.SUCCESS:
                tried.append("%s (%s): pcclGetVersion failed" % (path, what))
                continue
            got = (code.value // 10000, code.value // 100 % 100, code.value % 100)
            if got[:2] != EXPECTED_VERSION:
                raise LibraryLoadError(
                    "%s is libpccl %d.%d.%d, but this Python package speaks the C API of %d.%d.x (struct "
                    "layouts differ between versions); set PCCL_LIBRARY to the path of a matching libpccl.so"
                    % ((path,) + got + EXPECTED_VERSION))
            _version, _path, _lib = got, path, handle
            return _lib
        raise LibraryLoadError(
            "cannot load libpccl; tried:\n  " + "\n  ".join(tried) +
            "\nSet the environment variable PCCL_LIBRARY to the path of libpccl.so (for a build tree: "
            "PCCL_LIBRARY=<build>/src/libpccl.so), or install pccl so that the loader finds it.")


def loaded():
    """The CDLL when already loaded, else None (never loads)."""
    return _lib


def library_path():
    """The path or name libpccl was loaded from (loads it)."""
    load()
    return _path


def library_version():
    """(major, minor, patch) of the loaded libpccl, from pcclGetVersion (loads it)."""
    load()
    return _version
