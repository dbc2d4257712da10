"""Each address group's share of the server's compute, enforced before a call is queued.

The executor takes queued calls round-robin over address groups
(:meth:`~reasoning_env.server.executor.ElasticExecutor.submit_for`), but that alone does not
keep one client from taking the server: every message it sends also costs the event loop and
the GIL (frame parsing, JSON, the reply), and a work-conserving queue keeps the process
saturated with its calls, so each call of another client waits for the GIL and the loop behind
them (32 sessions of one address resetting back to back cut a canary of another group to
0.12-0.2x of its rate). :class:`ComputeShare` holds a group's next call back instead, before it
is queued, while ``n >= 2`` groups are active (have sent a call within ``active_s``):

- a group computes at most one call at a time (a call waiting on the grading fallback, inside
  :func:`~reasoning_env.server.executor.blocking`, steps aside and does not count);
- after a call that computed for ``d`` seconds (wall time, less its waits), the group's next
  call starts no sooner than ``d * (n - 1) * weight`` seconds later, so that the group keeps its
  lane busy at most about ``1/n`` of the time. ``weight`` (> 1) accounts for the event loop's
  share of a message (frame, JSON, reply), which the call's own time does not include.

A group alone is not held back at all (a single trainer keeps the whole server). The waiting
happens in the session's coroutine, before the call is queued: a held-back group's messages cost
the loop no more than their frames until their turn, and a ping-pong client sends no more until
it is answered. The price: while two groups are active, a group with many sessions gets at most
about half of one lane, even when the other group uses less (a light group rarely waits at all:
:data:`BURST_S`). Measured figures are in docs/server.md.

Everything here runs on the event loop, except :meth:`ComputeShare.step_aside`, which worker
threads reach through ``loop.call_soon_threadsafe``.
"""

from __future__ import annotations

import asyncio
import time
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

__all__ = ["ACTIVE_S", "BURST_S", "LOOP_WEIGHT", "ComputeShare", "Ticket"]

#: Seconds after its last call that a group still counts as active.
ACTIVE_S = 1.0
#: A message's whole cost over its call's own compute time (the loop's part: frame, JSON, reply).
LOOP_WEIGHT = 2.5
#: Spacing a group that was idle may skip (a token bucket this deep): a light client never waits.
BURST_S = 0.02
#: Bounds of the measured weight (the process's CPU time per second of its calls' CPU time).
WEIGHT_BOUNDS = (1.0, 8.0)
#: Seconds between two measurements of the weight.
WEIGHT_TICK_S = 0.5


@dataclass
class _Group:
    computing: int = 0
    next_at: float = 0.0
    seen: float = 0.0
    users: int = 0
    waiters: deque = field(default_factory=deque)
    timer: Any = None


@dataclass
class Ticket:
    """One admitted call of ``group``; ``computing`` until it leaves or steps aside."""

    group: Any
    computing: bool = True


class ComputeShare:
    """The gate of :mod:`reasoning_env.server.share` (see there).

    Args:
        active_s: Seconds after its last call that a group counts as active.
        weight: Starting factor on a call's compute time for the spacing of its group's calls;
            measured from then on (the process's CPU time over its calls' CPU time, every
            :data:`WEIGHT_TICK_S`, within :data:`WEIGHT_BOUNDS`).
        clock: Monotonic clock (seconds). cpu: The process's CPU time (seconds, all threads).
    """

    def __init__(
        self,
        active_s: float = ACTIVE_S,
        weight: float = LOOP_WEIGHT,
        clock: Callable[[], float] = time.monotonic,
        cpu: Callable[[], float] = time.process_time,
    ) -> None:
        if active_s <= 0 or weight <= 0:
            raise ValueError(f"need active_s > 0 and weight > 0, got active_s={active_s}, weight={weight}")
        self.active_s = active_s
        self.weight = weight
        self._clock = clock
        self._groups: dict[Any, _Group] = {}
        self._cpu = cpu
        self._calls_cpu = 0.0
        self._tick = (clock(), cpu(), 0.0)
        self.held_back = 0  # calls that waited for their group's turn (for /capacity and tests)

    def stats(self) -> dict[str, Any]:
        """``active_groups``, ``held_back`` (calls that waited for their turn so far) and ``weight``."""
        return {"active_groups": self.active(), "held_back": self.held_back, "weight": round(self.weight, 2)}

    def active(self, now: float | None = None) -> int:
        """Groups that sent a call within ``active_s``."""
        now = self._clock() if now is None else now
        horizon = now - self.active_s
        return sum(1 for g in self._groups.values() if g.seen >= horizon or g.computing)

    def join(self, group: Any) -> None:
        """A session of ``group`` opened (its entry stays while it has sessions)."""
        self._groups.setdefault(group, _Group()).users += 1

    def part(self, group: Any) -> None:
        """A session of ``group`` closed."""
        g = self._groups.get(group)
        if g is not None:
            g.users -= 1
            self._forget_if_unused(group)

    def try_enter(self, group: Any) -> Ticket | None:
        """The call's ticket if ``group`` may start it now, else ``None`` (then ``await enter``)."""
        g = self._groups.get(group)
        if g is None:
            g = self._groups[group] = _Group()  # a caller that did not join: kept while it has calls
        now = self._clock()
        g.seen = now
        if not g.waiters and self._may_start(g, now):
            g.computing += 1
            return Ticket(group)
        return None

    async def enter(self, group: Any) -> Ticket:
        """Wait for ``group``'s turn; returns the call's ticket (hand it to :meth:`leave`)."""
        ticket = self.try_enter(group)
        if ticket is not None:
            return ticket
        g = self._groups[group]
        self.held_back += 1
        fut = asyncio.get_running_loop().create_future()
        g.waiters.append(fut)
        self._pump(group)
        try:
            await fut  # _pump counted this call as computing when it resolved the future
        except asyncio.CancelledError:
            if fut.done() and not fut.cancelled():
                self._release(group)  # admitted, then cancelled before it ran
            else:
                try:
                    g.waiters.remove(fut)
                except ValueError:
                    pass
            raise
        return Ticket(group)

    def _may_start(self, g: _Group, now: float) -> bool:
        return (g.computing < 1 and now >= g.next_at) or self.active(now) <= 1

    def _pump(self, group: Any) -> None:
        """Admit ``group``'s next waiting call if its turn has come, else look again when it will."""
        g = self._groups.get(group)
        if g is None:
            return
        if g.timer is not None:
            g.timer.cancel()
            g.timer = None
        while g.waiters:
            now = self._clock()
            g.seen = now
            if not self._may_start(g, now):
                if g.computing < 1:  # spaced: look again at next_at (or sooner, others may go quiet)
                    delay = min(g.next_at - now, self.active_s)
                else:  # waits for a lane: _release pumps; look again within active_s regardless
                    delay = self.active_s
                g.timer = asyncio.get_running_loop().call_later(max(0.0, delay), self._pump, group)
                return
            fut = g.waiters.popleft()
            if not fut.done():
                g.computing += 1
                fut.set_result(None)

    def step_aside(self, ticket: Ticket) -> None:
        """The call started waiting on another process: its group may compute its next call."""
        if ticket.computing:
            ticket.computing = False
            self._release(ticket.group)

    def _measure(self, now: float) -> None:
        """Every WEIGHT_TICK_S: weight = the process's CPU time over its calls' (EWMA)."""
        t0, c0, k0 = self._tick
        if now - t0 < WEIGHT_TICK_S:
            return
        cpu = self._cpu()
        calls = self._calls_cpu - k0
        if calls > 0.005:
            lo, hi = WEIGHT_BOUNDS
            w = min(hi, max(lo, (cpu - c0) / calls))
            self.weight = 0.5 * self.weight + 0.5 * w
        self._tick = (now, cpu, self._calls_cpu)

    def leave(self, ticket: Ticket, busy_s: float, cpu_s: float = 0.0) -> None:
        """The call ended after computing ``busy_s`` seconds of wall time (``cpu_s`` of its
        thread's CPU time): space its group's next call."""
        g = self._groups.get(ticket.group)
        if g is None:
            return
        now = self._clock()
        self._calls_cpu += max(0.0, cpu_s)
        self._measure(now)
        n = self.active(now)
        if n > 1:
            g.next_at = max(g.next_at, now - BURST_S) + max(0.0, busy_s) * self.weight * (n - 1)
        if ticket.computing:
            ticket.computing = False
            self._release(ticket.group)
        else:
            self._pump(ticket.group)
            self._forget_if_unused(ticket.group)

    def _release(self, group: Any) -> None:
        g = self._groups.get(group)
        if g is None:
            return
        g.computing -= 1
        self._pump(group)
        self._forget_if_unused(group)

    def _forget_if_unused(self, group: Any) -> None:
        g = self._groups.get(group)
        if g is not None and g.users <= 0 and not g.computing and not g.waiters:
            if g.timer is not None:
                g.timer.cancel()
            del self._groups[group]
