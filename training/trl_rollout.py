"""TRL ``GRPOTrainer`` glue: the episode dataset, the ``rollout_func`` and the reward function.

TRL 1.16 contract (``trl/trainer/grpo_trainer.py``, checked in the installed source; same in
1.15): ``rollout_func(prompts, trainer) -> dict`` receives this process's slice of the
generation batch, in which the ``RepeatSampler`` has already repeated every dataset row
``num_generations`` times in a row, and must return, one entry per prompt:

- ``prompt_ids`` (``list[list[int]]``), ``completion_ids`` (``list[list[int]]``),
  ``logprobs`` (``list[list[float]]``, aligned with ``completion_ids``; used for vLLM's
  importance-sampling correction);
- optional ``env_mask`` (``list[list[int]]``, 1 = model token in the loss, 0 = environment text;
  TRL treats it as ``tool_mask``);
- any other key, passed to the reward functions as a keyword argument.

Rewards are normalised within each group of ``num_generations`` consecutive rollouts, so every
member of a group must play the same episode. ``rollout_func`` only sees the ``prompt`` column,
so each row's prompt carries its episode seed (:func:`episode_prompt`) and the environment's
``reset(seed)`` is deterministic in it.
"""

from __future__ import annotations

import re
from typing import Any, Callable, Optional

from training.chat import ChatFormat
from training.generation import GenerationBackend, SamplingConfig, TransformersBackend, TrlVLLMBackend
from training.rollout import EpisodeRunner, EpisodeSpec, EpisodeTrace, RolloutLimits

_PROMPT_RE = re.compile(r"^\[reasoning-economics episode\] seed=(\d+)$")


def episode_prompt(seed: int) -> str:
    """The dataset prompt naming an episode: ``"[reasoning-economics episode] seed=<seed>"``."""
    return f"[reasoning-economics episode] seed={int(seed)}"


def parse_episode_prompt(prompt: Any) -> int:
    """The seed in a prompt made by :func:`episode_prompt`.

    Raises:
        ValueError: the prompt is not an episode prompt (e.g. a chat-message dataset was passed).
    """
    text = prompt if isinstance(prompt, str) else None
    if isinstance(prompt, list) and prompt and isinstance(prompt[-1], dict):
        text = prompt[-1].get("content")
    m = _PROMPT_RE.match(str(text).strip()) if text is not None else None
    if not m:
        raise ValueError(
            f"rollout_func got prompt {str(prompt)[:80]!r}; the training dataset must come from "
            "training.trl_rollout.build_episode_dataset (one episode seed per row)"
        )
    return int(m.group(1))


def episode_seeds(n: int, base_seed: int) -> list[int]:
    """``n`` distinct episode seeds drawn deterministically from ``base_seed`` (each < 2**31)."""
    import random

    if n < 1:
        raise ValueError(f"the dataset needs at least one episode, got {n}")
    rng = random.Random(base_seed)
    return rng.sample(range(2**31 - 1), n)


def build_episode_dataset(n: int, base_seed: int = 0):
    """A ``datasets.Dataset`` of ``n`` rows ``{"prompt": episode_prompt(seed), "seed": seed}``.

    Each row is one GRPO group: TRL repeats it ``num_generations`` times and every copy plays
    the episode of that seed.
    """
    from datasets import Dataset

    seeds = episode_seeds(n, base_seed)
    return Dataset.from_dict({"prompt": [episode_prompt(s) for s in seeds], "seed": seeds})


def assign_groups(seeds: list[int], num_generations: int, offset: int, first_group: int) -> list[EpisodeSpec]:
    """Episode specs for a process's slice of a generation batch.

    Args:
        seeds: The slice's seeds, in order (``[B_local]``).
        num_generations: ``G``: consecutive copies of one dataset row.
        offset: Position of the slice's first row in the global generation batch
            (``process_index * B_local``).
        first_group: Run-level index of the batch's first group.
    Returns:
        One :class:`EpisodeSpec` per seed with ``group = first_group + pos // G`` and
        ``member = pos % G`` (``pos`` = global position); ``episode = group``.
    Raises:
        ValueError: two rows of one group carry different seeds (the sampler did not group them).
    """
    specs = []
    group_seed: dict[int, int] = {}
    for i, seed in enumerate(seeds):
        pos = offset + i
        group = first_group + pos // num_generations
        if group_seed.setdefault(group, seed) != seed:
            raise ValueError(
                f"rows {pos - pos % num_generations}..{pos} of the generation batch should be copies of one episode "
                f"(seed {group_seed[group]}) but row {pos} has seed {seed}: the GRPO groups are misaligned"
            )
        specs.append(EpisodeSpec(seed=seed, group=group, member=pos % num_generations, episode=group))
    return specs


def transformers_backend_for(trainer: Any, eos_ids: list[int], sampling: SamplingConfig) -> TransformersBackend:
    """A :class:`TransformersBackend` generating with the trainer's current model through TRL's
    ``unwrap_model_for_generation`` (DDP/DeepSpeed unwrapping, gradient checkpointing off)."""
    from trl.models.utils import unwrap_model_for_generation

    def model_context():
        return unwrap_model_for_generation(
            trainer.model_wrapped,
            trainer.accelerator,
            gather_deepspeed3_params=trainer.args.ds3_gather_for_generation,
            gradient_checkpointing_kwargs=trainer.args.gradient_checkpointing_kwargs,
        )

    tok = trainer.processing_class
    tok = getattr(tok, "tokenizer", tok)
    return TransformersBackend(
        model_context=model_context,
        pad_token_id=tok.pad_token_id,
        eos_ids=eos_ids,
        sampling=sampling,
        device=trainer.accelerator.device,
    )


class GRPORollout:
    """The ``rollout_func`` for ``GRPOTrainer``: plays the generation batch's episodes in lockstep.

    Args:
        env_factory: Makes environment sessions (in-process or remote).
        chat: The policy's :class:`~training.chat.ChatFormat`.
        limits: :class:`~training.rollout.RolloutLimits`.
        eos_ids: Ids that end a turn.
        writer: A :class:`~training.run_folder.TrainingRunWriter` recording the episodes, or ``None``.
        backend_factory: ``f(trainer) -> GenerationBackend``; default: vLLM through
            ``trainer.vllm_generation`` when ``trainer.use_vllm``, else ``transformers`` generate.
        run_id: Written to the step rows.

    Attributes:
        last_traces: The traces of the latest call (tests inspect them).
        backend: The backend in use (built on the first call).
    """

    def __init__(
        self,
        env_factory: Any,
        chat: ChatFormat,
        limits: RolloutLimits,
        eos_ids: list[int],
        *,
        writer: Any = None,
        backend_factory: Optional[Callable[[Any], GenerationBackend]] = None,
        run_id: str = "grpo",
    ) -> None:
        self.env_factory = env_factory
        self.chat = chat
        self.limits = limits
        self.eos_ids = list(eos_ids)
        self.writer = writer
        self.backend_factory = backend_factory
        self.run_id = run_id
        self.backend: Optional[GenerationBackend] = None
        self.runner: Optional[EpisodeRunner] = None
        self.calls = 0
        self.groups_done = 0
        self.last_traces: list[EpisodeTrace] = []
        self.__name__ = "reasoning_economics_rollout"

    def _ensure_runner(self, trainer: Any) -> EpisodeRunner:
        if self.runner is None:
            rank = trainer.accelerator.process_index
            if self.writer is not None and rank > 0 and getattr(self.writer, "episodes_log", None) is not None:
                # one per-episode log per process; the parquet files hold the main process's episodes
                self.writer.episodes_log = self.writer.episodes_log.with_name(f"episodes.rank{rank}.jsonl")
            if self.backend_factory is not None:
                self.backend = self.backend_factory(trainer)
            elif getattr(trainer, "use_vllm", False):
                self.backend = TrlVLLMBackend(trainer, self.eos_ids)
            else:
                self.backend = transformers_backend_for(trainer, self.eos_ids, SamplingConfig.from_trl(trainer.args))
            self.runner = EpisodeRunner(self.backend, self.env_factory, self.chat, limits=self.limits, run_id=self.run_id)
        return self.runner

    def __call__(self, prompts: list, trainer: Any) -> dict:
        runner = self._ensure_runner(trainer)
        mode = "train" if trainer.model.training else "eval"
        g = trainer.num_generations if mode == "train" else trainer.num_generations_eval
        nproc = trainer.accelerator.num_processes
        seeds = [parse_episode_prompt(p) for p in prompts]
        if (len(seeds) * nproc) % g:
            raise ValueError(f"the generation batch ({len(seeds)} x {nproc} processes) is not a multiple of num_generations={g}")
        specs = assign_groups(seeds, g, trainer.accelerator.process_index * len(seeds), self.groups_done)
        self.groups_done += len(seeds) * nproc // g
        self.calls += 1
        traces = runner.play_lockstep(specs)
        for tr in traces:
            tr.check()
        self.last_traces = traces
        if self.writer is not None:
            step = int(trainer.state.global_step)
            for tr in traces:
                self.writer.add_trace(tr, step, mode=mode)
        return {
            "prompt_ids": [tr.prompt_ids for tr in traces],
            "completion_ids": [tr.completion_ids for tr in traces],
            "logprobs": [tr.logprobs for tr in traces],
            "env_mask": [tr.env_mask for tr in traces],
            "episode_reward": [tr.reward for tr in traces],
            "episode_accuracy": [tr.accuracy for tr in traces],
            "episode_tokens_per_question": [tr.tokens_per_question for tr in traces],
            "episode_length": [tr.num_answered for tr in traces],
            "episode_ran_dry": [tr.ran_dry for tr in traces],
            "episode_utilisation": [
                (tr.tokens_spent / tr.reset_metadata["total_budget"]) if tr.reset_metadata.get("total_budget") else 0.0
                for tr in traces
            ],
            "episode_components": [dict(tr.components) for tr in traces],
            "episode_group": [tr.spec.group for tr in traces],
            "episode_member": [tr.spec.member for tr in traces],
        }


def environment_reward(prompts=None, completions=None, episode_reward=None, log_metric=None, **kwargs) -> list[float]:
    """The GRPO reward: each rollout's episode reward as the environment paid it.

    Also logs (through TRL's ``log_metric``) the batch means ``accuracy``,
    ``tokens_per_question``, ``episode_length`` (questions answered), ``ran_dry`` (share of
    episodes that ran out of budget), ``utilisation`` (spent / budget) and ``env/<component>``
    (summed reward components).

    Raises:
        ValueError: called without ``episode_reward`` (the rollout_func was not used).
    """
    if episode_reward is None:
        raise ValueError("environment_reward needs the episode_reward column that GRPORollout returns")
    rewards = [float(r) for r in episode_reward]
    if log_metric is not None and rewards:
        n = len(rewards)

        def mean(key: str) -> Optional[float]:
            vals = kwargs.get(key)
            return (sum(float(v) for v in vals) / len(vals)) if vals else None

        for name, key in (
            ("accuracy", "episode_accuracy"),
            ("tokens_per_question", "episode_tokens_per_question"),
            ("episode_length", "episode_length"),
            ("ran_dry", "episode_ran_dry"),
            ("utilisation", "episode_utilisation"),
        ):
            value = mean(key)
            if value is not None:
                log_metric(name, value)
        comps = kwargs.get("episode_components") or []
        names = sorted({k for c in comps for k in (c or {})})
        for k in names:
            log_metric(f"env/{k}", sum(float((c or {}).get(k, 0.0)) for c in comps) / n)
    return rewards
