"""Environment sessions for rollouts: in-process or against an OpenEnv server.

A session plays one episode:

    session.reset(seed=..., tokenizer_name=..., total_budget=...) -> observation
    session.step(response, grading_response, num_generated_tokens) -> observation
    session.close()

Observations are :class:`reasoning_env.models.ReasoningEconomicsObservation` (or their dicts when they
come over the wire); :func:`as_obs` (:func:`reasoning_env.remote.as_observation`) turns either
into an observation object.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Protocol

from reasoning_env.client import make_action
from reasoning_env.config import EnvConfig
from reasoning_env.models import ReasoningEconomicsAction, ReasoningEconomicsObservation
from reasoning_env.remote import RemoteEnv, Replicas, as_observation


class EnvSession(Protocol):
    """One episode's connection to an environment."""

    def reset(
        self, *, seed: int, tokenizer_name: str | None, total_budget: int | None
    ) -> ReasoningEconomicsObservation: ...

    def step(
        self, response: str, grading_response: str | None, num_generated_tokens: int | None = None
    ) -> ReasoningEconomicsObservation: ...

    def close(self) -> None: ...


def _action(response: str, grading_response: str | None, num_generated_tokens: int | None) -> ReasoningEconomicsAction:
    """The step's action: the decoded turn, its visible answer, and how many ids were generated
    (the environment charges at least that many tokens); built by the one action builder."""
    return make_action(response, grading_response, num_generated_tokens=num_generated_tokens)


#: The one normaliser of observations (kept under this name for the rollout code).
as_obs = as_observation


class Session:
    """One episode's connection to an environment: a :class:`~reasoning_env.env.ReasoningEconomicsEnv`
    in this process, or a :class:`reasoning_env.remote.RemoteEnv` (a server, or replicas with
    replay from the seed when one dies); both take an action and return an observation."""

    def __init__(self, env: Any) -> None:
        self.env = env

    def reset(
        self, *, seed: int, tokenizer_name: str | None, total_budget: int | None
    ) -> ReasoningEconomicsObservation:
        return as_obs(self.env.reset(seed=seed, tokenizer_name=tokenizer_name, total_budget=total_budget))

    def step(
        self, response: str, grading_response: str | None, num_generated_tokens: int | None = None
    ) -> ReasoningEconomicsObservation:
        return as_obs(self.env.step(_action(response, grading_response, num_generated_tokens)))

    def close(self) -> None:
        self.env.close()


InProcessSession = Session


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

    def new_session(self) -> Session:
        from reasoning_env.env import ReasoningEconomicsEnv
        from reasoning_env.grading import Grader

        if self._grader is None:
            self._grader = Grader(timeout_s=self.config.grading_timeout_s)
        env = ReasoningEconomicsEnv(self.config, pools=self._pools, grader=self._grader)
        if self._pools is None:
            self._pools = env.pools
        return Session(env)


class RemoteEnvFactory:
    """Makes sessions against OpenEnv server(s) at ``base_url`` (one WebSocket session each).

    Several URLs are replicas of one environment: sessions spread over them, each episode stays
    on one, and an episode whose replica dies is replayed from its seed on another
    (:class:`reasoning_env.remote.RemoteEnv`); when none can take it, the rollout fails with
    :class:`reasoning_env.remote.EpisodeLostError`. The servers' own config decides the questions
    and rewards; the local ``config`` is only recorded in the run folder.

    Args:
        base_url: One URL, several (a list, or comma-separated).
        config: Recorded in the run folder.
        api_token: The servers' shared token (default ``$REE_API_TOKEN``).
    """

    remote = True

    def __init__(
        self, base_url: str | Sequence[str], config: EnvConfig | None = None, api_token: str | None = None
    ) -> None:
        self.replicas = Replicas(base_url, api_token=api_token)
        self.base_url = self.replicas.urls[0] if len(self.replicas.urls) == 1 else self.replicas.urls
        self.config = config or EnvConfig()

    def new_session(self) -> Session:
        return Session(RemoteEnv(self.replicas))
