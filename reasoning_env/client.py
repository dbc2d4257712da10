"""Typed OpenEnv client of the ReasoningEconomicsEnv server (WebSocket ``/ws``, one session per client).

Synchronous::

    from reasoning_env.client import ReasoningEconomicsClient

    with ReasoningEconomicsClient(base_url="http://localhost:8000").sync() as env:
        result = env.reset(seed=7, tokenizer_name="Qwen/Qwen2.5-0.5B-Instruct")
        while not result.done:
            obs = result.observation                     # ReasoningEconomicsObservation
            result = env.step(f"... so the answer is \\boxed{{42}}")
        print(result.observation.history, result.reward)

Asynchronous: ``async with ReasoningEconomicsClient(base_url=...) as env: await env.reset(...)``;
run many clients at once (one session each) with ``asyncio.gather``.

Errors (all importable from here):

- :class:`ServerError` (a ``RuntimeError``): the server answered with an error frame (bad input,
  capacity reached, no episode, unauthorized, idle session closed); ``code`` and ``message`` say
  which and why.
- :class:`ServerGoneError` (a ``ConnectionError``): the connection ended under a request (the
  server stopped or restarted, the network dropped, the server closed the session); ``close_code``
  and ``reason`` carry the WebSocket close if there was one. The episode on that session is lost:
  reconnect (the next call does) and reset, or use :class:`reasoning_env.remote.RemoteEnv`, which
  replays it from its seed on another replica.
- ``ConnectionError`` when the server cannot be reached at all (from OpenEnv's ``connect``).

With ``$REE_API_TOKEN`` set (or ``api_token=``), the client sends ``Authorization: Bearer <token>``.
"""

from __future__ import annotations

import os
from typing import Any

from openenv.core.client_types import StepResult
from openenv.core.env_client import EnvClient
from websockets.exceptions import ConnectionClosed

from reasoning_env.errors import ServerError, ServerGoneError
from reasoning_env.models import ReasoningEconomicsAction, ReasoningEconomicsObservation, ReasoningEconomicsState

#: Environment variable holding the server's shared token (read by clients and trainers).
API_TOKEN_VAR = "REE_API_TOKEN"


def make_action(
    response: str | ReasoningEconomicsAction,
    grading_response: str | None = None,
    tokenizer_name: str | None = None,
    num_generated_tokens: int | None = None,
) -> ReasoningEconomicsAction:
    """The one way to build a step's action: a :class:`ReasoningEconomicsAction` from a response string
    (or an action) plus the optional metadata keys of the contract; given keys override the
    action's own metadata.

    Args:
        response: The full model output, or an action to add keys to.
        grading_response: Grade this text instead (tokens are still counted on ``response``);
            blank means none.
        tokenizer_name: Count this step (and the rest of the session) with this tokenizer.
        num_generated_tokens: Token ids the policy generated for ``response`` (stop token
            excluded): the step is charged at least that many.

    Raises:
        TypeError: ``response`` is neither a string nor a ReasoningEconomicsAction.
        ValueError: ``num_generated_tokens`` is negative or not an integer.
    """
    if isinstance(response, ReasoningEconomicsAction):
        action = response
    elif isinstance(response, str):
        action = ReasoningEconomicsAction(response=response)
    else:
        raise TypeError(f"step() takes a response string or a ReasoningEconomicsAction, got {type(response).__name__}")
    extra: dict[str, Any] = {}
    if grading_response is not None and grading_response.strip():
        extra["grading_response"] = grading_response
    if tokenizer_name:
        extra["tokenizer_name"] = tokenizer_name
    if num_generated_tokens is not None:
        if (
            isinstance(num_generated_tokens, bool)
            or int(num_generated_tokens) != num_generated_tokens
            or num_generated_tokens < 0
        ):
            raise ValueError(f"num_generated_tokens must be a non-negative integer, got {num_generated_tokens!r}")
        extra["num_generated_tokens"] = int(num_generated_tokens)
    if extra:
        action = action.model_copy(update={"metadata": {**(action.metadata or {}), **extra}})
    return action


class ReasoningEconomicsClient(
    EnvClient[ReasoningEconomicsAction, ReasoningEconomicsObservation, ReasoningEconomicsState]
):
    """OpenEnv client with typed results (``StepResult[ReasoningEconomicsObservation]``).

    Args:
        base_url: The server, ``http://host:port`` or ``ws://host:port`` (the ``/ws`` path is added).
        api_token: The server's shared token (default ``$REE_API_TOKEN``; none: no header).
        **kwargs: :class:`EnvClient`'s options, e.g. ``message_timeout_s`` (seconds to wait for an
            answer; default 60), ``connect_timeout_s`` and ``headers``.

    Each client is one server session (its own episode, tokenizer and budget); ``.sync()`` gives
    the synchronous wrapper. ``reset(seed=..., episode_id=..., tokenizer_name=..., total_budget=...)``
    starts an episode; ``step(response, grading_response=None, tokenizer_name=None)`` answers
    the current question. Both raise :class:`ServerError` when the server refuses the request
    and :class:`ServerGoneError` when the connection ends under it.
    """

    def __init__(
        self,
        base_url: str | None = None,
        *,
        api_token: str | None = None,
        close_timeout_s: float | None = None,
        **kwargs: Any,
    ) -> None:
        token = api_token if api_token is not None else os.environ.get(API_TOKEN_VAR, "").strip()
        if token:
            kwargs["headers"] = {**(kwargs.get("headers") or {}), "Authorization": f"Bearer {token}"}
        #: Seconds the WebSocket waits for the server's close handshake, also after a keepalive
        #: ping went unanswered (``None``: the websockets default, 10 s).
        self.close_timeout_s = close_timeout_s
        super().__init__(base_url, **kwargs)

    async def _connect_async(self) -> ReasoningEconomicsClient:
        out = await super()._connect_async()
        if self.close_timeout_s is not None and self._ws is not None:
            self._ws.close_timeout = self.close_timeout_s
        return out

    # ------------------------------------------------------------------ OpenEnv hooks
    def _step_payload(self, action: ReasoningEconomicsAction) -> dict[str, Any]:
        return action.model_dump(mode="json")

    def _parse_result(self, payload: dict[str, Any]) -> StepResult[ReasoningEconomicsObservation]:
        fields = dict(payload.get("observation") or {})
        fields["reward"] = payload.get("reward")
        fields["done"] = bool(payload.get("done", False))
        obs = ReasoningEconomicsObservation.model_validate(fields)
        return StepResult(observation=obs, reward=obs.reward, done=obs.done, metadata=obs.metadata)

    def _parse_state(self, payload: dict[str, Any]) -> ReasoningEconomicsState:
        return ReasoningEconomicsState.model_validate(payload)

    async def _receive(self) -> dict[str, Any]:
        try:
            response = await super()._receive()
        except ConnectionClosed as exc:
            self._ws = None  # the next call reconnects (a new, empty session)
            rcvd = exc.rcvd
            raise ServerGoneError(self._ws_url, rcvd.code if rcvd else None, rcvd.reason if rcvd else "") from None
        if isinstance(response, dict) and response.get("type") == "error":
            raise ServerError(response.get("data") or {})
        return response

    # ------------------------------------------------------------------ typed signatures
    async def _reset_async(
        self,
        seed: int | None = None,
        episode_id: str | None = None,
        tokenizer_name: str | None = None,
        total_budget: int | None = None,
        **kwargs: Any,
    ) -> StepResult[ReasoningEconomicsObservation]:
        """Start an episode (see :meth:`ReasoningEconomicsEnv.reset`; unset arguments are not sent,
        unknown ones are sent and refused by the server with a clear error).

        Args:
            seed: Episode seed (int >= 0): same server config and seed, same questions and budget.
            episode_id: Your identifier for the episode.
            tokenizer_name: The policy's tokenizer (Hub id): counts tokens and sets the
                tokenizer-native budget.
            total_budget: Explicit episode budget in tokens (1..100,000,000).

        Raises:
            ServerError: the server refused (bad argument, unknown tokenizer, ...).
        """
        data = {
            k: v
            for k, v in (
                ("seed", seed),
                ("episode_id", episode_id),
                ("tokenizer_name", tokenizer_name),
                ("total_budget", total_budget),
            )
            if v is not None
        }
        return await super()._reset_async(**data, **kwargs)

    async def _step_async(
        self,
        action: str | ReasoningEconomicsAction,
        grading_response: str | None = None,
        tokenizer_name: str | None = None,
        **kwargs: Any,
    ) -> StepResult[ReasoningEconomicsObservation]:
        """Answer the current question.

        Args:
            action: The full model output (a string), or a :class:`ReasoningEconomicsAction`.
            grading_response: Grade this text instead (tokens are still counted on the response).
            tokenizer_name: Count this step's tokens with this tokenizer (kept for the session).
            num_generated_tokens: (keyword) token ids generated for the response: charged at least.

        Raises:
            ServerError: the server refused (no episode, response over the size cap, ...).
            ServerGoneError: the connection ended before the answer came.
            TypeError: ``action`` is neither a string nor a ReasoningEconomicsAction.
        """
        num_generated_tokens = kwargs.pop("num_generated_tokens", None)
        if kwargs:
            raise TypeError(
                f"step() got unexpected keyword argument(s) {sorted(kwargs)}; "
                "it takes grading_response, tokenizer_name and num_generated_tokens"
            )
        return await super()._step_async(make_action(action, grading_response, tokenizer_name, num_generated_tokens))
