"""pccl.Communicator: one peer's membership in a run and its collectives, over pcclComm*. The
asynchronous collectives return a pccl.Request (pccl._requests)."""

import ctypes

from . import _common, _lifetime
from ._buffers import as_buffer, bump_versions, host_buffer, reduce_buffers
from ._lib import (MAX_REGION_LEN, Attribute, BufferLocation, SyncStrategy, TensorInfo, comm_config_init,
                   comm_stats_init, reduce_options_init, shared_state_init)
from ._lib import Link, ReduceInfo as _CReduceInfo
from ._lib import SyncInfo as _CSyncInfo
from ._requests import OpTable, Request, _Op
from ._requests import reduce_info as _reduce_info
from .errors import InvalidArgumentError, check, load_library
from .types import CommStats, ReduceInfo, SharedState, SyncInfo

_CIPHERS = {0: "none", 1: "ChaCha20-Poly1305", 2: "AES-256-GCM"}


def _sync_device(buf):
    """pccl works on its own GPU stream: what wrote a CUDA tensor on torch's current stream must have
    finished before the call (docs/concurrency.md rule 8)."""
    if buf.location == BufferLocation.DEVICE and buf.kind == "torch":
        import torch  # noqa: PLC0415 - only reached with a torch tensor in hand

        torch.cuda.current_stream(buf.owner.device).synchronize()


class Communicator(_common.OwnedHandle):
    """One peer of a pccl run (pcclComm_t).

    ``Communicator(master_address, ...)`` validates the configuration, opens the ring listener and
    starts the communicator's io thread (pcclCommCreate); it does not contact the master. Call
    :meth:`connect` to join. Close it with :meth:`close` (or use it as a context manager).

    Arguments (None keeps the C default of PCCL_COMM_CONFIG_INIT; see docs/c_api.md):
        master_address: ``"HOST:PORT"`` (IPv6 as ``"[::1]:PORT"``) or ``(host, port)``, or the run's
            masters as ``"HOST:PORT,HOST:PORT"`` (tried in turn; docs/concepts.md "When the master dies").
        listen_address: where ring neighbours connect (default ``"0.0.0.0:0"``, any port).
        peer_group: collectives run within a group (default 0).
        connections_per_peer: K TCP connections to the ring successor; 0 (the default): each link opens
            PCCL_MAX_CONNECTIONS (default 32), starts from its round trip and uses as many as pay.
        secret: shared secret (str or bytes); None = PCCL_SECRET / PCCL_SECRET_FILE, else an open run.
        encrypt: True encrypts every connection (needs a secret; master and peers must agree); False
            lets the environment variable PCCL_ENCRYPT decide.
        advertise_host, heartbeat_interval_ms, peer_timeout_ms, connect_timeout_ms,
        handshake_timeout_ms, op_timeout_ms, segment_bytes, same_host_connections,
        max_concurrent_ops, master_reconnect_ms: the pcclCommConfig_t fields of the same names
        (master_reconnect_ms: how long a peer that lost its master looks for one while its ring goes on;
        0 = never, -1 = PCCL_RECONNECT_MS else 30000).
        region: the region this peer is in (str, at most 64 bytes of ``[A-Za-z0-9._-]``, not starting
            with ``auto-``); None = PCCL_REGION, else none declared: the master places the peer from the
            measured links (docs/algorithms.md "Regions"). :meth:`regions` reads every member's.
        algorithm: how the group's all-reduces run when its peers sit in several regions: ``"flat"``,
            ``"hierarchical"`` (inside each region, then across regions) or ``"auto"`` (the master's cost
            model); None = PCCL_ALGORITHM, else ``"auto"``. The master decides for the whole group
            (docs/algorithms.md §12); :attr:`hierarchical` says what it decided.
        gather_bytes: small all-reduces gather (2 hops instead of 2(N-1), for (N-1) instead of
            2(N-1)/N times their bytes) when (group size - 1) x their wire bytes is at most this; 0 =
            never (every all-reduce on the ring: the fewest bytes, e.g. for Streaming DiLoCo's fragments),
            at most 4194304; every peer must use the same value; None or -1 = PCCL_GATHER_BYTES, else 1 MiB
            across hosts and 256 KiB on one host (docs/algorithms.md §1).
        inbound: whether other peers can open connections to this peer's ring port: False behind a
            firewall or a NAT (its links are then opened from this side and the master does not dial it
            back); None = PCCL_INBOUND, else True (the master's dial-back on join decides;
            docs/concepts.md "Reachability"). :meth:`inbound_of` reports what the ring decided.

    Raises InvalidArgumentError (a bad setting; ``.detail`` names it), PcclSystemError (cannot listen),
    LibraryNotFoundError.

    Thread-safety (the C API's rules, docs/concurrency.md): different communicators are independent.
    On one communicator, :meth:`connect` and :meth:`update_topology` must not overlap (the second gets
    InvalidUsageError); all-reduces may run at once from several threads when their tags differ;
    attributes, :meth:`are_peers_pending` and :meth:`stats` work from any thread at any time.
    :meth:`close` raises InvalidUsageError while another thread is inside a call on the communicator
    (the C API would leave only when that call returns). Every blocking call releases the GIL and has a
    deadline.
    """

    def __init__(self, master_address, listen_address="0.0.0.0:0", peer_group=0, connections_per_peer=0,
                 secret=None, encrypt=False, advertise_host=None, heartbeat_interval_ms=None,
                 peer_timeout_ms=None, connect_timeout_ms=None, handshake_timeout_ms=None, op_timeout_ms=None,
                 segment_bytes=None, same_host_connections=None, max_concurrent_ops=None,
                 master_reconnect_ms=None, region=None, algorithm=None, gather_bytes=None,
                 inbound=None):
        self._guard = None
        lib = load_library()
        cfg = comm_config_init()
        cfg.master_address = _common.address(master_address, "master_address")
        if listen_address is not None:
            cfg.listen_address = _common.address(listen_address, "listen_address")
        if advertise_host is not None:
            cfg.advertise_host = _common.to_bytes_or_none(advertise_host, "advertise_host")
        secret_buf = _common.set_credentials(cfg, secret, encrypt)
        _common.set_fields(cfg, {name: _common.u32(value, name) for name, value in (
            ("peer_group", peer_group), ("connections_per_peer", connections_per_peer),
            ("heartbeat_interval_ms", heartbeat_interval_ms), ("peer_timeout_ms", peer_timeout_ms),
            ("connect_timeout_ms", connect_timeout_ms), ("handshake_timeout_ms", handshake_timeout_ms),
            ("op_timeout_ms", op_timeout_ms), ("segment_bytes", segment_bytes),
            ("same_host_connections", same_host_connections), ("max_concurrent_ops", max_concurrent_ops))})
        if master_reconnect_ms is not None:
            if isinstance(master_reconnect_ms, bool) or not isinstance(master_reconnect_ms, int) or \
                    not -1 <= master_reconnect_ms <= 86400000:
                raise InvalidArgumentError(
                    detail="master_reconnect_ms must be an int in -1..86400000, got %r" % (master_reconnect_ms,))
            cfg.master_reconnect_ms = master_reconnect_ms
        if region is not None:
            if not isinstance(region, str) or "\0" in region:
                raise InvalidArgumentError(detail="region must be a str without NUL characters, got %r" % (region,))
            cfg.region = region.encode("utf-8")  # pcclCommCreate checks the name itself
        if gather_bytes is not None:  # pcclCommCreate checks the range itself
            if isinstance(gather_bytes, bool) or not isinstance(gather_bytes, int) or not -1 <= gather_bytes < 2 ** 63:
                raise InvalidArgumentError(detail="gather_bytes must be an int >= -1, got %r" % (gather_bytes,))
            cfg.gather_bytes = gather_bytes
        if inbound is not None:
            if not isinstance(inbound, bool):
                raise InvalidArgumentError(detail="inbound must be True, False or None, got %r" % (inbound,))
            cfg.inbound = 1 if inbound else 0
        if algorithm is not None:
            if algorithm not in ("flat", "hierarchical", "auto"):
                raise InvalidArgumentError(
                    detail="algorithm must be 'flat', 'hierarchical' or 'auto', got %r" % (algorithm,))
            cfg.algorithm = algorithm.encode("ascii")
        handle = ctypes.c_void_p()
        check(lib.pcclCommCreate(ctypes.byref(cfg), ctypes.byref(handle)))  # detail: pcclGetLastError(NULL)
        del secret_buf  # pccl copied everything cfg points to
        self._lib = lib
        self._master_address = cfg.master_address.decode()
        self._ops = OpTable(lib)  # the operations whose C request is not freed yet (pccl._requests)
        self._guard = _common.HandleGuard(handle.value, "communicator")
        _lifetime.start_janitor()  # the finalizer hands pcclCommDestroy to it

    # ---- membership ---------------------------------------------------------------------------------

    def connect(self):
        """Joins the run: connects to the master, authenticates, waits for admission (immediate for the
        first peer; otherwise until every accepted peer calls :meth:`update_topology`) and for the ring
        to be built. Blocks until then or connect_timeout_ms (the join is then abandoned and connect()
        may be called again).

        Raises InvalidUsageError (already connected), MasterUnreachableError (no master there),
        AuthFailedError (wrong or missing secret, or encryption on one side only), VersionMismatchError,
        PcclTimeoutError, PeerLostError (admitted but the ring build failed: call update_topology()),
        KickedError."""
        with self._guard as h:
            check(self._lib.pcclConnect(h), h)
        return self

    def update_topology(self):
        """Collective vote of every accepted peer: once all have called it, the master admits pending
        peers, drops departed ones, bumps the epoch, and every peer builds its connections of the new
        ring. Blocks until the whole ring is up, or connect_timeout_ms (the vote is then withdrawn).
        Not while an all-reduce or a sync is in flight on this peer.

        Raises InvalidUsageError (not connected; collectives in flight), PeerLostError (a peer died
        during the build: call it again), PcclTimeoutError (not every member voted in time),
        MasterUnreachableError, KickedError."""
        with self._guard as h:
            self._ops.reap()  # ended operations of dropped Requests would count as in flight
            check(self._lib.pcclUpdateTopology(h), h)

    def optimize_topology(self):
        """Like :meth:`update_topology`, and more: the peers measure their links (bandwidth over the
        ring's kind of connections, and round trips) in rounds the master plans; the master installs the
        ring whose slowest link is fastest (then the least latency) under a new epoch, on every member or
        none. Every accepted peer must call it. Takes up to (peers in the largest group - 1) rounds of
        the master's probe budget (2 s by default).

        Raises what :meth:`update_topology` raises, and PeerLostError (a peer died while the links were
        measured; nothing was installed: call it again), MismatchError (some peers called
        update_topology() instead), PcclTimeoutError."""
        with self._guard as h:
            self._ops.reap()
            check(self._lib.pcclOptimizeTopology(h), h)

    def links(self):
        """The links the master measured between members of this peer's current ring, as a list of dicts
        ``{"from_rank", "to_rank", "bandwidth" (bytes/s; 0: the link did not work), "rtt_s"}`` (ranks
        index the ring, as :attr:`rank` does). One round trip to the master.

        Raises InvalidUsageError (not connected), MasterUnreachableError, KickedError."""
        with self._guard as h:
            count = ctypes.c_size_t(0)
            check(self._lib.pcclGetLinks(h, None, 0, ctypes.byref(count)), h)
            while True:
                buf = (Link * max(count.value, 1))()
                cap = count.value
                check(self._lib.pcclGetLinks(h, buf, cap, ctypes.byref(count)), h)
                if count.value <= cap:
                    break
            return [{"from_rank": buf[i].from_rank, "to_rank": buf[i].to_rank, "bandwidth": buf[i].bandwidth,
                     "rtt_s": buf[i].rtt_s} for i in range(count.value)]

    def regions(self):
        """The region of every member of the current ring, a list of str indexed by ring rank (as
        :attr:`rank` and :meth:`links` number them): the region a member declared, else the one the
        master detected from the measured links (``"auto-0"``, ...), else ``""`` (the unnamed region).
        Every member reads the same list. Never blocks; any thread.

        Raises InvalidUsageError (no ring yet: before :meth:`connect` returns)."""
        with self._guard as h:
            count = self._attribute_of(h, Attribute.WORLD_SIZE)
            if count == 0:
                self._region_of(h, 0)  # no ring yet: raises pcclGetRegion's InvalidUsageError
            return [self._region_of(h, rank) for rank in range(count)]

    @property
    def region(self):
        """This peer's region in the current ring (``regions()[rank]``). Raises InvalidUsageError (no ring yet)."""
        with self._guard as h:
            return self._region_of(h, self._attribute_of(h, Attribute.RANK))

    def inbound_of(self, rank=None):
        """Whether other peers can dial ring member ``rank`` (default: this peer) in the current ring:
        False when it declared ``inbound=False`` or the master's dial-back of its ring port failed; its
        links are then opened from its side (docs/concepts.md "Reachability"). Never blocks; any thread.

        Raises InvalidUsageError (no ring yet), InvalidArgumentError (rank outside the ring)."""
        with self._guard as h:
            if rank is None:
                rank = self._attribute_of(h, Attribute.RANK)
            if isinstance(rank, bool) or not isinstance(rank, int) or not 0 <= rank < 2 ** 32:
                raise InvalidArgumentError(detail="rank must be an int >= 0, got %r" % (rank,))
            value = ctypes.c_int(0)
            check(self._lib.pcclGetInbound(h, rank, ctypes.byref(value)), h)
            return value.value == 1

    def _attribute_of(self, h, attr):
        value = ctypes.c_int64(0)
        check(self._lib.pcclGetAttribute(h, int(attr), ctypes.byref(value)), h)
        return value.value

    def _region_of(self, h, rank):
        buf = ctypes.create_string_buffer(MAX_REGION_LEN + 1)
        length = ctypes.c_size_t(0)
        check(self._lib.pcclGetRegion(h, rank, buf, len(buf), ctypes.byref(length)), h)
        return buf.value.decode("ascii")

    def are_peers_pending(self):
        """True when :meth:`update_topology` would change something (peers wait for admission, a member
        already voted, or a member left). One round trip to the master: blocks at most twice
        peer_timeout_ms. Any thread, any time.

        Raises InvalidUsageError (not connected), MasterUnreachableError, KickedError."""
        with self._guard as h:
            flag = ctypes.c_int(0)
            check(self._lib.pcclArePeersPending(h, ctypes.byref(flag)), h)
            return bool(flag.value)

    def attribute(self, attr):
        """The int value of a pcclAttribute_t (an :class:`pccl.Attribute`) for the last completed ring.
        Never blocks; any thread. Raises InvalidArgumentError (unknown attribute)."""
        if isinstance(attr, bool) or not isinstance(attr, int):
            raise InvalidArgumentError(detail="attribute must be a pccl.Attribute, got %r" % (attr,))
        with self._guard as h:
            return self._attribute_of(h, attr)

    world_size = property(lambda self: self.attribute(Attribute.WORLD_SIZE),
                          doc="Accepted peers in the run (all groups); 0 before connect().")
    rank = property(lambda self: self.attribute(Attribute.RANK), doc="This peer's index in the global ring.")
    group_world_size = property(lambda self: self.attribute(Attribute.GROUP_WORLD_SIZE),
                                doc="Accepted peers in this peer's group.")
    group_rank = property(lambda self: self.attribute(Attribute.GROUP_RANK),
                          doc="This peer's index within its group's ring.")
    epoch = property(lambda self: self.attribute(Attribute.EPOCH),
                     doc="Topology epoch of the current ring (0 before the first).")
    peer_group = property(lambda self: self.attribute(Attribute.PEER_GROUP), doc="The group id this peer declared.")
    listen_port = property(lambda self: self.attribute(Attribute.LISTEN_PORT),
                           doc="The port ring neighbours connect to.")
    ring_connections = property(lambda self: self.attribute(Attribute.RING_CONNECTIONS),
                                doc="TCP connections to the ring successor (0 when alone in the group).")

    hierarchical = property(lambda self: self.attribute(Attribute.HIERARCHICAL) == 1,
                            doc="True when this peer's group runs its large all-reduces in two levels "
                                "(regions; docs/algorithms.md §12), False when flat.")

    @property
    def cipher(self):
        """``"none"`` (plain run), ``"ChaCha20-Poly1305"``, or ``"AES-256-GCM"`` (offered: a connection uses
        it only when both its ends offer it); PCCL_ATTR_CIPHER 0, 1, 2."""
        value = self.attribute(Attribute.CIPHER)
        return _CIPHERS.get(value, str(value))

    @property
    def master_address(self):
        """The master address this communicator was created with."""
        return self._master_address

    def stats(self):
        """The counters since creation as a :class:`pccl.CommStats` (pcclGetStats). Never blocks; any
        thread, also while collectives run."""
        with self._guard as h:
            s = comm_stats_init()
            check(self._lib.pcclGetStats(h, ctypes.byref(s)), h)
        return CommStats(*(getattr(s, name) for name, _ in s._fields_[1:]))

    # ---- collectives --------------------------------------------------------------------------------

    def _options(self, tag, quant, compress, location):
        opts = reduce_options_init()
        opts.tag = _common.int_in(tag, 0, _common.U64_MAX, "tag")
        opts.quant = _common.quant(quant)
        opts.compress = _common.int_in(compress, -(2 ** 31), 2 ** 31 - 1, "compress")  # the range: C checks
        opts.location = location
        return opts

    def all_reduce(self, send, recv=None, op="sum", tag=0, quant=None, compress=0):
        """Reduces `send` across every peer of this peer's group into `recv` (in place when recv is None
        or recv is send), and returns a :class:`ReduceInfo`.

        send/recv: C-contiguous numpy arrays or contiguous torch tensors (CPU; torch.bfloat16 too) of
        one supported dtype and the same element count (shapes may differ); recv must be writable. A
        CUDA tensor is passed as device memory (pcclBufferDevice): that needs a pccl GPU backend module
        (docs/gpu.md), else UnsupportedError. op: "sum", "avg", "prod", "min", "max". tag: operations in
        flight at once need distinct tags (0..2**64-1). quant: None, "fp16", "bf16" (float32/float64
        data), "int8" or "fp4" (any floating type). compress: zstd level 1..19 on the wire, 0 = off.

        Every peer of the group must call it with the same tag, count, dtype, op and quant. Blocks until
        every peer has the result or the operation failed everywhere (op_timeout_ms at most; the GIL is
        released). Results are bit-identical on every peer. On failure send is untouched and an
        in-place buffer holds its input again: call :meth:`update_topology` on every peer and retry
        (``except pccl.PcclError as e: if e.retryable: ...``).

        Raises InvalidArgumentError (checked here before calling C: non-contiguous, read-only, wrong or
        different dtypes or counts; from C: overlapping buffers, quantization of integers, compress out
        of range), InvalidUsageError (not connected; tag in flight; a sync runs), PeerLostError,
        TopologyChangedError (a peer is in update_topology(), or this peer is an epoch behind),
        MismatchError (peers call the tag differently, or their tags diverge: not retryable),
        PcclTimeoutError, UnsupportedError, MasterUnreachableError, KickedError.
        Thread-safety: any thread; several at once when their tags differ."""
        sbuf, rbuf = reduce_buffers(send, recv)
        opts = self._options(tag, quant, compress, sbuf.location)
        _sync_device(sbuf)
        return self._blocking(self._lib.pcclAllReduce, (sbuf.ptr or None, rbuf.ptr or None, sbuf.count,
                                                        int(sbuf.dtype), int(_common.red_op(op))), opts, (sbuf, rbuf))

    def all_reduce_async(self, send, recv=None, op="sum", tag=0, quant=None, compress=0):
        """Starts the same operation as :meth:`all_reduce` and returns a :class:`Request` at once (never
        blocks on the network). The buffers belong to pccl until ``Request.wait()`` returns; the
        communicator keeps them alive until then (also when the Request is dropped unwaited).
        Operations in flight together need distinct tags.

        Raises, at once: InvalidArgumentError, InvalidUsageError (not connected, tag in flight,
        max_concurrent_ops reached, closed); the operation's own failures come from ``Request.wait()``.
        Thread-safety: as :meth:`all_reduce`."""
        sbuf, rbuf = reduce_buffers(send, recv)
        opts = self._options(tag, quant, compress, sbuf.location)
        op_value = int(_common.red_op(op))
        _sync_device(sbuf)
        return self._started(self._lib.pcclAllReduceAsync, (sbuf.ptr or None, rbuf.ptr or None, sbuf.count,
                                                             int(sbuf.dtype), op_value), opts, (sbuf, rbuf), rbuf.owner)

    # ---- broadcast, all-gather, reduce-scatter, barrier ------------------------------------------------
    # Each runs on the same ring as the all-reduce, with its properties and rules (docs/algorithms.md
    # §1a): every peer of the group calls it with the same tag, counts, dtype, (op, root), quant and
    # compress, else MismatchError everywhere; all or nothing (on failure send is untouched and an
    # in-place buffer holds its input again); ranks are group ranks (``group_rank``), which change when
    # the ring is rebuilt. Host memory only (a CUDA tensor: UnsupportedError; stage it through the CPU).

    # The two helpers every collective goes through. ``fn`` is the C function; it is called as
    # fn(*args, &opts, comm, &info) (blocking) or fn(*args, &opts, comm, &request) (async); ``keep`` are
    # the Buffers (pccl._buffers) the operation reads or writes: kept alive until the C request is freed,
    # checked afterwards (torch storage moved?), and their torch tensors' version counters bumped when
    # written.

    def _blocking(self, fn, args, opts, keep=()):
        """Runs a blocking collective; returns its ReduceInfo or raises its error (detail read at once)."""
        info = _CReduceInfo()
        try:
            with self._guard as h:
                self._ops.reap()  # after the guard's checks (closed, inherited through fork)
                check(fn(*args, ctypes.byref(opts), h, ctypes.byref(info)), h)
        finally:
            bump_versions(keep)  # pccl may have written (and, on failure, restored) them
        return _reduce_info(info)

    def _started(self, fn, args, opts, keep, recv_owner):
        """Starts an asynchronous collective and returns its :class:`Request` (pcclWait semantics)."""
        with self._guard as h:
            self._ops.reap()
            op = _Op(None, keep, h)
            req = ctypes.c_void_p()
            check(fn(*args, ctypes.byref(opts), h, ctypes.byref(req)), h)
            op.handle = req.value
            self._ops.add(op)  # inside the guard: close() cannot detach before it is registered
        bump_versions(keep)
        return Request(self, op, int(opts.tag), recv_owner)

    def _broadcast_args(self, buf, root, recv, tag, quant, compress):
        sbuf, rbuf = reduce_buffers(buf, recv)
        opts = self._options(tag, quant, compress, sbuf.location)
        root = _common.int_in(root, 0, 2 ** 32 - 1, "root")
        _sync_device(sbuf)
        return (sbuf.ptr or None, rbuf.ptr or None, sbuf.count, int(sbuf.dtype), root), opts, (sbuf, rbuf), rbuf

    def broadcast(self, buf, root, recv=None, tag=0, quant=None, compress=0):
        """Copies the root's `buf` (``group_rank == root``) into every peer's `buf` (in place), or into
        `recv` when given; a non-root's `buf` is then not read. Pipelined along the ring from the root.
        Returns a :class:`ReduceInfo`. quant: every peer (the root too) ends with the same decoded
        values. Raises as :meth:`all_reduce`, and InvalidArgumentError for a root outside the group."""
        args, opts, keep, _ = self._broadcast_args(buf, root, recv, tag, quant, compress)
        return self._blocking(self._lib.pcclBroadcast, args, opts, keep)

    def broadcast_async(self, buf, root, recv=None, tag=0, quant=None, compress=0):
        """:meth:`broadcast` as a :class:`Request` (the buffers belong to pccl until it is waited on)."""
        args, opts, keep, rbuf = self._broadcast_args(buf, root, recv, tag, quant, compress)
        return self._started(self._lib.pcclBroadcastAsync, args, opts, keep, rbuf.owner)

    def _blocks_args(self, send, recv, gather, tag, quant, compress):
        sbuf = as_buffer(send, "send", writable=False)
        rbuf = as_buffer(recv, "recv", writable=True)
        if sbuf.dtype != rbuf.dtype:
            raise InvalidArgumentError(detail="send is %s but recv is %s: they must have the same dtype"
                                       % (sbuf.dtype.name.lower(), rbuf.dtype.name.lower()))
        world = max(self.group_world_size, 1)
        small, large, names = (sbuf, rbuf, ("send", "recv")) if gather else (rbuf, sbuf, ("recv", "send"))
        if large.count != small.count * world:
            raise InvalidArgumentError(detail="%s has %d elements but %s has %d: it must have group size (%d) x %d"
                                       % (names[1], large.count, names[0], small.count, world, small.count))
        opts = self._options(tag, quant, compress, sbuf.location)
        return (sbuf.ptr or None, rbuf.ptr or None, small.count, int(sbuf.dtype)), opts, (sbuf, rbuf), rbuf

    def all_gather(self, send, recv, tag=0, quant=None, compress=0):
        """Every peer's `send`, in group-rank order, into every peer's `recv` (group size x send's
        elements). In place: `send` is this rank's block of `recv` (``recv[group_rank * n:(group_rank + 1)
        * n]`` of a 1-d recv). Returns a :class:`ReduceInfo`. Raises as :meth:`all_reduce`."""
        args, opts, keep, _ = self._blocks_args(send, recv, True, tag, quant, compress)
        return self._blocking(self._lib.pcclAllGather, args, opts, keep)

    def all_gather_async(self, send, recv, tag=0, quant=None, compress=0):
        """:meth:`all_gather` as a :class:`Request`."""
        args, opts, keep, rbuf = self._blocks_args(send, recv, True, tag, quant, compress)
        return self._started(self._lib.pcclAllGatherAsync, args, opts, keep, rbuf.owner)

    def reduce_scatter(self, send, recv, op="sum", tag=0, quant=None, compress=0):
        """Reduces every peer's `send` (group size x recv's elements) with `op` and leaves block
        ``group_rank`` of the result in `recv`. In place: `recv` is this rank's block of `send`. Returns a
        :class:`ReduceInfo`. Raises as :meth:`all_reduce`."""
        args, opts, keep, _ = self._blocks_args(send, recv, False, tag, quant, compress)
        return self._blocking(self._lib.pcclReduceScatter, args[:4] + (int(_common.red_op(op)),), opts, keep)

    def reduce_scatter_async(self, send, recv, op="sum", tag=0, quant=None, compress=0):
        """:meth:`reduce_scatter` as a :class:`Request`."""
        args, opts, keep, rbuf = self._blocks_args(send, recv, False, tag, quant, compress)
        return self._started(self._lib.pcclReduceScatterAsync, args[:4] + (int(_common.red_op(op)),), opts, keep,
                             rbuf.owner)

    def barrier(self, tag=0):
        """Returns once every peer of the group has called it (a collective without data). Returns a
        :class:`ReduceInfo`. Raises as :meth:`all_reduce`."""
        opts = self._options(tag, None, 0, BufferLocation.HOST)
        with self._guard as h:
            self._ops.reap()
            check(self._lib.pcclBarrier(ctypes.byref(opts), h), h)
        return ReduceInfo(0, 0, max(self.group_world_size, 1), 0.0)

    def barrier_async(self, tag=0):
        """:meth:`barrier` as a :class:`Request`."""
        return self._started(lambda o, h, r: self._lib.pcclBarrierAsync(o, h, r), (),
                             self._options(tag, None, 0, BufferLocation.HOST), (), None)

    def sync_shared_state(self, state, revision=None, strategy="enforce_popular", compress=None):
        """Makes this peer's shared state equal to the group's (docs/shared_state.md) and returns a
        :class:`SyncInfo`.

        state: a :class:`SharedState`, or a dict name -> array/tensor (host memory, contiguous, writable
        unless strategy is "send_only"). revision: this peer's revision (default: ``state.revision``,
        or 0 for a dict). strategy: "enforce_popular" (offer this peer's content, take the elected
        one), "receive_only" (never a candidate), "send_only" (offer, never take). compress: zstd level
        for what this peer fetches (default: ``state.compress``, or 0).

        A collective of the group: every peer calls it at the same point of its loop, with no
        all-reduce in flight. Blocks until the whole group is done (op_timeout_ms at most; the GIL is
        released); the buffers must not be touched meanwhile (pccl serves them to others and writes
        fetched bytes into them). On success a SharedState's revision becomes the elected one.

        Raises InvalidArgumentError (bad names, dtypes, non-contiguous buffers; or this peer's
        names/dtypes/counts differ from the elected set), InvalidUsageError (not a member, something
        in flight, no peer offers content), MismatchError (fetched bytes failed their digest),
        TopologyChangedError (a peer is in update_topology(), or this peer is an epoch behind: call
        update_topology(), then sync again), PeerLostError (call update_topology(), then sync again),
        PcclTimeoutError, MasterUnreachableError, KickedError. On failure the revision is unchanged and
        fetched tensors may hold partial content."""
        if isinstance(state, SharedState):
            target = state
        elif hasattr(state, "items"):
            target = SharedState(state, revision=0, compress=0)
        else:
            raise InvalidArgumentError(detail="state must be a pccl.SharedState or a dict of name -> buffer, got %s"
                                       % type(state).__name__)
        strat = _common.strategy(strategy)
        rev = _common.int_in(target.revision if revision is None else revision, 0, _common.U64_MAX, "revision")
        level = _common.int_in(target.compress if compress is None else compress, -(2 ** 31), 2 ** 31 - 1,
                               "compress")
        items = list(target.items())
        names, buffers = [], []
        for name, obj in items:
            if not isinstance(name, str):
                raise InvalidArgumentError(detail="shared-state names must be str, got %r" % (name,))
            names.append(name.encode("utf-8"))
            buffers.append(host_buffer(obj, "shared state %r" % name, writable=strat != SyncStrategy.SEND_ONLY))
        infos = (TensorInfo * max(len(items), 1))()
        for i, (name_b, buf) in enumerate(zip(names, buffers)):
            infos[i].name = name_b  # the array keeps a reference to the bytes during the call
            infos[i].dtype = int(buf.dtype)
            infos[i].count = buf.count
            infos[i].data = buf.ptr or None
        cstate = shared_state_init()
        cstate.revision = rev
        cstate.count = len(items)
        cstate.infos = ctypes.cast(infos, ctypes.POINTER(TensorInfo))
        cstate.compress = level
        info = _CSyncInfo()
        try:
            with self._guard as h:
                self._ops.reap()
                check(self._lib.pcclSyncSharedState(h, ctypes.byref(cstate), int(strat), ctypes.byref(info)), h)
        finally:
            bump_versions(buffers)
        del buffers, names, infos  # alive until here: pccl used them during the call
        target.revision = int(cstate.revision)
        return SyncInfo(int(info.tx_bytes), int(info.rx_bytes), int(info.keys_received), int(info.revision),
                        float(info.time_s))

    # ---- lifetime -----------------------------------------------------------------------------------

    def close(self):
        """Waits for the asynchronous operations still in flight (each ends by op_timeout_ms; a Request
        still referenced hands out its outcome at its next wait()), then leaves the run gracefully when
        joined (tells the master, waits at most 2 s), closes every connection and frees the communicator
        (pcclCommDestroy). Idempotent. In a child process that inherited the communicator through fork()
        it only marks it closed: the C handle is the parent's and is deliberately leaked.

        Raises InvalidUsageError while another thread is inside a call on this communicator."""
        if self._guard is None or self._guard.closed:
            return
        handle = self._guard.detach()  # from here on no operation can start
        if handle is None:
            return
        self._ops.complete_all()
        check(self._lib.pcclCommDestroy(handle))

    def _destroy_job(self, handle):
        # The finalizer's work, on the janitor thread: nobody references the communicator, so no Request
        # does either; destroying first ends what is in flight at once (pcclInvalidUsage), then every
        # request is freed and its buffers released.
        lib, ops = self._lib, self._ops.take_all()

        def job():
            lib.pcclCommDestroy(handle)
            OpTable.finish_after_destroy(lib, ops)

        return job

    def __enter__(self):
        return self

    def __repr__(self):
        if self.closed:
            return "<pccl.Communicator closed>"
        return "<pccl.Communicator master=%s>" % self._master_address


__all__ = ["Communicator", "Request"]
