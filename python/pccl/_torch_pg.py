"""ProcessGroupPccl: a torch.distributed ProcessGroup (torch 1.13's pybind trampoline) over a
pccl.Communicator.

Every collective is validated and staged in the caller's thread, started as a pccl asynchronous
operation with the group's next tag (the same on every rank: torch ranks issue collectives in the same
order), and completed by the group's :class:`~pccl._torch_work.Completer` thread. Ranks are torch ranks
of the group; the :class:`~pccl._torch_setup.RankMap` turns them into ring positions (pccl's group
ranks) and orders blocks, and is rebuilt by :meth:`ProcessGroupPccl.update_topology`.
"""

import logging
import threading

import torch
from torch._C._distributed_c10d import ProcessGroup

from . import _torch_ops as ops
from ._torch_errors import invalid, torch_error, unsupported, usage
from ._torch_setup import Membership, rank_map, resolve
from ._torch_work import Completer, PcclWork
from .errors import UnsupportedError


_log = logging.getLogger("pccl.torch")


def _one(tensors, what):
    if not isinstance(tensors, (list, tuple)) or len(tensors) != 1:
        raise invalid("%s: the pccl backend takes exactly one tensor per process, got %s"
                      % (what, len(tensors) if isinstance(tensors, (list, tuple)) else type(tensors).__name__))
    return tensors[0]


def _option(opts, name, default):
    return getattr(opts, name, default) if opts is not None else default


class ProcessGroupPccl(ProcessGroup):
    """The process group of ``dist.init_process_group("pccl")`` / ``dist.new_group(backend="pccl")``.

    ``rank()`` and ``size()`` are torch's (fixed at creation); after peers were lost and the survivors
    called :meth:`update_topology`, ``live_size``/``live_rank``/``live_ranks`` describe the ring, and
    the collectives' block lists are indexed by position in ``live_ranks``.
    """

    def __init__(self, store, rank, size, timeout, options=None, is_default_group=False, group_name=""):
        super().__init__(rank, size)
        self._closed = True
        timeout_s = timeout.total_seconds() if hasattr(timeout, "total_seconds") else float(timeout)
        self._options = resolve(options, is_default_group, timeout_s)
        self._timeout_s = timeout_s
        self._group_name = group_name
        self._lock = threading.RLock()  # start order is tag order
        self._tag = 0
        self._cuda_direct = None  # CUDA tensors as device memory: unknown until the first CUDA collective
        try:
            self._membership = Membership(store, rank, size, self._options, timeout_s)
        except BaseException as e:
            raise torch_error(e) from None
        self._comm = self._membership.comm
        self._completer = Completer("pccl-torch-%s" % (group_name or "group"))
        self._closed = False
        try:
            self._map = rank_map(self._comm, rank)
        except BaseException:
            self.shutdown()
            raise

    # ---- the ring -------------------------------------------------------------------------------------

    def getBackendName(self):  # noqa: N802 - torch's name
        return "pccl"

    @property
    def communicator(self):
        """The pccl.Communicator under the group (stats(), attributes; do not run collectives on it)."""
        return self._comm

    @property
    def master(self):
        """The embedded pccl.Master (on the rank that runs it), else None."""
        return self._membership.master

    @property
    def options(self):
        """The resolved :class:`pccl.torch.Options`."""
        return self._options

    live_size = property(lambda self: self._map.size, doc="Ranks in the current ring.")
    live_ranks = property(lambda self: list(self._map.live), doc="Torch ranks in the ring, ascending.")
    live_rank = property(lambda self: self._map.index[self.rank()], doc="This rank's index in live_ranks.")
    ring_order = property(lambda self: list(self._map.ring), doc="Torch rank at each ring position.")

    def update_topology(self):
        """Waits for this group's collectives in flight to end, then runs pccl's topology update (every
        surviving rank must call it) and rebuilds the rank map. Raises the backend's PeerLostError and
        friends (retryable: call it again)."""
        with self._lock:
            self._check_open()
            if not self._completer.drain(self._options.op_timeout_ms / 1000.0 + 5.0):
                raise usage("collectives of this group are still in flight")
            try:
                self._comm.update_topology()
            except BaseException as e:
                raise torch_error(e) from None
            self._map = rank_map(self._comm, self.rank())
            self._tag = 0

    def are_peers_pending(self):
        try:
            return self._comm.are_peers_pending()
        except BaseException as e:
            raise torch_error(e) from None

    def shutdown(self):
        """Waits for the collectives in flight, leaves the run, stops the embedded master. Idempotent."""
        with self._lock:
            if self._closed and getattr(self, "_membership", None) is None:
                return
            self._closed = True
            completer = getattr(self, "_completer", None)
            if completer is not None:
                completer.drain(self._options.op_timeout_ms / 1000.0 + 5.0)
                completer.close(5.0)
            if getattr(self, "_membership", None) is not None:
                self._membership.close()
                self._membership = None

    def _check_open(self):
        if self._closed:
            raise usage("the pccl process group was shut down")

    def _run(self, what, outputs, start, finish=None):
        """Starts one collective: start(tag) -> pccl.Request; finish() after it succeeded."""
        with self._lock:
            self._check_open()
            self._tag += 1
            try:
                request = start(self._tag)
            except BaseException as e:
                raise torch_error(e) from None
            work = PcclWork(outputs, what)
            self._completer.submit(request, work, finish)
        return work

    def _root(self, opts, what):
        return self._map.position_of_root(int(_option(opts, "rootRank", 0)), what)

    def _direct(self, *tensors):
        """True when the collective passes these tensors' CUDA memory to pccl as device memory."""
        return self._cuda_direct is not False and all(t.is_cuda for t in tensors)

    def _on_device(self, what, direct, make):
        """make(direct) -> (start, finish). With `direct`, the collective runs on the CUDA tensors
        themselves; when no pccl GPU backend module loads (pcclUnsupported at the start), this group
        stages CUDA tensors through host memory from then on, said once in the log."""
        start, finish = make(direct)
        if not direct:
            return start, finish
        chosen = [finish]

        def start_any(tag):
            try:
                request = start(tag)
            except UnsupportedError as e:
                self._cuda_direct = False
                _log.warning("pccl.torch: CUDA tensors are staged through host memory from now on (%s: %s)",
                             what, e)
                s2, chosen[0] = make(False)
                return s2(tag)
            self._cuda_direct = True
            return request

        return start_any, lambda: chosen[0]() if chosen[0] is not None else None

    # ---- collectives ------------------------------------------------------------------------------------

    def allreduce(self, tensors, opts=None):
        t = _one(tensors, "all_reduce")
        ops.check_tensor(t, "all_reduce")
        op = ops.op_name(_option(opts, "reduceOp", torch.distributed.ReduceOp.SUM), t.dtype)
        o = self._options

        def make(direct):
            staged = ops.Staged(t, "all_reduce", device_ok=direct)
            quant = ops.quant_for(staged.wire.dtype, o.quant)
            return (lambda tag: self._comm.all_reduce_async(staged.wire, op=op, tag=tag, quant=quant,
                                                            compress=o.compress), staged.copy_back)

        return self._run("all_reduce", [t], *self._on_device("all_reduce", self._direct(t), make))

    def allreduce_coalesced(self, tensors, opts=None):
        raise unsupported("all_reduce_coalesced is not implemented by the pccl backend; all-reduce each tensor")

    def reduce(self, tensors, opts=None):
        """dist.reduce: an all-reduce whose result only the root keeps (the others' tensors stay as
        they were)."""
        t = _one(tensors, "reduce")
        ops.check_tensor(t, "reduce")
        op = ops.op_name(_option(opts, "reduceOp", torch.distributed.ReduceOp.SUM), t.dtype)
        root = self._root(opts, "reduce root")
        mine = root == self._map.position[self.rank()]
        o = self._options

        def make(direct):
            staged = ops.Staged(t, "reduce", device_ok=direct)
            scratch = staged.wire if mine else torch.empty_like(staged.wire)
            return (lambda tag: self._comm.all_reduce_async(staged.wire, recv=scratch, op=op, tag=tag,
                                                            quant=ops.quant_for(staged.wire.dtype, o.quant),
                                                            compress=o.compress),
                    staged.copy_back if mine else None)

        return self._run("reduce", [t], *self._on_device("reduce", self._direct(t), make))

    def broadcast(self, tensors, opts=None):
        t = _one(tensors, "broadcast")
        root = self._root(opts, "broadcast root")
        ops.check_tensor(t, "broadcast")
        mine = root == self._map.position[self.rank()]

        def make(direct):
            staged = ops.Staged(t, "broadcast", device_ok=direct, read=mine)
            return (lambda tag: self._comm.broadcast_async(staged.wire, root, tag=tag,
                                                           compress=self._options.compress), staged.copy_back)

        return self._run("broadcast", [t], *self._on_device("broadcast", self._direct(t), make))

    def _gather_all(self, what, inp, outputs, flat, direct=False):
        """Starts an all-gather of inp into flat (ring order; on inp's GPU when `direct`) and copies the
        blocks into outputs (indexed by live rank) when it succeeded."""
        send = ops.Staged(inp, what, device_ok=direct)
        m, n = self._map, send.wire.numel()

        def finish():
            with torch.no_grad():
                for p, r in enumerate(m.ring):
                    outputs[m.index[r]].copy_(flat[p * n:(p + 1) * n])

        def start(tag):
            return self._comm.all_gather_async(send.wire, flat, tag=tag, compress=self._options.compress)

        return start, finish

    def allgather(self, output_tensors, input_tensors, opts=None):
        inp = _one(input_tensors, "all_gather input")
        outs = _one(output_tensors, "all_gather output")
        ops.check_tensor(inp, "all_gather input")
        if len(outs) != self._map.size:
            raise invalid("all_gather: %d output tensors for %d ranks in the ring (live torch ranks %s)"
                          % (len(outs), self._map.size, self._map.live))
        ops.same_blocks(outs, inp, "all_gather output")

        def make(direct):
            flat = self._wire_flat(inp, self._map.size, inp.device if direct else None)
            targets = [self._wire_block(x, direct) for x in outs]
            return self._gather_all("all_gather", inp, targets, flat, direct)

        return self._run("all_gather", output_tensors, *self._on_device("all_gather", self._direct(inp, *outs), make))

    def _allgather_base(self, output, input, opts=None):  # noqa: A002 - torch's names
        ops.check_tensor(input, "all_gather_into_tensor input")
        ops.check_tensor(output, "all_gather_into_tensor output")
        m = self._map
        if output.dtype != input.dtype or output.numel() != input.numel() * m.size:
            raise invalid("all_gather_into_tensor: the output must be %s with %d x %d elements (ranks in the ring "
                          "x input), got %s with %d" % (input.dtype, m.size, input.numel(), output.dtype,
                                                         output.numel()))
        what = "all_gather_into_tensor"

        def make(direct):
            out = ops.Staged(output, what + " output", device_ok=direct, read=False)
            if m.identity:  # ring order is rank order: straight into the output
                send = ops.Staged(input, what + " input", device_ok=direct)
                return (lambda tag: self._comm.all_gather_async(send.wire, out.wire, tag=tag,
                                                                compress=self._options.compress), out.copy_back)
            n = out.wire.numel() // m.size
            blocks = [out.wire[i * n:(i + 1) * n] for i in range(m.size)]
            start, finish = self._gather_all(what, input, blocks, torch.empty_like(out.wire), direct)
            return start, lambda: (finish(), out.copy_back())

        return self._run(what, [output], *self._on_device(what, self._direct(input, output), make))

    def allgather_coalesced(self, output_lists, input_list, opts=None):
        raise unsupported("all_gather_coalesced is not implemented by the pccl backend")

    def gather(self, output_tensors, input_tensors, opts=None):
        """dist.gather: an all-gather whose blocks only the root keeps."""
        inp = _one(input_tensors, "gather input")
        ops.check_tensor(inp, "gather input")
        root = self._root(opts, "gather root")
        mine = root == self._map.position[self.rank()]
        outs = []
        if mine:
            outs = _one(output_tensors, "gather output")
            if len(outs) != self._map.size:
                raise invalid("gather: %d output tensors for %d ranks in the ring" % (len(outs), self._map.size))
            ops.same_blocks(outs, inp, "gather output")

        def make(direct):
            flat = self._wire_flat(inp, self._map.size, inp.device if direct else None)
            targets = [self._wire_block(x, direct) for x in outs] if mine else [torch.empty(0)] * self._map.size
            start, finish = self._gather_all("gather", inp, targets, flat, direct)
            return start, finish if mine else None

        return self._run("gather", output_tensors, *self._on_device("gather", self._direct(inp, *outs), make))

    def scatter(self, output_tensors, input_tensors, opts=None):
        """dist.scatter: the root broadcasts every block, each rank keeps its own."""
        out = _one(output_tensors, "scatter output")
        ops.check_tensor(out, "scatter output")
        root = self._root(opts, "scatter root")
        m = self._map
        mine = root == m.position[self.rank()]
        ins = []
        if mine:
            ins = _one(input_tensors, "scatter input")
            if len(ins) != m.size:
                raise invalid("scatter: %d input tensors for %d ranks in the ring" % (len(ins), m.size))
            ops.same_blocks(ins, out, "scatter input")
        me = m.index[self.rank()]

        def make(direct):
            flat = self._wire_flat(out, m.size, out.device if direct else None)
            n = flat.numel() // m.size
            for i, x in enumerate(ins):
                flat[i * n:(i + 1) * n].copy_(self._wire_read(x, direct))
            dest = ops.Staged(out, "scatter output", device_ok=direct, read=False)

            def finish():
                with torch.no_grad():
                    dest.wire.copy_(flat[me * n:(me + 1) * n])
                dest.copy_back()

            return (lambda tag: self._comm.broadcast_async(flat, root, tag=tag, compress=self._options.compress),
                    finish)

        return self._run("scatter", output_tensors, *self._on_device("scatter", self._direct(out, *ins), make))

    def reduce_scatter(self, output_tensors, input_tensors, opts=None):
        out = _one(output_tensors, "reduce_scatter output")
        ins = _one(input_tensors, "reduce_scatter input")
        ops.check_tensor(out, "reduce_scatter output")
        m = self._map
        if len(ins) != m.size:
            raise invalid("reduce_scatter: %d input tensors for %d ranks in the ring (live torch ranks %s)"
                          % (len(ins), m.size, m.live))
        ops.same_blocks(ins, out, "reduce_scatter input")
        return self._reduce_scatter_blocks("reduce_scatter", out, lambda i: ins[i], opts, self._direct(out, *ins))

    def _reduce_scatter_base(self, output, input, opts=None):  # noqa: A002
        ops.check_tensor(output, "reduce_scatter_tensor output")
        ops.check_tensor(input, "reduce_scatter_tensor input")
        m = self._map
        if input.dtype != output.dtype or input.numel() != output.numel() * m.size:
            raise invalid("reduce_scatter_tensor: the input must be %s with %d x %d elements (ranks in the ring x "
                          "output), got %s with %d" % (output.dtype, m.size, output.numel(), input.dtype,
                                                        input.numel()))
        n = output.numel()
        flat_in = input.detach().reshape(-1)
        return self._reduce_scatter_blocks("reduce_scatter_tensor", output, lambda i: flat_in[i * n:(i + 1) * n],
                                           opts, self._direct(output, input))

    def _reduce_scatter_blocks(self, what, out, block, opts, direct):
        """block(i): the input block for live rank i; sent in ring order."""
        op = ops.op_name(_option(opts, "reduceOp", torch.distributed.ReduceOp.SUM), out.dtype)
        m, o = self._map, self._options

        def make(direct):
            flat = self._wire_flat(out, m.size, out.device if direct else None)
            n = flat.numel() // m.size
            for p, r in enumerate(m.ring):
                flat[p * n:(p + 1) * n].copy_(self._wire_read(block(m.index[r]), direct))
            dest = ops.Staged(out, what + " output", device_ok=direct, read=False)
            return (lambda tag: self._comm.reduce_scatter_async(flat, dest.wire, op=op, tag=tag,
                                                                quant=ops.quant_for(flat.dtype, o.quant),
                                                                compress=o.compress), dest.copy_back)

        return self._run(what, [out], *self._on_device(what, direct, make))

    def barrier(self, opts=None):
        return self._run("barrier", [], lambda tag: self._comm.barrier_async(tag=tag))

    def monitored_barrier(self, *args, **kwargs):
        raise unsupported("monitored_barrier is gloo's; use dist.barrier() with the pccl backend")

    def alltoall(self, *args, **kwargs):
        raise unsupported("all_to_all is not implemented by the pccl backend (a ring collective library)")

    def alltoall_base(self, *args, **kwargs):
        raise unsupported("all_to_all_single is not implemented by the pccl backend")

    def send(self, *args, **kwargs):
        raise unsupported("point-to-point send is not implemented by the pccl backend")

    def recv(self, *args, **kwargs):
        raise unsupported("point-to-point recv is not implemented by the pccl backend")

    def recv_anysource(self, *args, **kwargs):
        raise unsupported("point-to-point recv is not implemented by the pccl backend")

    # ---- wire helpers -----------------------------------------------------------------------------------

    @staticmethod
    def _wire_flat(like, blocks, device=None):
        """A buffer for `blocks` wire blocks of `like`'s shape and dtype, in host memory (or on `device`)."""
        probe = ops.wire_view(torch.empty(like.shape, dtype=like.dtype))
        return torch.empty(probe.numel() * blocks, dtype=probe.dtype, device=device or "cpu")

    @staticmethod
    def _wire_read(x, direct=False):
        """x's values as a 1-d wire-dtype tensor in host memory (with `direct`: where x is), a view when
        x is contiguous there."""
        x = x.detach() if direct else x.detach().cpu()
        return ops.wire_view(x.resolve_conj().contiguous())

    @staticmethod
    def _wire_block(x, direct=False):
        """x (any layout/device) as a 1-d wire-dtype view or copy; writable back into x only when x is
        contiguous host memory, or with `direct` contiguous memory of its GPU (used for outputs:
        gather's copy target must be a view)."""
        if x.is_contiguous() and (direct or not x.is_cuda):
            return ops.wire_view(x.detach())
        return _CopyTarget(x)

    def __repr__(self):
        return "<pccl.torch ProcessGroupPccl rank=%d size=%d live=%s>" % (self.rank(), self.size(), self._map.live)


class _CopyTarget:
    """An output block that is not contiguous host memory: copy_(src) writes through a staging copy."""

    def __init__(self, target):
        self.target = target

    def copy_(self, src):
        with torch.no_grad():
            x = src.view(torch.bool) if self.target.dtype == torch.bool else src
            if self.target.dtype.is_complex:
                x = torch.view_as_complex(src.view(-1, 2))
            self.target.copy_(x.view(self.target.shape))
