"""Result records (ReduceInfo, SyncInfo, CommStats) and the SharedState container."""

import dataclasses


@dataclasses.dataclass(frozen=True)
class ReduceInfo:
    """What one all-reduce did (pcclReduceInfo_t).

    tx_bytes / rx_bytes: payload bytes this peer sent / received on the ring; world_size: peers that
    took part (this peer's group); time_s: wall time from the call to the result."""

    tx_bytes: int
    rx_bytes: int
    world_size: int
    time_s: float


@dataclasses.dataclass(frozen=True)
class SyncInfo:
    """What one shared-state sync did (pcclSyncInfo_t).

    tx_bytes / rx_bytes: shared-state bytes sent / received (on the wire, after zstd; 0 received when
    this peer was up to date); keys_received: tensors whose content was replaced; revision: the elected
    revision; time_s: wall time from the call to the result."""

    tx_bytes: int
    rx_bytes: int
    keys_received: int
    revision: int
    time_s: float


@dataclasses.dataclass(frozen=True)
class CommStats:
    """Counters of one communicator since it was created (pcclCommStats_t); see pccl.h for each field."""

    allreduce_ops: int
    allreduce_aborts: int
    allreduce_retries: int
    sync_ops: int
    sync_aborts: int
    topology_updates: int
    tx_bytes: int
    rx_bytes: int
    epoch: int
    last_allreduce_time_s: float
    last_allreduce_bytes_per_s: float
    same_host_read_bytes: int
    master_losses: int = 0
    master_returns: int = 0
    master_away_ms: int = 0
    ring_reconnects: int = 0
    ring_resent_bytes: int = 0
    ring_stalled_ms: int = 0
    ring_active_connections: int = 0
    ring_connection_changes: int = 0
    relayed_bytes: int = 0

    def as_dict(self):
        """The counters as a plain dict."""
        return dataclasses.asdict(self)


class SharedState:
    """Named host buffers plus a revision: what :meth:`pccl.Communicator.sync_shared_state` keeps equal
    on every peer of a group (docs/shared_state.md).

    ``SharedState({"weights": w, "step": step}, revision=0, compress=0)``: every value is a C-contiguous
    numpy array or a contiguous CPU torch tensor of a supported dtype (writable unless the sync uses the
    ``send_only`` strategy). Names are unique, 1..256 bytes of UTF-8; the set of (name, dtype, element
    count) must be the same on every peer (order does not matter).

    ``revision`` is yours: a number that grows as the state advances (e.g. outer steps done; a new peer
    says 0). A successful sync sets it to the elected revision. ``compress`` is the zstd level (1..19, 0
    = off) the sources use for what this peer fetches.

    Behaves as a mutable mapping of name -> buffer. Not thread-safe: do not change it, or touch its
    buffers, while a sync that uses it runs.
    """

    def __init__(self, tensors=None, revision=0, compress=0):
        self.tensors = dict(tensors or {})
        self.revision = revision
        self.compress = compress

    def __getitem__(self, name):
        """The buffer registered as `name`."""
        return self.tensors[name]

    def __setitem__(self, name, value):
        """Registers (or replaces) the buffer `name`."""
        self.tensors[name] = value

    def __delitem__(self, name):
        """Unregisters `name`."""
        del self.tensors[name]

    def __contains__(self, name):
        return name in self.tensors

    def __iter__(self):
        return iter(self.tensors)

    def __len__(self):
        return len(self.tensors)

    def keys(self):
        """The names."""
        return self.tensors.keys()

    def items(self):
        """(name, buffer) pairs."""
        return self.tensors.items()

    def values(self):
        """The buffers."""
        return self.tensors.values()

    def __repr__(self):
        return "SharedState(%s, revision=%r, compress=%r)" % (sorted(self.tensors), self.revision, self.compress)
