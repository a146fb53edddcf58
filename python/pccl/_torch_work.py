"""The torch Work objects of the pccl backend and the thread that completes them.

A collective of the backend starts a pccl asynchronous operation (a pccl.Request) in the caller's
thread and returns a :class:`PcclWork` at once. One thread per process group (:class:`Completer`)
waits for the requests in the order they were started, runs the copy-back of staged tensors, then
completes the work: its event (``wait()``, ``is_completed()``) and its torch Future (``get_future()``,
which DDP's reducer and comm hooks use; its callbacks run on that thread, as with gloo's).

torch's own ``_create_work_from_future`` would do for successes, but its ``wait()`` does not raise the
future's exception on torch 1.13; a Work subclass whose ``wait()`` raises the pccl exception itself
(through pybind's trampoline when C++ calls it) does.
"""

import datetime
import queue
import threading

import torch
from torch._C._distributed_c10d import Work

from ._torch_errors import torch_error


def _seconds(timeout):
    """Work.wait's timeout (a timedelta, seconds or None; 0 = no limit, as c10d's kNoTimeout)."""
    if timeout is None:
        return None
    if isinstance(timeout, datetime.timedelta):
        timeout = timeout.total_seconds()
    timeout = float(timeout)
    return None if timeout <= 0 else timeout


class PcclWork(Work):
    """A collective of the pccl backend in flight (what ``dist.all_reduce(..., async_op=True)`` returns).

    ``wait(timeout=None)``: blocks until the collective ended (at most `timeout`, a timedelta or seconds,
    when given: then the backend's WaitTimeoutError, and the collective goes on) and raises its
    failure: a pccl exception that is also a RuntimeError (``pccl.PeerLostError`` and friends, with
    ``.retryable``). ``is_completed()``, ``is_success()``, ``exception()``, ``get_future()`` (a
    torch.futures.Future of the output tensors, failing with the same exception), ``result()``.
    """

    def __init__(self, outputs, what):
        super().__init__()
        self._outputs = outputs
        self._what = what
        self._done = threading.Event()
        self._error = None
        self._future = torch.futures.Future()

    def _complete(self, error):
        self._error = error
        self._done.set()
        if error is None:
            self._future.set_result(self._outputs)
        else:
            self._future.set_exception(error)

    def wait(self, timeout=None):
        if not self._done.wait(_seconds(timeout)):
            from ._torch_errors import WaitTimeoutError  # noqa: PLC0415 - generated class

            raise WaitTimeoutError(detail="%s has not ended within %s; it goes on (wait again)"
                                   % (self._what, timeout))
        if self._error is not None:
            raise self._error
        return True

    def is_completed(self):
        return self._done.is_set()

    def is_success(self):
        return self._done.is_set() and self._error is None

    def exception(self):
        return self._error

    def get_future(self):
        return self._future

    def result(self):
        return self._outputs

    def synchronize(self):
        pass

    def source_rank(self):
        raise torch_error(RuntimeError("source_rank() is only defined for recv_anysource"))

    def __repr__(self):
        state = "failed" if self._error is not None else "done" if self._done.is_set() else "in flight"
        return "<pccl.torch work %s %s>" % (self._what, state)


class Completer:
    """A thread waiting for the requests of one process group in start order.

    ``submit(request, work, finish)``: `request` is a pccl.Request (or None: nothing to wait for);
    `finish()` (or None) runs after the request succeeded (copy back). ``drain(timeout_s)`` blocks until
    everything submitted so far is complete; ``close()`` ends the thread after the queue.
    """

    def __init__(self, name):
        self._queue = queue.Queue()
        self._cond = threading.Condition()
        self._submitted = 0
        self._completed = 0
        self._thread = threading.Thread(target=self._run, name=name, daemon=True)
        self._thread.start()

    def submit(self, request, work, finish=None, release=None):
        with self._cond:
            self._submitted += 1
        self._queue.put((request, work, finish, release))

    @property
    def in_flight(self):
        with self._cond:
            return self._submitted - self._completed

    def _run(self):
        while True:
            item = self._queue.get()
            if item is None:
                return
            request, work, finish, release = item
            error = None
            try:
                if request is not None:
                    request.wait()
                if finish is not None:
                    finish()
            except BaseException as e:  # noqa: BLE001 - handed to the work
                error = torch_error(e)
            finally:
                if release is not None:
                    release()
            try:
                work._complete(error)
            finally:
                with self._cond:
                    self._completed += 1
                    self._cond.notify_all()

    def drain(self, timeout_s):
        """True once every work submitted before the call is complete; False at the deadline."""
        with self._cond:
            target = self._submitted
            return self._cond.wait_for(lambda: self._completed >= target, timeout_s)

    def close(self, timeout_s):
        self._queue.put(None)
        self._thread.join(timeout_s)
