"""pccl.Master: an embedded master (the control plane of a run), over pcclMaster*."""

import ctypes
import math

from . import _common, _lifetime
from ._lib import master_config_init, master_stats_init
from .errors import InvalidArgumentError, check, load_library


class Master(_common.OwnedHandle):
    """A master embedded in this process; the same as the ``pccl-master`` program.

    ``Master(...)`` validates the configuration (pcclMasterCreate) without binding; :meth:`start` binds
    and serves on a background thread. Used as a context manager it starts on entry (unless started)
    and is closed on exit.

    Arguments (None keeps the C default of PCCL_MASTER_CONFIG_INIT):
        listen: ``"HOST:PORT"`` or ``(host, port)`` to listen on; port 0 picks a free port (read it
            from :attr:`port`). Default ``"127.0.0.1:0"`` (the C default is ``"0.0.0.0:0"``: pass that to
            accept peers from other machines).
        secret: shared secret (str or bytes); None = an open run (the master logs a warning). Peers
            must use the same secret.
        encrypt: True: every connection is encrypted (needs a secret; every peer must set it too).
        heartbeat_interval_ms, peer_timeout_ms, handshake_timeout_ms, max_peers,
        max_pending_handshakes, max_concurrent_ops, announce_window_ms, probe_budget_ms, probe_bytes:
            the pcclMasterConfig_t fields (docs/c_api.md).
        auto_optimize: True: every update_topology() measures the links the master lacks (a joiner's)
            and installs the best ring; None: PCCL_AUTO_OPTIMIZE (0/1), else off.
        standby, rebuild_window_ms, state_file, etcd_url, etcd_prefix, etcd_lease_ms, advertise_address:
            surviving the master (docs/failover.md): the pcclMasterConfig_t fields of the same names.

    Raises InvalidArgumentError (a bad setting, encrypt without a secret; ``.detail`` names it) and
    LibraryNotFoundError (libpccl not found).

    Thread-safety: every method may be called from any thread, as in the C API; :meth:`close` raises
    InvalidUsageError instead of freeing the master while another thread is inside one of its calls.
    """

    def __init__(self, listen="127.0.0.1:0", secret=None, encrypt=False, heartbeat_interval_ms=None,
                 peer_timeout_ms=None, handshake_timeout_ms=None, max_peers=None, max_pending_handshakes=None,
                 max_concurrent_ops=None, announce_window_ms=None, probe_budget_ms=None, probe_bytes=None,
                 auto_optimize=None, standby=None, rebuild_window_ms=None, state_file=None, etcd_url=None,
                 etcd_prefix=None, etcd_lease_ms=None, advertise_address=None):
        self._guard = None
        lib = load_library()
        listen_b = _common.address(listen, "listen") if listen is not None else None
        cfg = master_config_init()
        cfg.listen_address = listen_b
        secret_buf = _common.set_credentials(cfg, secret, encrypt)
        _common.set_fields(cfg, {
            "heartbeat_interval_ms": _common.u32(heartbeat_interval_ms, "heartbeat_interval_ms"),
            "peer_timeout_ms": _common.u32(peer_timeout_ms, "peer_timeout_ms"),
            "handshake_timeout_ms": _common.u32(handshake_timeout_ms, "handshake_timeout_ms"),
            "max_peers": _common.u32(max_peers, "max_peers"),
            "max_pending_handshakes": _common.u32(max_pending_handshakes, "max_pending_handshakes"),
            "max_concurrent_ops": _common.u32(max_concurrent_ops, "max_concurrent_ops"),
            "announce_window_ms": _common.u32(announce_window_ms, "announce_window_ms"),
            "probe_budget_ms": _common.u32(probe_budget_ms, "probe_budget_ms"),
            "probe_bytes": None if probe_bytes is None else _common.int_in(probe_bytes, 1, 2**64 - 1, "probe_bytes"),
        })
        _common.set_fields(cfg, {
            "rebuild_window_ms": _common.u32(rebuild_window_ms, "rebuild_window_ms"),
            "etcd_lease_ms": _common.u32(etcd_lease_ms, "etcd_lease_ms"),
            "state_file": _common.to_bytes_or_none(state_file, "state_file"),
            "etcd_url": _common.to_bytes_or_none(etcd_url, "etcd_url"),
            "etcd_prefix": _common.to_bytes_or_none(etcd_prefix, "etcd_prefix"),
            "advertise_address": _common.to_bytes_or_none(advertise_address, "advertise_address"),
        })
        if standby is not None:
            if not isinstance(standby, bool):
                raise InvalidArgumentError(detail="standby must be True, False or None, got %r" % (standby,))
            cfg.standby = 1 if standby else 0
        if auto_optimize is not None:
            if not isinstance(auto_optimize, bool):
                raise InvalidArgumentError(detail="auto_optimize must be True, False or None, got %r" % (auto_optimize,))
            cfg.auto_optimize = 1 if auto_optimize else 0
        handle = ctypes.c_void_p()
        check(lib.pcclMasterCreate(ctypes.byref(cfg), ctypes.byref(handle)))  # pccl copied what cfg points to
        del secret_buf
        self._lib = lib
        self._listen = listen_b.decode() if listen_b else "0.0.0.0:0"
        self._started = False
        self._guard = _common.HandleGuard(handle.value, "master")
        _lifetime.start_janitor()  # the finalizer hands pcclMasterDestroy to it

    def start(self):
        """Binds the listen address and serves on a background thread; returns at once.

        Raises PcclSystemError (cannot bind, e.g. the port is in use), InvalidUsageError (already
        started, or closed)."""
        with self._guard as h:
            check(self._lib.pcclMasterStart(h))
            self._started = True
        return self

    @property
    def port(self):
        """The bound port (useful with port 0). Never blocks. InvalidUsageError before :meth:`start`."""
        with self._guard as h:
            port = ctypes.c_uint16()
            check(self._lib.pcclMasterGetPort(h, ctypes.byref(port)))
            return port.value

    @property
    def address(self):
        """``"HOST:PORT"`` peers of this machine can connect to: the listen host (127.0.0.1 for a wildcard
        listen address) and the bound :attr:`port`."""
        host = self._listen.rsplit(":", 1)[0]
        if host in ("0.0.0.0", ""):
            host = "127.0.0.1"
        elif host in ("[::]", "::"):
            host = "[::1]"
        return "%s:%d" % (host, self.port)

    def wait_for_peers(self, accepted, pending=0, timeout_s=30.0):
        """Blocks until at least `accepted` peers are in the ring and at least `pending` peers wait for
        admission, or `timeout_s` seconds pass. The GIL is released while it waits.

        Raises PcclTimeoutError (its detail gives the counts reached), InvalidUsageError (closed)."""
        accepted = _common.int_in(accepted, 0, _common.U32_MAX, "accepted")
        pending = _common.int_in(pending, 0, _common.U32_MAX, "pending")
        if not isinstance(timeout_s, (int, float)) or math.isnan(timeout_s) or timeout_s < 0:
            raise InvalidArgumentError(detail="timeout_s must be a number >= 0, got %r" % (timeout_s,))
        timeout_ms = min(int(math.ceil(timeout_s * 1000.0)), _common.U32_MAX)
        with self._guard as h:
            check(self._lib.pcclMasterWaitForPeers(h, accepted, pending, timeout_ms))

    def stats(self):
        """A snapshot of the run as a dict (pcclMasterStats_t): accepted, pending, building (bool), epoch,
        connections, collectives, measuring (bool), topology_surveys, links_measured, links_known,
        predicted_bottleneck and join_order_bottleneck (bytes/s; 0: not measured), role ("leader",
        "standby", "recovering" or "follower"), term, takeovers, step_downs and unreachable (members
        whose ring port the master could not dial when they joined: behind a firewall or NAT). Never
        blocks; any thread. Raises InvalidUsageError (closed)."""
        s = master_stats_init()
        with self._guard as h:
            check(self._lib.pcclMasterGetStats(h, ctypes.byref(s)))
        return {"accepted": s.accepted, "pending": s.pending, "building": bool(s.building), "epoch": s.epoch,
                "connections": s.connections, "collectives": s.collectives, "measuring": bool(s.measuring),
                "topology_surveys": s.topology_surveys, "links_measured": s.links_measured,
                "links_known": s.links_known, "predicted_bottleneck": s.predicted_bottleneck,
                "join_order_bottleneck": s.join_order_bottleneck,
                "role": ("leader", "standby", "recovering", "follower")[s.role] if 0 <= s.role <= 3 else s.role,
                "term": s.term, "takeovers": s.takeovers, "step_downs": s.step_downs, "unreachable": s.unreachable}

    def stop(self):
        """Closes every connection (peers then see MasterUnreachableError) and joins the serving thread;
        blocks until it has stopped. Idempotent; a no-op after :meth:`close`."""
        if self._guard is None or self._guard.closed:
            return
        with self._guard as h:
            check(self._lib.pcclMasterStop(h))

    def close(self):
        """Stops (if running) and frees the master (pcclMasterDestroy). Idempotent.

        Raises InvalidUsageError while another thread is inside a call on this master. In a child process
        that inherited the master through fork() it only marks it closed (the C handle is the parent's)."""
        if self._guard is None:
            return
        handle = self._guard.detach()
        if handle is not None:
            check(self._lib.pcclMasterDestroy(handle))

    def _destroy_job(self, handle):
        lib = self._lib
        return lambda: lib.pcclMasterDestroy(handle)

    def __enter__(self):
        if not self._started:
            self.start()
        return self

    def __repr__(self):
        if self.closed:
            return "<pccl.Master closed>"
        return "<pccl.Master listen=%s started=%s>" % (self._listen, self._started)
