"""pccl as a torch.distributed backend: ``import pccl.torch`` registers the backend "pccl".

::

    import torch.distributed as dist
    import pccl.torch                                  # registers "pccl"

    dist.init_process_group("pccl")                    # env://: MASTER_ADDR, MASTER_PORT, RANK, WORLD_SIZE
    dist.all_reduce(t)                                 # through pccl's ring
    model = torch.nn.parallel.DistributedDataParallel(model)

Torch rank 0 of each pccl group embeds the pccl master and publishes its address in the group's c10d
store (``PCCL_TORCH_MASTER=HOST:PORT`` or ``Options(master=...)``: an external pccl-master instead).
Collectives: all_reduce (SUM, AVG, PRODUCT, MIN, MAX), broadcast, all_gather, all_gather_into_tensor,
reduce_scatter, reduce_scatter_tensor, reduce, gather, scatter, barrier; sync or async_op=True.

Failures raise pccl's exceptions, which are also RuntimeErrors (``pccl.PeerLostError``, ``.retryable``;
messages start with the C name, ``pcclPeerLost``). Recovery: every surviving rank calls
:func:`update_topology`, then retries; ``dist.get_world_size()`` stays what init_process_group set,
:func:`live_world_size` / :func:`live_rank` / :func:`live_ranks` describe the ring after a loss.
See docs/python.md, "torch.distributed backend".
"""


import torch  # noqa: F401 - the real torch (absolute imports), before torch.distributed
import torch.distributed as dist

from . import _torch_errors as errors
from ._torch_pg import ProcessGroupPccl
from ._torch_setup import Options
from ._torch_work import PcclWork

BACKEND = "pccl"


def _create(backend_options, pg_options):
    """Backend.register_backend's creator (extended_api): c10d's _DistributedBackendOptions."""
    return ProcessGroupPccl(backend_options.store, backend_options.group_rank, backend_options.group_size,
                            backend_options.timeout, pg_options,
                            is_default_group=not backend_options.global_ranks_in_group,
                            group_name=str(backend_options.group_id))


def _register():
    if BACKEND.upper() not in dist.Backend._plugins:  # noqa: SLF001 - torch keeps the registry there
        dist.Backend.register_backend(BACKEND, _create, extended_api=True)


_register()


def process_group(group=None):
    """The :class:`ProcessGroupPccl` of `group` (None: the default group); InvalidArgumentError when
    that group does not use the pccl backend."""
    pg = group if group is not None else dist.distributed_c10d._get_default_group()  # noqa: SLF001
    if not isinstance(pg, ProcessGroupPccl):
        raise errors.invalid("the process group uses the %r backend, not pccl" % dist.get_backend(pg))
    return pg


def update_topology(group=None):
    """The recovery step after a retryable failure (``e.retryable``: pcclPeerLost, pcclTopologyChanged,
    pcclTimeout): every surviving rank of the group calls it; it waits for the group's collectives in
    flight to end, rebuilds pccl's ring without the lost peers and relearns which torch rank sits where.
    Then retry the collective (a failed one left its tensors as they were: all or nothing). Raises the
    same exceptions (call it again on a retryable one)."""
    process_group(group).update_topology()


def are_peers_pending(group=None):
    """True when pccl's topology would change at an update (a member left or voted). One master round
    trip."""
    return process_group(group).are_peers_pending()


def live_world_size(group=None):
    """Ranks in the group's current ring (``dist.get_world_size()`` until a peer is lost)."""
    return process_group(group).live_size


def live_ranks(group=None):
    """The torch ranks (of the group) in the current ring, ascending: the order of all_gather outputs and
    reduce_scatter inputs."""
    return process_group(group).live_ranks


def live_rank(group=None):
    """This rank's index in :func:`live_ranks` (its torch rank until a lower rank is lost)."""
    return process_group(group).live_rank


def communicator(group=None):
    """The group's pccl.Communicator (stats(), attributes); run collectives through torch.distributed."""
    return process_group(group).communicator


def allreduce_avg_hook(group, bucket):
    """A DDP comm hook (``ddp.register_comm_hook(None, pccl.torch.allreduce_avg_hook)``): averages each
    bucket with pccl's AVG, which divides by the ranks in the ring, so that DDP's gradients stay means
    after a peer is lost (DDP's own averaging divides by the fixed torch world size)."""
    buf = bucket.buffer()
    work = dist.all_reduce(buf, op=dist.ReduceOp.AVG, group=group, async_op=True)
    return work.get_future().then(lambda fut: fut.value()[0])


RETRYABLE_ERRORS = (errors.PeerLostError, errors.TopologyChangedError, errors.PcclTimeoutError)

__all__ = ["BACKEND", "Options", "PcclWork", "ProcessGroupPccl", "RETRYABLE_ERRORS", "allreduce_avg_hook",
           "are_peers_pending", "communicator", "live_rank", "live_ranks", "live_world_size", "process_group",
           "update_topology"]
