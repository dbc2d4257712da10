"""Held-out evaluation while training: did the policy learn to allocate its budget?

``--eval_every N --eval_seeds K`` plays a fixed set of ``K`` held-out episode seeds (disjoint from the
training seeds) with the live policy every ``N`` optimizer steps and at the end, in the training
format (the same lockstep rollout, one conversation per episode), at ``--eval_temperature``
(0 = greedy, the default). Per evaluation, :func:`evaluation_metrics` computes, each with a bootstrap
95% interval over episodes (:mod:`workbench.stats`):

- ``accuracy`` (correct / questions served), ``tokens_per_question`` (tokens charged for answered
  questions / answered questions), ``cap_hit_rate`` (turns cut by their cap / turns), ``ran_dry``
  (share of episodes), ``forfeits`` (per episode), ``regret`` (oracle expected correct minus the
  policy's expected correct, per episode, under the run's accuracy curves);
- ``tokens_by_difficulty`` / ``accuracy_by_difficulty``, ``tokens_by_type`` / ``accuracy_by_type``
  and ``tokens_by_position`` (question index, 1-based), one row per key.

Rows are appended to ``evaluations.jsonl`` in the run folder (tidy: one JSON object per
``(step, metric, key)`` with ``estimate``, ``ci_low``, ``ci_high``, ``n``), and the played episodes to
``eval_episodes.jsonl``, as each evaluation ends, so a crashed run keeps every evaluation logged.

Each evaluation plays the weights of the step it is logged at: with TRL's vLLM engine it first hands
the current weights to the engine (:func:`training.trl_rollout.sync_generation_weights`), as TRL does
before a training rollout; otherwise the "step N" and final evaluations would play the weights from
before the last update.

Regret needs the questions of every episode, answered or not: it is computed for in-process
environments (the rollout keeps them as trusted context) and, against a remote server, only for
episodes whose questions were all answered.
"""

from __future__ import annotations

import json
import logging
import math
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

logger = logging.getLogger("training.evaluation")

#: Base seed of the held-out episode seeds (training seeds come from ``--seed``).
HELD_OUT_BASE = 1_000_003


def held_out_seeds(k: int, train_seeds: Sequence[int], base: int = HELD_OUT_BASE) -> list[int]:
    """``k`` episode seeds disjoint from ``train_seeds``, the same for every run with the same ``k``.

    Raises:
        ValueError: ``k < 1``.
    """
    from training.trl_rollout import episode_seeds

    if k < 1:
        raise ValueError(f"--eval_seeds must be >= 1, got {k}")
    taken = set(int(s) for s in train_seeds)
    out: list[int] = []
    for seed in episode_seeds(k + len(taken), base):
        if seed not in taken:
            out.append(seed)
        if len(out) == k:
            break
    return out


def expected_and_oracle(
    curves: Any,
    questions: Sequence[tuple],
    step_tokens: Sequence[int],
    budget: int,
    *,
    cap: int,
    min_tokens: int,
    tokenizer: Any = None,
) -> tuple[float, float]:
    """Expected correct answers of an episode as played, and of the oracle allocation of its budget.

    Args:
        curves: :class:`reasoning_env.policies.SolverCurves` (accuracy vs tokens per type and difficulty).
        questions: ``(problem_type, difficulty, gold_answer)`` of every question, in order.
        step_tokens: Tokens charged per question, in order (questions not reached get 0).
        budget: The episode's total budget (tokens).
        cap, min_tokens: The config's ``max_tokens_per_step`` and ``min_tokens``.
        tokenizer: The episode's tokenizer, for the oracle's shortest answers (``None``: 1 token).
    Returns:
        ``(expected, oracle_expected)``; the regret is their difference.

    The one place training calls the oracle: :func:`reasoning_env.policies.episode_regret`, the
    function evaluation and Play use (the exact plan of ``optimal_allocation``).
    """
    from reasoning_env.policies import episode_regret
    from reasoning_env.policies.text import minimal_tokens

    lows = [minimal_tokens(tokenizer, q[2]) for q in questions] if tokenizer is not None else None
    r = episode_regret(
        curves,
        [(q[0], q[1]) for q in questions],
        int(budget),
        list(step_tokens),
        lows=lows,
        cap=cap,
        min_tokens=min_tokens,
    )
    return float(r.expected_correct), float(r.oracle_expected_correct)


def episode_record(trace: Any, *, curves: Any, cap: int, min_tokens: int, tokenizer: Any = None) -> dict:
    """A played episode as the JSON-ready record :func:`evaluation_metrics` reads
    (``trace.summary()`` plus ``expected_correct``, ``oracle_expected_correct``, ``regret`` and ``questions``:
    each question's ``problem_type`` and ``difficulty`` in order, asked or not; ``None`` where unknown)."""
    rec = trace.summary()
    rec["answered_tokens"] = trace.answered_tokens
    questions = trace.questions
    if questions is None and trace.steps and trace.num_answered == trace.num_questions:
        questions = [(s.problem_type, s.difficulty, s.gold_answer) for s in trace.steps]
    rec["expected_correct"] = rec["oracle_expected_correct"] = rec["regret"] = None
    # every question's type and difficulty, asked or not, so a report can count the unasked ones per difficulty
    rec["questions"] = [{"problem_type": q[0], "difficulty": q[1]} for q in questions] if questions else None
    if questions:
        tokens = [0] * len(questions)
        for s in trace.answered_steps:
            if s.step < len(tokens):
                tokens[s.step] = int(s.tokens)
        budget = int(trace.reset_metadata.get("total_budget") or 0)
        exp, orc = expected_and_oracle(
            curves, questions, tokens, budget, cap=cap, min_tokens=min_tokens, tokenizer=tokenizer
        )
        rec.update(expected_correct=exp, oracle_expected_correct=orc, regret=orc - exp)
    return rec


def _interval_row(step: int, metric: str, key: str | None, iv: Any) -> dict:
    def clean(x: float) -> float | None:
        return None if x is None or (isinstance(x, float) and math.isnan(x)) else float(x)

    return {
        "step": int(step),
        "metric": metric,
        "key": key,
        "estimate": clean(iv.estimate),
        "ci_low": clean(iv.low),
        "ci_high": clean(iv.high),
        "n": int(iv.n),
    }


def evaluation_metrics(records: list[dict], step: int, *, seed: int = 0) -> list[dict]:
    """Tidy metric rows of one evaluation (see the module docstring), intervals over episodes.

    Args:
        records: :func:`episode_record` of every held-out episode.
        step: The optimizer step the policy was evaluated at.
    Returns:
        One dict per ``(metric, key)``: ``step``, ``metric``, ``key`` (``None``, a difficulty, a
        problem type or a 1-based position, as a string), ``estimate``, ``ci_low``, ``ci_high``
        (``None`` when undefined), ``n`` (episodes).
    """
    from workbench.stats import mean_interval, ratio_interval

    rows: list[dict] = []
    if not records:
        return rows

    def ratio(metric: str, key: str | None, num: list[float], den: list[float]) -> None:
        if sum(den) > 0:
            rows.append(_interval_row(step, metric, key, ratio_interval(num, den, seed=seed)))

    ratio("accuracy", None, [r["num_correct"] for r in records], [r["num_questions"] for r in records])
    ratio("tokens_per_question", None, [r["answered_tokens"] for r in records], [r["num_answered"] for r in records])
    ratio("cap_hit_rate", None, [r["cap_hits"] for r in records], [r["num_turns"] for r in records])
    rows.append(_interval_row(step, "ran_dry", None, mean_interval([float(r["ran_dry"]) for r in records], seed=seed)))
    rows.append(
        _interval_row(step, "forfeits", None, mean_interval([float(r["forfeited"]) for r in records], seed=seed))
    )
    reg = [r["regret"] for r in records if r.get("regret") is not None]
    if reg:
        rows.append(_interval_row(step, "regret", None, mean_interval(reg, seed=seed)))

    def answered(r: dict) -> list[dict]:
        return [s for s in r["steps"] if not s.get("forfeit")]

    def by(metric_tokens: str, metric_acc: str | None, keyfn) -> None:
        keys = sorted(
            {keyfn(s) for r in records for s in answered(r) if keyfn(s) is not None}, key=lambda k: (len(k), k)
        )
        for key in keys:
            sel = [[s for s in answered(r) if keyfn(s) == key] for r in records]
            ratio(metric_tokens, key, [sum(s["tokens"] for s in x) for x in sel], [len(x) for x in sel])
            if metric_acc:
                ratio(metric_acc, key, [sum(int(s["correct"]) for s in x) for x in sel], [len(x) for x in sel])

    def diff_key(s: dict) -> str | None:
        d = s.get("difficulty")
        return None if d is None or (isinstance(d, float) and math.isnan(d)) else str(int(d))

    by("tokens_by_difficulty", "accuracy_by_difficulty", diff_key)
    by("tokens_by_type", "accuracy_by_type", lambda s: s.get("problem_type") or None)
    by("tokens_by_position", None, lambda s: str(int(s["step"]) + 1))
    return rows


class HeldOutEvaluator:
    """Plays the held-out seeds with the rollout's backend and logs the metrics (see module docstring).

    Args:
        rollout: The :class:`~training.trl_rollout.GRPORollout` (its backend, environment and format).
        seeds: The held-out episode seeds.
        run_dir: The run folder (``evaluations.jsonl``, ``eval_episodes.jsonl``).
        curves: Accuracy curves for the regret (:class:`reasoning_env.policies.SolverCurves`).
        config: The :class:`EnvConfig` (its ``max_tokens_per_step`` and ``min_tokens`` bound the oracle).
        temperature: Sampling temperature of the evaluation (0 = greedy).
        tokenizer_name: The episode tokenizer (for the oracle's shortest answers).
        env_factory: Environments of the held-out episodes when they differ from training's (``--eval_config``:
            other questions), with their ``limits`` (:class:`~training.rollout.RolloutLimits`); default: the
            rollout's own.
    """

    def __init__(
        self,
        rollout: Any,
        seeds: list[int],
        run_dir: Path,
        *,
        curves: Any,
        config: Any,
        temperature: float = 0.0,
        tokenizer_name: str | None = None,
        env_factory: Any = None,
        limits: Any = None,
    ) -> None:
        self.rollout = rollout
        self.env_factory = env_factory
        self.limits = limits
        self._runner = None
        self.seeds = list(seeds)
        self.run_dir = Path(run_dir)
        self.curves = curves
        self.config = config
        self.temperature = float(temperature)
        self.tokenizer_name = tokenizer_name
        # a resumed run keeps the evaluations written up to its checkpoint: those steps are not played again
        self.evaluated_steps: list[int] = sorted(_steps_in(self.run_dir / "evaluations.jsonl"))
        self._tokenizer = None

    def _episode_tokenizer(self):
        if self._tokenizer is None and self.tokenizer_name:
            from reasoning_env.tokenization import TokenizerLoadError, get_tokenizer

            try:
                self._tokenizer = get_tokenizer(self.tokenizer_name)
            except (TokenizerLoadError, TypeError):
                self._tokenizer = None
        return self._tokenizer

    def _held_out_runner(self, trainer: Any) -> Any:
        """The rollout's runner, or one on the same backend over the held-out environments (``env_factory``)."""
        from training.rollout import EpisodeRunner

        runner = self.rollout._ensure_runner(trainer)
        if self.env_factory is None:
            return runner
        if self._runner is None or self._runner.backend is not runner.backend:
            self._runner = EpisodeRunner(
                runner.backend,
                self.env_factory,
                runner.chat,
                limits=self.limits or runner.limits,
                run_id=runner.run_id,
            )
        return self._runner

    def run(self, trainer: Any, step: int) -> list[dict]:
        """Evaluate at ``step`` (every process plays its share of the seeds; the main process writes).

        Returns:
            The metric rows (on the main process; ``[]`` elsewhere).
        """
        from training.distributed import gather_rows, process_info
        from training.rollout import EpisodeSpec
        from training.trl_rollout import sync_generation_weights

        if step in self.evaluated_steps:
            return []
        self.evaluated_steps.append(step)
        # TRL hands the weights to vLLM only inside its own generation step: after an optimizer update the
        # engine still holds the previous weights until the next rollout, so sync first (a no-op without vLLM).
        sync_generation_weights(trainer)
        runner = self._held_out_runner(trainer)
        rank, world = process_info()
        mine = [
            EpisodeSpec(seed=s, group=None, member=None, episode=i)
            for i, s in enumerate(self.seeds)
            if i % world == rank
        ]
        t0 = time.perf_counter()
        was_training = trainer.model.training
        with runner.backend.temperature(self.temperature):
            traces = runner.play_lockstep(mine)
        if was_training:
            trainer.model.train()
        tok = self._episode_tokenizer()
        local = [
            episode_record(
                tr,
                curves=self.curves,
                cap=self.config.max_tokens_per_step,
                min_tokens=self.config.min_tokens,
                tokenizer=tok,
            )
            for tr in traces
        ]
        records, _ = gather_rows(local)
        if rank != 0:
            return []
        records.sort(key=lambda r: r["episode"])
        rows = evaluation_metrics(records, step)
        seconds = time.perf_counter() - t0
        with open(self.run_dir / "evaluations.jsonl", "a", encoding="utf-8") as fh:
            for row in rows:
                fh.write(json.dumps({**row, "temperature": self.temperature, "seconds": round(seconds, 3)}) + "\n")
        with open(self.run_dir / "eval_episodes.jsonl", "a", encoding="utf-8") as fh:
            for rec in records:
                fh.write(json.dumps({"train_step": int(step), "mode": "held_out", **rec}, default=str) + "\n")
        summary = {r["metric"]: r["estimate"] for r in rows if r["key"] is None}
        logger.info("held-out evaluation at step %d (%d episodes, %.1f s): %s", step, len(records), seconds, summary)
        return rows


def _steps_in(path: Path) -> set[int]:
    """The training steps an ``evaluations.jsonl`` holds rows of (none when it does not exist)."""
    steps: set[int] = set()
    if path.is_file():
        for line in path.read_text(encoding="utf-8").splitlines():
            try:
                steps.add(int(json.loads(line)["step"]))
            except (ValueError, KeyError, TypeError):
                continue
    return steps


def make_evaluation_callback(evaluator: HeldOutEvaluator, every: int):
    """A ``TrainerCallback`` running ``evaluator`` before the first step, every ``every`` optimizer
    steps, and at the end of training (once per step). A run resumed from a checkpoint does not evaluate
    at its start (that is not "before the first step"; its earlier evaluations are kept)."""
    from transformers import TrainerCallback

    class HeldOutEvaluationCallback(TrainerCallback):
        def __init__(self) -> None:
            self.trainer = None  # set by build_trainer once the trainer exists

        def on_train_begin(self, args, state, control, **kwargs):
            # TRL has restored global_step from the checkpoint before this event on a resumed run
            if int(state.global_step) == 0:
                evaluator.run(self.trainer, 0)

        def on_step_end(self, args, state, control, **kwargs):
            if every > 0 and state.global_step % every == 0:
                evaluator.run(self.trainer, int(state.global_step))

        def on_train_end(self, args, state, control, **kwargs):
            evaluator.run(self.trainer, int(state.global_step))

    return HeldOutEvaluationCallback()
