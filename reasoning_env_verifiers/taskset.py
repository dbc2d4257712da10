"""This project's episodes as a verifiers v1 taskset and env (``verifiers==0.4.0``, ``import verifiers.v1``).

One task is one seeded episode. The env's ``run()`` plays it as the model's user: it resets a
:class:`reasoning_env.ReasoningEconomicsEnv`, sends each question as one user turn (the project's
own :data:`~reasoning_env.prompting.SYSTEM_PROMPT` and :func:`~reasoning_env.prompting.build_user_prompt`),
steps the environment with each reply (token counting with the configured tokenizer, grading, the
configured reward) and ends the exchange when the episode is done. The trace's reward is the episode's
total (what the environment paid, summed over its steps); each reward component's episode total, and
accuracy and token use, are metrics. Nothing here computes a reward: the environment does.

The environment runs in the verifiers process, beside the interception server (host-side, like
verifiers' own TextArena env); the model's harness only chats.

Generation limit: each prompt states the most tokens the answer may use (``step_token_cap``). The taskset makes
sure generation is never cut below that: when the run sets no ``max_tokens``, it sends the largest cap the
episode's prompts can state (the environment's ``max_tokens_per_step``, at most the episode budget in hard-cap
mode); when the run's ``max_tokens`` is lower, it keeps the user's value, states ``min(cap, max_tokens)`` in each
prompt instead (so the model is told the limit it really has) and says so in the log and in
``trace.info["episode"]["generation_limit"]``.

``vf-validate`` (model-free): the gold check plays each task's episode with every question answered
``\\boxed{gold}`` through the environment (its grader, its budget) and is valid when every gold is graded
right; the noop check scores an untouched episode, which the environment pays nothing (0, not a pass).
"""

from __future__ import annotations

import asyncio
import dataclasses
import itertools
import logging
from collections.abc import Iterator
from functools import cached_property
from pathlib import Path
from typing import Any

import verifiers.v1 as vf
from pydantic import Field
from verifiers.v1.harnesses.null import NullHarness

from reasoning_env import EnvConfig, ReasoningEconomicsEnv
from reasoning_env.grading import Grader
from reasoning_env.models import ReasoningEconomicsAction
from reasoning_env.policies.turn_cap import capped_observation
from reasoning_env.prompting import SYSTEM_PROMPT, build_user_prompt
from reasoning_env.sources import PoolSet
from reasoning_env.tokenization import get_tokenizer

__all__ = [
    "ChatHarness",
    "EpisodeData",
    "EpisodeTask",
    "ReasoningEconomicsConfig",
    "ReasoningEconomicsEnvConfig",
    "ReasoningEconomicsTaskset",
    "ReasoningEconomicsVfEnv",
    "episode_metrics",
    "generation_limit",
    "gold_check",
]

#: Under verifiers' library logger ("verifiers.v1"), which vf-eval / vf-validate route to the console and the run's
#: log file; a logger of this package's own name would reach neither.
logger = logging.getLogger("verifiers.v1.tasksets.reasoning_env_verifiers")

#: The name of the trace's reward (the episode's total, weight 1).
REWARD_NAME = "reasoning_economics"


class ReasoningEconomicsConfig(vf.TasksetConfig):
    """The taskset's knobs (``--env.taskset.<name>`` on the CLI, ``[env.taskset]`` in TOML)."""

    config: str | None = None
    """Path to an EnvConfig YAML (as ``python -m reasoning_env.server --config``); None = the defaults."""
    env: dict[str, Any] = Field(default_factory=dict)
    """EnvConfig fields on top of ``config`` (e.g. ``{"num_questions": 5, "reward": {"type": "accuracy"}}``)."""
    seed: int = 0
    """Episode ``i`` of the taskset is the environment's episode of seed ``seed + i``."""
    num_episodes: int | None = None
    """How many episodes the taskset holds; None = an endless stream (bound the run with ``-n``)."""
    tokenizer_name: str | None = None
    """The model's tokenizer (Hub id, ``embedded:...`` or folder): the environment counts each reply's
    tokens with it and sizes the tokenizer-native budget; None = the EnvConfig's tokenizer."""
    total_budget: int | None = None
    """An explicit episode budget in tokens (overrides the budget formula)."""
    history_len: int = 3
    """Past answers summarised in each question's prompt (the project's prompt template)."""

    def env_config(self) -> EnvConfig:
        """The :class:`EnvConfig` these settings describe (raises ``ConfigError`` naming a bad field)."""
        base = EnvConfig.from_yaml(Path(self.config)) if self.config else EnvConfig()
        return base.replace(**self.env) if self.env else base


class EpisodeData(vf.TaskData):
    """One episode: the seed and budget the environment's ``reset()`` takes."""

    info: dict[str, Any]


class EpisodeTask(vf.Task[EpisodeData, vf.State, vf.TaskConfig]):
    """An episode of this environment. The env's ``run()`` plays and scores it; the task's reward reads
    what the environment paid (so verifiers' own scoring, and ``vf-validate``'s noop check, see it), and
    :meth:`validate` is ``vf-validate``'s gold check.

    Args:
        data: The episode's seed and budget.
        config: verifiers' task config.
        settings: The taskset's settings (the EnvConfig and tokenizer the gold check plays with); None for
            a task rebuilt from wire data alone (its gold check is then unchecked).
    """

    def __init__(
        self, data: EpisodeData, config: vf.TaskConfig | None = None, settings: ReasoningEconomicsConfig | None = None
    ) -> None:
        super().__init__(data, config)
        self.settings = settings

    @property
    def key(self) -> str:
        return f"reasoning_economics/seed={self.data.info['seed']}"

    @vf.reward(weight=1.0)
    async def reasoning_economics(self, trace: vf.Trace) -> float:
        """The episode's total as the environment paid it so far (the env's ``run()`` keeps it in
        ``trace.info["episode"]["reward"]`` after every step and records the same value as this reward when
        the exchange ends); 0 for an episode that was never answered (nothing paid)."""
        return float((trace.info.get("episode") or {}).get("reward", 0.0))

    async def validate(self, runtime: Any) -> bool | None:
        """``vf-validate``'s gold check: :func:`gold_check` on this task's episode."""
        if self.settings is None:
            return None
        info = self.data.info
        report = await asyncio.to_thread(
            gold_check,
            self.settings.env_config(),
            seed=int(info["seed"]),
            tokenizer_name=self.settings.tokenizer_name,
            total_budget=info.get("total_budget"),
        )
        if not report["valid"]:
            logger.warning("gold check failed for %s: %s", self.key, report["failures"])
        return bool(report["valid"])


def gold_check(
    config: EnvConfig, *, seed: int, tokenizer_name: str | None = None, total_budget: int | None = None
) -> dict[str, Any]:
    """Play episode ``seed`` answering every question with its gold answer in ``\\boxed{}`` through the
    environment (its grader, token counting and budget), and report whether each gold is graded right.

    Returns:
        ``{"valid": bool, "questions": n, "correct": k, "failures": [{"question_id", "gold",
        "extracted_answer", "done_reason"}...]}``: valid when all ``n`` questions were answered and graded
        correct.
    """
    env = ReasoningEconomicsEnv(config)
    try:
        obs = env.reset(seed=seed, tokenizer_name=tokenizer_name, total_budget=total_budget)
        questions = env.questions
        failures: list[dict[str, Any]] = []
        correct = 0
        while not obs.done:
            q = questions[obs.question_index]
            obs = env.step(ReasoningEconomicsAction(response=f"The answer is \\boxed{{{q.gold_answer}}}"))
            if obs.last_step.correct:
                correct += 1
            else:
                failures.append(
                    {"question_id": q.id, "gold": q.gold_answer, "extracted_answer": obs.last_step.extracted_answer}
                )
        if correct + len(failures) < len(questions):
            failures.append({"done_reason": env.state.done_reason, "answered": correct + len(failures)})
        return {"valid": not failures, "questions": len(questions), "correct": correct, "failures": failures}
    finally:
        env.close()


def generation_limit(max_tokens: int | None, config: EnvConfig, total_budget: int) -> tuple[int, str]:
    """The per-reply generation limit of an episode and where it comes from.

    Args:
        max_tokens: The run's ``max_tokens`` (verifiers' sampling), or None when it sets none.
        config: The episode's EnvConfig.
        total_budget: The episode's budget (after reset).

    Returns:
        ``(limit, source)``: the run's value (``"run"``) when set, else the largest cap this episode's prompts
        can state, ``max_tokens_per_step`` (at most ``total_budget`` in hard-cap mode) (``"taskset"``).
    """
    if max_tokens is not None:
        return int(max_tokens), "run"
    cap = int(config.max_tokens_per_step)
    if config.hard_cap_mode:
        cap = max(1, min(cap, int(total_budget)))
    return cap, "taskset"


class ReasoningEconomicsTaskset(vf.Taskset[EpisodeTask, ReasoningEconomicsConfig]):
    """Seeded episodes ``seed, seed + 1, ...`` (endless unless ``num_episodes`` is set)."""

    @property
    def INFINITE(self) -> bool:  # verifiers reads it on the instance
        return self.config.num_episodes is None

    def load(self) -> Iterator[EpisodeTask]:
        self.config.env_config()  # a bad config fails here, before any rollout
        count = itertools.count() if self.config.num_episodes is None else range(self.config.num_episodes)
        for i in count:
            seed = self.config.seed + i
            yield EpisodeTask(
                EpisodeData(
                    name=f"episode-{seed}",
                    prompt=None,  # the env opens the exchange with the first question
                    system_prompt=SYSTEM_PROMPT,
                    info={"seed": seed, "total_budget": self.config.total_budget},
                ),
                self.config.task,
                settings=self.config,
            )


class ReasoningEconomicsEnvConfig(vf.EnvConfig):
    """One agent, ``player`` (``--env.player.*``): the model answering the questions."""

    player: vf.AgentConfig = vf.AgentConfig()


def episode_metrics(env: ReasoningEconomicsEnv, observations: list[Any]) -> dict[str, float]:
    """The trace's metrics for a finished (or abandoned) episode: each reward component's total over
    the steps (``reward/<component>``), and what the episode did."""
    state = env.state
    out: dict[str, float] = {}
    for obs in observations:
        for name, value in obs.last_step.reward_components.items():
            out[f"reward/{name}"] = out.get(f"reward/{name}", 0.0) + value
    out.update(
        {
            "episode_reward": state.episode_reward,
            "accuracy": state.total_correct / state.num_questions if state.num_questions else 0.0,
            "questions_answered": float(state.questions_answered),
            "num_correct": float(state.total_correct),
            "tokens_spent": float(state.spent_budget),
            "total_budget": float(state.total_budget),
            "budget_utilisation": state.spent_budget / state.total_budget if state.total_budget else 0.0,
            "ran_dry": float(state.done_reason == "budget_exhausted"),
        }
    )
    return out


def _generated(calls: list[Any]) -> dict[str, int]:
    """``{"num_generated_tokens": n}`` from the provider's usage of one turn's model calls (the
    environment charges at least that many tokens: re-encoding the text can merge tokens, and
    hidden reasoning is generated too); ``{}`` when the provider reported no usage."""
    usages = [c.usage for c in calls if c.usage is not None]
    return {"num_generated_tokens": sum(u.completion_tokens for u in usages)} if usages else {}


class ReasoningEconomicsVfEnv(vf.Env[ReasoningEconomicsEnvConfig]):
    """Plays one episode per task: one question per user turn, the environment scoring each reply."""

    @cached_property
    def _shared(self) -> tuple[EnvConfig, PoolSet, Grader]:
        """What every episode of this worker shares, built once on the event loop's thread before any
        episode runs in a worker thread (concurrent first loads of a tokenizer race in transformers'
        lazy imports): the config, the question pools, one grader, the tokenizer loaded."""
        config = self.taskset.config.env_config()
        grader = Grader(timeout_s=config.grading_timeout_s)
        pools = ReasoningEconomicsEnv(config, grader=grader).pools
        get_tokenizer(self.taskset.config.tokenizer_name or config.tokenizer_name)
        return config, pools, grader

    _warned_limit = False

    def _limit_agent(self, agents: Any, config: EnvConfig, total_budget: int) -> tuple[int, str]:
        """Give the player's episode agent its generation limit (:func:`generation_limit`): the taskset's cap
        when the run sets no ``max_tokens``; the run's own otherwise, with a warning (once) when it is below
        what the environment would allow (the prompts then state it)."""
        player = agents.player
        limit, source = generation_limit(player.ctx.sampling.max_tokens, config, total_budget)
        if source == "taskset":
            sampling = player.ctx.sampling.model_copy(update={"max_tokens": limit})
            player.ctx = dataclasses.replace(player.ctx, sampling=sampling)
        else:
            allowed, _ = generation_limit(None, config, total_budget)
            if limit < allowed and not ReasoningEconomicsVfEnv._warned_limit:
                ReasoningEconomicsVfEnv._warned_limit = True
                logger.warning(
                    "max_tokens %d (the run's sampling) is below the environment's per-answer cap (up to %d tokens "
                    "here: max_tokens_per_step %d, budget %d): each prompt states min(cap, %d) instead, the limit "
                    "generation really has. Unset max_tokens to let the taskset send the environment's cap.",
                    limit,
                    allowed,
                    config.max_tokens_per_step,
                    total_budget,
                    limit,
                )
        return limit, source

    async def run(self, task, agents):
        ts: ReasoningEconomicsConfig = self.taskset.config
        config, pools, grader = self._shared
        env = ReasoningEconomicsEnv(config, pools=pools, grader=grader)
        info = task.data.info
        obs = await asyncio.to_thread(
            env.reset, seed=info["seed"], tokenizer_name=ts.tokenizer_name, total_budget=info.get("total_budget")
        )
        limit, source = self._limit_agent(agents, config, obs.total_budget)

        def prompt(o: Any) -> str:
            # the prompt states the cap generation really has: the environment's, or the run's max_tokens if lower
            stated = min(int(o.step_token_cap), limit) if o.step_token_cap else limit
            return build_user_prompt(capped_observation(o, stated), history_len=ts.history_len)

        steps: list[Any] = []
        async with agents.player.interaction(task) as interaction:
            trace = interaction.trace
            episode = {k: obs.metadata.get(k) for k in ("seed", "total_budget", "budget_source")}
            episode["generation_limit"] = {"max_tokens": limit, "source": source}
            episode["reward"] = 0.0
            trace.info["episode"] = episode
            if not obs.done:
                calls = len(trace.calls)
                segment = await interaction.turn(prompt(obs))
                while not segment.terminated:
                    action = ReasoningEconomicsAction(
                        response=segment.last_reply, metadata=_generated(trace.calls[calls:])
                    )
                    obs = await asyncio.to_thread(env.step, action)
                    steps.append(obs)
                    episode["reward"] = env.state.episode_reward
                    if obs.done:
                        break  # the episode is over: end the exchange
                    calls = len(trace.calls)
                    segment = await interaction.turn(prompt(obs))
        trace.record_reward(REWARD_NAME, env.state.episode_reward, 1.0)
        trace.record_metrics(episode_metrics(env, steps))
        trace.info["episode"]["done_reason"] = env.state.done_reason
        trace.info["steps"] = [
            {
                "question_id": o.last_step.question_id,
                "tokens": o.last_step.tokens,
                "raw_tokens": o.last_step.raw_tokens,
                "correct": o.last_step.correct,
                "extracted_answer": o.last_step.extracted_answer,
                "reward": o.reward,
                "reward_components": o.last_step.reward_components,
            }
            for o in steps
        ]
        env.close()


class ChatHarness(NullHarness):
    """The default harness of this taskset: verifiers' ``null`` harness (plain chat, no tools), so
    the model answers the questions with its own reasoning (another harness: ``--env.player.harness.id``)."""
