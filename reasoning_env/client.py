"""Typed OpenEnv client of the ReasoningEconomicsEnv server (WebSocket ``/ws``, one session per client).

Synchronous::

    from reasoning_env.client import ReasoningEconomicsClient

    with ReasoningEconomicsClient(base_url="http://localhost:8000").sync() as env:
        result = env.reset(seed=7, tokenizer_name="Qwen/Qwen2.5-0.5B-Instruct")
        while not result.done:
            obs = result.observation                     # ReasonBudgetObservation
            result = env.step(f"... so the answer is \\boxed{{42}}")
        print(result.observation.history, result.reward)

Asynchronous: ``async with ReasoningEconomicsClient(base_url=...) as env: await env.reset(...)``;
run many clients at once (one session each) with ``asyncio.gather``.

Errors the server answers (bad input, capacity reached, no episode, idle session closed) raise
:class:`ServerError`, a ``RuntimeError`` carrying the server's ``code`` and ``message``.
"""

from __future__ import annotations

from typing import Any, Dict, Optional, Union

from openenv.core.client_types import StepResult
from openenv.core.env_client import EnvClient

from reasoning_env.models import ReasonBudgetAction, ReasonBudgetObservation, ReasonBudgetState


class ServerError(RuntimeError):
    """The server answered a request with an error frame.

    Attributes:
        code: OpenEnv's error code (``VALIDATION_ERROR``, ``EXECUTION_ERROR``, ``CAPACITY_REACHED``,
            ``INVALID_JSON``, ``UNKNOWN_TYPE``, ``SESSION_ERROR``, ...).
        message: The server's explanation (what was wrong and how to fix it).
        data: The whole error payload.
    """

    def __init__(self, data: Dict[str, Any]) -> None:
        self.data = dict(data)
        self.code = str(self.data.get("code", "UNKNOWN"))
        self.message = str(self.data.get("message", "unknown error"))
        super().__init__(f"Server error: {self.message} (code: {self.code})")


def make_action(
    response: Union[str, ReasonBudgetAction],
    grading_response: Optional[str] = None,
    tokenizer_name: Optional[str] = None,
) -> ReasonBudgetAction:
    """A :class:`ReasonBudgetAction` from a response string (or an action) plus the optional
    metadata keys; given keys override the action's own metadata.

    Raises:
        TypeError: ``response`` is neither a string nor a ReasonBudgetAction.
    """
    if isinstance(response, ReasonBudgetAction):
        action = response
    elif isinstance(response, str):
        action = ReasonBudgetAction(response=response)
    else:
        raise TypeError(f"step() takes a response string or a ReasonBudgetAction, got {type(response).__name__}")
    extra = {k: v for k, v in (("grading_response", grading_response), ("tokenizer_name", tokenizer_name)) if v is not None}
    if extra:
        action = action.model_copy(update={"metadata": {**(action.metadata or {}), **extra}})
    return action


class ReasoningEconomicsClient(EnvClient[ReasonBudgetAction, ReasonBudgetObservation, ReasonBudgetState]):
    """OpenEnv client with typed results (``StepResult[ReasonBudgetObservation]``).

    Args:
        base_url: The server, ``http://host:port`` or ``ws://host:port`` (the ``/ws`` path is added).
        **kwargs: :class:`EnvClient`'s options, e.g. ``message_timeout_s`` (seconds to wait for an
            answer; default 60) and ``connect_timeout_s``.

    Each client is one server session (its own episode, tokenizer and budget); ``.sync()`` gives
    the synchronous wrapper. ``reset(seed=..., episode_id=..., tokenizer_name=..., total_budget=...)``
    starts an episode; ``step(response, grading_response=None, tokenizer_name=None)`` answers
    the current question. Both raise :class:`ServerError` when the server refuses the request.
    """

    # ------------------------------------------------------------------ OpenEnv hooks
    def _step_payload(self, action: ReasonBudgetAction) -> Dict[str, Any]:
        return action.model_dump(mode="json")

    def _parse_result(self, payload: Dict[str, Any]) -> StepResult[ReasonBudgetObservation]:
        fields = dict(payload.get("observation") or {})
        fields["reward"] = payload.get("reward")
        fields["done"] = bool(payload.get("done", False))
        obs = ReasonBudgetObservation.model_validate(fields)
        return StepResult(observation=obs, reward=obs.reward, done=obs.done, metadata=obs.metadata)

    def _parse_state(self, payload: Dict[str, Any]) -> ReasonBudgetState:
        return ReasonBudgetState.model_validate(payload)

    async def _receive(self) -> Dict[str, Any]:
        response = await super()._receive()
        if isinstance(response, dict) and response.get("type") == "error":
            raise ServerError(response.get("data") or {})
        return response

    # ------------------------------------------------------------------ typed signatures
    async def _reset_async(
        self,
        seed: Optional[int] = None,
        episode_id: Optional[str] = None,
        tokenizer_name: Optional[str] = None,
        total_budget: Optional[int] = None,
        **kwargs: Any,
    ) -> StepResult[ReasonBudgetObservation]:
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
        data = {k: v for k, v in (("seed", seed), ("episode_id", episode_id), ("tokenizer_name", tokenizer_name),
                                  ("total_budget", total_budget)) if v is not None}
        return await super()._reset_async(**data, **kwargs)

    async def _step_async(
        self,
        action: Union[str, ReasonBudgetAction],
        grading_response: Optional[str] = None,
        tokenizer_name: Optional[str] = None,
        **kwargs: Any,
    ) -> StepResult[ReasonBudgetObservation]:
        """Answer the current question.

        Args:
            action: The full model output (a string), or a :class:`ReasonBudgetAction`.
            grading_response: Grade this text instead (tokens are still counted on the response).
            tokenizer_name: Count this step's tokens with this tokenizer (kept for the session).

        Raises:
            ServerError: the server refused (no episode, response over the size cap, ...).
            TypeError: ``action`` is neither a string nor a ReasonBudgetAction.
        """
        if kwargs:
            raise TypeError(f"step() got unexpected keyword argument(s) {sorted(kwargs)}; "
                            "it takes grading_response and tokenizer_name")
        return await super()._step_async(make_action(action, grading_response, tokenizer_name))
