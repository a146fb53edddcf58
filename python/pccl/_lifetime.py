"""What keeps finalizers and forked children away from the C library.

* Fork: a child process inherits copies of every Communicator, Master and Request, whose C handles
  refer to io threads that do not exist in the child and to sockets shared with the parent. Every
  object records where it was created (:class:`Origin`); ``os.register_at_fork`` bumps a generation in
  the child, so each method of an inherited object raises InvalidUsageError before touching a lock
  or the library, and its close() and finalizer leak the C handle on purpose.
* Finalizers: a finalizer runs in whatever thread the garbage collector interrupts, possibly between
  a failing pccl call and the read of its per-thread detail, possibly while that thread holds a lock.
  So finalizers never call into C and never block: they hand the work (pcclCommDestroy,
  pcclMasterDestroy, waiting for the requests of a destroyed communicator) to one janitor thread
  through a ``queue.SimpleQueue`` (whose put() is safe from a finalizer). At interpreter exit the
  janitor's remaining work runs before the exit completes (atexit).
"""

import atexit
import os
import queue
import threading

from .errors import InvalidUsageError

_generation = 0  # how many forks separate this process from the one that imported pccl


def _after_fork_in_child():
    global _generation
    _generation += 1
    _janitor.reset_in_child()


class Origin:
    """The process (and fork generation) an object was created in."""

    __slots__ = ("pid", "generation", "kind")

    def __init__(self, kind):
        self.pid = os.getpid()
        self.generation = _generation
        self.kind = kind

    @property
    def inherited(self):
        """True in a child process made by fork() after the object was created."""
        return self.generation != _generation or self.pid != os.getpid()

    def check(self):
        """InvalidUsageError when the object was inherited through fork()."""
        if self.inherited:
            raise InvalidUsageError(
                detail="the %s was created in process %d and used after fork() in process %d; its C handle "
                "belongs to the parent (threads and sockets the child does not own): create a new one in the "
                "child" % (self.kind, self.pid, os.getpid()))


class _Janitor:
    """One daemon thread running the C cleanup that finalizers hand over (in order)."""

    def __init__(self):
        self._jobs = queue.SimpleQueue()
        self._thread = None
        self._start_lock = threading.Lock()
        self._exiting = False

    def ensure_started(self):
        """Starts the thread; called by constructors (never by finalizers: starting a thread blocks)."""
        if self._thread is not None and self._thread.is_alive():
            return
        with self._start_lock:
            if self._thread is None or not self._thread.is_alive():
                self._thread = threading.Thread(target=self._run, args=(self._jobs,), name="pccl-janitor",
                                                daemon=True)
                self._thread.start()

    def submit(self, job):
        """Queues job() (safe in a finalizer: never blocks). After the atexit hook ran (objects finalized
        while the interpreter shuts down) the job runs at once instead."""
        if self._exiting or self._thread is None:
            _run_quietly(job)
        else:
            self._jobs.put(job)

    @staticmethod
    def _run(jobs):
        while True:
            job = jobs.get()
            if job is None:
                return
            _run_quietly(job)

    def drain_at_exit(self, timeout_s=30.0):
        """atexit: lets the thread finish what was queued (each job ends by its own deadline), then runs
        inline whatever a late finalizer queues."""
        self._exiting = True
        thread = self._thread
        if thread is not None and thread.is_alive():
            self._jobs.put(None)
            thread.join(timeout_s)
        while True:
            try:
                job = self._jobs.get_nowait()
            except queue.Empty:
                return
            if job is not None:
                _run_quietly(job)

    def reset_in_child(self):
        """fork(): the thread does not exist in the child and the queued jobs are the parent's."""
        self._jobs = queue.SimpleQueue()
        self._thread = None
        self._start_lock = threading.Lock()


def _run_quietly(job):
    try:
        job()
    except Exception:  # noqa: BLE001 - cleanup of objects nobody references: nothing to report to
        pass


_janitor = _Janitor()
os.register_at_fork(after_in_child=_after_fork_in_child)
atexit.register(_janitor.drain_at_exit)


def start_janitor():
    _janitor.ensure_started()


def defer(job):
    """Runs job() on the janitor thread (see the module docstring); safe from a finalizer."""
    _janitor.submit(job)
