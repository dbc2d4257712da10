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
  message (JSON, reply, the scheduling here), measured every :data:`COST_TICK_S` as the loop
  thread's CPU time, less what was charged to groups directly, over the messages answered (the
  process's CPU time counted an in-flight call's tokenizer work as loop cost: 0.3 -> 1.2-4.3 ms);
- everything else a group sends is charged to it too (:meth:`ComputeShare.charge`): the loop's
  CPU time reading its bytes (frames, pings and their pongs, refusals of oversized or malformed
  ones, HTTP parsing, and the socket read before it, per byte: :mod:`reasoning_env.server.net`),
  and each HTTP request's CPU time, on the loop and on OpenEnv's route pool
  (:mod:`reasoning_env.server.guard`), left out of the loop cost per message; while a group owes
  time its connections are not read;
- a group's calls are spaced so
  that its charges add up to at most its share of one core: after a call that cost ``c``, its
  group's next call is due ``c / share`` seconds after the previous one was (a token bucket: a
  group under its share never waits; one idle before may skip :data:`BURST_S` of spacing);
- the share is ``1/n`` (each group's weight over the sum of the active groups' weights: 1 each,
  except that groups that appeared within :data:`COHORT_S` of each other weigh 1 together until
  they have been there :data:`EARN_S`: a flood from 40 /24s that arrives at once counts as one
  group beside the clients that were there before, for its first five minutes; and like one group
  it computes one call at a time then, its members taking turns, and queues as one: each of 24
  young groups could have a call in flight where one group has one, and none of them alone ever
  queued), except for a group whose calls queue up (one is waiting for its turn, or it owes more
  than :data:`BURST_S` for what it sent outside calls) while another active group's do not: that
  group gets ``1/(n + 1)``, and what it leaves goes to the groups that wait for each answer before
  they send the next. Those are bound by the latency of each answer, not by their share of the CPU:
  on 2 cores, a canary stepping one session alone keeps the server ~0.73 of a core busy, and at an
  equal share it kept only 0.33-0.44x of its rate behind a reset storm; with this rule, 0.53-0.63x
  (docs/server.md). When every active group queues (two trainers), each gets ``1/n`` and nothing is
  left unused.

A group alone is not held back at all (a single trainer keeps the whole server), and neither is
a light one (under :data:`LIGHT_RATE` messages a second, nothing computing or waiting, and a
call in flight under :data:`LIGHT_BUSY` of the time, and under :data:`LIGHT_LOAD` of a core used: a
person playing, a monitor; a client whose steps wait seconds behind a flood sends few messages
because it waits, and is not light), which
does not count among the ``n`` groups either, while the light groups together stay under
:data:`LIGHT_TOTAL_RATE`. The waiting
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
#: A group with a call in flight more than this fraction of the time (decaying over RATE_TAU_S) is
#: not light, whatever its rate: a client whose steps wait seconds behind a flood sends few
#: messages because it waits, not because it asks little (the review's "stalled canary" trap).
LIGHT_BUSY = 0.5
#: Groups that appear within this many seconds of the previous new group form one cohort...
COHORT_S = 5.0
#: ... which weighs as one group until its members have been there this long (seconds): groups
#: earn their own share. A flood from 40 /24s that arrive together weighs as one group for its
#: first EARN_S seconds, so a client that was there before keeps at least half a core's share
#: (the review: 0.017-0.038x of its rate while each of 41 groups got 1/41).
EARN_S = 300.0
#: ... and a group that used more than this fraction of a core (its calls and what was charged
#: to it, decaying over RATE_TAU_S) is not light either: a ping flood sends no calls, and one
#: session stepping 1 MB answers sends few (the review: it cut a canary to ~0.2x).
LIGHT_LOAD = 0.05
#: Most seconds of spacing a group may owe: charges beyond it are forgiven (a connection held
#: back longer would miss its keepalive pongs).
MAX_DEBT_S = 5.0


@dataclass
class _Group:
    since: float = 0.0  # when this group appeared (its tenure counts from here)
    cohort: int = 0  # groups that appeared together (COHORT_S) share one weight until EARN_S
    computing: int = 0
    next_at: float = 0.0
    seen: float = 0.0
    users: int = 0
    waiters: deque = field(default_factory=deque)
    timer: Any = None
    rate: float = 0.0  # messages per second, decaying with RATE_TAU_S
    rate_at: float = 0.0
    used: float = 0.0  # CPU seconds charged (calls and the rest), decaying with RATE_TAU_S
    used_at: float = 0.0
    busy: float = 0.0  # seconds with a call in flight, decaying with RATE_TAU_S
    busy_at: float = 0.0
    busy_since: float | None = None
    lane: _Lane | None = None  # its cohort's lane, while the cohort has more than one group

    def rate_now(self, now: float) -> float:
        return self.rate * math.exp((self.rate_at - now) / RATE_TAU_S) if now > self.rate_at else self.rate

    def count(self, now: float) -> None:
        self.rate = self.rate_now(now) + 1.0 / RATE_TAU_S
        self.rate_at = now

    def use(self, now: float, cpu_s: float) -> None:
        self.used = self.load_now(now) * RATE_TAU_S + cpu_s
        self.used_at = now

    def load_now(self, now: float) -> float:
        """Fraction of a core this group used recently (decaying over RATE_TAU_S)."""
        used = self.used * math.exp((self.used_at - now) / RATE_TAU_S) if now > self.used_at else self.used
        return used / RATE_TAU_S

    def busy_now(self, now: float) -> float:
        """Fraction of the recent time with a call in flight (decaying over RATE_TAU_S)."""
        past = self.busy * math.exp((self.busy_at - now) / RATE_TAU_S) if now > self.busy_at else self.busy
        if self.busy_since is not None:
            past += now - self.busy_since
        return past / RATE_TAU_S

    def started(self, now: float) -> None:
        if self.busy_since is None:
            self.busy_since = now

    def stopped(self, now: float) -> None:
        if self.busy_since is not None and not self.computing:
            decayed = self.busy * math.exp((self.busy_at - now) / RATE_TAU_S) if now > self.busy_at else self.busy
            self.busy = decayed + (now - self.busy_since)
            self.busy_at = now
            self.busy_since = None


@dataclass(eq=False)
class _Lane:
    """What the young groups of one cohort share: one call computing at a time while others
    compete, and the queue of members whose turn came while that call ran (pumped when it ends)."""

    computing: int = 0
    blocked: deque = field(default_factory=deque)


@dataclass
class Ticket:
    """One admitted call of ``group``; ``computing`` until it leaves or steps aside; ``lane``:
    its cohort's lane it holds meanwhile (``None`` outside a cohort of several young groups)."""

    group: Any
    computing: bool = True
    lane: _Lane | None = None


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
        cpu: Callable[[], float] = time.thread_time,
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
        self._charged_cpu = 0.0  # event-loop CPU charged to groups directly (charge())
        self._tick: tuple | None = None  # taken on the loop's thread at the first measurement
        self.held_back = 0  # calls that waited for their group's turn (for /capacity and tests)
        self._cohorts = 0
        self._swept = -math.inf
        self._last_new: tuple = (-math.inf, 0, None)  # (when, cohort, entry) of the newest group
        self.charged_s = 0.0  # seconds of CPU charged outside calls (frames, pings, HTTP)

    def stats(self) -> dict[str, Any]:
        """``active_groups``, ``held_back`` (calls that waited for their turn so far) and
        ``loop_cost_ms`` (the event loop's measured CPU milliseconds per message)."""
        return {
            "active_groups": self.active(),
            "held_back": self.held_back,
            "loop_cost_ms": round(self.loop_cost_s * 1000, 3),
            "charged_outside_calls_s": round(self.charged_s, 3),
        }

    def active(self, now: float | None = None) -> int:
        """Groups that sent a call within ``active_s``."""
        now = self._clock() if now is None else now
        horizon = now - self.active_s
        return sum(1 for g in self._groups.values() if g.seen >= horizon or g.computing)

    def _group(self, group: Any, now: float) -> _Group:
        """``group``'s entry, made now if it has none (in the cohort of the previous new group
        when that one appeared within COHORT_S)."""
        g = self._groups.get(group)
        if g is None:
            last, cohort, prev = self._last_new
            g = _Group(since=now)
            if now - last > COHORT_S:
                self._cohorts += 1
                cohort = self._cohorts
            else:  # a cohort of several: its young members share one lane
                if prev.lane is None:
                    prev.lane = _Lane()
                g.lane = prev.lane
            g.cohort = cohort
            self._last_new = (now, cohort, g)
            self._groups[group] = g
        return g

    @staticmethod
    def _lane(g: _Group, now: float) -> _Lane | None:
        """The lane ``g`` computes in: its cohort's until it has been there EARN_S, else none."""
        return g.lane if g.lane is not None and now - g.since < EARN_S else None

    def _weight(self, g: _Group, contenders: list[_Group], now: float) -> float:
        """1 once ``g`` has been there EARN_S; before, its cohort's contenders share 1."""
        if now - g.since >= EARN_S:
            return 1.0
        return 1.0 / sum(1 for o in contenders if o.cohort == g.cohort and now - o.since < EARN_S)

    def join(self, group: Any) -> None:
        """A session of ``group`` opened (its entry stays while it has sessions)."""
        self._group(group, self._clock()).users += 1

    def part(self, group: Any) -> None:
        """A session of ``group`` closed."""
        g = self._groups.get(group)
        if g is not None:
            g.users -= 1
            self._forget_if_unused(group)

    def try_enter(self, group: Any) -> Ticket | None:
        """The call's ticket if ``group`` may start it now, else ``None`` (then ``await enter``)."""
        now = self._clock()
        g = self._group(group, now)  # a caller that did not join: kept while it has calls
        g.seen = now
        g.count(now)
        if not g.waiters and self._may_start(g, now):
            g.computing += 1
            g.started(now)
            lane = self._lane(g, now)
            if lane is not None:
                lane.computing += 1
            return Ticket(group, lane=lane)
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
            lane = await fut  # _pump counted this call as computing (and its lane's) when it resolved it
        except asyncio.CancelledError:
            if fut.done() and not fut.cancelled():
                self._release(group, fut.result())  # admitted, then cancelled before it ran
            else:
                try:
                    g.waiters.remove(fut)
                except ValueError:
                    pass
            raise
        return Ticket(group, lane=lane)

    @staticmethod
    def _light(g: _Group, now: float) -> bool:
        """Under :data:`LIGHT_RATE` messages a second, nothing computing or waiting, a call in
        flight under :data:`LIGHT_BUSY` of the recent time, and under :data:`LIGHT_LOAD` of a core used."""
        return (
            not g.computing
            and not g.waiters
            and g.rate_now(now) < LIGHT_RATE
            and g.busy_now(now) < LIGHT_BUSY
            and g.load_now(now) < LIGHT_LOAD
        )

    def _contenders(self, g: _Group, now: float) -> list[_Group]:
        """The groups ``g`` shares the core with: active and not light, ``g`` first (``[g]``
        when there are none, or when ``g`` is the only group there is); ``[]`` when ``g`` itself
        is light and others are there. While the light groups together send
        :data:`LIGHT_TOTAL_RATE` messages a second or more, none is exempt. Callers ask only
        whether there is more than one."""
        if len(self._groups) <= 1:  # alone (one trainer): nothing to share, nothing to weigh
            return [g]
        horizon = now - self.active_s
        active = [o for o in self._groups.values() if o is g or o.seen >= horizon or o.computing]
        light = {id(o): o.rate_now(now) for o in active if self._light(o, now)}
        if sum(light.values()) >= LIGHT_TOTAL_RATE:
            light = {}
        if id(g) in light:
            return []
        return [g] + [o for o in active if o is not g and id(o) not in light]

    def _parts(self, g: _Group, contenders: list[_Group], now: float | None = None) -> float:
        """``1 / share`` of ``g`` among its contenders: the sum of their weights (1 each, except
        that a cohort of groups that appeared together weighs 1 in all for EARN_S), plus 1 while
        it queues (:meth:`_queues`) and another does not, over ``g``'s weight."""
        now = self._clock() if now is None else now
        total = sum(self._weight(o, contenders, now) for o in contenders)
        lane = self._lane(g, now)
        if lane is not None and self._in_lane(lane, contenders, now) < len(contenders):
            # beside groups outside it, a cohort queues as one: a member queues, another group not
            mine = [o.lane is lane and now - o.since < EARN_S for o in contenders]
            if any(self._queues(o, now) for o, m in zip(contenders, mine) if m) and any(
                not self._queues(o, now) for o, m in zip(contenders, mine) if not m
            ):
                total += 1.0
        elif self._queues(g, now) and any(not self._queues(o, now) for o in contenders[1:]):
            total += 1.0
        return total / self._weight(g, contenders, now)

    @staticmethod
    def _queues(g: _Group, now: float) -> bool:
        """``g`` sends faster than it is served: a call of it waits for its turn, or it owes more
        than BURST_S for what it sent outside calls (its connections are not read meanwhile: a
        flood of pings or of refused messages has no call to wait, and got 1/n, not 1/(n + 1))."""
        return bool(g.waiters) or g.next_at - now > BURST_S

    def _may_start(self, g: _Group, now: float) -> bool:
        lane = self._lane(g, now)
        if lane is not None:  # one call of the cohort at a time while a group outside it competes
            contenders = self._contenders(g, now)
            if self._in_lane(lane, contenders, now) < len(contenders):
                return g.computing < 1 and now >= g.next_at and lane.computing < 1
            return (g.computing < 1 and now >= g.next_at) or len(contenders) <= 1
        return (g.computing < 1 and now >= g.next_at) or len(self._contenders(g, now)) <= 1

    @staticmethod
    def _in_lane(lane: _Lane, contenders: list[_Group], now: float) -> int:
        """How many of ``contenders`` compute in ``lane`` (young members of its cohort)."""
        return sum(1 for o in contenders if o.lane is lane and now - o.since < EARN_S)

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
                if g.computing < 1 and now < g.next_at:  # spaced: look again at next_at (or sooner)
                    delay = min(g.next_at - now, self.active_s)
                else:  # waits for its lane, or its cohort's: _release pumps; look again within active_s
                    delay = self.active_s
                    lane = self._lane(g, now)
                    if lane is not None and g.computing < 1 and group not in lane.blocked:
                        lane.blocked.append(group)
                g.timer = asyncio.get_running_loop().call_later(max(0.0, delay), self._pump, group)
                return
            fut = g.waiters.popleft()
            if not fut.done():
                g.computing += 1
                g.started(now)
                lane = self._lane(g, now)
                if lane is not None:
                    lane.computing += 1
                fut.set_result(lane)

    def step_aside(self, ticket: Ticket) -> None:
        """The call started waiting on another process: its group may compute its next call."""
        if ticket.computing:
            ticket.computing = False
            self._release(ticket.group, ticket.lane)

    def _measure(self, now: float) -> None:
        """Every COST_TICK_S: loop cost = (the event loop thread's CPU time - what was charged
        to groups directly) / calls (EWMA). Runs on the loop's thread (``cpu`` is its CPU clock:
        the calls' threads, tokenizers and grading processes are not in it)."""
        if self._tick is None:
            self._tick = (now, self._cpu(), self._charged_cpu, self._calls)
            return
        t0, c0, k0, m0 = self._tick
        if now - t0 < COST_TICK_S:
            return
        cpu = self._cpu()
        charged, count = self._charged_cpu - k0, self._calls - m0
        if count >= 20:
            lo, hi = LOOP_COST_BOUNDS
            per = min(hi, max(lo, ((cpu - c0) - charged) / count))
            self.loop_cost_s = 0.5 * self.loop_cost_s + 0.5 * per
        self._tick = (now, cpu, self._charged_cpu, self._calls)
        self._sweep(now)

    def charge(self, group: Any, cpu_s: float, *, loop: bool = True) -> float:
        """Charge ``group`` for work outside its calls (reading its frames and pings, refusing
        oversized or malformed ones, an HTTP request): while other groups compete, its next
        call, and the reading of its connections, are spaced as for a call that cost ``cpu_s``.
        ``loop``: the CPU was the event loop thread's (left out of the loop cost per message).
        Returns the seconds the group now owes (hold its connections' reading that long)."""
        now = self._clock()
        g = self._group(group, now)
        cpu_s = max(0.0, cpu_s)
        if loop:
            self._charged_cpu += cpu_s
        self.charged_s += cpu_s
        g.use(now, cpu_s)
        if cpu_s > 0:
            g.seen = now
        if now - self._swept > COST_TICK_S:
            self._sweep(now)
        contenders = self._contenders(g, now)
        if len(contenders) > 1 and cpu_s > 0:
            g.next_at = min(max(g.next_at, now - BURST_S) + cpu_s * self._parts(g, contenders, now), now + MAX_DEBT_S)
        self._forget_if_unused(group)
        return max(0.0, g.next_at - now)

    def owed(self, group: Any) -> float:
        """Seconds until ``group``'s next call is due (0: now), while others compete."""
        g = self._groups.get(group)
        if g is None:
            return 0.0
        now = self._clock()
        if len(self._contenders(g, now)) <= 1:
            return 0.0
        return max(0.0, g.next_at - now)

    def leave(self, ticket: Ticket, cpu_s: float, *, loop_s: float = 0.0) -> None:
        """The call ended after ``cpu_s`` seconds of its thread's CPU time (its waits on other
        processes excluded): charge its group and space the group's next call. ``loop_s``: the
        part of ``cpu_s`` that was the event loop thread's (an HTTP request computes there; left
        out of the loop cost per message, which it would otherwise raise for every group)."""
        if loop_s > 0:
            self._charged_cpu += loop_s
        g = self._groups.get(ticket.group)
        if g is None:
            return
        now = self._clock()
        g.seen = now  # active until its answer, however long that took (a stalled client competes)
        cpu_s = max(0.0, cpu_s)
        g.use(now, cpu_s + self.loop_cost_s)
        self._calls_cpu += cpu_s
        self._calls += 1
        self._measure(now)
        contenders = self._contenders(g, now)
        if len(contenders) > 1:
            g.next_at = min(
                max(g.next_at, now - BURST_S) + (cpu_s + self.loop_cost_s) * self._parts(g, contenders, now),
                now + MAX_DEBT_S,
            )
        if ticket.computing:
            ticket.computing = False
            self._release(ticket.group, ticket.lane)
        else:
            self._pump(ticket.group)
            self._forget_if_unused(ticket.group)

    def _release(self, group: Any, lane: _Lane | None = None) -> None:
        if lane is not None:  # the cohort's members whose turn came meanwhile go first, in order
            lane.computing -= 1
            for _ in range(len(lane.blocked)):
                key = lane.blocked.popleft()
                self._pump(key)
                if lane.blocked and lane.blocked[-1] == key:
                    break  # blocked again: the lane is taken
        g = self._groups.get(group)
        if g is None:
            return
        g.computing -= 1
        g.stopped(self._clock())
        self._pump(group)
        self._forget_if_unused(group)

    def _unused(self, g: _Group, now: float) -> bool:
        """No session, nothing computing or waiting, nothing owed and quiet for ``active_s``: an
        HTTP client or a client that reconnects keeps what it owes (and its tenure) while active."""
        return (
            g.users <= 0
            and not g.computing
            and not g.waiters
            and g.next_at <= now
            and now - max(g.seen, g.rate_at, g.used_at) > self.active_s
        )

    def _forget_if_unused(self, group: Any) -> None:
        g = self._groups.get(group)
        if g is not None and g.users <= 0 and self._unused(g, self._clock()):
            if g.timer is not None:
                g.timer.cancel()
            del self._groups[group]

    def _sweep(self, now: float) -> None:
        """Forget the groups that became unused while nobody looked (every COST_TICK_S)."""
        self._swept = now
        for key in [k for k, g in self._groups.items() if self._unused(g, now)]:
            g = self._groups.pop(key)
            if g.timer is not None:
                g.timer.cancel()
