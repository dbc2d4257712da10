"""The grading fallback (math-verify in worker processes) shared fairly between clients.

A grade the fast path cannot settle goes to a math-verify worker process and may take up to
``grading_timeout_s`` (2 s). Without a rule, one client sending such answers on many sessions
holds every worker and every thread, and all other sessions wait (the reliability review measured
a canary falling from 1,741 to 162 steps/s). :class:`FairFallback` stands between the grader and
the pool:

- a client address has at most ``per_client`` fallback grades in flight, and so has its address
  group (IPv4 /24, IPv6 /64: :func:`~reasoning_env.server.executor.address_group`), so that 16
  addresses of one host cannot hold 16 workers' worth of CPU; further grades wait for their own
  turn (within their deadline), never for a worker another client needs;
- the wait happens inside :func:`~reasoning_env.server.executor.blocking`, so it does not hold one
  of the server's computing threads: fast grades never queue behind slow ones;
- the pool is the server's own (:class:`~reasoning_env.grading.pool.WorkerPool`, sized by
  ``REE_GRADING_WORKERS``), its processes at a lower CPU priority than the server.

The client is whatever :data:`client_key` holds in the calling thread (the WebSocket route sets
it to the client's address for each call); calls without one share the key ``""``.
"""

from __future__ import annotations

import contextvars
import threading
import time
from typing import Any

from reasoning_env.server.executor import address_group, blocking

__all__ = ["FairFallback", "client_key"]

#: The client on whose behalf the current thread grades (an address); set by the WebSocket route.
client_key: contextvars.ContextVar[str] = contextvars.ContextVar("reasoning_env_client", default="")


class FairFallback:
    """A :class:`~reasoning_env.grading.pool.WorkerPool` front that caps each client's share.

    Args:
        pool: The worker pool (``verify``, ``warm_up``, ``shutdown``).
        per_client: Fallback grades one client may have in flight (>= 1).

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

    @property
    def size(self) -> int:
        """Worker processes of the pool."""
        return self.pool.size

    def in_flight(self) -> dict[str, int]:
        """Fallback grades in flight per client (for ``/capacity`` and tests)."""
        with self._cond:
            return dict(self._in_flight)

    def verify(self, pred: str, gold: str, timeout_s: float) -> tuple:
        """math-verify's verdict within ``timeout_s`` seconds (see ``WorkerPool.call``): a client
        over its share waits for its own turn and gets ``("timeout", ...)`` if that does not
        come in time."""
        key = client_key.get()
        group = address_group(key) if key else key
        deadline = time.monotonic() + max(0.0, timeout_s)
        with blocking():
            with self._cond:
                while (
                    self._in_flight.get(key, 0) >= self.per_client
                    or self._group_in_flight.get(group, 0) >= self.per_client
                ):
                    left = deadline - time.monotonic()
                    if left <= 0:
                        return (
                            "timeout",
                            f"this client (or its address group {group}) already had {self.per_client} fallback "
                            "grade(s) in flight (REE_FALLBACK_PER_CLIENT)",
                        )
                    self._cond.wait(left)
                self._in_flight[key] = self._in_flight.get(key, 0) + 1
                self._group_in_flight[group] = self._group_in_flight.get(group, 0) + 1
            try:
                return self.pool.verify(pred, gold, max(0.0, deadline - time.monotonic()))
            finally:
                with self._cond:
                    for counts, k in ((self._in_flight, key), (self._group_in_flight, group)):
                        n = counts[k] - 1
                        if n:
                            counts[k] = n
                        else:
                            del counts[k]
                    self._cond.notify_all()

    def warm_up(self, wait_s: float = 0.0) -> bool:
        """Start the pool's workers (see ``WorkerPool.warm_up``)."""
        return self.pool.warm_up(wait_s)

    def pids(self) -> list:
        """Process ids of the live workers."""
        return self.pool.pids()

    def shutdown(self) -> None:
        """Stop the pool's workers."""
        self.pool.shutdown()
