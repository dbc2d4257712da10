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
- each call is charged its cost: its thread's CPU time plus the event loop's CPU time per
  message (frame, JSON, reply, the scheduling here), measured every :data:`COST_TICK_S` as the
  process's CPU time less its calls' over the messages answered; a group's calls are spaced so
  that its charges add up to at most its share of one core: after a call that cost ``c``, its
  group's next call is due ``c / share`` seconds after the previous one was (a token bucket: a
  group under its share never waits; one idle before may skip :data:`BURST_S` of spacing);
- the share is ``1/n``, except for a group whose calls queue up (one is waiting for its turn)
  while another active group's do not: that group gets ``1/(n + 1)``, and what it leaves goes
  to the groups that wait for each answer before they send the next. Those are bound by
  the latency of each answer, not by their share of the CPU: on 2 cores, a canary stepping one
  session alone keeps the server ~0.73 of a core busy, and at an equal share it kept only
  0.33-0.44x of its rate behind a reset storm; with this rule, 0.53-0.63x (docs/server.md). When
  every active group queues (two trainers), each gets ``1/n`` and nothing is left unused.

A group alone is not held back at all (a single trainer keeps the whole server), and neither is
a light one (under :data:`LIGHT_RATE` messages a second, nothing computing or waiting: a person
playing, a monitor), which does not count among the ``n`` groups either, while the light groups
together stay under :data:`LIGHT_TOTAL_RATE`. The waiting
happens in the session's coroutine, before the call is queued: a held-back group's messages cost
the loop no more than their frames until their turn, and a ping-pong client sends no more until
it is answered. The price: while another group that is not light is active, a group with many
sessions gets at most about a third of one core beside a client that waits for its answers, even
when that client uses less. Measured figures are in docs/server.md.

Everything here runs on the event loop, except :meth:`ComputeShare.step_aside`, which worker
threads reach through ``loop.call_soon_threadsafe``.
"""

from __future__ import annotations

import asyncio
import math
import time
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

__all__ = ["ACTIVE_S", "BURST_S", "LOOP_COST_S", "ComputeShare", "Ticket"]

#: Seconds after its last call that a group still counts as active.
ACTIVE_S = 1.0
#: Starting estimate of the event loop's CPU seconds per message (measured from then on).
LOOP_COST_S = 3e-4
#: Spacing a group that was idle may skip (a token bucket this deep): a light client never waits.
BURST_S = 0.02
#: Bounds of the measured loop cost per message (seconds).
LOOP_COST_BOUNDS = (0.0, 0.01)
#: Seconds between two measurements of the loop cost.
COST_TICK_S = 0.5
#: Messages per second below which an active group is light: it is never held back and does not
#: count among the groups that share the core (a person playing, a monitor's probes).
LIGHT_RATE = 10.0
#: Light groups are exempt only while all of them together send fewer messages a second than
#: this (else many addresses each under LIGHT_RATE would be a flood that is never held back).
LIGHT_TOTAL_RATE = 5 * LIGHT_RATE
#: Time constant (seconds) of each group's message rate (a decaying count).
RATE_TAU_S = 1.0


@dataclass
class _Group:
    computing: int = 0
    next_at: float = 0.0
    seen: float = 0.0
    users: int = 0
    waiters: deque = field(default_factory=deque)
    timer: Any = None
    rate: float = 0.0  # messages per second, decaying with RATE_TAU_S
    rate_at: float = 0.0

    def rate_now(self, now: float) -> float:
        return self.rate * math.exp((self.rate_at - now) / RATE_TAU_S) if now > self.rate_at else self.rate

    def count(self, now: float) -> None:
        self.rate = self.rate_now(now) + 1.0 / RATE_TAU_S
        self.rate_at = now


@dataclass
class Ticket:
    """One admitted call of ``group``; ``computing`` until it leaves or steps aside."""

    group: Any
    computing: bool = True


class ComputeShare:
    """The gate of :mod:`reasoning_env.server.share` (see there).

    Args:
        active_s: Seconds after its last call that a group counts as active.
        loop_cost_s: Starting estimate of the event loop's CPU seconds per message; measured from
            then on (the process's CPU time less its calls' CPU time, over the calls that ended,
            every :data:`COST_TICK_S`, within :data:`LOOP_COST_BOUNDS`).
        clock: Monotonic clock (seconds). cpu: The process's CPU time (seconds, all threads).
    """

    def __init__(
        self,
        active_s: float = ACTIVE_S,
        loop_cost_s: float = LOOP_COST_S,
        clock: Callable[[], float] = time.monotonic,
        cpu: Callable[[], float] = time.process_time,
    ) -> None:
        if active_s <= 0 or loop_cost_s < 0:
            raise ValueError(
                f"need active_s > 0 and loop_cost_s >= 0, got active_s={active_s}, loop_cost_s={loop_cost_s}"
            )
        self.active_s = active_s
        self.loop_cost_s = loop_cost_s
        self._clock = clock
        self._groups: dict[Any, _Group] = {}
        self._cpu = cpu
        self._calls_cpu = 0.0
        self._calls = 0
        self._tick = (clock(), cpu(), 0.0, 0)
        self.held_back = 0  # calls that waited for their group's turn (for /capacity and tests)

    def stats(self) -> dict[str, Any]:
        """``active_groups``, ``held_back`` (calls that waited for their turn so far) and
        ``loop_cost_ms`` (the event loop's measured CPU milliseconds per message)."""
        return {
            "active_groups": self.active(),
            "held_back": self.held_back,
            "loop_cost_ms": round(self.loop_cost_s * 1000, 3),
        }

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
        g.count(now)
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

    @staticmethod
    def _light(g: _Group, now: float) -> bool:
        """Under :data:`LIGHT_RATE` messages a second, and nothing computing or waiting."""
        return not g.computing and not g.waiters and g.rate_now(now) < LIGHT_RATE

    def _contenders(self, g: _Group, now: float) -> list[_Group]:
        """The groups ``g`` shares the core with: active and not light, ``g`` first (``[g]``
        when there are none); ``[]`` when ``g`` itself is light. While the light groups together
        send :data:`LIGHT_TOTAL_RATE` messages a second or more, none is exempt."""
        horizon = now - self.active_s
        active = [o for o in self._groups.values() if o is g or o.seen >= horizon or o.computing]
        light = {id(o): o.rate_now(now) for o in active if self._light(o, now)}
        if sum(light.values()) >= LIGHT_TOTAL_RATE:
            light = {}
        if id(g) in light:
            return []
        return [g] + [o for o in active if o is not g and id(o) not in light]

    def _parts(self, g: _Group, contenders: list[_Group]) -> float:
        """``1 / share`` of ``g`` among its ``n`` contenders: ``n + 1`` while its calls queue (one
        waits for its turn) and another's do not, else ``n``."""
        n = len(contenders)
        if g.waiters and any(not o.waiters for o in contenders[1:]):
            return n + 1.0
        return float(n)

    def _may_start(self, g: _Group, now: float) -> bool:
        return (g.computing < 1 and now >= g.next_at) or len(self._contenders(g, now)) <= 1

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
        """Every COST_TICK_S: loop cost = (the process's CPU time - its calls') / calls (EWMA)."""
        t0, c0, k0, m0 = self._tick
        if now - t0 < COST_TICK_S:
            return
        cpu = self._cpu()
        calls, count = self._calls_cpu - k0, self._calls - m0
        if count >= 20:
            lo, hi = LOOP_COST_BOUNDS
            per = min(hi, max(lo, ((cpu - c0) - calls) / count))
            self.loop_cost_s = 0.5 * self.loop_cost_s + 0.5 * per
        self._tick = (now, cpu, self._calls_cpu, self._calls)

    def leave(self, ticket: Ticket, cpu_s: float) -> None:
        """The call ended after ``cpu_s`` seconds of its thread's CPU time (its waits on other
        processes excluded): charge its group and space the group's next call."""
        g = self._groups.get(ticket.group)
        if g is None:
            return
        now = self._clock()
        cpu_s = max(0.0, cpu_s)
        self._calls_cpu += cpu_s
        self._calls += 1
        self._measure(now)
        contenders = self._contenders(g, now)
        if len(contenders) > 1:
            g.next_at = max(g.next_at, now - BURST_S) + (cpu_s + self.loop_cost_s) * self._parts(g, contenders)
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
