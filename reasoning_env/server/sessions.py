"""The session registry of one server process: slots, per-client shares, idle and unused expiry.

Every ``/ws`` connection is one session. The registry admits it (or says which limit refuses
it), records its activity, and closes sessions that went silent: after ``session_timeout_s``
without a message, or after ``unused_session_timeout_s`` when no reset or step came since the
connection opened (a client cannot hold slots by opening connections and never using them).
It lives on the event loop (no locks); with ``--workers N`` each worker process has its own,
and :mod:`reasoning_env.server.workers` adds them up for ``/capacity``.
"""

from __future__ import annotations

import asyncio
import itertools
import logging
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any

from reasoning_env.errors import ReasoningEconomicsError
from reasoning_env.server.settings import ServerSettings

logger = logging.getLogger(__name__)

#: Close code sent when the server closes an idle or unused session (private-use range of RFC 6455).
IDLE_CLOSE_CODE = 4000


class AdmissionError(ReasoningEconomicsError):
    """A new session is refused: ``message`` names the limit (and its variable); ``extra`` holds
    the counts for the error frame."""

    def __init__(self, message: str, **extra: Any) -> None:
        super().__init__(message)
        self.message = message
        self.extra = extra


@dataclass(eq=False)
class Session:
    """One connection's session.

    Attributes:
        id: Server-side id (``<worker>-<n>``). client: The client's address.
        opened / last_activity: ``time.monotonic()`` seconds. used: a reset or step arrived.
        close: Coroutine function ``close(message)`` that tells the client why and closes the socket.
    """

    id: str
    client: str
    opened: float
    last_activity: float
    close: Callable[[str], Awaitable[None]]
    used: bool = False
    steps: int = 0
    closed: bool = False
    extra: dict = field(default_factory=dict)


class SessionRegistry:
    """Admission and expiry of sessions (see the module docstring).

    Args:
        settings: The limits (``max_sessions``, ``session_cap_per_client``, timeouts).
        name: Prefix of the session ids (the worker's id with ``--workers``).
        on_change: Called after every admission and close (publishes the counts).
    """

    def __init__(
        self, settings: ServerSettings, *, name: str = "w0", on_change: Callable[[], None] | None = None
    ) -> None:
        self.settings = settings
        self.name = name
        self.on_change = on_change
        self._sessions: dict[str, Session] = {}
        self._per_client: dict[str, int] = {}
        self._ids = itertools.count(1)
        self._reaper: asyncio.Task | None = None
        self.refused = {"max_sessions": 0, "per_client": 0}

    # ------------------------------------------------------------------ admission
    def open(self, client: str, close: Callable[[str], Awaitable[None]]) -> Session:
        """Admit a session for ``client``.

        Raises:
            AdmissionError: all slots are taken (``REE_MAX_SESSIONS``), or this client holds its
                share (``REE_MAX_SESSIONS_PER_CLIENT``).
        """
        s = self.settings
        active = len(self._sessions)
        if active >= s.max_sessions:
            self.refused["max_sessions"] += 1
            raise AdmissionError(
                f"Server at capacity: {active}/{s.max_sessions} sessions active (REE_MAX_SESSIONS); retry later, "
                "or close sessions you no longer use",
                active_sessions=active,
                max_sessions=s.max_sessions,
                limit="max_sessions",
            )
        held = self._per_client.get(client, 0)
        cap = s.session_cap_per_client
        if held >= cap:
            self.refused["per_client"] += 1
            raise AdmissionError(
                f"this client address ({client}) already holds {held} of the {cap} sessions one client may hold "
                f"(REE_MAX_SESSIONS_PER_CLIENT; {active}/{s.max_sessions} in use in all); close some, or ask the "
                "operator to raise the limit",
                active_sessions=active,
                max_sessions=s.max_sessions,
                client_sessions=held,
                max_sessions_per_client=cap,
                limit="max_sessions_per_client",
            )
        now = time.monotonic()
        session = Session(f"{self.name}-{next(self._ids)}", client, now, now, close)
        self._sessions[session.id] = session
        self._per_client[client] = held + 1
        self._changed()
        return session

    def close(self, session: Session) -> None:
        """Free ``session``'s slot (idempotent)."""
        session.closed = True
        if self._sessions.pop(session.id, None) is None:
            return
        n = self._per_client.get(session.client, 1) - 1
        if n > 0:
            self._per_client[session.client] = n
        else:
            self._per_client.pop(session.client, None)
        self._changed()

    @staticmethod
    def touch(session: Session, used: bool = False) -> None:
        """Record activity (any message); ``used`` for a reset or step."""
        session.last_activity = time.monotonic()
        if used:
            session.used = True

    def _changed(self) -> None:
        if self.on_change is not None:
            try:
                self.on_change()
            except Exception:  # publishing the counts must never break a session
                logger.exception("publishing session counts failed")

    # ------------------------------------------------------------------ reporting
    @property
    def active(self) -> int:
        """Sessions open now."""
        return len(self._sessions)

    def capacity(self) -> dict[str, Any]:
        """This process's counts and limits (the ``/capacity`` fields)."""
        s = self.settings
        return {
            "active_sessions": len(self._sessions),
            "max_sessions": s.max_sessions,
            "available_slots": max(0, s.max_sessions - len(self._sessions)),
            "unused_sessions": sum(1 for x in self._sessions.values() if not x.used),
            "clients": len(self._per_client),
            "max_sessions_per_client": s.session_cap_per_client,
            "busiest_client_sessions": max(self._per_client.values(), default=0),
            "session_timeout_s": s.session_timeout_s,
            "unused_session_timeout_s": s.unused_session_timeout_s,
            "refused": dict(self.refused),
        }

    # ------------------------------------------------------------------ expiry
    def expired(self, now: float | None = None) -> list[tuple[Session, str]]:
        """Sessions past a timeout, each with the message telling its client why."""
        now = time.monotonic() if now is None else now
        s = self.settings
        out = []
        for session in list(self._sessions.values()):
            if (
                s.unused_session_timeout_s is not None
                and not session.used
                and now - session.opened > s.unused_session_timeout_s
            ):
                out.append(
                    (
                        session,
                        (
                            "session closed by the server: no reset or step within "
                            f"{s.unused_session_timeout_s:g} s of opening "
                            "(REE_UNUSED_SESSION_TIMEOUT_S); reconnect and reset when you are ready to play"
                        ),
                    )
                )
            elif s.session_timeout_s is not None and now - session.last_activity > s.session_timeout_s:
                out.append(
                    (
                        session,
                        (
                            f"session closed by the server after more than {s.session_timeout_s:g} s "
                            "without a message "
                            "(REE_SESSION_TIMEOUT_S); reconnect and reset to start again (any message, e.g. a state "
                            "request, keeps a session alive)"
                        ),
                    )
                )
        return out

    def check_interval(self) -> float | None:
        """Seconds between expiry checks: a quarter of the shortest timeout, 0.25 to 5 s."""
        timeouts = [t for t in (self.settings.session_timeout_s, self.settings.unused_session_timeout_s) if t]
        if not timeouts:
            return None
        return min(5.0, max(0.25, min(timeouts) / 4))

    async def reap_forever(self) -> None:
        """Close expired sessions until cancelled (started with the app)."""
        interval = self.check_interval()
        if interval is None:
            return
        closing: set[asyncio.Task] = set()
        while True:
            await asyncio.sleep(interval)
            for session, why in self.expired():
                self.close(session)
                # Each close is its own task: a peer that reads nothing holds its own close (until
                # its connection is dropped, REE_SEND_STALL_TIMEOUT_S), never the expiry of the others
                # (the review: a 10 s unused timeout fired after 33-45 s behind one such client).
                task = asyncio.get_running_loop().create_task(self._tell(session, why))
                closing.add(task)
                task.add_done_callback(closing.discard)

    @staticmethod
    async def _tell(session: Session, why: str) -> None:
        try:
            await session.close(why)
        except Exception:
            logger.exception("closing an expired session failed")

    def start(self) -> None:
        """Start the expiry task on the running loop (idempotent)."""
        if self._reaper is None or self._reaper.done():
            self._reaper = asyncio.get_running_loop().create_task(self.reap_forever())

    def stop(self) -> None:
        """Stop the expiry task."""
        if self._reaper is not None:
            self._reaper.cancel()
            self._reaper = None
