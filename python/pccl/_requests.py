"""Asynchronous operations: pccl.Request (what the user holds), _Op (one C request and the buffers pccl
uses until it is freed) and OpTable (a communicator's operations in flight).

Ownership: a Communicator's OpTable holds every _Op until its C request is freed by pcclWait, so the
buffers stay alive while pccl may touch them, whoever holds the Request. A Request that is dropped
unwaited only marks its _Op orphaned (its finalizer never blocks and never calls into C); the table
frees orphaned operations that have ended on the communicator's later calls (pcclTest, then pcclWait,
which then returns at once), and close() or the communicator's finalizer takes care of the rest.
"""

import ctypes
import threading

from . import _common
from ._buffers import storage_problems
from ._lib import ReduceInfo as _CReduceInfo
from ._lib import Result
from .errors import InvalidUsageError, WaitTimeoutError, error_class, last_error, make_error
from .types import ReduceInfo


def reduce_info(c):
    return ReduceInfo(int(c.tx_bytes), int(c.rx_bytes), int(c.world_size), float(c.time_s))


class _Op:
    """One C request: its handle until pcclWait frees it, the Buffers pccl uses until then, and the
    outcome when someone other than the Request's owner ended it (close())."""

    __slots__ = ("handle", "keep", "comm_handle", "lock", "orphaned", "outcome")

    def __init__(self, handle, keep, comm_handle):
        self.handle = handle
        self.keep = keep
        self.comm_handle = comm_handle
        self.lock = threading.Lock()  # held by whoever waits on the handle
        self.orphaned = False  # the Request was dropped unwaited
        self.outcome = None  # a ReduceInfo or an exception not yet handed to the Request's wait()

    def wait(self, lib, limit_ms=None):
        """pcclWait (pcclWaitFor when limit_ms is not None) with self.lock held and the handle live.
        Returns None when the limited wait gave up (the error to raise is then in the second member),
        else the outcome (a ReduceInfo or an exception) once the request is freed and the buffers
        released. The failure's detail is read on this thread right after the call, before anything
        else can call into pccl (pcclGetLastError is per thread; a stale comm handle reads this thread's
        last failure, which is the same)."""
        info = _CReduceInfo()
        if limit_ms is None:
            r = lib.pcclWait(self.handle, ctypes.byref(info))
            detail = "" if r == Result.SUCCESS else last_error(self.comm_handle)
        else:
            handle = ctypes.c_void_p(self.handle)
            r = lib.pcclWaitFor(ctypes.byref(handle), limit_ms, ctypes.byref(info))
            detail = "" if r == Result.SUCCESS else last_error(self.comm_handle)
            if handle.value is not None:  # not freed: the wait gave up, the operation goes on
                return None, (WaitTimeoutError if r == Result.TIMEOUT else error_class(r))(r, detail)
        self.handle = None
        problems = storage_problems(self.keep)
        self.keep = None
        if problems:
            also = "" if r == Result.SUCCESS else " (the operation itself failed: %s)" % make_error(r, detail)
            return make_error(Result.INVALID_USAGE, "; ".join(problems) + also), None
        if r != Result.SUCCESS:
            return make_error(r, detail), None
        return reduce_info(info), None


class OpTable:
    """A communicator's operations whose C request is not freed yet."""

    def __init__(self, lib):
        self._lib = lib
        self._lock = threading.Lock()  # never taken by a finalizer
        self._ops = set()
        self.orphans = False  # set by Request finalizers (a plain store: safe anywhere)

    def add(self, op):
        with self._lock:
            self._ops.add(op)

    def remove(self, op):
        with self._lock:
            self._ops.discard(op)

    def __len__(self):
        return len(self._ops)

    def reap(self):
        """Frees the orphaned operations that have ended, releasing their buffers. Never blocks: skips
        what another thread holds; pcclTest first, pcclWait only on an ended operation."""
        if not self.orphans or not self._lock.acquire(blocking=False):
            return
        try:
            self.orphans = False  # cleared first: a finalizer running meanwhile sets it again
            candidates = [op for op in self._ops if op.orphaned]
        finally:
            self._lock.release()
        for op in candidates:
            if not op.lock.acquire(blocking=False):
                self.orphans = True
                continue
            try:
                if op.handle is not None:
                    flag = ctypes.c_int(0)
                    if self._lib.pcclTest(op.handle, ctypes.byref(flag)) != Result.SUCCESS or not flag.value:
                        self.orphans = True  # still running
                        continue
                    op.wait(self._lib)  # returns at once; nobody wants the outcome
                op.outcome = None
            finally:
                op.lock.release()
            self.remove(op)

    def complete_all(self):
        """close(), the communicator still alive and no operation starting any more: waits for every
        operation (each ends by op_timeout_ms), keeping the outcome for Requests still referenced."""
        with self._lock:
            ops = list(self._ops)
        for op in ops:
            with op.lock:
                if op.handle is not None:
                    outcome, _ = op.wait(self._lib)
                    if not op.orphaned:
                        op.outcome = outcome
            self.remove(op)

    def take_all(self):
        """Empties the table (the communicator's finalizer hands the operations to the janitor)."""
        with self._lock:
            ops, self._ops = list(self._ops), set()
        return ops

    @staticmethod
    def finish_after_destroy(lib, ops):
        """After pcclCommDestroy: every operation has ended (pcclInvalidUsage when it was in flight), so
        each pcclWait returns at once; frees the requests and releases the buffers."""
        for op in ops:
            with op.lock:
                if op.handle is not None:
                    op.wait(lib)
                op.outcome = None


class Request:
    """An asynchronous collective started by ``Communicator.all_reduce_async`` (or broadcast_async,
    all_gather_async, reduce_scatter_async, barrier_async).

    The buffers passed in belong to pccl until :meth:`wait` returns: do not read, write, resize or free
    them before. The communicator keeps them alive until the operation's C request is freed, whether or
    not this Request is kept: dropping a Request unwaited is allowed (fire and forget) and never blocks;
    its buffers are released on a later call of the communicator once the operation has ended, or by
    :meth:`Communicator.close`. close() waits for the operations still in flight; a Request it ended
    still hands out the outcome at its first :meth:`wait`.

    Thread-safety: :meth:`wait` from any thread, one thread at a time (a wait that raised
    WaitTimeoutError may be repeated; any other outcome ends the request); :meth:`test` from any thread
    (it answers False while another thread is inside :meth:`wait`). In a child process that inherited
    the request through fork(), every method raises InvalidUsageError.
    """

    def __init__(self, comm, op, tag, recv):
        self._comm = comm
        self._op = op
        self._tag = tag
        self._recv = recv
        self._waited = False

    @property
    def tag(self):
        """The tag the operation was started with."""
        return self._tag

    @property
    def recv(self):
        """The array or tensor that receives the result (the send buffer when in place); complete once
        :meth:`wait` has returned. The request keeps it alive as long as the request exists."""
        return self._recv

    @property
    def done(self):
        """True once the operation has ended and its C request is freed: :meth:`wait` returned or raised
        anything but WaitTimeoutError, or close() ended it."""
        return self._waited or self._op.handle is None

    def test(self):
        """True when the operation has ended (:meth:`wait` then returns at once). Never blocks.

        Raises InvalidUsageError when the request was already waited on, or was inherited through
        fork()."""
        self._comm._guard.origin.check()
        op = self._op
        if not op.lock.acquire(blocking=False):
            return False  # another thread is in wait()
        try:
            if op.handle is None:
                if self._waited:
                    raise InvalidUsageError(detail="the request was already waited on")
                return True  # ended by close(); wait() hands out the outcome
            flag = ctypes.c_int(0)
            r = self._comm._lib.pcclTest(op.handle, ctypes.byref(flag))
            if r != Result.SUCCESS:
                raise make_error(r, last_error(op.comm_handle))
            return bool(flag.value)
        finally:
            op.lock.release()

    def wait(self, timeout=None):
        """Blocks until the operation ends (at most the communicator's op_timeout_ms; the GIL is released
        meanwhile), frees the request and returns a :class:`ReduceInfo`. The result is in recv (or the
        in-place buffer) only now.

        timeout: None (default) waits until the operation ends. Otherwise at most this many seconds
        (int or float >= 0; 0 only looks): if the operation has not ended by then, raises
        WaitTimeoutError and nothing else happens. The operation is not aborted, the request stays
        valid, its buffers still belong to pccl: call wait() again (with or without a timeout) or test().

        Raises WaitTimeoutError (gave up, see above), the operation's error (PeerLostError,
        TopologyChangedError, MismatchError, PcclTimeoutError when the operation itself ran past
        op_timeout_ms, ...: see :meth:`Communicator.all_reduce`), InvalidUsageError when already waited
        on, when a torch tensor's memory was resized, freed or replaced during the operation, or when
        inherited through fork(); InvalidArgumentError for a bad timeout."""
        self._comm._guard.origin.check()
        limit_ms = None if timeout is None else _common.timeout_ms(timeout)
        op = self._op
        with op.lock:
            if op.handle is not None:
                outcome, gave_up = op.wait(self._comm._lib, limit_ms)
                if gave_up is not None:
                    raise gave_up
            elif op.outcome is not None and not self._waited:
                outcome, op.outcome = op.outcome, None  # close() ended it
            else:
                raise InvalidUsageError(detail="the request was already waited on")
            self._waited = True
        self._comm._ops.remove(op)
        if isinstance(outcome, BaseException):
            raise outcome
        return outcome

    def __del__(self):
        # Never blocks, never calls into C: the communicator's table frees the operation once it ends.
        op = getattr(self, "_op", None)
        if op is not None and op.handle is not None:
            op.orphaned = True
            self._comm._ops.orphans = True

    def __repr__(self):
        return "<pccl.Request tag=%d %s>" % (self._tag, "done" if self.done else "in flight")
