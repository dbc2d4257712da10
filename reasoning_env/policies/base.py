"""The policy interface: observation in, response out.

A policy answers the current question of an observation with one response (a reasoning trace
ending in ``\\boxed{}``). The evaluator drives it::

    policy.reset(EpisodeInfo(...))          # once per episode, after env.reset()
    while not obs.done:
        out = policy.act(obs)               # -> PolicyOutput(response, grading_response, meta)
        obs = env.step(ReasoningEconomicsAction(response=out.response,
                                          metadata={"grading_response": out.grading_response}))

What a policy may see:

- the observation (question, problem type, difficulty where the data has it, remaining budget,
  ``step_token_cap``, history): this is all an LLM sees, through the one prompt template of
  :mod:`reasoning_env.prompting`;
- :class:`EpisodeInfo`: the episode's budget, seed and tokenizer; plus, only for policies that
  declare ``needs_trusted_context = True`` (simulated solvers and the oracle), the episode's
  questions with their gold answers. The evaluator passes these from ``env.questions`` (trusted,
  in-process code); they never travel through the observation or the server.
"""

from __future__ import annotations

import copy
from dataclasses import dataclass, field
from typing import Any, Protocol, runtime_checkable

from reasoning_env.errors import PolicyError

__all__ = ["BasePolicy", "EpisodeInfo", "Policy", "PolicyError", "PolicyOutput", "obs_get"]


@dataclass
class PolicyOutput:
    """One response.

    Attributes:
        response: The full text the policy produced; its tokens are counted in full and charged.
        grading_response: If set and non-empty, the text the environment grades instead of
            ``response`` (Qwen3-style thinking: the visible part after ``</think>``).
        meta: Diagnostics recorded as ``policy_<key>`` columns of ``trajectories.parquet``:
            e.g. ``target_tokens`` (length the policy aimed for), ``tokens`` (tokens the policy
            itself generated / the endpoint's reported completion tokens), ``prompt_tokens``,
            ``latency_s`` (seconds), ``finish_reason``, ``p_correct`` (simulated solvers).
            Values must be JSON scalars (str, int, float, bool, None).
        num_generated_tokens: Token ids the policy generated for ``response``, when it generated
            them itself with the environment's tokenizer (a local model); sent as
            ``metadata.num_generated_tokens`` so the step is charged at least that many tokens.
    """

    response: str
    grading_response: str | None = None
    meta: dict[str, Any] = field(default_factory=dict)
    num_generated_tokens: int | None = None


@dataclass
class EpisodeInfo:
    """What the evaluator tells a policy at the start of an episode.

    Attributes:
        episode: 0-based episode index in the run (same index = same questions for every policy).
        seed: The episode seed passed to ``reset``.
        total_budget: Episode budget (tokens of ``tokenizer_name``).
        num_questions: Questions in the episode.
        tokenizer_name: The tokenizer the environment counts with.
        tokenizer: That tokenizer, loaded (:class:`~reasoning_env.tokenization.LoadedTokenizer`),
            for policies that write text of an exact token length; ``None`` if it could not be
            loaded locally.
        min_tokens: The hard-cap mode's end threshold (tokens; the episode ends when the
            remaining budget falls below it).
        max_tokens: The config's ``max_tokens`` (tokens; the "max" of ``greedy_max``).
        max_tokens_per_step: The config's per-step generation cap (tokens).
        hard_cap_mode: The config's budget mode.
        reset_metadata: The reset observation's ``metadata`` (budget source, question ids...).
        questions: Trusted context: the episode's :class:`~reasoning_env.questions.Question`
            list, gold answers included, in order. Set only for policies whose
            ``needs_trusted_context`` is true; ``None`` otherwise.
    """

    episode: int
    seed: int
    total_budget: int
    num_questions: int
    tokenizer_name: str
    tokenizer: Any = None
    min_tokens: int = 10
    max_tokens: int = 800
    max_tokens_per_step: int = 2048
    hard_cap_mode: bool = True
    reset_metadata: dict[str, Any] = field(default_factory=dict)
    questions: list | None = None


@runtime_checkable
class Policy(Protocol):
    """The policy protocol (see the module docstring).

    Attributes:
        name: Row label in tables and run folders (unique within a run).
        kind: ``"budget_baseline"``, ``"simulated"``, ``"oracle"`` or ``"llm"``.
        needs_trusted_context: Whether :meth:`reset` must receive the episode's questions with
            gold answers (only in-process evaluation can provide them).
        tokenizer_name: Tokenizer to reset the environment with (the policy's own), or ``None``
            for the config's ``tokenizer_name``.
    """

    name: str
    kind: str
    needs_trusted_context: bool
    tokenizer_name: str | None

    def reset(self, info: EpisodeInfo) -> None:
        """Start an episode."""

    def act(self, obs: Any) -> PolicyOutput:
        """Answer the current question of ``obs`` (a ``ReasoningEconomicsObservation`` or its dict)."""


class BasePolicy:
    """Convenience base class: stores the episode info, clones per worker, describes itself."""

    name: str = "policy"
    kind: str = "budget_baseline"
    needs_trusted_context: bool = False
    tokenizer_name: str | None = None

    def __init__(self) -> None:
        self.info: EpisodeInfo | None = None

    def reset(self, info: EpisodeInfo) -> None:
        """Remember ``info`` for the episode. Raises :class:`PolicyError` when trusted context
        is required but missing."""
        if self.needs_trusted_context and info.questions is None:
            raise PolicyError(
                f"policy {self.name!r} needs the episode's questions with gold answers (trusted context), "
                "which only in-process evaluation has: run it without --server-url"
            )
        self.info = info

    def act(self, obs: Any) -> PolicyOutput:  # pragma: no cover - abstract
        raise NotImplementedError

    def clone(self) -> BasePolicy:
        """An independent copy for a parallel worker (heavy resources such as a loaded model are
        shared, not copied)."""
        twin = copy.copy(self)
        twin.info = None
        return twin

    #: Whether the policy reads the difficulty label to allocate (*oracle-informed*: under the
    #: simulated solver the label sets the success probability; an LLM's prompt never has it).
    reads_difficulty: bool = False

    def describe(self) -> dict[str, Any]:
        """JSON-ready description for ``run.json`` (name, kind, class, settings, ``oracle_informed``)."""
        return {
            "name": self.name,
            "kind": self.kind,
            "class": type(self).__name__,
            "oracle_informed": bool(self.reads_difficulty),
        }

    def close(self) -> None:
        """Release resources (HTTP clients, models). Idempotent."""


def obs_get(obs: Any, key: str, default: Any = None) -> Any:
    """``obs.key`` for an observation object, ``obs[key]`` for its dict form."""
    if isinstance(obs, dict):
        return obs.get(key, default)
    return getattr(obs, key, default)
