"""Options of the pccl torch.distributed backend and the rendezvous of one process group.

Who runs the pccl master: by default the group's torch rank 0 embeds one (pccl.Master) and publishes
its address under the key ``pccl/master`` of the c10d store handed to the backend (the group's
PrefixStore); ``Options.master`` (or ``PCCL_TORCH_MASTER`` for the default group) names an external
pccl-master instead. Rank 0 connects first; the others read the key, connect and wait as pending;
rank 0 admits them all with one topology update; then every rank checks that the ring holds the
group's size and learns the torch rank of every ring position (see :func:`rank_map`).
"""

import dataclasses
import ipaddress
import os
import socket
import threading
import time

import numpy as np

from ._torch_errors import invalid, torch_error, usage
from .communicator import Communicator
from .master import Master

MASTER_KEY = "pccl/master"
RANK_MAP_TAG = 2 ** 64 - 1  # the rank-map all-gather's tag; collectives number theirs from 1


@dataclasses.dataclass
class Options:
    """Per-process-group settings of the pccl backend: ``dist.init_process_group("pccl",
    pg_options=pccl.torch.Options(...))`` or ``dist.new_group(backend="pccl", pg_options=...)``.
    None takes the environment variable named (read at group creation), else the default.

    quant: None, "fp16", "bf16", "int8" or "fp4" on the wire for all_reduce / reduce / reduce_scatter of
        floating-point tensors (fp16/bf16 only for float32/float64 tensors; others go exact);
        PCCL_TORCH_QUANT. Broadcast, all_gather, gather and scatter stay exact.
    compress: zstd level 1..19 on the wire for every collective, 0 = off; PCCL_TORCH_COMPRESS.
    master: "HOST:PORT" of an external pccl-master; PCCL_TORCH_MASTER (the default group only).
        Unset: the group's rank 0 embeds a master.
    master_listen: where an embedded master listens; PCCL_TORCH_MASTER_LISTEN. Default "HOST:0" with
        HOST 127.0.0.1 when MASTER_ADDR is a loopback address, else 0.0.0.0.
    advertise_host: the host other ranks dial for the embedded master and for this rank's ring
        listener; PCCL_TORCH_ADVERTISE_HOST. Default: the master's listen host when it is not a
        wildcard, else MASTER_ADDR, else this machine's name (the master); the address the master sees
        (ring).
    listen: this rank's ring listener ("HOST:PORT"); PCCL_TORCH_LISTEN. Default as master_listen.
    connections_per_peer, heartbeat_interval_ms, peer_timeout_ms (also the embedded master's; also
        PCCL_TORCH_PEER_TIMEOUT_MS), op_timeout_ms / connect_timeout_ms (default: the group's torch
        timeout), secret (None: PCCL_SECRET / PCCL_SECRET_FILE), encrypt: as pccl.Communicator.
    region: the region this rank is in, as pccl.Communicator's ``region`` (None: PCCL_REGION, else
        none declared).
    algorithm: "flat", "hierarchical" or "auto", as pccl.Communicator's ``algorithm`` (None:
        PCCL_ALGORITHM, else "auto"): two-level all-reduces when the group sits in several regions.
    """

    quant: object = None
    compress: object = None
    master: object = None
    master_listen: object = None
    advertise_host: object = None
    listen: object = None
    connections_per_peer: object = None
    heartbeat_interval_ms: object = None
    peer_timeout_ms: object = None
    op_timeout_ms: object = None
    connect_timeout_ms: object = None
    secret: object = None
    encrypt: bool = False
    region: object = None
    algorithm: object = None


_QUANTS = {None: None, "": None, "none": None, "fp16": "fp16", "bf16": "bf16", "int8": "int8", "fp4": "fp4"}


def _env_int(name, lo, hi):
    raw = os.environ.get(name)
    if raw is None or raw.strip() == "":
        return None
    try:
        value = int(raw.strip(), 10)
    except ValueError:
        raise invalid("%s=%r is not an integer" % (name, raw)) from None
    if not lo <= value <= hi:
        raise invalid("%s=%d is out of range %d..%d" % (name, value, lo, hi))
    return value


def _is_loopback(host):
    if host is None:
        return False
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False


def _host_of(address):
    host = address.rsplit(":", 1)[0]
    return host[1:-1] if host.startswith("[") and host.endswith("]") else host


def resolve(options, is_default_group, timeout_s):
    """A complete Options: pg_options, then the environment, then the defaults."""
    o = dataclasses.replace(options) if options is not None else Options()
    if not isinstance(o, Options):
        raise invalid("pg_options must be a pccl.torch.Options, got %s" % type(options).__name__)
    quant = o.quant if o.quant is not None else os.environ.get("PCCL_TORCH_QUANT")
    key = quant.lower() if isinstance(quant, str) else quant
    if key not in _QUANTS:
        raise invalid("quant (or PCCL_TORCH_QUANT) must be none, fp16, bf16, int8 or fp4, got %r" % (quant,))
    o.quant = _QUANTS[key]
    if o.compress is None:
        o.compress = _env_int("PCCL_TORCH_COMPRESS", 0, 19) or 0
    if isinstance(o.compress, bool) or not isinstance(o.compress, int) or not 0 <= o.compress <= 19:
        raise invalid("compress must be a zstd level 0..19, got %r" % (o.compress,))
    if o.master is None and is_default_group:
        o.master = os.environ.get("PCCL_TORCH_MASTER") or None
    loop = _is_loopback(os.environ.get("MASTER_ADDR"))
    wildcard = "127.0.0.1" if loop else "0.0.0.0"
    o.master_listen = o.master_listen or os.environ.get("PCCL_TORCH_MASTER_LISTEN") or wildcard + ":0"
    o.listen = o.listen or os.environ.get("PCCL_TORCH_LISTEN") or wildcard + ":0"
    o.advertise_host = o.advertise_host or os.environ.get("PCCL_TORCH_ADVERTISE_HOST") or None
    if o.peer_timeout_ms is None:
        o.peer_timeout_ms = _env_int("PCCL_TORCH_PEER_TIMEOUT_MS", 1, 2 ** 32 - 1)
    ms = max(1, min(int(timeout_s * 1000), 2 ** 32 - 1))
    o.op_timeout_ms = o.op_timeout_ms or ms
    o.connect_timeout_ms = o.connect_timeout_ms or ms
    return o


def _master_host(o):
    if o.advertise_host:
        return o.advertise_host
    host = _host_of(o.master_listen)
    if host not in ("0.0.0.0", "::", ""):
        return host
    return os.environ.get("MASTER_ADDR") or socket.gethostname()


class Membership:
    """The embedded master (rank 0, unless external) and this rank's connected communicator."""

    def __init__(self, store, rank, size, o, timeout_s):
        self.master = None
        self.comm = None
        deadline = time.monotonic() + timeout_s
        try:
            if rank == 0:
                address = o.master
                if address is None:
                    self.master = Master(listen=o.master_listen, heartbeat_interval_ms=o.heartbeat_interval_ms,
                                         peer_timeout_ms=o.peer_timeout_ms, secret=o.secret,
                                         encrypt=o.encrypt).start()
                    host = _master_host(o)
                    address = "%s:%d" % ("[%s]" % host if ":" in host else host, self.master.port)
                self.comm = self._communicator(address, o)
                self.comm.connect()
                store.set(MASTER_KEY, address)
            else:
                address = store.get(MASTER_KEY).decode()  # blocks up to the store's timeout
                self.comm = self._communicator(address, o)
                self.comm.connect()
            self._complete_ring(size, deadline)
        except BaseException:
            self.close()
            raise

    @staticmethod
    def _communicator(address, o):
        return Communicator(address, listen_address=o.listen, advertise_host=o.advertise_host,
                            connections_per_peer=o.connections_per_peer or 0, secret=o.secret, encrypt=o.encrypt,
                            heartbeat_interval_ms=o.heartbeat_interval_ms, peer_timeout_ms=o.peer_timeout_ms,
                            connect_timeout_ms=o.connect_timeout_ms, op_timeout_ms=o.op_timeout_ms,
                            region=o.region, algorithm=o.algorithm)

    def _complete_ring(self, size, deadline):
        comm = self.comm
        if self.master is not None:
            if comm.group_world_size < size:
                # Rank 0 is the only member: it admits everyone at once when all are pending.
                self.master.wait_for_peers(1, size - 1, max(0.0, deadline - time.monotonic()))
                comm.update_topology()
        else:
            # An external master: admitted ranks vote whenever someone waits, until the group is whole.
            idle = threading.Event()
            while comm.group_world_size < size:
                if time.monotonic() > deadline:
                    raise usage("the pccl ring has %d of %d ranks after the timeout" % (comm.group_world_size, size))
                if comm.are_peers_pending():
                    comm.update_topology()
                else:
                    idle.wait(0.02)  # the others are still on their way to the master
        if comm.group_world_size != size:
            raise usage("the pccl ring has %d ranks but the torch group %d (another run on the master?)"
                        % (comm.group_world_size, size))

    def close(self):
        if self.comm is not None:
            try:
                self.comm.close()
            except Exception:  # noqa: BLE001 - best effort at shutdown
                pass
            self.comm = None
        if self.master is not None:
            try:
                self.master.close()
            except Exception:  # noqa: BLE001
                pass
            self.master = None


class RankMap:
    """Ring positions <-> torch ranks of the current ring.

    ``ring[p]``: the torch rank at ring position (group rank) p; ``live``: the torch ranks in the ring,
    ascending; ``index[r]``: the position of torch rank r in ``live`` (the order of all_gather outputs
    and reduce_scatter inputs); ``position[r]``: the ring position of torch rank r; ``identity``: ring
    order == ascending torch order (flat tensors need no permutation)."""

    def __init__(self, ring):
        self.ring = list(ring)
        if len(set(self.ring)) != len(self.ring):
            raise usage("two ring members claim the same torch rank: %s" % self.ring)
        self.live = sorted(self.ring)
        self.index = {r: i for i, r in enumerate(self.live)}
        self.position = {r: p for p, r in enumerate(self.ring)}
        self.identity = self.ring == self.live

    @property
    def size(self):
        return len(self.ring)

    def position_of_root(self, root, what="root"):
        if root not in self.position:
            raise invalid("%s rank %d is not in the ring (live torch ranks: %s)" % (what, root, self.live))
        return self.position[root]


def rank_map(comm, torch_rank):
    """All-gathers every ring member's torch rank (int64) and returns a :class:`RankMap`."""
    size = comm.group_world_size
    mine = np.array([torch_rank], dtype=np.int64)
    ring = np.zeros(size, dtype=np.int64)
    try:
        comm.all_gather(mine, ring, tag=RANK_MAP_TAG)
    except BaseException as e:
        raise torch_error(e) from None
    return RankMap(int(r) for r in ring)
