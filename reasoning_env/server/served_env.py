"""The environment as the server runs it: :class:`ReasoningEconomicsEnv` plus the rules a shared,
remote server needs and an in-process caller does not.

- A step with no episode to step (before any reset, or after the episode ended) raises
  :class:`EpisodeStateError` instead of returning the contract's done observation with
  ``metadata.error``: over the wire a clear error is harder to miss (the WebSocket answers it
  with an ``EXECUTION_ERROR`` frame, HTTP with 409).
- Tokenizer names from clients pass the server's policy first (:meth:`ServerSettings.check_tokenizer_name`):
  no folders on the server's disk unless allowed, optionally an allow-list.
"""

from __future__ import annotations

from typing import Any

from reasoning_env.env import ReasoningEconomicsEnv
from reasoning_env.errors import EpisodeStateError, TokenizerNotAllowedError
from reasoning_env.models import ReasoningEconomicsAction, ReasoningEconomicsObservation
from reasoning_env.server.settings import ServerSettings
from reasoning_env.tokenization import LoadedTokenizer, get_tokenizer


class ServedReasoningEconomicsEnv(ReasoningEconomicsEnv):
    """:class:`ReasoningEconomicsEnv` with the server's rules (see the module docstring).

    Args:
        config, pools, grader: As for :class:`ReasoningEconomicsEnv` (the server shares one pool
            set and one grader across sessions).
        settings: The server's :class:`ServerSettings` (tokenizer policy).
    """

    def __init__(self, config: Any = None, *, settings: ServerSettings | None = None, **kwargs: Any) -> None:
        super().__init__(config, **kwargs)
        self.settings = settings or ServerSettings()

    def _tokenizer_for(self, name: str) -> LoadedTokenizer:
        # A client's name is a Hub id unless the operator allows folders: never a folder under
        # the server's working directory that happens to have that name.
        local = self.settings.allow_local_tokenizers or name == self.config.tokenizer_name
        return get_tokenizer(name, allow_local=local)

    def _check_tokenizer(self, name: Any) -> None:
        if isinstance(name, str):
            why = self.settings.check_tokenizer_name(name, self.config.tokenizer_name)
            if why:
                raise TokenizerNotAllowedError(why)

    def reset(
        self,
        seed: int | None = None,
        episode_id: str | None = None,
        tokenizer_name: str | None = None,
        total_budget: int | None = None,
        **kwargs: Any,
    ) -> ReasoningEconomicsObservation:
        """:meth:`ReasoningEconomicsEnv.reset` after the tokenizer policy check.

        Raises:
            TokenizerNotAllowedError: the policy refuses ``tokenizer_name``.
            EpisodeError, TokenizerLoadError: as the base class.
        """
        self._check_tokenizer(tokenizer_name)
        return super().reset(
            seed=seed, episode_id=episode_id, tokenizer_name=tokenizer_name, total_budget=total_budget, **kwargs
        )

    def step(
        self, action: ReasoningEconomicsAction | dict | str, timeout_s: float | None = None, **kwargs: Any
    ) -> ReasoningEconomicsObservation:
        """:meth:`ReasoningEconomicsEnv.step`, refusing steps without an episode in progress.

        The grading time limit is always the config's: a client's ``timeout_s`` is ignored.

        Raises:
            EpisodeStateError: no reset yet, or the episode is over (nothing changes).
            TokenizerNotAllowedError: the policy refuses ``metadata.tokenizer_name``.
            EpisodeError, TokenizerLoadError: as the base class.
        """
        action = self._coerce_action(action)
        self._check_tokenizer((action.metadata or {}).get("tokenizer_name"))
        obs = super().step(action)
        if obs.done_reason == "no_episode":
            raise EpisodeStateError(
                "no episode to step: send a reset first. Each WebSocket connection is its own session "
                "and starts empty (so does a reconnect, e.g. after the server closed an idle session); "
                "HTTP POST /step builds a fresh environment per request and never has an episode, so "
                "play episodes over the WebSocket /ws (ReasoningEconomicsClient)."
            )
        if obs.done_reason == "episode_already_done":
            raise EpisodeStateError(f"the episode is over ({self.state.done_reason}); send a reset to start a new one")
        return obs
