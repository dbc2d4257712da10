"""The grading fallback (math-verify in worker processes) shared fairly between clients.

A grade the fast path cannot settle goes to a math-verify worker process and may take up to
``grading_timeout_s`` (2 s) of that worker's CPU. Without a rule, one client sending such
answers on many sessions holds every worker and every thread, and all other sessions wait (the
reliability review measured a canary falling from 1,741 to 162 steps/s). :class:`FairFallback`
stands between the grader and the pool:

- **no grade depends on what other clients do**: a grade waits for its turn at a worker as
  long as it takes (it is admitted, never timed out for waiting), and its time limit is the
  worker's CPU time on it (``WorkerPool.call(cpu_time=True)``), not the wall time of a busy
  machine (a slow-grade flood from 16 /24s turned 24 of 30 right answers of another client
  into ``timeout`` when the wait and the machine's load counted);
- a free worker goes to the waiting grade whose address group (IPv4 /24, IPv6 /64:
  :func:`~reasoning_env.server.executor.address_group`) was served longest ago, then whose
  client was, then in arrival order: a client among 40 flooding groups gets the next worker
  that frees, not the 41st;
- a client address has at most ``per_client`` fallback grades in flight, and so has its address
  group, so that 16 addresses of one host cannot hold 16 workers' worth of CPU;
- the wait happens inside :func:`~reasoning_env.server.executor.blocking`, so it does not hold one
  of the server's computing threads: fast grades never queue behind slow ones;
- a grade whose client went away (:data:`client_gone`) leaves the queue;
- the pool is the server's own (:class:`~reasoning_env.grading.pool.WorkerPool`, sized by
  ``REE_GRADING_WORKERS``), its processes at a lower CPU priority than the server.

The client is whatever :data:`client_key` holds in the calling thread (the WebSocket route sets
it to the client's address for each call); calls without one share the key ``""``.
"""

from __future__ import annotations

import contextvars
import itertools
import threading
from collections.abc import Callable
from typing import Any

from reasoning_env.server.executor import address_group, blocking

__all__ = ["FairFallback", "client_gone", "client_key"]

#: The client on whose behalf the current thread grades (an address); set by the WebSocket route.
client_key: contextvars.ContextVar[str] = contextvars.ContextVar("reasoning_env_client", default="")
#: Whether the current call's client has gone (a waiting grade of a closed session leaves the queue).
client_gone: contextvars.ContextVar[Callable[[], bool] | None] = contextvars.ContextVar(
    "reasoning_env_client_gone", default=None
)
#: Seconds between looks at :data:`client_gone` while a grade waits for its turn.
GONE_POLL_S = 0.25


class _Waiter:
    __slots__ = ("key", "group", "seq", "admitted")

    def __init__(self, key: str, group: str, seq: int) -> None:
        self.key, self.group, self.seq = key, group, seq
        self.admitted = False


class FairFallback:
    """A :class:`~reasoning_env.grading.pool.WorkerPool` front that shares its workers fairly.

    Args:
        pool: The worker pool (``verify(pred, gold, timeout_s, cpu_time=...)``, ``warm_up``,
            ``shutdown``, ``size``).
        per_client: Fallback grades one client (and one address group) may have in flight (>= 1).

    It has the pool's interface (``verify(pred, gold, timeout_s)``, ``warm_up``, ``pids``,
    ``shutdown``), so a :class:`~reasoning_env.grading.Grader` takes it as its ``pool``.
    """

    def __init__(self, pool: Any, per_client: int) -> None:
        if per_client < 1:
            raise ValueError(f"per_client must be >= 1, got {per_client}")
        self.pool = pool
        self.per_client = int(per_client)
        self._cond = threading.Condition()
        self._in_flight: dict[str, int] = {}
        self._group_in_flight: dict[str, int] = {}
        self._served: dict[str, int] = {}  # group or client -> the admission count when it was last served
        self._waiting: list[_Waiter] = []
        self._seq = itertools.count()
        self._admissions = 0
        self._closed = False
        self.waited = 0  # grades that waited for their turn (for /capacity and tests)

    @property
    def size(self) -> int:
        """Worker processes of the pool."""
        return self.pool.size

    def in_flight(self) -> dict[str, int]:
        """Fallback grades in flight per client (for ``/capacity`` and tests)."""
        with self._cond:
            return dict(self._in_flight)

    def queued(self) -> int:
        """Fallback grades waiting for their turn."""
        with self._cond:
            return len(self._waiting)

    def _eligible(self, w: _Waiter) -> bool:
        return (
            self._in_flight.get(w.key, 0) < self.per_client and self._group_in_flight.get(w.group, 0) < self.per_client
        )

    def _admit_locked(self) -> None:
        """Give free workers to the waiting grades in fair order (least recently served group,
        then client, then arrival)."""
        busy = sum(self._in_flight.values())
        while busy < self.pool.size:
            best = None
            for w in self._waiting:
                if w.admitted or not self._eligible(w):
                    continue
                rank = (self._served.get("g:" + w.group, -1), self._served.get("c:" + w.key, -1), w.seq)
                if best is None or rank < best[0]:
                    best = (rank, w)
            if best is None:
                return
            w = best[1]
            w.admitted = True
            self._waiting.remove(w)
            self._take_locked(w.key, w.group)
            busy += 1
        self._cond.notify_all()

    def _take_locked(self, key: str, group: str) -> None:
        self._admissions += 1
        self._served["g:" + group] = self._served["c:" + key] = self._admissions
        self._in_flight[key] = self._in_flight.get(key, 0) + 1
        self._group_in_flight[group] = self._group_in_flight.get(group, 0) + 1

    def verify(self, pred: str, gold: str, timeout_s: float, *, cpu_time: bool = False) -> tuple:
        """math-verify's verdict on ``pred`` vs ``gold``, with ``timeout_s`` seconds of the
        worker's CPU time with ``cpu_time`` (the server's grader asks for that), else wall time. Waits for this
        client's fair turn first, however long the queue; ``("error", ...)`` if the client went
        away or the server stops meanwhile."""
        key = client_key.get()
        group = address_group(key) if key else key
        gone = client_gone.get()
        with blocking():
            with self._cond:
                if self._closed:
                    return ("error", "pool closed")
                w = _Waiter(key, group, next(self._seq))
                self._waiting.append(w)
                self._admit_locked()
                if not w.admitted:
                    self.waited += 1
                while not w.admitted:
                    if self._closed or (gone is not None and gone()):
                        self._waiting.remove(w)
                        return ("error", "the server stopped" if self._closed else "the client went away")
                    self._cond.wait(GONE_POLL_S)
            try:
                if cpu_time:
                    return self.pool.verify(pred, gold, max(0.0, timeout_s), cpu_time=True)
                return self.pool.verify(pred, gold, max(0.0, timeout_s))
            finally:
                with self._cond:
                    for counts, k in ((self._in_flight, key), (self._group_in_flight, group)):
                        n = counts[k] - 1
                        if n:
                            counts[k] = n
                        else:
                            del counts[k]
                    self._forget_locked()
                    self._admit_locked()
                    self._cond.notify_all()

    def _forget_locked(self) -> None:
        """Drop the service marks of clients and groups with nothing in flight or waiting once
        there are many (the marks only order the waiting ones)."""
        if len(self._served) < 4096:
            return
        live = {"c:" + k for k in self._in_flight} | {"g:" + g for g in self._group_in_flight}
        live |= {"c:" + w.key for w in self._waiting} | {"g:" + w.group for w in self._waiting}
        self._served = {k: v for k, v in self._served.items() if k in live}

    def warm_up(self, wait_s: float = 0.0) -> bool:
        """Start the pool's workers (see ``WorkerPool.warm_up``)."""
        return self.pool.warm_up(wait_s)

    def pids(self) -> list:
        """Process ids of the live workers."""
        return self.pool.pids()

    def shutdown(self) -> None:
        """Stop the pool's workers; waiting grades end with an error."""
        with self._cond:
            self._closed = True
            self._cond.notify_all()
        self.pool.shutdown()
