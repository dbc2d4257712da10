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

**Dynamic sampling** (DAPO; ``GRPORollout(dynamic_sampling=True)``, training only): a group whose members
would all get advantage 0 (:func:`training.advantages.group_has_signal`: equal episode rewards, or equal
per-question credits with ``advantage="question"``) is dropped before ``rollout_func`` returns and replaced
by a group playing a fresh episode (:func:`resample_seed`: deterministic in the run seed, the group index
and the round; never a held-out seed), up to ``max_resample_rounds`` rounds. The rows returned still answer
the prompts TRL passed, one per prompt, in order (a replaced group's rows carry its new seed in
``episodes.jsonl`` and ``resample_round``; TRL's completion log shows the dataset prompt). Groups still
without variance after the last round are masked out of the loss (``env_mask`` all 0: no token of theirs
is trained or counted in the loss normaliser); when no group of the whole batch has variance, no token is
left, and the trainer (:mod:`training.trainer`) skips the loss and backward, so no parameter has a
gradient and the optimizer moves nothing (AdamW skips parameters without a gradient; its momentum does not
act). Logged per step: ``dynamic_sampling/kept_share`` (groups of the first play with variance),
``resampled_groups``, ``rounds``, ``masked_groups``, ``skipped_step``. Several processes: each plays its own
groups' replacements; a group must lie within one process (the local batch a multiple of
``num_generations``, refused otherwise), and every process plays the same number of rounds (the decision to
play another is taken over all processes), as the collective generation backends need.
"""

from __future__ import annotations

import re
import time
from collections.abc import Callable
from typing import Any

from reasoning_env.conversation import ChatFormat
from reasoning_env.errors import ReasoningEconomicsError
from training.advantages import ADVANTAGE_MODES, group_has_signal, question_advantages, token_advantages, turn_credits
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


def resample_seed(base_seed: int, group: int, round_: int, exclude: Any = ()) -> int:
    """The seed of the episode dynamic sampling plays for ``group`` in round ``round_`` (< 2**31).

    Deterministic in ``(base_seed, group, round_)`` (a string-seeded ``random.Random``: the same in every
    process and every Python run), and never one of ``exclude`` (the held-out evaluation's seeds).
    """
    import random

    rng = random.Random(f"resample:{int(base_seed)}:{int(group)}:{int(round_)}")
    while True:
        seed = rng.randrange(2**31 - 1)
        if seed not in exclude:
            return seed


class GroupLayoutError(ReasoningEconomicsError, ValueError):
    """A GRPO group would be split across processes where a whole group must be local."""


def check_local_groups(local_rows: int, num_generations: int, why: str) -> None:
    """Refuse a process slice that does not hold whole GRPO groups.

    Args:
        local_rows: Rows of one process's generation slice (``per_device_train_batch_size x
            steps_per_generation``).
        num_generations: ``G``.
        why: The feature that needs whole groups (named in the message).
    Raises:
        GroupLayoutError: ``local_rows`` is not a multiple of ``G``.
    """
    if local_rows % num_generations:
        raise GroupLayoutError(
            f"{why} needs every GRPO group on one process, but each process gets {local_rows} rollouts of groups of "
            f"{num_generations}. Fix: make per_device_train_batch_size x gradient_accumulation_steps a multiple of "
            f"num_generations (e.g. --per_device_train_batch_size {num_generations})"
        )


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


class PadTokenError(ReasoningEconomicsError, ValueError):
    """The tokenizer's pad id is one of the ids that end a turn (see :func:`check_pad_token`)."""


def check_pad_token(pad_token_id: int | None, eos_ids: list[int]) -> None:
    """Refuse a pad id that is also an end-of-turn id.

    A turn ended by such a token keeps it in the episode's completion, and Unsloth's GRPO loss treats
    every pad-id token as padding (``unsloth_zoo`` ``left_pack_padding`` moves them to the end and
    masks them), which would shift every later token against its log-prob.

    Raises:
        PadTokenError: naming both ids and the fix.
    """
    if pad_token_id is not None and int(pad_token_id) in {int(e) for e in eos_ids}:
        raise PadTokenError(
            f"the tokenizer's pad id {int(pad_token_id)} is one of the end-of-turn ids {sorted(set(eos_ids))}: a turn "
            "ended by it would be taken for padding by Unsloth's loss and misalign the log-probs. Fix: give the "
            "tokenizer a pad token that never ends a turn (e.g. tokenizer.pad_token = '<|vision_pad|>' for Qwen; "
            "training.models.distinct_pad_token does this when the vocabulary has one), or drop that id from the "
            "model's generation_config.eos_token_id"
        )


def unwrap_kwargs(unwrap: Callable, args: Any) -> dict:
    """Keyword arguments for TRL's ``unwrap_model_for_generation`` that this TRL version takes.

    TRL 1.16 has ``(model, accelerator, gather_deepspeed3_params, gradient_checkpointing_kwargs,
    generation_kwargs)``; TRL 1.15 (the GPU pin) has no ``gradient_checkpointing_kwargs`` and
    raises ``TypeError`` on it, so it is passed only where the signature names it.
    """
    import inspect

    params = inspect.signature(unwrap).parameters
    kwargs = {"gather_deepspeed3_params": args.ds3_gather_for_generation}
    if "gradient_checkpointing_kwargs" in params:
        kwargs["gradient_checkpointing_kwargs"] = args.gradient_checkpointing_kwargs
    return kwargs


def sync_generation_weights(trainer: Any) -> bool:
    """Hand the trainer's current weights to its vLLM engine if they changed since the last hand-off.

    TRL syncs only inside its ``_generate`` (before ``rollout_func``), keyed on ``_last_loaded_step``;
    anything generating elsewhere (the held-out evaluation, from a callback after an optimizer step)
    must do the same first, or it plays the weights from before the last update. Same condition and
    bookkeeping as TRL 1.15/1.16, so TRL's next rollout does not sync again. A no-op without vLLM.
    Call it on every process (the sync is collective). Returns whether it synced.
    """
    if not getattr(trainer, "use_vllm", False) or getattr(trainer, "vllm_generation", None) is None:
        return False
    step = trainer.state.global_step
    if getattr(trainer, "_last_loaded_step", None) == step:
        return False
    trainer.vllm_generation.sync_weights()
    trainer._last_loaded_step = step
    return True


def transformers_backend_for(trainer: Any, eos_ids: list[int], sampling: SamplingConfig) -> TransformersBackend:
    """A :class:`TransformersBackend` generating with the trainer's current model through TRL's
    ``unwrap_model_for_generation`` (DDP/DeepSpeed unwrapping, gradient checkpointing off)."""
    from trl.models.utils import unwrap_model_for_generation

    kwargs = unwrap_kwargs(unwrap_model_for_generation, trainer.args)

    def model_context():
        return unwrap_model_for_generation(trainer.model_wrapped, trainer.accelerator, **kwargs)

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
        chat: The policy's :class:`~reasoning_env.conversation.ChatFormat`.
        limits: :class:`~training.rollout.RolloutLimits`.
        eos_ids: Ids that end a turn.
        writer: A :class:`~training.run_folder.TrainingRunWriter` recording the episodes, or ``None``.
        backend_factory: ``f(trainer) -> GenerationBackend``; default: vLLM through
            ``trainer.vllm_generation`` when ``trainer.use_vllm``, else ``transformers`` generate.
        run_id: Written to the step rows.
        pad_token_id: The tokenizer's pad id, checked against ``eos_ids`` (:func:`check_pad_token`); the
            trainer's tokenizer is checked again on the first call.
        dynamic_sampling: Replace groups without reward variance before the optimizer step (module
            docstring); training batches only.
        max_resample_rounds: Bound on the replacement rounds per batch (0: drop without replaying).
        base_seed: The run seed the replacement seeds derive from (:func:`resample_seed`).
        advantage: ``"episode"`` (TRL's one advantage per episode) or ``"question"`` (per-question
            advantages, :mod:`training.advantages`; the trainer asks :meth:`token_advantages` for them).
        episode_components: Names of the reward's episode-level components (``advantage="question"``);
            default: read off the environment config's reward.

    Raises:
        PadTokenError: the pad id is one of ``eos_ids``.

    Attributes:
        last_traces: The traces of the latest call, in row order (tests inspect them).
        last_trained: Per row of the latest call, 1 if its group is in the loss, 0 if masked out
            (dynamic sampling found no variance in it after the last round).
        last_dropped: The traces dynamic sampling replaced in the latest call.
        last_rounds: The replacement rounds it played in the latest call.
        exclude_seeds: Seeds a replacement episode must not use (the held-out seeds; set by ``build_trainer``).
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
        backend_factory: Callable[[Any], GenerationBackend] | None = None,
        run_id: str = "grpo",
        pad_token_id: int | None = None,
        dynamic_sampling: bool = False,
        max_resample_rounds: int = 2,
        base_seed: int = 0,
        advantage: str = "episode",
        episode_components: tuple[str, ...] | None = None,
    ) -> None:
        check_pad_token(pad_token_id, list(eos_ids))
        if advantage not in ADVANTAGE_MODES:
            raise ValueError(f"advantage must be one of {ADVANTAGE_MODES}, got {advantage!r}")
        if int(max_resample_rounds) < 0:
            raise ValueError(f"max_resample_rounds must be >= 0, got {max_resample_rounds}")
        self.dynamic_sampling = bool(dynamic_sampling)
        self.max_resample_rounds = int(max_resample_rounds)
        self.base_seed = int(base_seed)
        self.advantage = advantage
        self._episode_components = tuple(episode_components) if episode_components is not None else None
        self.exclude_seeds: set[int] = set()
        self.last_trained: list[int] = []
        self.last_rounds = 0
        self.last_dropped: list[EpisodeTrace] = []
        self.env_factory = env_factory
        self.chat = chat
        self.limits = limits
        self.eos_ids = list(eos_ids)
        self.writer = writer
        self.backend_factory = backend_factory
        self.run_id = run_id
        self.backend: GenerationBackend | None = None
        self.runner: EpisodeRunner | None = None
        self.calls = 0
        self.seconds = 0.0  # wall time spent in calls (the trainer logs it as timing/generation_s)
        self.groups_done = 0
        self.last_traces: list[EpisodeTrace] = []
        self.__name__ = "reasoning_economics_rollout"

    def _ensure_runner(self, trainer: Any) -> EpisodeRunner:
        if self.runner is None:
            tok = getattr(trainer, "processing_class", None)
            check_pad_token(getattr(getattr(tok, "tokenizer", tok), "pad_token_id", None), self.eos_ids)
            if self.writer is not None:  # one streamed log per process; the parquet files hold the main process's
                self.writer.use_rank(trainer.accelerator.process_index)
            if self.backend_factory is not None:
                self.backend = self.backend_factory(trainer)
            elif getattr(trainer, "use_vllm", False):
                self.backend = TrlVLLMBackend(trainer, self.eos_ids)
            else:
                self.backend = transformers_backend_for(trainer, self.eos_ids, SamplingConfig.from_trl(trainer.args))
            self.runner = EpisodeRunner(
                self.backend, self.env_factory, self.chat, limits=self.limits, run_id=self.run_id
            )
        return self.runner

    def __call__(self, prompts: list, trainer: Any) -> dict:
        t0 = time.perf_counter()
        try:
            return self._play(prompts, trainer)
        finally:
            self.seconds += time.perf_counter() - t0

    def _play(self, prompts: list, trainer: Any) -> dict:
        runner = self._ensure_runner(trainer)
        mode = "train" if trainer.model.training else "eval"
        g = trainer.num_generations if mode == "train" else trainer.num_generations_eval
        nproc = trainer.accelerator.num_processes
        seeds = [parse_episode_prompt(p) for p in prompts]
        if (len(seeds) * nproc) % g:
            raise ValueError(
                f"the generation batch ({len(seeds)} x {nproc} processes) is not a multiple of num_generations={g}"
            )
        train = mode == "train"
        if train and (self.dynamic_sampling or self.advantage == "question"):
            why = "dynamic sampling" if self.dynamic_sampling else "per-question advantages"
            check_local_groups(len(seeds), g, why)
        specs = assign_groups(seeds, g, trainer.accelerator.process_index * len(seeds), self.groups_done)
        self.groups_done += len(seeds) * nproc // g
        self.calls += 1
        traces = runner.play_lockstep(specs)
        for tr in traces:
            tr.check()
        trained = [1] * len(traces)
        self.last_dropped, self.last_rounds = [], 0
        if train and self.dynamic_sampling:
            traces, trained = self._resample(runner, traces, g, trainer)
        self.last_traces = traces
        self.last_trained = trained
        if self.writer is not None:
            step = int(trainer.state.global_step)
            for tr in traces:
                self.writer.add_trace(tr, step, mode=mode)
        return {
            "prompt_ids": [tr.prompt_ids for tr in traces],
            "completion_ids": [tr.completion_ids for tr in traces],
            "logprobs": [tr.logprobs for tr in traces],
            # a group masked out by dynamic sampling: no token in the loss or its normaliser
            "env_mask": [tr.env_mask if keep else [0] * len(tr.env_mask) for tr, keep in zip(traces, trained)],
            "episode_reward": [tr.reward for tr in traces],
            "episode_stats": [episode_stats(tr) for tr in traces],
            "episode_components": [dict(tr.components) for tr in traces],
            "episode_group": [tr.spec.group for tr in traces],
            "episode_member": [tr.spec.member for tr in traces],
        }

    # ------------------------------------------------------------------ dynamic sampling
    def episode_component_names(self) -> tuple[str, ...]:
        """The environment reward's episode-level component names (read once from the env config)."""
        if self._episode_components is None:
            from reasoning_env.config import EnvConfig
            from reasoning_env.rewards import build_reward
            from training.advantages import episode_component_names

            cfg = getattr(self.env_factory, "config", None) or EnvConfig()
            self._episode_components = episode_component_names(build_reward(cfg), bool(cfg.hard_cap_mode))
        return self._episode_components

    def credits(self, trace: EpisodeTrace) -> list[float]:
        """Per-turn credits of ``trace`` (:func:`training.advantages.turn_credits`)."""
        if len(trace.turns) != trace.num_answered:
            raise ValueError(f"episode has {len(trace.turns)} model turns but {trace.num_answered} answered questions")
        return turn_credits(
            [s.reward for s in trace.steps],
            [s.components for s in trace.steps],
            trace.num_answered,
            trace.reward,
            self.episode_component_names(),
        )

    def has_signal(self, group: list[EpisodeTrace]) -> bool:
        """Whether ``group`` gives any member a non-zero advantage under this rollout's advantage mode."""
        credits = [self.credits(tr) for tr in group] if self.advantage == "question" else None
        return group_has_signal([tr.reward for tr in group], credits)

    def _resample(self, runner: EpisodeRunner, traces: list, g: int, trainer: Any) -> tuple[list, list[int]]:
        """Replace this process's groups without variance (module docstring); returns the traces in row
        order and, per row, 1 if its group is trained."""
        from training.distributed import gather_rows

        slots = [traces[i : i + g] for i in range(0, len(traces), g)]
        signal = [self.has_signal(s) for s in slots]
        first_kept, rounds, resampled = sum(signal), 0, 0
        while rounds < self.max_resample_rounds:
            pending = [i for i, ok in enumerate(signal) if not ok]
            rows, _ = gather_rows([len(pending)])  # every process plays the same number of rounds
            if sum(rows) == 0:
                break
            rounds += 1
            specs = []
            for i in pending:
                group = slots[i][0].spec.group
                seed = resample_seed(self.base_seed, group, rounds, self.exclude_seeds)
                specs += [
                    EpisodeSpec(seed=seed, group=group, member=tr.spec.member, episode=group, resample_round=rounds)
                    for tr in slots[i]
                ]
            new = runner.play_lockstep(specs)  # [] on a process with nothing pending: it still takes part
            for tr in new:
                tr.check()
            for j, i in enumerate(pending):
                self.last_dropped += slots[i]
                slots[i] = new[j * g : (j + 1) * g]
                signal[i] = self.has_signal(slots[i])
            resampled += len(pending)
        self.last_rounds = rounds
        counts, _ = gather_rows([(first_kept, len(slots), resampled, len(slots) - sum(signal))])
        kept, total, replayed, masked = (sum(c[k] for c in counts) for k in range(4))
        metrics = getattr(trainer, "_metrics", None)
        if metrics is not None:
            m = metrics["train"]
            m["dynamic_sampling/kept_share"].append(kept / total if total else 0.0)
            m["dynamic_sampling/resampled_groups"].append(float(replayed))
            m["dynamic_sampling/rounds"].append(float(rounds))
            m["dynamic_sampling/masked_groups"].append(float(masked))
            m["dynamic_sampling/skipped_step"].append(float(masked == total))
        out = [tr for s in slots for tr in s]
        trained = [int(signal[i]) for i in range(len(slots)) for _ in range(g)]
        return out, trained

    # ------------------------------------------------------------------ per-question advantages
    def token_advantages(self, trainer: Any, length: int) -> Any:
        """``(B_local, length)`` per-question advantages of the latest training batch (float32 numpy), or
        ``None`` with ``advantage="episode"`` (TRL's own advantages stand). Called by the trainer on every
        process (it gathers the batch's credits for ``scale_rewards="batch"``)."""
        if self.advantage != "question":
            return None
        from training.distributed import gather_rows

        keep = self.last_trained or [1] * len(self.last_traces)
        local = [(self.credits(tr) if k else None, tr.spec.group) for tr, k in zip(self.last_traces, keep)]
        rows, offset = gather_rows(local)
        trained = [i for i, r in enumerate(rows) if r[0] is not None]  # masked groups take no part in the scale
        adv = question_advantages(
            [rows[i][0] for i in trained], [rows[i][1] for i in trained], str(trainer.args.scale_rewards)
        )
        by_row = dict(zip(trained, adv))
        mine = [by_row.get(offset + i, [0.0] * len(tr.turns)) for i, tr in enumerate(self.last_traces)]
        spans = [[(t.start, t.end) for t in tr.turns] for tr in self.last_traces]
        return token_advantages(mine, spans, length)


def episode_stats(trace: EpisodeTrace) -> dict:
    """The per-episode figures the reward functions log and compare across a group (JSON-ready).

    Keys: ``num_correct``, ``num_questions``, ``num_answered`` (by the model), ``forfeited``,
    ``answered_tokens`` (tokens charged for answered questions), ``tokens_spent``, ``total_budget``,
    ``ran_dry`` (0/1), ``num_turns``, ``cap_hits``, and ``steps``: one dict per answered question
    (``question_index``, ``correct``, ``has_answer``, ``raw_tokens``, ``tokens``, ``spent_before``,
    ``difficulty``, ``problem_type``, ``hard_cap_mode``) for group rewards.
    """
    hard = bool(trace.reset_metadata.get("hard_cap_mode", True))
    return {
        "num_correct": trace.num_correct,
        "num_questions": trace.num_questions,
        "num_answered": trace.num_answered,
        "forfeited": trace.forfeited,
        "answered_tokens": trace.answered_tokens,
        "tokens_spent": trace.tokens_spent,
        "total_budget": int(trace.reset_metadata.get("total_budget") or 0),
        "ran_dry": int(trace.ran_dry),
        "num_turns": len(trace.turns),
        "cap_hits": trace.cap_hits,
        "steps": [
            {
                "question_index": s.step,
                "correct": bool(s.correct),
                "has_answer": bool(s.has_answer),
                "raw_tokens": int(s.raw_tokens),
                "tokens": int(s.tokens),
                "spent_before": int(s.spent_before),
                "difficulty": s.difficulty,
                "problem_type": s.problem_type,
                "hard_cap_mode": hard,
            }
            for s in trace.answered_steps
        ],
    }


def batch_metrics(stats: list[dict], groups: list) -> dict[str, float]:
    """Figures of a whole generation batch (every process's episodes), logged each step.

    Args:
        stats: :func:`episode_stats` of every episode of the batch.
        groups: their GRPO group ids (same length).
    Returns:
        ``accuracy`` (correct / questions served), ``tokens_per_question`` (tokens charged for
        answered questions / answered questions: one denominator), ``forfeits_per_episode``,
        ``episode_length`` (questions the model answered), ``ran_dry`` (share of episodes),
        ``utilisation`` (spent / budget, pooled), ``tokens_spent`` (answer tokens charged over the whole
        batch: what the model generated, less what a hard cap clipped), ``cap_hit_rate`` (model turns cut by their cap
        before the stop token / model turns; replaces TRL's ``completions/clipped_ratio``, which
        counts every episode that ran out of budget), ``groups_tied_on_correctness`` (share of
        GRPO groups whose members all got the same number right: their advantages come from cost
        differences only).
    """
    n = len(stats)
    if n == 0:
        return {}

    def total(key: str) -> float:
        return float(sum(float(s[key]) for s in stats))

    def ratio(num: float, den: float) -> float:
        return num / den if den else 0.0

    by_group: dict[Any, set] = {}
    for s, g in zip(stats, groups):
        by_group.setdefault(g, set()).add(int(s["num_correct"]))
    return {
        "accuracy": ratio(total("num_correct"), total("num_questions")),
        "tokens_per_question": ratio(total("answered_tokens"), total("num_answered")),
        "episode_length": total("num_answered") / n,
        "forfeits_per_episode": total("forfeited") / n,
        "ran_dry": total("ran_dry") / n,
        "utilisation": ratio(total("tokens_spent"), total("total_budget")),
        "tokens_spent": total("tokens_spent"),
        "cap_hit_rate": ratio(total("cap_hits"), total("num_turns")),
        "groups_tied_on_correctness": sum(1 for v in by_group.values() if len(v) == 1) / len(by_group),
    }


def environment_reward(
    prompts=None,
    completions=None,
    episode_reward=None,
    log_metric=None,
    episode_stats=None,
    episode_group=None,
    episode_components=None,
    **kwargs,
) -> list[float]:
    """The GRPO reward: each rollout's episode reward as the environment paid it.

    Also logs (through TRL's ``log_metric``) the :func:`batch_metrics` of the whole generation
    batch (gathered over processes, so every process logs the same values) and the batch mean of
    each reward component as ``env/<component>``.

    Raises:
        ValueError: called without ``episode_reward`` (the rollout_func was not used).
    """
    from training.distributed import gather_rows

    if episode_reward is None:
        raise ValueError("environment_reward needs the episode_reward column that GRPORollout returns")
    rewards = [float(r) for r in episode_reward]
    if log_metric is not None and episode_stats is not None:
        local = [
            (s, g, c or {})
            for s, g, c in zip(
                episode_stats, episode_group or [None] * len(rewards), episode_components or [{}] * len(rewards)
            )
        ]
        rows, _ = gather_rows(local)
        for name, value in batch_metrics([r[0] for r in rows], [r[1] for r in rows]).items():
            log_metric(name, value)
        names = sorted({k for r in rows for k in r[2]})
        for k in names:
            log_metric(f"env/{k}", sum(float(r[2].get(k, 0.0)) for r in rows) / max(1, len(rows)))
    return rewards


def group_reward_function(spec: Any, log_path: Any = None) -> Callable[..., list[float]]:
    """A TRL reward function paying a group reward shape (``kimi_length``, ``shorter_better``,
    ``arora_zanette``, or a spec combining them) on top of the environment's reward.

    A question's group is the members of a GRPO group that answered that question (same group,
    same question index: members play the same seeded episode). The answered steps of every
    process are gathered first (:func:`training.distributed.gather_rows`), so a group split across
    processes is scored whole; each process returns its own episodes' rewards: the sum over the
    episode's answered questions of the shape's components.

    With ``log_path``, the main process appends one JSON line per episode of the global batch
    (``train_step``, ``group``, ``member``, ``group_reward``) to it (``group_rewards.jsonl``).

    Raises:
        ValueError: the spec is unknown or not valid (message from ``reasoning_env.rewards``).
    """
    import json

    import numpy as np

    from reasoning_env.rewards import build_reward
    from reasoning_env.rewards.batch import StepBatch
    from training.distributed import gather_rows

    reward = build_reward(spec, context="training")

    def group_reward(
        prompts=None,
        completions=None,
        episode_stats=None,
        episode_group=None,
        episode_member=None,
        trainer_state=None,
        **kwargs,
    ) -> list[float]:
        if episode_stats is None or episode_group is None:
            raise ValueError("group rewards need the episode_stats/episode_group columns that GRPORollout returns")
        members = episode_member or [None] * len(episode_stats)
        rows, offset = gather_rows([(s, g, m) for s, g, m in zip(episode_stats, episode_group, members)])
        flat = [(e, st, g) for e, (s, g, _) in enumerate(rows) for st in s["steps"]]
        totals = np.zeros(len(rows))
        if flat:
            n = len(flat)
            keys: dict[tuple, int] = {}
            codes = [keys.setdefault((g, st["question_index"]), len(keys)) for _, st, g in flat]
            batch = StepBatch.build(
                n,
                correct=[st["correct"] for _, st, _ in flat],
                has_answer=[st["has_answer"] for _, st, _ in flat],
                tokens=[st["tokens"] for _, st, _ in flat],
                raw_tokens=[st["raw_tokens"] for _, st, _ in flat],
                total_budget=[rows[e][0]["total_budget"] for e, _, _ in flat],
                num_questions=[rows[e][0]["num_questions"] for e, _, _ in flat],
                spent_before=[st["spent_before"] for _, st, _ in flat],
                question_index=[st["question_index"] for _, st, _ in flat],
                hard_cap_mode=[st["hard_cap_mode"] for _, st, _ in flat],
                difficulty=[st["difficulty"] for _, st, _ in flat],
                problem_type=[st["problem_type"] or "" for _, st, _ in flat],
                group=codes,
            )
            per_step = np.zeros(n)
            for values in reward.step_batch(batch).values():
                per_step = per_step + np.asarray(values, dtype=np.float64)
            np.add.at(totals, np.array([e for e, _, _ in flat]), per_step)
        if log_path is not None and offset == 0:  # the main process holds every row after the gather
            step = int(getattr(trainer_state, "global_step", 0) or 0)
            with open(log_path, "a", encoding="utf-8") as fh:
                for (_, g, m), value in zip(rows, totals):
                    fh.write(
                        json.dumps({"train_step": step, "group": g, "member": m, "group_reward": float(value)}) + "\n"
                    )
        return [float(x) for x in totals[offset : offset + len(episode_stats)]]

    group_reward.__name__ = f"group_{reward.info.name}"
    group_reward.reward = reward  # type: ignore[attr-defined]
    return group_reward
