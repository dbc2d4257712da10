"""Did training change the policy? Held-out evaluations of a training run compared before vs after, paired.

A training run made with ``--eval_every`` (``python -m training.grpo_train``) plays the same held-out episode
seeds at several optimizer steps and writes every episode to ``eval_episodes.jsonl`` (one record per episode and
step: :func:`training.evaluation.episode_record`). Episode ``i`` of one step and of another share their seed, so
the change between two steps is measured episode by episode:

- pooled ratios (accuracy = correct / questions served; tokens per answered question, overall and by difficulty or
  problem type; cap-hit rate = turns cut by their cap / turns): the difference of the two ratios with a paired
  bootstrap interval (each episode's numerator and denominator at both steps resampled together);
- per-episode means (right answers; per difficulty tier, the tokens spent on its questions and its right answers,
  0 where it went unasked; ran dry; questions never asked because the budget ran dry, ``num_questions - num_answered -
  forfeited``; context forfeits, questions answered empty because the model's context was full; regret against
  the oracle allocation under the run's solver curves): the mean paired difference with its bootstrap interval
  and the sign-flip p-value (:func:`workbench.stats.paired_difference`).

``changed`` says whether the 95% interval of the change excludes 0 (unadjusted: over many rows some will by
chance; the p-values, where given, are unadjusted too).

    python -m workbench.held_out runs/grpo-cpu-qwen0.5b            # first vs last evaluated step, a table
    python -m workbench.held_out runs/grpo-cpu-qwen0.5b --before 0 --after 30 --json
"""

from __future__ import annotations

import argparse
import json
import math
import sys
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path

import numpy as np
import pandas as pd

from workbench.stats import (
    CONFIDENCE,
    Interval,
    mean_interval,
    paired_difference,
    paired_ratio_difference,
    ratio_interval,
)

__all__ = [
    "EVAL_EPISODES_FILE",
    "REGRET_NOTE",
    "allocation_by_difficulty",
    "change_table",
    "evaluated_steps",
    "load_eval_episodes",
    "main",
    "markdown",
    "power_markdown",
    "power_table",
    "run_allocation",
    "runs_allocation",
    "run_change_markdown",
    "step_timing",
]

#: The per-episode log of held-out evaluations in a training run folder.
EVAL_EPISODES_FILE = "eval_episodes.jsonl"


def _unasked(rec: dict) -> float | None:
    """Questions never asked because the budget ran dry: the episode's questions less those the model answered
    and the context forfeits (each forfeit is a step of its own, answered empty); ``None`` if not recorded."""
    if any(rec.get(k) is None for k in ("num_questions", "num_answered", "forfeited")):
        return None
    return float(rec["num_questions"] - rec["num_answered"] - rec["forfeited"])


#: (metric, label, value of one episode record) of the per-episode means compared.
MEAN_METRICS: tuple[tuple[str, str, Callable[[dict], float | None]], ...] = (
    ("correct", "right answers per episode", lambda r: r.get("num_correct")),
    ("ran_dry", "ran dry (share of episodes)", lambda r: r.get("ran_dry")),
    ("unasked", "questions unasked (ran dry) per episode", _unasked),
    ("forfeited", "context forfeits per episode (context full)", lambda r: r.get("forfeited")),
    ("regret", "regret vs the oracle (expected correct answers)", lambda r: r.get("regret")),
    ("reward", "reward per episode", lambda r: r.get("reward")),
)


def load_eval_episodes(run_dir: str | Path) -> dict[int, list[dict]]:
    """``{step: records sorted by episode}`` from a run folder's ``eval_episodes.jsonl`` (empty if absent)."""
    path = Path(run_dir) / EVAL_EPISODES_FILE
    out: dict[int, list[dict]] = {}
    if not path.is_file():
        return out
    for line in path.read_text(encoding="utf-8").splitlines():
        if line.strip():
            rec = json.loads(line)
            out.setdefault(int(rec["train_step"]), []).append(rec)
    for recs in out.values():
        recs.sort(key=lambda r: int(r["episode"]))
    return out


def evaluated_steps(run_dir: str | Path) -> list[int]:
    """The optimizer steps a run folder holds held-out episodes of, in order."""
    return sorted(load_eval_episodes(run_dir))


def _answered(rec: dict) -> list[dict]:
    return [s for s in rec.get("steps", []) if not s.get("forfeit")]


def _difficulty(step: dict) -> str | None:
    d = step.get("difficulty")
    if d is None or (isinstance(d, float) and math.isnan(d)):
        return None
    return str(int(d))


def _cut_at_cap(rec: dict, i: int) -> bool:
    """Whether answer ``i`` of an episode (its ``i``-th turn) was cut by its turn cap."""
    caps, toks = rec.get("turn_caps") or [], rec.get("turn_tokens") or []
    return i < len(caps) and i < len(toks) and toks[i] >= caps[i]


def _unasked_in_tier(rec: dict, tier: str) -> float | None:
    """Questions of ``tier`` the episode never asked (the budget ran dry); ``None`` where the record does not
    list its questions (records written before ``questions`` was)."""
    questions = rec.get("questions")
    if not questions:
        return None
    asked = len(rec.get("steps") or [])
    return float(sum(1 for q in questions[asked:] if _tier(q) == tier))


def _tier_measures(recs: Sequence[dict], tiers: Sequence[str]) -> list[tuple[str, str, str, Callable[[dict], float]]]:
    """Per difficulty tier, per-episode measures: ``(metric, tier, label, value(rec))`` for the tokens spent on
    the tier's questions, its right answers, its answers cut by their turn cap and its answers' rewards (each 0
    where the tier went unasked), and its questions never asked (``None`` where the record lacks its questions)."""

    def answered_sum(tier: str, value: Callable[[int, dict, dict], float]) -> Callable[[dict], float]:
        return lambda r: float(sum(value(i, s, r) for i, s in enumerate(_answered(r)) if _tier(s) == tier))

    out = []
    for t in tiers:
        out += [
            ("tokens_per_episode", t, f"tokens spent per episode, {t}", answered_sum(t, lambda i, s, r: s["tokens"])),
            (
                "correct_per_episode",
                t,
                f"right answers per episode, {t}",
                answered_sum(t, lambda i, s, r: bool(s.get("correct"))),
            ),
            (
                "cut_per_episode",
                t,
                f"answers cut by their turn cap per episode, {t}",
                answered_sum(t, lambda i, s, r: _cut_at_cap(r, i)),
            ),
            (
                "reward_per_episode",
                t,
                f"answers' reward per episode, {t}",
                answered_sum(t, lambda i, s, r: float(s.get("reward") or 0.0)),
            ),
            (
                "unasked_per_episode",
                t,
                f"questions never asked per episode, {t}",
                lambda r, tier=t: _unasked_in_tier(r, tier),
            ),
        ]
    return out


def _ratio_specs(before: list[dict], after: list[dict]) -> list[tuple[str, str | None, str, Callable, Callable]]:
    """(metric, key, label, numerator(rec), denominator(rec)) of every pooled ratio compared."""
    specs: list = [
        ("accuracy", None, "accuracy (correct / questions)", lambda r: r["num_correct"], lambda r: r["num_questions"]),
        (
            "tokens_per_question",
            None,
            "tokens per answered question",
            lambda r: r["answered_tokens"],
            lambda r: r["num_answered"],
        ),
        (
            "cap_hit_rate",
            None,
            "cap-hit rate (turns cut by their cap)",
            lambda r: r["cap_hits"],
            lambda r: r["num_turns"],
        ),
    ]
    both = before + after
    for name, keyfn, label in (
        ("tokens_by_difficulty", _difficulty, "tokens per answered question, difficulty {}"),
        ("tokens_by_type", lambda s: s.get("problem_type") or None, "tokens per answered question, {}"),
    ):
        keys = sorted(
            {keyfn(s) for r in both for s in _answered(r) if keyfn(s) is not None}, key=lambda k: (len(k), k)
        )
        for key in keys:
            specs.append(
                (
                    name,
                    key,
                    label.format(key),
                    lambda r, k=key, f=keyfn: sum(s["tokens"] for s in _answered(r) if f(s) == k),
                    lambda r, k=key, f=keyfn: sum(1 for s in _answered(r) if f(s) == k),
                )
            )
    return specs


def _row(
    metric: str,
    key: str | None,
    label: str,
    a: Interval,
    b: Interval,
    change: Interval,
    p: float | None,
    sd: float | None = None,
) -> dict:
    def clean(x: float) -> float | None:
        return None if x is None or (isinstance(x, float) and math.isnan(x)) else float(x)

    return {
        "metric": metric,
        "key": key,
        "label": label,
        "before": clean(a.estimate),
        "before_ci_low": clean(a.low),
        "before_ci_high": clean(a.high),
        "after": clean(b.estimate),
        "after_ci_low": clean(b.low),
        "after_ci_high": clean(b.high),
        "change": clean(change.estimate),
        "change_ci_low": clean(change.low),
        "change_ci_high": clean(change.high),
        "p_value": clean(p) if p is not None else None,
        "sd_of_differences": clean(sd) if sd is not None else None,
        "changed": bool(not math.isnan(change.low) and (change.low > 0 or change.high < 0)),
        "n": int(change.n),
    }


def paired_episodes(before: list[dict], after: list[dict]) -> tuple[list[dict], list[dict]]:
    """The episode records of two held-out evaluations on the episodes both hold, in episode order, paired.

    Raises:
        ValueError: the two evaluations share no episode.
    """
    a_by = {int(r["episode"]): r for r in before}
    b_by = {int(r["episode"]): r for r in after}
    common = sorted(set(a_by) & set(b_by))
    if not common:
        raise ValueError("the two evaluations share no held-out episode: compare steps of the same run")
    return [a_by[i] for i in common], [b_by[i] for i in common]


def change_table(before: Sequence[dict], after: Sequence[dict], *, seed: int = 0) -> pd.DataFrame:
    """The paired before/after comparison of two evaluations of the same held-out episodes (see the module).

    Args:
        before, after: :func:`training.evaluation.episode_record` dicts of the same episodes (matched by
            ``episode``; an episode missing from either side is left out).
    Returns:
        One row per metric and key: ``before``/``after`` with their own 95% intervals, ``change`` (after -
        before) with its paired interval, ``p_value`` and ``sd_of_differences`` (the SD of the per-episode paired
        differences; per-episode means only), ``changed``, ``n``.
    Raises:
        ValueError: the two evaluations share no episode.
    """
    a, b = paired_episodes(before, after)
    rows = []
    for metric, key, label, num, den in _ratio_specs(a, b):
        na, da = [float(num(r)) for r in a], [float(den(r)) for r in a]
        nb, db = [float(num(r)) for r in b], [float(den(r)) for r in b]
        if sum(da) <= 0 or sum(db) <= 0:
            continue
        rows.append(
            _row(
                metric,
                key,
                label,
                ratio_interval(na, da, seed=seed),
                ratio_interval(nb, db, seed=seed),
                paired_ratio_difference(nb, db, na, da, seed=seed),
                None,
            )
            | {  # how many episodes hold such questions: what an interval that cannot be formed rests on
                "before_with": sum(x > 0 for x in da),
                "after_with": sum(x > 0 for x in db),
                "both_with": sum(x > 0 and y > 0 for x, y in zip(da, db)),
            }
        )
    tiers = sorted({t for r in a + b for s in _answered(r) if (t := _tier(s))}, key=_tier_order)
    per_episode = [(m, None, lab, v) for m, lab, v in MEAN_METRICS] + _tier_measures(a + b, tiers)
    for metric, key, label, value in per_episode:
        pairs = [(value(r1), value(r2)) for r1, r2 in zip(a, b)]
        pairs = [(float(x), float(y)) for x, y in pairs if x is not None and y is not None]
        if not pairs:
            continue
        xa = [x for x, _ in pairs]
        xb = [y for _, y in pairs]
        cmp = paired_difference(xb, xa, seed=seed)
        rows.append(
            _row(
                metric,
                key,
                label,
                mean_interval(xa, seed=seed),
                mean_interval(xb, seed=seed),
                cmp.difference,
                cmp.p_value,
                cmp.sd,
            )
        )
    return pd.DataFrame(rows)


def _tier(step: dict) -> str | None:
    """The allocation tier of one answered question: its difficulty label (``"difficulty 3"``) where the source
    gives one, else its problem type (GSM8K has no level); ``None`` when neither is recorded."""
    d = _difficulty(step)
    if d is not None:
        return f"difficulty {d}"
    return step.get("problem_type") or None


def _tier_order(tier: str) -> tuple:
    """Difficulty levels first, easy to hard, then the unlevelled problem types by name."""
    if tier.startswith("difficulty "):
        level = tier.split(" ", 1)[1]
        return (0, len(level), level)
    return (1, 0, tier)


def allocation_by_difficulty(before: Sequence[dict], after: Sequence[dict], *, seed: int = 0) -> pd.DataFrame:
    """Where the tokens went before vs after training: per difficulty tier, tokens per answered question and the
    accuracy of the answered questions, each with its 95% bootstrap interval over the held-out episodes, and the
    paired change in tokens (the figure the Runs tab opens a training run with, and notebook 03 draws).

    A tier is a question's difficulty label where the source gives one (MATH-500 levels; the easy and hard entries
    of a curriculum mix), else its problem type (GSM8K: no level). Questions never asked (the budget ran dry) and
    context forfeits have no answer and count in no tier: read the ran-dry and unasked rows of :func:`change_table`
    beside this.

    Args:
        before, after: :func:`training.evaluation.episode_record` dicts of the same held-out episodes (matched by
            ``episode``; an episode missing from either side is left out).
    Returns:
        One row per tier and side (``"before"``, ``"after"``; a tier answered on one side only has that row
        only): ``tier``, ``problem_types`` (the types answered in it), ``side``, ``tokens`` (tokens per answered
        question) with ``tokens_ci_low``/``tokens_ci_high``, ``accuracy`` (correct / answered) with its interval,
        ``answered`` (questions answered in the tier), ``episodes`` (paired episodes), and on the ``after`` row of a
        tier answered on both sides ``tokens_change`` (after - before) with its paired interval. Tiers run from
        the easiest level to the hardest, then the unlevelled types.
    Raises:
        ValueError: the two evaluations share no episode.
    """
    a, b = paired_episodes(before, after)
    sides = {"before": a, "after": b}
    tiers = sorted(
        {t for recs in sides.values() for r in recs for s in _answered(r) if (t := _tier(s))}, key=_tier_order
    )

    def per_episode(recs: list[dict], tier: str, value: Callable[[dict], float]) -> list[float]:
        return [float(sum(value(s) for s in _answered(r) if _tier(s) == tier)) for r in recs]

    rows = []
    for tier in tiers:
        counts = {k: per_episode(v, tier, lambda s: 1) for k, v in sides.items()}
        tokens = {k: per_episode(v, tier, lambda s: s["tokens"]) for k, v in sides.items()}
        correct = {k: per_episode(v, tier, lambda s: bool(s.get("correct"))) for k, v in sides.items()}
        types = sorted({s.get("problem_type") for v in sides.values() for r in v for s in _answered(r)
                        if _tier(s) == tier and s.get("problem_type")})  # fmt: skip
        for side in ("before", "after"):
            if sum(counts[side]) <= 0:
                continue
            tok = ratio_interval(tokens[side], counts[side], seed=seed)
            acc = ratio_interval(correct[side], counts[side], seed=seed)
            row = {
                "tier": tier,
                "problem_types": ", ".join(types),
                "side": side,
                "tokens": tok.estimate,
                "tokens_ci_low": tok.low,
                "tokens_ci_high": tok.high,
                "accuracy": acc.estimate,
                "accuracy_ci_low": acc.low,
                "accuracy_ci_high": acc.high,
                "answered": int(sum(counts[side])),
                "episodes": len(a),
                "tokens_change": math.nan,
                "tokens_change_ci_low": math.nan,
                "tokens_change_ci_high": math.nan,
            }
            if side == "after" and sum(counts["before"]) > 0:
                change = paired_ratio_difference(
                    tokens["after"], counts["after"], tokens["before"], counts["before"], seed=seed
                )
                row.update(
                    tokens_change=change.estimate, tokens_change_ci_low=change.low, tokens_change_ci_high=change.high
                )
            rows.append(row)
    return pd.DataFrame(rows, columns=ALLOCATION_COLUMNS)


#: The columns of :func:`allocation_by_difficulty` (and, with ``run``, ``before_step`` and ``after_step`` first,
#: of :func:`run_allocation`).
ALLOCATION_COLUMNS = (
    "tier",
    "problem_types",
    "side",
    "tokens",
    "tokens_ci_low",
    "tokens_ci_high",
    "accuracy",
    "accuracy_ci_low",
    "accuracy_ci_high",
    "answered",
    "episodes",
    "tokens_change",
    "tokens_change_ci_low",
    "tokens_change_ci_high",
)


def run_allocation(run_dir: str | Path, label: str | None = None, *, seed: int = 0) -> pd.DataFrame | None:
    """:func:`allocation_by_difficulty` of a training run's first and last held-out evaluations, with ``run``
    (``label``, default the folder's name), ``before_step`` and ``after_step`` columns; ``None`` when the run holds
    held-out episodes of fewer than two steps (or none answered a question)."""
    episodes = load_eval_episodes(run_dir)
    if len(episodes) < 2:
        return None
    steps = sorted(episodes)
    frame = allocation_by_difficulty(episodes[steps[0]], episodes[steps[-1]], seed=seed)
    if frame.empty:
        return None
    frame.insert(0, "after_step", steps[-1])
    frame.insert(0, "before_step", steps[0])
    frame.insert(0, "run", label or Path(run_dir).name)
    return frame


def runs_allocation(folders: Mapping[str, str | Path], *, seed: int = 0) -> pd.DataFrame | None:
    """:func:`run_allocation` of every run folder of ``folders`` (``{label: folder}``, e.g. the Runs tab's chosen
    runs) that has held-out evaluations at two steps, one after another; ``None`` when none has."""
    frames = [f for label, path in folders.items() if (f := run_allocation(path, label, seed=seed)) is not None]
    return pd.concat(frames, ignore_index=True) if frames else None


#: Parts of an optimizer step as the trainer logs them (``timing/<part>_s``, :mod:`training.trainer`), in order.
STEP_PARTS = ("generation", "weight_handoff", "logprobs", "backward")


def step_timing(run_dir: str | Path) -> dict | None:
    """Where a training run's optimizer steps spent their time (``timing/*`` rows of ``metrics.jsonl``).

    Returns:
        ``None`` when the run logged no step times; else ``steps``, ``step_s`` (mean), ``step_s_min_max``,
        ``steps_per_hour`` (3,600 / the mean), ``seconds`` (mean per part of :data:`STEP_PARTS`, and ``other``:
        the optimizer and the rest), ``share`` (each part / the step), ``per_step`` (each step's figures), and,
        when logged, ``tokens_spent_per_step`` with ``generation_tokens_per_s``.
    """
    path = Path(run_dir) / "metrics.jsonl"
    if not path.is_file():
        return None
    rows = [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]
    rows = [r for r in rows if r.get("timing/step_s") is not None]
    if not rows:
        return None

    def mean(key: str) -> float | None:
        values = [float(r[key]) for r in rows if r.get(key) is not None]
        return float(np.mean(values)) if values else None

    step = float(np.mean([r["timing/step_s"] for r in rows]))
    seconds = {p: mean(f"timing/{p}_s") for p in STEP_PARTS}
    seconds = {k: v for k, v in seconds.items() if v is not None}
    seconds["other"] = max(0.0, step - sum(seconds.values()))
    out = {
        "steps": len(rows),
        "step_s": round(step, 1),
        "step_s_min_max": [
            round(min(r["timing/step_s"] for r in rows), 1),
            round(max(r["timing/step_s"] for r in rows), 1),
        ],
        "steps_per_hour": round(3600.0 / step, 2) if step else None,
        "seconds": {k: round(v, 1) for k, v in seconds.items()},
        "share": {k: round(v / step, 3) for k, v in seconds.items()} if step else {},
        "per_step": [
            {"step": int(r["step"]), "step_s": round(float(r["timing/step_s"]), 1)}
            | {p: round(float(r[f"timing/{p}_s"]), 1) for p in STEP_PARTS if r.get(f"timing/{p}_s") is not None}
            for r in rows
        ],
    }
    spent = mean("tokens_spent")
    if spent is not None:
        out["tokens_spent_per_step"] = round(spent, 1)
        if seconds.get("generation"):
            out["generation_tokens_per_s"] = round(spent / seconds["generation"], 2)
    return out


def _missing(x: float | None) -> bool:
    return x is None or (isinstance(x, float) and math.isnan(x))


def _fmt(
    x: float | None,
    lo: float | None,
    hi: float | None,
    digits: int = 3,
    *,
    episodes: float | None = None,
    where: str = "",
) -> str:
    if _missing(x):
        return "-"
    if _missing(lo) or _missing(hi):
        if episodes is None or _missing(episodes):
            return f"{x:.{digits}g} (no interval)"
        few = int(episodes)
        return f"{x:.{digits}g} (no interval: only {few} episode{'' if few == 1 else 's'} with such questions{where})"
    return f"{x:.{digits}g} [{lo:.{digits}g}, {hi:.{digits}g}]"


def markdown(table: pd.DataFrame, *, before_step: int, after_step: int) -> str:
    """The comparison as a Markdown table (the one docs/training.md shows)."""
    head = (
        f"| held-out metric (n = {int(table['n'].max()) if len(table) else 0} episodes) | step {before_step} | "
        f"step {after_step} | change, paired 95% interval | p | changed |\n|---|---|---|---|---|---|\n"
    )
    lines = []
    for r in table.to_dict("records"):
        p = "-" if _missing(r["p_value"]) else f"{r['p_value']:.3g}"
        lines.append(
            f"| {r['label']} | "
            f"{_fmt(r['before'], r['before_ci_low'], r['before_ci_high'], episodes=r.get('before_with'))} | "
            f"{_fmt(r['after'], r['after_ci_low'], r['after_ci_high'], episodes=r.get('after_with'))} | "
            + _fmt(r["change"], r["change_ci_low"], r["change_ci_high"], episodes=r.get("both_with"), where=" in both")
            + f" | {p} | "
            f"{'yes' if r['changed'] else 'no'} |"
        )
    return head + "\n".join(lines) + "\n"


#: Said beside regret wherever a before/after comparison shows it: regret is expected right answers under the run's
#: curve set, so it moves when training changes the model's accuracy at a given number of tokens, whatever the
#: allocation does (the learning experiment's step-50 evaluation: more right answers with fewer tokens, more regret).
REGRET_NOTE = (
    "*Regret* is the oracle's expected right answers minus those of the tokens the model spent, both under the "
    "run's curve set (for the learning experiment, fitted to the untrained model): it measures allocation only while "
    "the model's accuracy at a given number of tokens stays what those curves say. A model trained to answer right "
    "with fewer tokens shows more regret there although more of its answers are right; read it beside the right "
    "answers and the tokens per tier."
)

#: What the before/after table's columns mean, shown under it.
TABLE_NOTES = (
    "*step N*: the mean over the held-out episodes [95% bootstrap interval]; *change*: after minus before, paired by "
    "episode seed, with its paired 95% interval; *changed*: yes when that interval excludes 0; *p*: the two-sided "
    'sign-flip p-value of the paired change of a per-episode mean. A *p* of "-" is no test: the row is a ratio '
    "pooled over the episodes (accuracy, tokens per answered question, cap-hit rate, the per-tier rows: their "
    "interval is a paired bootstrap of the ratio), or fewer than two episodes pair."
)


def run_change_markdown(run_dir: str | Path, label: str | None = None) -> str | None:
    """A training run's first vs last held-out evaluation and its step time, as Markdown (the Runs tab and
    notebook 03 show it), or ``None`` when the run holds held-out episodes of fewer than two steps."""
    episodes = load_eval_episodes(run_dir)
    if len(episodes) < 2:
        return None
    steps = sorted(episodes)
    table = change_table(episodes[steps[0]], episodes[steps[-1]])
    name = label or Path(run_dir).name
    meta = {}
    if (Path(run_dir) / "run.json").is_file():
        meta = json.loads((Path(run_dir) / "run.json").read_text(encoding="utf-8"))
    server = meta.get("rollout_server") if isinstance(meta.get("rollout_server"), dict) else {}
    engine = " ".join(str(server[k]) for k in ("distribution", "engine_version") if server.get(k))
    where = ", ".join(
        str(v)
        for v in (
            meta.get("model"),
            f"generated by {engine} ({server.get('dtype')})" if engine else None,
            f"temperature {meta['eval_temperature']}" if meta.get("eval_temperature") is not None else None,
        )
        if v
    )
    parts = [
        f"**Held-out, before vs after training ({name})**: the same {int(table['n'].max())} held-out episode seeds "
        f"at step {steps[0]} and step {steps[-1]}, paired by episode" + (f" ({where})" if where else "") + ":",
        markdown(table, before_step=steps[0], after_step=steps[-1]),
        TABLE_NOTES,
        REGRET_NOTE,
    ]
    timing = step_timing(run_dir)
    if timing:
        split = ", ".join(f"{k} {v} s" for k, v in timing["seconds"].items())
        parts.append(
            f"Step time over {timing['steps']} steps: {timing['step_s']} s a step ({timing['steps_per_hour']} "
            f"steps/hour): {split}."
        )
    return "\n\n".join(parts)


def power_table(
    records: Sequence[dict],
    *,
    episodes: int | None = None,
    correlations: Sequence[float] = (0.0, 0.5),
    power: float = 0.8,
    alpha: float = 1 - CONFIDENCE,
) -> pd.DataFrame:
    """What a paired before/after comparison of ``episodes`` held-out episodes can detect, from one evaluation
    (the untrained policy's, before a run: the power calculation of a pre-registered experiment).

    For every per-episode measure of :func:`change_table` (right answers, ran dry, unasked, context forfeits,
    regret) and, per difficulty tier, the tokens spent and right answers per episode, it takes the measured mean and
    standard deviation ``sd`` over episodes. The paired difference of two evaluations of the same episodes has
    ``sd_d = sd * sqrt(2 * (1 - rho))`` when both sides share ``sd`` and correlate ``rho`` across episodes (0: the
    conservative bound of unpaired outcomes; greedy replays of the same questions correlate positively), and a
    two-sided test at ``alpha`` detects ``(z_{1-alpha/2} + z_power) * sd_d / sqrt(episodes)`` with ``power``
    (:func:`workbench.stats.detectable_difference`).

    Args:
        records: :func:`training.evaluation.episode_record` dicts of one evaluation.
        episodes: Paired episodes of the planned comparison (default: ``len(records)``).
    Returns:
        One row per measure: ``metric``, ``key`` (tier or ``None``), ``label``, ``mean``, ``sd``, ``n`` (episodes
        measured), ``episodes`` (planned) and ``mde_rho_<rho>`` per correlation.
    Raises:
        ValueError: no records.
    """
    from workbench.stats import detectable_difference

    recs = list(records)
    if not recs:
        raise ValueError("power_table needs the episodes of one held-out evaluation (none given)")
    n_plan = int(episodes or len(recs))
    measures: list[tuple[str, str | None, str, list[float]]] = []
    for metric, label, value in MEAN_METRICS:
        xs = [float(v) for r in recs if (v := value(r)) is not None]
        measures.append((metric, None, label, xs))
    tiers = sorted({t for r in recs for s in _answered(r) if (t := _tier(s))}, key=_tier_order)
    for metric, key, label, value in _tier_measures(recs, tiers):
        measures.append((metric, key, label, [float(v) for r in recs if (v := value(r)) is not None]))
    rows = []
    for metric, key, label, xs in measures:
        if not xs:
            continue
        arr = np.asarray(xs, dtype=float)
        sd = float(arr.std(ddof=1)) if arr.size > 1 else math.nan
        row = {"metric": metric, "key": key, "label": label, "mean": float(arr.mean()), "sd": sd, "n": int(arr.size)}
        row["episodes"] = n_plan
        for rho in correlations:
            sd_d = sd * math.sqrt(2.0 * (1.0 - float(rho)))
            row[f"mde_rho_{rho:g}"] = detectable_difference(sd_d, n_plan, alpha=alpha, power=power)
        rows.append(row)
    return pd.DataFrame(rows)


def power_markdown(table: pd.DataFrame, *, step: int, power: float = 0.8) -> str:
    """:func:`power_table` as a Markdown table."""
    rhos = [c for c in table.columns if c.startswith("mde_rho_")]
    n_plan = int(table["episodes"].iloc[0]) if len(table) else 0
    n_seen = int(table["n"].max()) if len(table) else 0
    head = ["measure (per episode)", f"step {step}: mean", "SD"] + [
        f"detectable change, rho {c.removeprefix('mde_rho_')}" for c in rhos
    ]
    lines = [
        f"Detectable paired change over {n_plan} held-out episodes ({power:.0%} power, two-sided alpha "
        f"{1 - CONFIDENCE:g}), from the SDs measured at step {step} (n = {n_seen}):",
        "",
        "| " + " | ".join(head) + " |",
        "|" + "---|" * len(head),
    ]
    for _, r in table.iterrows():
        cells = [r["label"], f"{r['mean']:.3f}", f"{r['sd']:.3f}"] + [f"{r[c]:.3f}" for c in rhos]
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines)


def main(argv: Sequence[str] | None = None) -> int:
    """``python -m workbench.held_out RUN_DIR [--before S] [--after S] [--power S [--episodes N]] [--json]``;
    returns the exit status."""
    p = argparse.ArgumentParser(prog="python -m workbench.held_out", description=__doc__.splitlines()[0])
    p.add_argument("run_dir", help="a training run folder holding eval_episodes.jsonl (--eval_every)")
    p.add_argument("--before", type=int, default=None, help="step to compare from (default: the first evaluated)")
    p.add_argument("--after", type=int, default=None, help="step to compare to (default: the last evaluated)")
    p.add_argument("--json", action="store_true", help="print JSON (rows, steps, timing) instead of a table")
    p.add_argument(
        "--power",
        type=int,
        default=None,
        metavar="STEP",
        help="instead of a comparison: what a paired comparison can detect, from the SDs of the evaluation at STEP "
        "(e.g. 0, the untrained policy of an --eval_only start)",
    )
    p.add_argument(
        "--episodes", type=int, default=None, help="--power: planned paired episodes (default: those evaluated)"
    )
    args = p.parse_args(argv)
    episodes = load_eval_episodes(args.run_dir)
    if args.power is not None:
        if args.power not in episodes:
            print(
                f"error: --power {args.power}: no held-out evaluation at that step in {args.run_dir} "
                f"(evaluated: {sorted(episodes)}); play one with training.grpo_train --eval_only",
                file=sys.stderr,
            )
            return 2
        table = power_table(episodes[args.power], episodes=args.episodes)
        if args.json:
            print(json.dumps({"step": args.power, "rows": table.to_dict("records")}, indent=2))
        else:
            print(power_markdown(table, step=args.power))
        return 0
    if len(episodes) < 2:
        print(
            f"error: {args.run_dir} holds held-out episodes of {len(episodes)} step(s) ({EVAL_EPISODES_FILE}); "
            "a comparison needs two: train with --eval_every N",
            file=sys.stderr,
        )
        return 2
    steps = sorted(episodes)
    before = steps[0] if args.before is None else args.before
    after = steps[-1] if args.after is None else args.after
    for flag, step in (("--before", before), ("--after", after)):
        if step not in episodes:
            print(f"error: {flag} {step}: no held-out evaluation at that step (evaluated: {steps})", file=sys.stderr)
            return 2
    table = change_table(episodes[before], episodes[after])
    timing = step_timing(args.run_dir)
    if args.json:
        out = {"before_step": before, "after_step": after, "confidence": CONFIDENCE, "rows": table.to_dict("records")}
        print(json.dumps({**out, "timing": timing}, indent=2))
        return 0
    print(markdown(table, before_step=before, after_step=after))
    if timing:
        parts = ", ".join(f"{k} {v} s ({100 * timing['share'].get(k, 0):.0f}%)" for k, v in timing["seconds"].items())
        print(
            f"step time over {timing['steps']} steps: {timing['step_s']} s "
            f"({timing['steps_per_hour']} steps/hour): {parts}"
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
