"""This environment in your own TRL ``GRPOTrainer`` script: a rollout function, a reward and a dataset of episodes.

:func:`grpo_environment` returns the three things ``trl.GRPOTrainer`` takes (TRL 1.16's ``rollout_func``
contract), plus the ``GRPOConfig`` settings an episode-long completion needs::

    from trl import GRPOConfig, GRPOTrainer
    from training.trl_env import grpo_environment

    env = grpo_environment(tokenizer, config="examples/sources/builtin.yaml", num_episodes=64)
    trainer = GRPOTrainer(
        model=model,
        processing_class=tokenizer,
        args=GRPOConfig(output_dir="runs/mine", num_generations=4, per_device_train_batch_size=4,
                        **env.grpo_config_kwargs),
        train_dataset=env.train_dataset,   # one row per episode seed; TRL repeats it num_generations times
        reward_funcs=env.reward_funcs,     # [environment_reward]: the episode's reward as the environment paid it
        rollout_func=env.rollout_func,     # plays each group's episode in lockstep, as token ids
    )
    trainer.train()

(``examples/trl_grpo.py`` is this script, runnable on a CPU with the tiny random model.)

What the pieces are (the same ones ``python -m training.grpo_train`` assembles; docs/training.md):

- ``train_dataset``: ``{"prompt": "[reasoning-economics episode] seed=<n>", "seed": n}`` rows
  (:func:`training.trl_rollout.build_episode_dataset`); TRL's sampler repeats each row ``num_generations``
  times, so the members of a GRPO group play the same episode (questions, order, budget).
- ``rollout_func``: a :class:`training.trl_rollout.GRPORollout`. It plays every episode of the generation batch
  in lockstep with the trainer's own model (``transformers`` generate; TRL's vLLM when ``use_vllm``), one token
  sequence per episode: the sampled ids exactly, environment turns appended as ids (``env_mask`` 0, so they are
  not trained), each answer capped by the turn-cap rule the prompt states, every generated token charged to
  the episode's budget. It returns ``prompt_ids``, ``completion_ids``, ``logprobs``, ``env_mask`` and the
  episode's reward, components and statistics, which TRL hands to the reward function.
- ``reward_funcs``: ``[environment_reward]``: each episode's reward as the environment paid it (the sum of
  its step rewards, episode bonus included); it also logs accuracy, tokens, cap hits and ``env/<component>``
  through TRL's metric log.

Not here (the project's CLI adds them): the run folder the workbench reads, held-out evaluation, dynamic
sampling, per-question advantages, the vLLM-server LoRA hand-off, and the diagnostics of
:mod:`training.trainer`. TRL's ``environment_factory`` is not offered: docs/integrations.md, "TRL", says why.
"""

from __future__ import annotations

import dataclasses
import logging
from pathlib import Path
from typing import Any

from reasoning_env.config import EnvConfig
from reasoning_env.conversation import ChatFormat
from reasoning_env.errors import ReasoningEconomicsError
from reasoning_env.policies.turn_cap import TurnCap
from training.envs import InProcessEnvFactory, RemoteEnvFactory
from training.models import eos_token_ids
from training.rollout import RolloutLimits
from training.trainer import DEFAULT_IS_MODE
from training.trl_rollout import GRPORollout, build_episode_dataset, environment_reward

__all__ = ["GRPOEnvironment", "GRPOSetupError", "EnvironmentRollout", "grpo_environment"]

logger = logging.getLogger(__name__)


class GRPOSetupError(ReasoningEconomicsError, ValueError):
    """The trainer's settings cannot train on these episodes; the message says what to change."""


class EnvironmentRollout(GRPORollout):
    """:class:`~training.trl_rollout.GRPORollout` that checks, on its first call, the trainer it was given to."""

    _checked = False

    def __call__(self, prompts: list, trainer: Any) -> dict:
        if not self._checked:
            check_trainer_args(trainer.args, self.limits.max_episode_tokens)
            self._checked = True
        return super().__call__(prompts, trainer)


def check_trainer_args(args: Any, max_episode_tokens: int) -> None:
    """Refuse ``GRPOConfig`` settings that would train on the episodes wrongly; warn about doubtful ones.

    Raises:
        GRPOSetupError: ``mask_truncated_completions`` (TRL would drop every episode that ran out of budget).
    """
    if getattr(args, "mask_truncated_completions", False):
        raise GRPOSetupError(
            "GRPOConfig(mask_truncated_completions=True) is refused: a completion here is a whole episode, whose "
            "last turn is cut at the remaining budget whenever the budget runs dry, so TRL would drop every run-dry "
            "episode from the loss, the very episodes that teach the policy not to run dry. Use "
            "grpo_environment(...).grpo_config_kwargs (it sets it False)"
        )
    limit = getattr(args, "max_completion_length", None)
    if limit is not None and int(limit) < int(max_episode_tokens):
        logger.warning(
            "GRPOConfig.max_completion_length %s is below the episode length %s: a completion is a whole episode, "
            "and TRL's length-normalised losses divide by max_completion_length (grpo_config_kwargs sets it)",
            limit,
            max_episode_tokens,
        )


@dataclasses.dataclass
class GRPOEnvironment:
    """What :func:`grpo_environment` returns: pass the first three to ``trl.GRPOTrainer``.

    Attributes:
        rollout_func: TRL's ``rollout_func`` (:class:`EnvironmentRollout`); ``rollout_func.last_traces`` holds
            the latest call's episodes (:class:`training.rollout.EpisodeTrace`, with every step's record).
        reward_funcs: ``[environment_reward]``.
        train_dataset: ``num_episodes`` rows, one episode seed each.
        env_config: The environment's :class:`~reasoning_env.config.EnvConfig`.
        grpo_config_kwargs: ``GRPOConfig`` settings for episode-long completions: ``max_completion_length``
            (the episode length), ``mask_truncated_completions=False``, ``remove_unused_columns=False``,
            ``log_completions=False`` and a token-level ``vllm_importance_sampling_mode`` (used with vLLM only).
    """

    rollout_func: EnvironmentRollout
    reward_funcs: list
    train_dataset: Any
    env_config: EnvConfig
    grpo_config_kwargs: dict


def grpo_environment(
    tokenizer: Any,
    *,
    config: EnvConfig | str | Path | dict | None = None,
    num_episodes: int = 64,
    seed: int = 0,
    model: Any = None,
    tokenizer_name: str | None = None,
    total_budget: int | None = None,
    max_episode_tokens: int = 4096,
    turn_cap: str = "share",
    turn_factor: float = 2.0,
    reasoning_mode: str = "auto",
    env_base_url: str | None = None,
) -> GRPOEnvironment:
    """The rollout function, reward and episode dataset for a ``trl.GRPOTrainer`` (module docstring).

    Args:
        tokenizer: The policy's tokenizer (with a chat template): episodes are rendered and generated with it.
        config: The environment's config: an :class:`EnvConfig`, a YAML path (as ``--config`` takes, e.g.
            ``examples/sources/builtin.yaml``) or a dict of its fields; None = the defaults.
        num_episodes: Rows of the dataset (episode seeds); one GRPO group each.
        seed: The seeds are drawn deterministically from it.
        model: The policy model, if at hand: its ``generation_config`` may add end-of-turn ids.
        tokenizer_name: The name the environment counts tokens with (a Hub id, ``embedded:...`` or a folder);
            default: the tokenizer's ``name_or_path``.
        total_budget: A fixed token budget per episode; default: the config's ``total_budget`` when it sets one,
            else the tokenizer-native budget.
        max_episode_tokens: The most tokens one episode's sequence may reach (prompt + every turn); when the next
            question no longer fits, the remaining ones are forfeited (graded wrong), so the reward stays the
            environment's.
        turn_cap: The per-answer cap rule (``share``: twice the remaining budget per remaining question; ``env``:
            the environment's ``step_token_cap``); the prompt states the cap applied.
        turn_factor: The share rule's multiple.
        reasoning_mode: ``auto``, ``on`` or ``off`` (the chat template's thinking switch).
        env_base_url: Play against a running environment server (``python -m reasoning_env.server``) instead of
            in this process.

    Raises:
        ConfigError: the config is invalid.
        ChatFormatError: the tokenizer has no chat template.
        ValueError: ``num_episodes`` < 1, or a bad ``turn_cap`` / ``reasoning_mode``.
    """
    if int(num_episodes) < 1:
        raise ValueError(f"num_episodes must be >= 1, got {num_episodes}")
    if isinstance(config, EnvConfig):
        env_config = config
    elif isinstance(config, dict):
        env_config = EnvConfig.from_dict(config)
    elif config is not None:
        env_config = EnvConfig.from_yaml(config)
    else:
        env_config = EnvConfig()
    name = tokenizer_name or getattr(tokenizer, "name_or_path", None) or None
    budget = total_budget if total_budget is not None else env_config.total_budget
    limits = RolloutLimits(
        max_episode_tokens=int(max_episode_tokens),
        tokenizer_name=name,
        total_budget=budget,
        turn_cap=TurnCap(turn_cap, factor=turn_factor),
    )
    factory = RemoteEnvFactory(env_base_url, env_config) if env_base_url else InProcessEnvFactory(env_config)
    rollout = EnvironmentRollout(
        factory,
        ChatFormat(tokenizer, reasoning_mode=reasoning_mode),
        limits,
        eos_token_ids(tokenizer, model),
        pad_token_id=getattr(tokenizer, "pad_token_id", None),
        run_id="trl",
        base_seed=int(seed),
    )
    kwargs = {
        "max_completion_length": int(max_episode_tokens),
        "mask_truncated_completions": False,
        "remove_unused_columns": False,
        "log_completions": False,
        "vllm_importance_sampling_mode": DEFAULT_IS_MODE,
    }
    return GRPOEnvironment(
        rollout_func=rollout,
        reward_funcs=[environment_reward],
        train_dataset=build_episode_dataset(int(num_episodes), base_seed=int(seed)),
        env_config=env_config,
        grpo_config_kwargs=kwargs,
    )
