"""Environment sessions for rollouts: in-process or against an OpenEnv server.

A session plays one episode:

    session.reset(seed=..., tokenizer_name=..., total_budget=...) -> observation
    session.step(response, grading_response, num_generated_tokens) -> observation
    session.close()

Observations are :class:`reasoning_env.models.ReasonBudgetObservation` (or their dicts when they
come over the wire); :func:`as_obs` turns either into an observation object.
"""

from __future__ import annotations

from typing import Any, Optional, Protocol

from reasoning_env.config import EnvConfig
from reasoning_env.models import ReasonBudgetAction, ReasonBudgetObservation


class EnvSession(Protocol):
    """One episode's connection to an environment."""

    def reset(self, *, seed: int, tokenizer_name: Optional[str], total_budget: Optional[int]) -> ReasonBudgetObservation: ...

    def step(self, response: str, grading_response: Optional[str], num_generated_tokens: Optional[int] = None) -> ReasonBudgetObservation: ...

    def close(self) -> None: ...


def _action(response: str, grading_response: Optional[str], num_generated_tokens: Optional[int]) -> ReasonBudgetAction:
    """The step's action: the decoded turn, its visible answer, and how many ids were generated
    (the environment charges at least that many tokens)."""
    md: dict[str, Any] = {}
    if grading_response is not None:
        md["grading_response"] = grading_response
    if num_generated_tokens is not None:
        md["num_generated_tokens"] = int(num_generated_tokens)
    return ReasonBudgetAction(response=response, metadata=md)


def as_obs(result: Any) -> ReasonBudgetObservation:
    """An observation from what an environment returned: an observation, a ``StepResult``-like
    object with ``.observation``, or a dict of either.

    Raises:
        TypeError: nothing observation-like in ``result``.
    """
    if isinstance(result, ReasonBudgetObservation):
        return result
    inner = getattr(result, "observation", None)
    if inner is not None:
        obs = as_obs(inner)
        # OpenEnv clients carry reward/done on the StepResult
        if getattr(result, "reward", None) is not None and obs.reward is None:
            obs.reward = result.reward
        return obs
    if isinstance(result, dict):
        data = result.get("observation", result)
        return ReasonBudgetObservation.model_validate(data)
    if hasattr(result, "model_dump"):
        return ReasonBudgetObservation.model_validate(result.model_dump())
    raise TypeError(f"cannot read an observation from {type(result).__name__}")


class InProcessSession:
    """A :class:`~reasoning_env.env.ReasoningEconomicsEnv` in this process (pools and grader
    shared through the factory)."""

    def __init__(self, env: Any) -> None:
        self.env = env

    def reset(self, *, seed: int, tokenizer_name: Optional[str], total_budget: Optional[int]) -> ReasonBudgetObservation:
        return self.env.reset(seed=seed, tokenizer_name=tokenizer_name, total_budget=total_budget)

    def step(self, response: str, grading_response: Optional[str], num_generated_tokens: Optional[int] = None) -> ReasonBudgetObservation:
        return self.env.step(_action(response, grading_response, num_generated_tokens))

    def close(self) -> None:
        self.env.close()


class InProcessEnvFactory:
    """Makes in-process sessions that share question pools and the grader.

    Args:
        config: The :class:`EnvConfig` every episode runs with.

    Raises:
        ConfigError / SourceError: the config's sources cannot be loaded (raised on the first
            :meth:`new_session`).
    """

    remote = False

    def __init__(self, config: EnvConfig) -> None:
        self.config = config
        self._pools = None
        self._grader = None

    def new_session(self) -> InProcessSession:
        from reasoning_env.env import ReasoningEconomicsEnv
        from reasoning_env.grading import Grader

        if self._grader is None:
            self._grader = Grader(timeout_s=self.config.grading_timeout_s)
        env = ReasoningEconomicsEnv(self.config, pools=self._pools, grader=self._grader)
        if self._pools is None:
            self._pools = env.pools
        return InProcessSession(env)


class RemoteSession:
    """One WebSocket session with an OpenEnv server, through
    ``reasoning_env.client.ReasoningEconomicsClient`` (its ``.sync()`` wrapper)."""

    def __init__(self, client: Any) -> None:
        self.client = client

    def reset(self, *, seed: int, tokenizer_name: Optional[str], total_budget: Optional[int]) -> ReasonBudgetObservation:
        kwargs: dict = {"seed": seed}
        if tokenizer_name is not None:
            kwargs["tokenizer_name"] = tokenizer_name
        if total_budget is not None:
            kwargs["total_budget"] = total_budget
        return as_obs(self.client.reset(**kwargs))

    def step(self, response: str, grading_response: Optional[str], num_generated_tokens: Optional[int] = None) -> ReasonBudgetObservation:
        return as_obs(self.client.step(_action(response, grading_response, num_generated_tokens)))

    def close(self) -> None:
        close = getattr(self.client, "close", None)
        if callable(close):
            close()


class RemoteEnvFactory:
    """Makes sessions against an OpenEnv server at ``base_url`` (one WebSocket session each).

    The server's own config decides the questions and rewards; the local ``config`` is only
    recorded in the run folder.

    Raises:
        ImportError: ``reasoning_env.client`` is not available (raised here, with the fix).
    """

    remote = True

    def __init__(self, base_url: str, config: Optional[EnvConfig] = None) -> None:
        try:
            from reasoning_env.client import ReasoningEconomicsClient  # noqa: F401
        except ImportError as exc:
            raise ImportError(
                f"--env_base_url needs reasoning_env.client.ReasoningEconomicsClient ({exc}); "
                "update the package or train in-process (omit --env_base_url)"
            ) from None
        self.base_url = base_url
        self.config = config or EnvConfig()

    def new_session(self) -> RemoteSession:
        from reasoning_env.client import ReasoningEconomicsClient

        client = ReasoningEconomicsClient(base_url=self.base_url)
        sync = getattr(client, "sync", None)
        return RemoteSession(sync() if callable(sync) else client)
