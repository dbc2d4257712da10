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
"""

from __future__ import annotations

import asyncio
import itertools
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
]

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
    """An episode of this environment (scored by the env's ``run()``, not by task rewards)."""

    @property
    def key(self) -> str:
        return f"reasoning_economics/seed={self.data.info['seed']}"


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

    async def run(self, task, agents):
        ts: ReasoningEconomicsConfig = self.taskset.config
        config, pools, grader = self._shared
        env = ReasoningEconomicsEnv(config, pools=pools, grader=grader)
        info = task.data.info
        obs = await asyncio.to_thread(
            env.reset, seed=info["seed"], tokenizer_name=ts.tokenizer_name, total_budget=info.get("total_budget")
        )
        steps: list[Any] = []
        async with agents.player.interaction(task) as interaction:
            trace = interaction.trace
            trace.info["episode"] = {k: obs.metadata.get(k) for k in ("seed", "total_budget", "budget_source")}
            if not obs.done:
                calls = len(trace.calls)
                segment = await interaction.turn(build_user_prompt(obs, history_len=ts.history_len))
                while not segment.terminated:
                    action = ReasoningEconomicsAction(
                        response=segment.last_reply, metadata=_generated(trace.calls[calls:])
                    )
                    obs = await asyncio.to_thread(env.step, action)
                    steps.append(obs)
                    if obs.done:
                        break  # the episode is over: end the exchange
                    calls = len(trace.calls)
                    segment = await interaction.turn(build_user_prompt(obs, history_len=ts.history_len))
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
