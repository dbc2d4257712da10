"""The thread pool that runs every session's resets and steps, and lets waits step aside.

A step mostly computes (counting tokens, the fast grader, the reward), but a grade the fast path
cannot settle waits on a math-verify worker process for up to ``grading_timeout_s``. In a plain
thread pool such a wait holds a thread: 8 steps that wait 2 s each held all 4 threads of the
server, and every other session's steps queued behind them (a canary session fell from 1,741 to
162 steps/s). :class:`ElasticExecutor` keeps ``threads`` threads for computing and treats a thread
inside :func:`blocking` (a wait on another process) as not there: a spare thread takes its place
for as long as the wait lasts, and the extra thread ends once the pool is back to size. This is
the "managed blocking" of Java's ``ForkJoinPool``.

Waits are bounded elsewhere (the grading fallback admits a bounded number per client, see
:mod:`reasoning_env.server.fallback`); ``max_threads`` is the hard cap on threads in all.
"""

from __future__ import annotations

import contextlib
import itertools
import queue
import threading
import time
from collections import deque
from collections.abc import Callable, Iterator
from concurrent.futures import Executor, Future
from typing import Any

__all__ = ["ElasticExecutor", "address_group", "blocking", "on_wait"]

_local = threading.local()
#: Queue entry standing for "the next call in fair order" (:meth:`ElasticExecutor.submit_for`).
_FAIR = object()


def address_group(address: str) -> str:
    """The address group a client belongs to for fair scheduling: its IPv4 /24 or IPv6 /64
    (one host, or one tenant's neighbouring hosts, cannot outweigh the others by using many
    addresses); other names stand for themselves."""
    import ipaddress

    try:
        ip = ipaddress.ip_address(address)
    except ValueError:
        return address
    prefix = 24 if ip.version == 4 else 64
    return str(ipaddress.ip_network(f"{ip}/{prefix}", strict=False))


@contextlib.contextmanager
def blocking() -> Iterator[None]:
    """Mark the code inside as waiting (not computing): when it runs on an
    :class:`ElasticExecutor` thread, another thread serves the queue meanwhile. Elsewhere it
    does nothing."""
    hook = getattr(_local, "on_wait", None)
    if hook is not None:
        _local.on_wait = None  # once per call
        hook()
    pool: ElasticExecutor | None = getattr(_local, "pool", None)
    if pool is None:
        yield
        return
    pool._enter_wait()
    try:
        yield
    finally:
        pool._leave_wait()


@contextlib.contextmanager
def on_wait(callback: Callable[[], None]) -> Iterator[None]:
    """Call ``callback()`` (in this thread) the first time the code inside enters :func:`blocking`."""
    _local.on_wait = callback
    try:
        yield
    finally:
        _local.on_wait = None


class ElasticExecutor(Executor):
    """``threads`` computing threads, plus one stand-in per thread waiting in :func:`blocking`.

    Args:
        threads: Threads that compute at once (>= 1).
        max_threads: Most threads in all, waiting ones included (>= ``threads``).
        name: Prefix of the thread names.

    Calls run in submission order. A cancelled future whose call has not started never runs
    (a session whose client went away drops its queued work). The hot path is the standard
    library's: a C queue and an idle-thread semaphore, as in ``ThreadPoolExecutor`` (a
    condition variable shared by the event loop and the workers cost the loop 0.14 ms per
    submit in lock hand-offs under load); the lock is taken only to start, retire or park threads.
    """

    def __init__(self, threads: int, max_threads: int, name: str = "ree-worker") -> None:
        if threads < 1 or max_threads < threads:
            raise ValueError(f"need 1 <= threads <= max_threads, got threads={threads}, max_threads={max_threads}")
        self.threads = threads
        self.max_threads = max_threads
        self._name = name
        self._queue: queue.SimpleQueue = queue.SimpleQueue()
        self._idle = threading.Semaphore(0)  # threads blocked on the queue, free to take the next call
        self._lock = threading.Lock()
        self._alive = 0  # all threads
        self._waiting = 0  # threads inside blocking()
        self._shutdown = False
        self._ids = itertools.count()
        # Fair order (submit_for): group -> (ring of clients, client -> calls), and a ring of groups.
        self._fair_lock = threading.Lock()
        self._groups: dict[Any, tuple[deque, dict[Any, deque]]] = {}
        self._group_ring: deque = deque()

    # ------------------------------------------------------------------ Executor
    def submit(self, fn: Callable[..., Any], /, *args: Any, **kwargs: Any) -> Future:
        """Queue ``fn(*args, **kwargs)``; returns its future.

        Raises:
            RuntimeError: the executor was shut down.
        """
        if self._shutdown:
            raise RuntimeError("the executor was shut down")
        future: Future = Future()
        self._queue.put((future, fn, args, kwargs))
        if not self._idle.acquire(blocking=False):
            self._spawn_if_short()
        return future

    def submit_for(self, group: Any, client: Any, fn: Callable[..., Any], /, *args: Any, **kwargs: Any) -> Future:
        """Queue ``fn(*args, **kwargs)`` on behalf of ``client`` of ``group``: calls are taken
        round-robin over the groups with calls waiting, then over each group's clients, then in
        submission order within a client. One client (or address group) with 64 sessions
        resetting back to back thus gets one turn in two against a second client, not 64 in 65.

        Raises:
            RuntimeError: the executor was shut down.
        """
        if self._shutdown:
            raise RuntimeError("the executor was shut down")
        future: Future = Future()
        with self._fair_lock:
            entry = self._groups.get(group)
            if entry is None:
                entry = self._groups[group] = (deque(), {})
                self._group_ring.append(group)
            ring, lanes = entry
            lane = lanes.get(client)
            if lane is None:
                lane = lanes[client] = deque()
                ring.append(client)
            lane.append((future, fn, args, kwargs))
        self._queue.put(_FAIR)
        if not self._idle.acquire(blocking=False):
            self._spawn_if_short()
        return future

    def _next_fair(self) -> tuple:
        with self._fair_lock:
            group = self._group_ring.popleft()
            ring, lanes = self._groups[group]
            client = ring.popleft()
            lane = lanes[client]
            item = lane.popleft()
            if lane:
                ring.append(client)
            else:
                del lanes[client]
            if ring:
                self._group_ring.append(group)
            else:
                del self._groups[group]
            return item

    def shutdown(self, wait: bool = True, *, cancel_futures: bool = False) -> None:
        """Stop taking calls; with ``cancel_futures`` drop the queued ones. Running calls finish."""
        with self._lock:
            self._shutdown = True
            alive = self._alive
        if cancel_futures:
            while True:
                try:
                    item = self._queue.get_nowait()
                except queue.Empty:
                    break
                if item is _FAIR:
                    item = self._next_fair()
                if item is not None:
                    item[0].cancel()
        for _ in range(alive):
            self._queue.put(None)
        if wait:
            while True:
                with self._lock:
                    if not self._alive:
                        return
                time.sleep(0.02)

    def stats(self) -> dict[str, int]:
        """``threads`` (target), ``alive``, ``computing``, ``waiting`` (in :func:`blocking`) and ``queued``."""
        with self._lock:
            alive, waiting = self._alive, self._waiting
        idle = getattr(self._idle, "_value", 0)
        return {
            "threads": self.threads,
            "alive": alive,
            "computing": max(0, alive - waiting - idle),
            "waiting": waiting,
            "queued": self._queue.qsize(),
        }

    # ------------------------------------------------------------------ internals
    def _spawn_if_short(self) -> None:
        with self._lock:
            if self._shutdown or self._alive - self._waiting >= self.threads or self._alive >= self.max_threads:
                return
            self._alive += 1
        threading.Thread(target=self._run, name=f"{self._name}-{next(self._ids)}", daemon=True).start()

    def _enter_wait(self) -> None:
        with self._lock:
            self._waiting += 1
        if self._queue.empty():
            return  # calls submitted later find the pool short (waiting threads do not count) and spawn
        if self._idle.acquire(blocking=False):
            self._idle.release()  # an idle thread will take the queued call
            return
        self._spawn_if_short()  # a stand-in serves the queue while this thread waits

    def _leave_wait(self) -> None:
        with self._lock:
            self._waiting -= 1

    def _run(self) -> None:
        _local.pool = self
        get = self._queue.get
        while True:
            item = get()
            if item is None:
                break
            if item is _FAIR:
                item = self._next_fair()
            future, fn, args, kwargs = item
            if future.set_running_or_notify_cancel():
                try:
                    result = fn(*args, **kwargs)
                except BaseException as exc:  # noqa: BLE001 - handed to the caller
                    future.set_exception(exc)
                else:
                    future.set_result(result)
            del item, future, fn, args, kwargs
            if self._alive - self._waiting > self.threads:  # back from a wait: one thread too many
                with self._lock:
                    if self._alive - self._waiting > self.threads:
                        self._alive -= 1
                        return
            self._idle.release()
        with self._lock:
            self._alive -= 1
