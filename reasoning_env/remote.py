"""Playing against remote servers: the one adapter that evaluation and training use.

:class:`RemoteEnv` gives one server session the in-process environment's interface
(``reset(seed=, episode_id=, tokenizer_name=, total_budget=)``, ``step(action)``, ``close()``,
``questions = None``: a server never sends gold answers before they are answered). Given several
replicas (containers, Spaces, pods serving the same configuration) it spreads sessions over them
(:class:`Replicas`: the replica with the fewest sessions from this process, skipping replicas that
failed recently) and keeps each episode on one replica. When that replica goes away mid-episode,
the episode is **replayed from its seed** on another replica: the same reset, then every action
sent so far, each answer compared with the one first received (questions, tokens, verdicts,
rewards). The environment is deterministic, so the replay lands exactly where the episode was
and the caller never notices, except for the time it took. If no replica is left, or the replay
differs (replicas with different configurations), :class:`EpisodeLostError` says so.

A replica that stops answering (a frozen process, a partitioned host) is treated like one that
died: the connection's keepalive pings go unanswered for ``ping_timeout_s`` (default 10 s, pings
every ``ping_interval_s`` = 5 s; then 2 s for a close that never comes), or one answer takes longer
than ``message_timeout_s`` (default 30 s), and the episode is replayed elsewhere, or fails with
:class:`EpisodeLostError` naming the replica. So a frozen replica costs an episode at most about
17 s, and never more than ``message_timeout_s``.

:func:`as_observation` is the one normaliser of what clients return (a ``StepResult``, an
observation, or their dicts).

Example::

    env = RemoteEnv(["http://gpu-a:8000", "http://gpu-b:8000"])     # or one URL
    obs = env.reset(seed=7, tokenizer_name="Qwen/Qwen2.5-0.5B-Instruct")
    while not obs.done:
        obs = env.step(make_action(generate(obs), num_generated_tokens=...))
    env.close()
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Sequence
from typing import Any

from reasoning_env.errors import EpisodeLostError
from reasoning_env.models import ReasoningEconomicsAction, ReasoningEconomicsObservation

logger = logging.getLogger(__name__)

__all__ = ["EpisodeLostError", "RemoteEnv", "Replicas", "as_observation", "parse_urls"]


def as_observation(result: Any) -> ReasoningEconomicsObservation:
    """An observation from what an environment or client returned: an observation, a
    ``StepResult``-like object with ``.observation`` (its ``reward``/``done`` fill the
    observation's when missing), or a dict of either.

    Raises:
        TypeError: nothing observation-like in ``result``.
    """
    if isinstance(result, ReasoningEconomicsObservation):
        return result
    inner = getattr(result, "observation", None)
    if inner is not None:
        obs = as_observation(inner)
        for attr in ("reward", "done"):
            outer = getattr(result, attr, None)
            if outer is not None and getattr(obs, attr, None) in (None, False) and outer is not False:
                setattr(obs, attr, outer)
        return obs
    if isinstance(result, dict):
        data = result.get("observation", result)
        obs = ReasoningEconomicsObservation.model_validate(data)
        if "observation" in result:
            for attr in ("reward", "done"):
                if result.get(attr) is not None and getattr(obs, attr, None) in (None, False):
                    setattr(obs, attr, result[attr])
        return obs
    if hasattr(result, "model_dump"):
        return ReasoningEconomicsObservation.model_validate(result.model_dump())
    raise TypeError(f"cannot read an observation from {type(result).__name__}")


def parse_urls(urls: str | Sequence[str] | None) -> list[str]:
    """Server URLs from a string (comma- or space-separated) or a list of such strings.

    Raises:
        ValueError: no URL given.
    """
    if urls is None:
        items: list[str] = []
    elif isinstance(urls, str):
        items = [urls]
    else:
        items = list(urls)
    out = [u.strip() for item in items for u in str(item).replace(",", " ").split() if u.strip()]
    if not out:
        raise ValueError("no server URL given: pass one or more, e.g. http://127.0.0.1:8000")
    return out


class Replicas:
    """Servers of the same environment that sessions are spread over.

    Args:
        urls: Their base URLs (``http://host:port``).
        api_token: Sent to each (default ``$REE_API_TOKEN``).
        cooldown_s: Seconds a replica that failed is skipped by new sessions (when others are up).
        message_timeout_s: Longest wait for one answer (seconds); a replica that takes longer is
            treated as gone (see the module docstring). A step's grading is bounded by the
            server's ``grading_timeout_s`` (2 s), so 30 s leaves room for a loaded server.
        ping_interval_s / ping_timeout_s: WebSocket keepalive: a ping every ``ping_interval_s``
            seconds; a replica that does not answer one within ``ping_timeout_s`` is gone
            (``None``: no pings; only ``message_timeout_s`` applies).

    Thread-safe: evaluation and training open sessions from several threads.
    """

    def __init__(
        self,
        urls: str | Sequence[str],
        *,
        api_token: str | None = None,
        cooldown_s: float = 30.0,
        message_timeout_s: float = 30.0,
        ping_interval_s: float | None = 5.0,
        ping_timeout_s: float | None = 10.0,
    ) -> None:
        self.urls = parse_urls(urls)
        self.api_token = api_token
        self.cooldown_s = float(cooldown_s)
        self.message_timeout_s = float(message_timeout_s)
        self.ping_interval_s = None if ping_interval_s is None else float(ping_interval_s)
        self.ping_timeout_s = None if ping_timeout_s is None else float(ping_timeout_s)
        self._lock = threading.Lock()
        self._open = {u: 0 for u in self.urls}
        self._down_until = {u: 0.0 for u in self.urls}
        self._turn = 0

    def order(self, exclude: Sequence[str] = ()) -> list[str]:
        """The replicas to try for a new session, best first: up before recently failed, then
        fewest open sessions from this process, then round-robin."""
        now = time.monotonic()
        with self._lock:
            self._turn += 1
            n = len(self.urls)
            rotated = [self.urls[(self._turn + i) % n] for i in range(n)]
            candidates = [u for u in rotated if u not in exclude]
            return sorted(candidates, key=lambda u: (self._down_until[u] > now, self._open[u]))

    def connect(self, url: str) -> Any:
        """A connected synchronous client of ``url``.

        Raises:
            ConnectionError: ``url`` cannot be reached.
        """
        from reasoning_env.client import ReasoningEconomicsClient

        client = ReasoningEconomicsClient(
            base_url=url,
            api_token=self.api_token,
            message_timeout_s=self.message_timeout_s,
            connect_timeout_s=min(10.0, self.message_timeout_s),
            websocket_ping_interval_s=self.ping_interval_s,
            websocket_ping_timeout_s=self.ping_timeout_s,
            close_timeout_s=2.0,  # after an unanswered ping, a frozen replica never closes either
        ).sync()
        try:
            client.connect()
        except Exception:
            try:
                client.close()
            except Exception:  # noqa: BLE001 - cleaning up after a failed connect must not hide its error
                pass
            raise
        with self._lock:
            self._open[url] += 1
        return client

    def release(self, url: str) -> None:
        """A session on ``url`` ended."""
        with self._lock:
            self._open[url] = max(0, self._open[url] - 1)

    def mark_down(self, url: str) -> None:
        """``url`` failed: new sessions avoid it for ``cooldown_s``."""
        with self._lock:
            self._down_until[url] = time.monotonic() + self.cooldown_s
        logger.warning("environment server %s went away; new sessions avoid it for %.0f s", url, self.cooldown_s)

    def status(self) -> list[dict[str, Any]]:
        """Per replica: ``url``, ``open`` sessions from this process, whether it is marked ``down``."""
        now = time.monotonic()
        with self._lock:
            return [{"url": u, "open": self._open[u], "down": self._down_until[u] > now} for u in self.urls]


class ReplicaUnresponsiveError(ConnectionError):
    """A replica accepted a request and did not answer within the message timeout (frozen,
    partitioned): handled like a replica that died."""


def _call(client: Any, url: str | None, timeout_s: float | None, method: str, *args: Any, **kwargs: Any) -> Any:
    """``client.<method>(...)``, with a timeout turned into :class:`ReplicaUnresponsiveError`
    naming the replica (a bare ``TimeoutError`` said nothing)."""
    try:
        return getattr(client, method)(*args, **kwargs)
    except TimeoutError:
        limit = f"{timeout_s:g} s" if timeout_s else "its message timeout"
        raise ReplicaUnresponsiveError(
            f"the environment server {url} stopped answering: no answer to a {method} within {limit} "
            "(frozen or unreachable)"
        ) from None


def _close_quietly(client: Any) -> None:
    try:
        client.close()
    except Exception:  # noqa: BLE001 - the session is being dropped anyway (often because it died)
        pass


def _same(a: ReasoningEconomicsObservation, b: ReasoningEconomicsObservation) -> bool:
    """Whether a replayed answer equals the one first received (what the policy saw and was paid)."""
    sa, sb = a.last_step, b.last_step
    if (sa is None) != (sb is None) or a.question_id != b.question_id or a.remaining_budget != b.remaining_budget:
        return False
    if sa is None:
        return a.total_budget == b.total_budget
    return (sa.question_id, sa.tokens, sa.correct, round(sa.reward, 9)) == (
        sb.question_id,
        sb.tokens,
        sb.correct,
        round(sb.reward, 9),
    )


class RemoteEnv:
    """One session on a server, or on one of several replicas, with the in-process env's interface.

    Args:
        target: A base URL, a list of them, a :class:`Replicas`, or an already connected client
            (anything with ``reset(**kw)`` and ``step(action)``; no replay then).
        api_token: Sent to the servers (default ``$REE_API_TOKEN``) when ``target`` is URLs.
        replays: How many times one episode may be replayed on another replica (default 2).

    ``reset`` and ``step`` return :class:`ReasoningEconomicsObservation`. They raise
    :class:`~reasoning_env.client.ServerError` when a server refuses a request, and
    :class:`EpisodeLostError` when the episode's replica went away and it could not be replayed.
    """

    questions = None

    def __init__(self, target: Any, *, api_token: str | None = None, replays: int = 2) -> None:
        if isinstance(target, Replicas):
            self.replicas: Replicas | None = target
        elif isinstance(target, (str, list, tuple)):
            self.replicas = Replicas(target, api_token=api_token)
        else:
            self.replicas = None
        self.replays = int(replays)
        self._client = None if self.replicas is not None else target
        self.url: str | None = None
        self._reset_args: dict[str, Any] | None = None
        self._log: list[tuple[ReasoningEconomicsAction, ReasoningEconomicsObservation]] = []
        self._first: ReasoningEconomicsObservation | None = None
        self.replayed = 0  # episodes replayed on another replica (for logs and tests)

    # ------------------------------------------------------------------ connection
    def _open(self, exclude: Sequence[str] = ()) -> None:
        assert self.replicas is not None
        errors = []
        for url in self.replicas.order(exclude):
            try:
                self._client = self.replicas.connect(url)
                self.url = url
                return
            except Exception as exc:  # noqa: BLE001 - any failure to connect (OSError, ServerError, timeouts): try the next replica
                errors.append(f"{url}: {exc}")
                self.replicas.mark_down(url)
        raise EpisodeLostError(
            "no environment server could be reached: "
            + "; ".join(errors)
            + " (start one with: python -m reasoning_env.server --port 8000)"
        )

    def _drop(self, failed: bool) -> None:
        client, url = self._client, self.url
        self._client = None
        self.url = None
        if client is not None:
            if failed:
                # A frozen replica never answers the close handshake (the client waits 10 s for
                # it): close in the background, so that the replay starts at once.
                threading.Thread(target=_close_quietly, args=(client,), name="ree-close", daemon=True).start()
            else:
                _close_quietly(client)
        if self.replicas is not None and url is not None:
            self.replicas.release(url)
            if failed:
                self.replicas.mark_down(url)

    def _call(self, client: Any, method: str, *args: Any, **kwargs: Any) -> Any:
        timeout = self.replicas.message_timeout_s if self.replicas is not None else None
        return _call(client, self.url, timeout, method, *args, **kwargs)

    def _ensure(self) -> Any:
        if self._client is None:
            self._open()
        return self._client

    # ------------------------------------------------------------------ episode
    def reset(
        self,
        seed: int | None = None,
        episode_id: str | None = None,
        tokenizer_name: str | None = None,
        total_budget: int | None = None,
        **kwargs: Any,
    ) -> ReasoningEconomicsObservation:
        """Start an episode (``None`` arguments are not sent); see :meth:`ReasoningEconomicsEnv.reset`."""
        args = {
            k: v
            for k, v in (
                ("seed", seed),
                ("episode_id", episode_id),
                ("tokenizer_name", tokenizer_name),
                ("total_budget", total_budget),
            )
            if v is not None
        }
        args.update({k: v for k, v in kwargs.items() if v is not None})
        tried: list[str] = []
        while True:
            client = self._ensure()
            try:
                obs = as_observation(self._call(client, "reset", **args))
                break
            except ConnectionError as exc:
                if self.replicas is None or len(tried) >= self.replays:
                    raise EpisodeLostError(f"the environment server went away at reset: {exc}") from None
                tried.append(self.url or "")
                self._drop(failed=True)
        # The seed the server drew (when none was given) makes the episode replayable.
        self._reset_args = {**args, "seed": args.get("seed", obs.metadata.get("seed"))}
        self._first = obs
        self._log = []
        return obs

    def step(self, action: ReasoningEconomicsAction | str) -> ReasoningEconomicsObservation:
        """Answer the current question (an action, or a bare response string)."""
        from reasoning_env.client import make_action

        action = make_action(action)
        client = self._ensure()
        try:
            obs = as_observation(self._call(client, "step", action))
        except ConnectionError as exc:
            obs = self._replay_then(action, exc)
        self._log.append((action, obs))
        return obs

    def _replay_then(self, action: ReasoningEconomicsAction, cause: Exception) -> ReasoningEconomicsObservation:
        """Replay the episode on another replica, then send ``action`` there."""
        if self.replicas is None or self._reset_args is None:
            raise EpisodeLostError(f"the environment server went away mid-episode: {cause}") from None
        seed = self._reset_args.get("seed")
        failed = [self.url or ""]
        logger.warning("episode with seed %s lost its server %s (%s); replaying it on another", seed, self.url, cause)
        self._drop(failed=True)
        for _attempt in range(self.replays):
            try:
                self._open(exclude=failed)
            except EpisodeLostError as exc:
                raise EpisodeLostError(
                    f"the episode with seed {seed} lost its server {failed[0]} ({cause}) and could not be "
                    f"replayed: {exc}"
                ) from None
            try:
                first = as_observation(self._call(self._client, "reset", **self._reset_args))
                if (
                    self._first is None
                    or not _same(first, self._first)
                    or first.metadata.get("question_ids") != self._first.metadata.get("question_ids")
                ):
                    raise EpisodeLostError(
                        f"the episode with seed {seed} could not be replayed on {self.url}: its reset "
                        "differs from the "
                        "first server's (the replicas serve different configurations)"
                    )
                for past, seen in self._log:
                    again = as_observation(self._call(self._client, "step", past))
                    if not _same(again, seen):
                        raise EpisodeLostError(
                            f"the episode with seed {seed} could not be replayed on {self.url}: step "
                            f"{seen.question_index} answered differently (the replicas serve different configurations "
                            "or a grade timed out on one of them)"
                        )
                obs = as_observation(self._call(self._client, "step", action))
            except ConnectionError as exc:
                if isinstance(exc, EpisodeLostError):
                    raise
                failed.append(self.url or "")
                self._drop(failed=True)
                cause = exc
                continue
            self.replayed += 1
            logger.warning("episode with seed %s replayed on %s after its server went away", seed, self.url)
            return obs
        raise EpisodeLostError(f"the episode with seed {seed} lost its server and every replay failed: {cause}")

    def state(self) -> Any:
        """The server-side episode state."""
        return self._ensure().state()

    def close(self) -> None:
        """End the session (the connection is closed; the replica keeps serving others)."""
        if self.replicas is None:
            close = getattr(self._client, "close", None)
            if callable(close):
                close()
            return
        self._drop(failed=False)
