"""Metrics over run frames: pure functions, DataFrames in, DataFrames (or text) out.

``steps`` is a run folder's ``trajectories.parquet`` and ``episodes`` its ``episodes.parquet``
(schema: :mod:`workbench.runs`). Token counts are in tokens of the episode's tokenizer.
Definitions (per policy):

- ``accuracy``: correct answers / questions served (``sum num_questions``): questions left
  unanswered when a hard-cap episode runs dry count as wrong.
- ``unasked``: questions never asked because the budget ran dry (``num_questions -
  num_answered``), summed; ``unasked_per_episode``: its mean per episode (forfeits: they count as
  wrong in ``accuracy``, and the default reward pays them 0, less than a wrong answer's -0.1).
- ``tokens_per_question``: tokens charged / questions answered (the unasked ones are not in the
  denominator: read it beside ``unasked_per_episode``).
- ``utilisation``: mean over episodes of ``total_spent / total_budget``.
- ``run_dry_rate``: share of episodes that ended with the budget exhausted (``ran_dry``).
- ``reward`` and ``reward_<component>``: mean per episode (components sum to the reward).
- ``acc_per_1k_tokens``: correct answers per 1,000 charged tokens (a policy that forfeits questions
  spends fewer tokens: read it beside ``unasked_per_episode``).
- ``oracle_informed``: the policy reads the difficulty label that sets the simulated solver's own
  success probability (``difficulty_oracle``, ``sim_proportional``, ``sim_greedy``,
  ``oracle_allocation``); an LLM never sees it (missing for runs written before the column).
- ``expected_accuracy``: expected correct answers under the solver curves at the charged
  tokens (``expected_correct``) / questions served; ``regret``: mean over episodes of
  ``oracle_expected_correct - expected_correct`` (expected correct answers lost to allocation).

Uncertainty (:mod:`workbench.stats`): every metric of :data:`CI_METRICS` gets a 95% bootstrap
interval over episodes in ``<metric>_ci_low`` / ``<metric>_ci_high`` (ratios such as accuracy
resample each episode's numerator and denominator together). Policies played on the same seeds
are compared episode by episode in :func:`paired_comparisons` (difference, interval, sign-flip
permutation p-value and its Holm adjustment over the pairs). A run with several budget ratios
(``budget_ratio`` column) or calibration caps (``token_cap``) has one summary row per policy and
condition; :func:`pareto_frontier` marks the rows no other row beats on both accuracy and
tokens per question.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence

import numpy as np
import pandas as pd

from reasoning_env.records import REWARD_COMPONENT_COLUMNS
from workbench import stats

__all__ = [
    "model_free_note",
    "MODEL_BASED",
    "NOT_MODELLED_KINDS",
    "model_free",
    "not_modelled",
    "curve_sensitivity",
    "format_curve_sensitivity",
    "ALPHA",
    "CI_METRICS",
    "COMPARISON_COLUMNS",
    "COMPARISON_METRICS",
    "CONDITION_COLUMNS",
    "SUMMARY_COLUMNS",
    "TIMING_COLUMNS",
    "accuracy_vs_tokens",
    "by_group",
    "conditions",
    "format_comparisons",
    "format_floor",
    "format_power",
    "format_table",
    "indistinguishable",
    "paired_comparisons",
    "pareto_frontier",
    "policy_order",
    "power_of",
    "provenance_line",
    "reward_components",
    "seed_table",
    "spend_curve",
    "summary_table",
]

#: Metrics of ``summary.csv`` that carry a 95% bootstrap interval over episodes.
CI_METRICS = (
    "accuracy",
    "expected_accuracy",
    "unasked_per_episode",
    "tokens_per_question",
    "utilisation",
    "run_dry_rate",
    "reward",
    "acc_per_1k_tokens",
    "regret",
)
#: Episode columns that define a condition of a sweep (one summary row per policy and condition).
CONDITION_COLUMNS = ("budget_ratio", "token_cap")
#: Per-episode metrics compared between policies in :func:`paired_comparisons`.
COMPARISON_METRICS = ("accuracy", "reward", "regret")


#: Columns of ``summary.csv`` in order (then any extra reward components, then timing columns).
def _with_ci(*names: str) -> tuple[str, ...]:
    out: list[str] = []
    for n in names:
        out.append(n)
        if n in CI_METRICS:
            out.extend(stats.ci_columns(n))
    return tuple(out)


SUMMARY_COLUMNS = (
    ("policy", "kind", "oracle_informed", "budget_ratio", "episodes", "questions", "answered", "unasked", "correct")
    + _with_ci(
        "accuracy",
        "expected_accuracy",
        # forfeits beside the two figures that leave them out
        "unasked_per_episode",
        "tokens_per_question",
        "acc_per_1k_tokens",
        "utilisation",
        "run_dry_rate",
        "reward",
    )
    + REWARD_COMPONENT_COLUMNS
    + ("reward_forfeit",)  # the default reward's charge per question never asked (absent under the seed's)
    + _with_ci("regret")
    + (
        "regret_std",
        "on_frontier",
        "mean_total_budget",
        "budget_source",
        "tokenizer_name",
    )
)
#: Columns of ``comparisons.csv`` (:func:`paired_comparisons`).
COMPARISON_COLUMNS = (
    "condition",
    "metric",
    "policy_a",
    "policy_b",
    "episodes",
    "difference",
    "ci_low",
    "ci_high",
    "p_value",
    "p_holm",
    "distinguishable",
    "p_floor",
    "sd",
)
#: Significance level of "told apart": a pair is told apart when its Holm-adjusted p-value is below it.
ALPHA = 1 - stats.CONFIDENCE
#: Columns that measure time and so differ between reruns.
TIMING_COLUMNS = ("wall_s", "latency_s_mean")


def policy_order(frame: pd.DataFrame, preferred: Sequence[str] | None = None) -> list[str]:
    """Policies of ``frame`` in ``preferred`` order, then in order of first appearance."""
    if frame is None or frame.empty or "policy" not in frame:
        return []
    seen = list(dict.fromkeys(frame["policy"].tolist()))
    if not preferred:
        return seen
    return [p for p in preferred if p in seen] + [p for p in seen if p not in preferred]


def _col(df: pd.DataFrame, name: str, default: float = np.nan) -> pd.Series:
    return df[name] if name in df.columns else pd.Series(default, index=df.index, dtype=float)


def conditions(episodes: pd.DataFrame) -> list[str]:
    """The sweep columns (:data:`CONDITION_COLUMNS`) that ``episodes`` holds values for."""
    if episodes is None or episodes.empty:
        return []
    return [c for c in CONDITION_COLUMNS if c in episodes.columns and episodes[c].notna().any()]


def _condition_groups(ep: pd.DataFrame, conds: Sequence[str]) -> list[tuple[tuple, pd.DataFrame]]:
    if not conds:
        return [((), ep)]
    keys = ep[list(conds)].drop_duplicates().sort_values(list(conds))
    out = []
    for _, k in keys.iterrows():
        mask = np.ones(len(ep), dtype=bool)
        for c in conds:
            col = ep[c]
            mask &= (col.isna() if pd.isna(k[c]) else (col == k[c])).to_numpy()
        if mask.any():
            out.append((tuple(k[c] for c in conds), ep[mask]))
    return out


def _interval_row(row: dict, name: str, interval: stats.Interval | None) -> None:
    lo, hi = stats.ci_columns(name)
    row[lo] = np.nan if interval is None else interval.low
    row[hi] = np.nan if interval is None else interval.high


def _safe(fn, *args, **kw) -> stats.Interval | None:
    try:
        return fn(*args, **kw)
    except ValueError:  # an undefined ratio (nothing served or answered) or NaN values
        return None


def summary_table(
    episodes: pd.DataFrame,
    steps: pd.DataFrame | None = None,
    *,
    order: Sequence[str] | None = None,
    decimals: int = 6,
    confidence: float = stats.CONFIDENCE,
    n_resamples: int = stats.N_RESAMPLES,
    seed: int = 0,
) -> pd.DataFrame:
    """One row per policy (and per sweep condition) with the metrics of the module docstring
    (:data:`SUMMARY_COLUMNS`) and their bootstrap intervals over episodes.

    Args:
        episodes: Episode rows (``episodes.parquet``).
        steps: Step rows (``trajectories.parquet``); used for ``kind`` when episodes lack it.
        order: Preferred policy order.
        decimals: Floats are rounded to this many decimals (stable CSVs).
        confidence, n_resamples, seed: Of the bootstrap intervals (:mod:`workbench.stats`;
            deterministic for a given seed).

    Returns:
        The table (empty with the right columns when there are no episodes). ``token_cap`` is
        added after ``budget_ratio`` for a calibration sweep. A mean over episodes (reward,
        utilisation) is NaN, with no interval, when one of its episodes' values is not finite.

    Raises:
        ValueError: ``confidence`` outside (0, 1) or ``n_resamples`` < 100.
    """
    stats.check_bootstrap_arguments(confidence, n_resamples)  # else _safe would drop every interval
    if episodes is None or episodes.empty:
        return pd.DataFrame(columns=list(SUMMARY_COLUMNS))
    rows = []
    comp_cols = [c for c in episodes.columns if c.startswith("reward_")]
    conds = conditions(episodes)
    kw = dict(confidence=confidence, n_resamples=n_resamples, seed=seed)
    for pol in policy_order(episodes, order):
        for key, ep in _condition_groups(episodes[episodes["policy"] == pol], conds):
            questions = int(ep["num_questions"].sum())
            answered = int(ep["num_answered"].sum())
            correct = int(ep["num_correct"].sum())
            spent = float(ep["total_spent"].sum())
            kind = (
                ep["kind"].iloc[0]
                if "kind" in ep.columns
                else (
                    steps.loc[steps["policy"] == pol, "kind"].iloc[0]
                    if steps is not None and "kind" in steps.columns and (steps["policy"] == pol).any()
                    else ""
                )
            )
            exp = _col(ep, "expected_correct")
            regret = _col(ep, "regret")
            row: dict = {"policy": pol, "kind": kind}
            if "oracle_informed" in ep.columns and ep["oracle_informed"].notna().any():
                row["oracle_informed"] = bool(ep["oracle_informed"].fillna(False).astype(bool).any())
            row["budget_ratio"] = float(key[conds.index("budget_ratio")]) if "budget_ratio" in conds else np.nan
            if "token_cap" in conds:
                row["token_cap"] = int(key[conds.index("token_cap")])
            unasked = (ep["num_questions"] - ep["num_answered"]).clip(lower=0).astype(float)
            row.update(
                {
                    "episodes": int(len(ep)),
                    "questions": questions,
                    "answered": answered,
                    "unasked": int(unasked.sum()),
                    "correct": correct,
                }
            )
            row["accuracy"] = correct / questions if questions else np.nan
            _interval_row(row, "accuracy", _safe(stats.ratio_interval, ep["num_correct"], ep["num_questions"], **kw))
            ok_exp = bool(questions) and exp.notna().all()
            row["expected_accuracy"] = float(exp.sum()) / questions if ok_exp else np.nan
            _interval_row(
                row,
                "expected_accuracy",
                _safe(stats.ratio_interval, exp, ep["num_questions"], **kw) if ok_exp else None,
            )
            row["unasked_per_episode"] = float(unasked.mean())
            _interval_row(row, "unasked_per_episode", _safe(stats.mean_interval, unasked, **kw))
            row["tokens_per_question"] = spent / answered if answered else np.nan
            _interval_row(
                row,
                "tokens_per_question",
                _safe(stats.ratio_interval, ep["total_spent"], ep["num_answered"], **kw) if answered else None,
            )
            for metric, column in (("utilisation", "utilisation"), ("reward", "episode_reward")):
                # over every episode counted, or missing: pandas' mean would skip a NaN episode
                # silently, and an infinite one has no interval
                values = ep[column].astype(float)
                finite = bool(np.isfinite(values).all())
                row[metric] = float(values.mean()) if finite else np.nan
                _interval_row(row, metric, _safe(stats.mean_interval, values, **kw) if finite else None)
            row["run_dry_rate"] = float(ep["ran_dry"].astype(float).mean())
            _interval_row(row, "run_dry_rate", _safe(stats.mean_interval, ep["ran_dry"].astype(float), **kw))
            for c in comp_cols:
                row[c] = float(ep[c].mean())
            row["acc_per_1k_tokens"] = 1000.0 * correct / spent if spent else np.nan
            _interval_row(
                row,
                "acc_per_1k_tokens",
                _safe(stats.ratio_interval, 1000.0 * ep["num_correct"], ep["total_spent"], **kw) if spent else None,
            )
            ok_regret = regret.notna().all()
            row["regret"] = float(regret.mean()) if ok_regret else np.nan
            _interval_row(row, "regret", _safe(stats.mean_interval, regret, **kw) if ok_regret else None)
            row.update(
                {
                    "regret_std": float(regret.std(ddof=0)) if ok_regret else np.nan,
                    "mean_total_budget": float(ep["total_budget"].mean()),
                    "budget_source": ",".join(sorted(set(ep["budget_source"].astype(str)))),
                    "tokenizer_name": ",".join(sorted(set(ep["tokenizer_name"].astype(str)))),
                }
            )
            rows.append(row)
    df = pd.DataFrame(rows)
    df["on_frontier"] = pareto_frontier(df)
    cols = [c for c in SUMMARY_COLUMNS if c in df.columns]
    if "token_cap" in df.columns:
        cols.insert(cols.index("budget_ratio") + 1, "token_cap")
    cols += [c for c in df.columns if c not in cols]
    df = df[cols]
    floats = df.select_dtypes(include="float").columns
    df[floats] = df[floats].round(decimals)
    return df


def pareto_frontier(
    summary: pd.DataFrame, *, accuracy: str = "accuracy", cost: str = "tokens_per_question"
) -> pd.Series:
    """Whether each row is on the Pareto frontier of accuracy against tokens per question: no
    other row has at least its accuracy with at most its tokens, one of them strictly (rows with
    a missing value are not on it). Budget-baseline, simulated, oracle and LLM rows all compete."""
    if summary is None or summary.empty or accuracy not in summary or cost not in summary:
        return pd.Series(False, index=getattr(summary, "index", None), dtype=bool)
    a = summary[accuracy].to_numpy(dtype=float)
    c = summary[cost].to_numpy(dtype=float)
    ok = ~(np.isnan(a) | np.isnan(c))
    out = np.zeros(len(summary), dtype=bool)
    for i in np.flatnonzero(ok):
        dominated = ok & (a >= a[i]) & (c <= c[i]) & ((a > a[i]) | (c < c[i]))
        out[i] = not dominated.any()
    return pd.Series(out, index=summary.index, dtype=bool)


def _per_episode(ep: pd.DataFrame, metric: str) -> pd.Series:
    if metric == "accuracy":
        return ep["num_correct"] / ep["num_questions"].where(ep["num_questions"] > 0, np.nan)
    if metric == "reward":
        return ep["episode_reward"]
    return _col(ep, metric)


def _condition_label(conds: Sequence[str], key: tuple) -> str:
    """``"budget_ratio=2"`` (empty for no condition; a missing value, e.g. the ratio of a fixed
    budget, is left out)."""
    parts = []
    for c, v in zip(conds, key):
        if pd.isna(v):
            continue
        parts.append(f"{c}={v:g}" if isinstance(v, (int, float, np.floating, np.integer)) else f"{c}={v}")
    return ", ".join(parts)


def paired_comparisons(
    episodes: pd.DataFrame,
    *,
    metrics: Sequence[str] = COMPARISON_METRICS,
    order: Sequence[str] | None = None,
    on: str = "episode",
    confidence: float = stats.CONFIDENCE,
    n_resamples: int = stats.N_RESAMPLES,
    seed: int = 0,
) -> pd.DataFrame:
    """Every pair of policies compared on the episodes they both played (same episode index, so
    the same seed and questions; ``on="seed"`` pairs by episode seed instead, e.g. across runs),
    per sweep condition and metric: ``a - b`` with its paired
    bootstrap interval, the sign-flip permutation p-value (:func:`workbench.stats.paired_difference`)
    and the Holm-adjusted p-value over the pairs of that condition and metric.

    Per-episode metrics: ``accuracy`` (correct / questions), ``reward`` (episode reward),
    ``regret`` (expected correct answers lost to allocation; pairs without it are skipped).

    The p-value is exact (all ``2**n`` sign flips) up to :data:`workbench.stats.EXACT_PAIRS`
    common episodes; above, the random flips are :func:`workbench.stats.flips_for` the number of
    pairs ``m`` (at least ``n_resamples``), so the floor ``1 / (flips + 1)`` lies 100 times below
    Holm's strictest threshold ``0.05 / m``.

    Returns:
        Columns :data:`COMPARISON_COLUMNS`; ``distinguishable`` ("told apart") is True when the
        Holm-adjusted p-value is below :data:`ALPHA` (the one criterion of every table; the 95%
        interval is unadjusted and may exclude 0 for a pair that is not told apart);
        ``p_floor`` is the smallest p-value the test could give; ``sd`` the standard deviation of
        the per-episode differences.
    """
    if episodes is None or episodes.empty:
        return pd.DataFrame(columns=list(COMPARISON_COLUMNS))
    conds = conditions(episodes)
    pols = policy_order(episodes, order)
    n_flips = stats.flips_for(len(pols) * (len(pols) - 1) // 2, ALPHA, at_least=n_resamples)
    rows = []
    for key, ep in _condition_groups(episodes, conds):
        label = _condition_label(conds, key)
        # each policy's episodes once per condition (first row per pairing key), not once per pair and metric:
        # with 6 runs of 7 policies that was ~3,000 filtered, de-duplicated and re-indexed frames
        groups = ep.groupby("policy", sort=False, observed=True)
        by_policy = {pol: part.drop_duplicates(on).set_index(on) for pol, part in groups}
        for metric in metrics:
            values = {pol: _per_episode(frame, metric) for pol, frame in by_policy.items()}
            block = []
            for ia, a in enumerate(pols):
                if a not in values:
                    continue
                for b in pols[ia + 1 :]:
                    if b not in values:
                        continue
                    common = values[a].index.intersection(values[b].index)
                    if len(common) == 0:
                        continue
                    va = values[a].loc[common]
                    vb = values[b].loc[common]
                    keep = va.notna() & vb.notna()
                    if not keep.any():
                        continue
                    cmp = stats.paired_difference(
                        va[keep].to_numpy(),
                        vb[keep].to_numpy(),
                        confidence=confidence,
                        n_resamples=n_resamples,
                        seed=seed,
                        n_flips=n_flips,
                    )
                    d = cmp.difference
                    block.append(
                        dict(
                            condition=label,
                            metric=metric,
                            policy_a=a,
                            policy_b=b,
                            episodes=int(keep.sum()),
                            difference=d.estimate,
                            ci_low=d.low,
                            ci_high=d.high,
                            p_value=cmp.p_value,
                            p_floor=cmp.p_floor,
                            sd=cmp.sd,
                        )
                    )
            if block:
                adj = stats.holm_adjust(np.array([r["p_value"] for r in block], dtype=float))
                for r, ph in zip(block, adj):
                    r["p_holm"] = float(ph)
                    r["distinguishable"] = bool(not math.isnan(ph) and ph < ALPHA)
                rows.extend(block)
    df = pd.DataFrame(rows, columns=list(COMPARISON_COLUMNS))
    return df


def indistinguishable(comparisons: pd.DataFrame, summary: pd.DataFrame, *, metric: str = "accuracy") -> list[dict]:
    """Per sweep condition: the best policy by ``metric`` (highest accuracy or reward, lowest
    regret) and the policies the paired comparison cannot tell apart from it.

    "Told apart" is the Holm-adjusted p-value below :data:`ALPHA` (``distinguishable`` of
    :func:`paired_comparisons`).

    Returns:
        ``[{"condition", "metric", "best", "tied": [names], "separated": [names], "differences": [...],
        "pairs", "p_floor", "power"}]``; ``differences`` holds one dict per pair that includes the
        best policy, oriented best minus other: ``{"other", "difference", "ci_low", "ci_high",
        "p_value", "p_holm", "distinguishable", "episodes", "sd"}`` (the interval's bounds swapped
        where the pair was stored the other way round); ``pairs`` is the number of pairs Holm
        adjusts over, ``p_floor`` the largest floor of their p-values, and ``power`` the
        :func:`power_of` the best against the runner-up (``None`` without one).
    """
    if comparisons is None or comparisons.empty or summary is None or summary.empty or metric not in summary:
        return []
    out = []
    for label, cmp in comparisons[comparisons["metric"] == metric].groupby("condition", sort=False):
        pols = set(cmp["policy_a"]) | set(cmp["policy_b"])
        sub = summary[summary["policy"].isin(pols)]
        for c in conditions(summary):
            for part in str(label).split(", "):
                if part.startswith(c + "="):
                    sub = sub[np.isclose(sub[c].astype(float), float(part.split("=", 1)[1]))]
        sub = sub.dropna(subset=[metric])
        if sub.empty:
            continue
        best = sub.sort_values(metric, ascending=(metric == "regret")).iloc[0]["policy"]
        tied, separated, differences = [], [], []
        for _, r in cmp.iterrows():
            if best not in (r["policy_a"], r["policy_b"]):
                continue
            sign = 1.0 if r["policy_a"] == best else -1.0
            other = r["policy_b"] if sign > 0 else r["policy_a"]
            (separated if r["distinguishable"] else tied).append(other)
            lo, hi = sorted((sign * r["ci_low"], sign * r["ci_high"]))
            differences.append(
                {
                    "other": other,
                    "difference": sign * r["difference"],
                    "ci_low": lo,
                    "ci_high": hi,
                    "p_value": r["p_value"],
                    "p_holm": r["p_holm"],
                    "distinguishable": bool(r["distinguishable"]),
                    "episodes": int(r["episodes"]),
                    "sd": float(r["sd"]) if "sd" in r else np.nan,
                }
            )
        ranked = sub.sort_values(metric, ascending=(metric == "regret"))["policy"].tolist()
        runner_up = next((p for p in ranked[1:] if any(d["other"] == p for d in differences)), None)
        power = None
        if runner_up is not None:
            d = next(d for d in differences if d["other"] == runner_up)
            power = power_of(d["difference"], d["sd"], d["episodes"], pairs=len(cmp))
            power["other"] = runner_up
        floors = cmp["p_floor"].dropna() if "p_floor" in cmp else pd.Series(dtype=float)
        out.append(
            {
                "condition": label,
                "metric": metric,
                "best": best,
                "tied": tied,
                "separated": separated,
                "differences": differences,
                "pairs": int(len(cmp)),
                "p_floor": float(floors.max()) if len(floors) else np.nan,
                "power": power,
            }
        )
    return out


def power_of(difference: float, sd: float, episodes: int, *, pairs: int = 1, power: float = 0.8) -> dict:
    """What a paired comparison of ``episodes`` episodes could detect (normal approximation,
    :func:`workbench.stats.detectable_difference` / :func:`~workbench.stats.episodes_to_detect`),
    at the unadjusted level :data:`ALPHA` and at Holm's strictest level ``ALPHA / pairs`` (the
    Bonferroni bound: the level the pair must clear when its p-value is the smallest).

    Returns:
        ``{"difference", "sd", "episodes", "pairs", "power", "mde", "mde_holm", "needed", "needed_holm"}``:
        ``mde`` the smallest true difference detected with ``power``; ``needed`` the paired episodes
        that would detect the observed ``difference`` (inf when it is 0).
    """
    holm_alpha = ALPHA / max(1, int(pairs))
    return {
        "difference": float(difference),
        "sd": float(sd),
        "episodes": int(episodes),
        "pairs": int(pairs),
        "power": power,
        "mde": stats.detectable_difference(sd, episodes, alpha=ALPHA, power=power),
        "mde_holm": stats.detectable_difference(sd, episodes, alpha=holm_alpha, power=power),
        "needed": stats.episodes_to_detect(difference, sd, alpha=ALPHA, power=power),
        "needed_holm": stats.episodes_to_detect(difference, sd, alpha=holm_alpha, power=power),
    }


def _count(v: float) -> str:
    if math.isnan(v):
        return "?"
    return "never (no difference observed)" if math.isinf(v) else f"{v:,.0f}"


def format_power(item: dict) -> str:
    """The power line of one :func:`indistinguishable` item (best vs runner-up), or ``""``."""
    pw = item.get("power")
    if not pw or math.isnan(pw["sd"]):
        return ""
    if pw["sd"] == 0:
        return (
            f"power: {item['best']} - {pw['other']} differs by the same {pw['difference']:+.3f} on every one of "
            f"{pw['episodes']} episodes (paired SD 0)"
        )
    return (
        f"power ({item['best']} vs runner-up {pw['other']}, {pw['episodes']} paired episodes, paired SD "
        f"{pw['sd']:.3g}): smallest difference detectable with 80% power {pw['mde']:.3g} at p < {ALPHA:g}, "
        f"{pw['mde_holm']:.3g} after Holm over {pw['pairs']} pairs; the observed {pw['difference']:+.3g} would "
        f"need about {_count(pw['needed'])} episodes ({_count(pw['needed_holm'])} after Holm)"
    )


def format_floor(item: dict) -> str:
    """How low the item's p-values could go (exact enumeration or random flips)."""
    f = item.get("p_floor")
    if f is None or (isinstance(f, float) and math.isnan(f)):
        return ""
    n = max((d["episodes"] for d in item["differences"]), default=0)
    how = f"exact over all 2^{n} sign flips" if n <= stats.EXACT_PAIRS else f"{round(1 / f) - 1:,} random sign flips"
    return (
        f"p-values: {how}, floor {f:.2g} (Holm's strictest threshold {ALPHA / max(1, item['pairs']):.2g} over "
        f"{item['pairs']} pairs)"
    )


def seed_table(episodes: pd.DataFrame, *, order: Sequence[str] | None = None) -> pd.DataFrame:
    """Per evaluation seed (``base_seed``), sweep condition and policy: accuracy, mean episode
    reward, regret, and the policy's rank by reward among that seed's policies (1 = best): how
    much a single-seed result would have moved. Empty unless the run has several seeds."""
    cols = ["base_seed", *CONDITION_COLUMNS, "policy", "episodes", "accuracy", "reward", "regret", "reward_rank"]
    if episodes is None or episodes.empty or "base_seed" not in episodes or episodes["base_seed"].nunique() < 2:
        return pd.DataFrame(columns=cols)
    conds = conditions(episodes)
    rows = []
    for s, eps in episodes.groupby("base_seed", sort=True):
        for key, ep in _condition_groups(eps, conds):
            block = []
            for pol in policy_order(ep, order):
                e = ep[ep["policy"] == pol]
                reg = _col(e, "regret")
                block.append(
                    {
                        "base_seed": int(s),
                        **dict(zip(conds, key)),
                        "policy": pol,
                        "episodes": len(e),
                        "accuracy": float(e["num_correct"].sum() / e["num_questions"].sum()),
                        "reward": float(e["episode_reward"].mean()),
                        "regret": float(reg.mean()) if reg.notna().all() else np.nan,
                    }
                )
            ranks = pd.Series([b["reward"] for b in block]).rank(ascending=False, method="min").astype(int)
            for b, r in zip(block, ranks):
                b["reward_rank"] = int(r)
            rows.extend(block)
    df = pd.DataFrame(rows)
    return df[[c for c in cols if c in df.columns]]


def spend_curve(steps: pd.DataFrame) -> pd.DataFrame:
    """Mean share of the budget spent after each question, per policy.

    Returns:
        Columns ``policy``, ``question`` (1-based), ``spent_fraction`` (mean over episodes of
        cumulative charged tokens / budget; episodes that ended earlier keep their final value),
        ``episodes``.
    """
    if steps is None or steps.empty:
        return pd.DataFrame(columns=["policy", "question", "spent_fraction", "episodes"])
    s = steps.copy()
    s["spent_after"] = (s["spent_before"] + s["tokens"]) / s["total_budget"].where(s["total_budget"] > 0, np.nan)
    out = []
    for pol in policy_order(s):
        ps = s[s["policy"] == pol]
        n_q = int(ps["num_questions"].max())
        wide = ps.pivot_table(index="episode", columns="step", values="spent_after", aggfunc="last")
        wide = wide.reindex(columns=range(n_q)).ffill(axis=1)
        for q in range(n_q):
            out.append(
                {
                    "policy": pol,
                    "question": q + 1,
                    "spent_fraction": float(wide[q].mean()),
                    "episodes": int(wide[q].notna().sum()),
                }
            )
    return pd.DataFrame(out)


def by_group(steps: pd.DataFrame, by: str) -> pd.DataFrame:
    """Mean charged tokens and accuracy per policy and ``by`` (e.g. ``problem_type``, ``difficulty``).

    Missing ``by`` values are labelled ``"n/a"``.

    Returns:
        Columns ``policy``, ``by`` value (as a string), ``tokens`` (mean), ``accuracy`` (of
        answered questions), ``n`` (steps).
    """
    if steps is None or steps.empty:
        return pd.DataFrame(columns=["policy", by, "tokens", "accuracy", "n"])
    s = steps.copy()
    if by == "difficulty":
        s[by] = s[by].map(lambda v: "n/a" if v is None or (isinstance(v, float) and math.isnan(v)) else str(int(v)))
    else:
        s[by] = s[by].fillna("n/a").astype(str)
    g = (
        s.groupby(["policy", by], sort=True)
        .agg(tokens=("tokens", "mean"), accuracy=("correct", "mean"), n=("tokens", "size"))
        .reset_index()
    )
    order = {p: i for i, p in enumerate(policy_order(steps))}
    g["_o"] = g["policy"].map(order)
    return g.sort_values(["_o", by]).drop(columns="_o").reset_index(drop=True)


def accuracy_vs_tokens(steps: pd.DataFrame, bins: Iterable[float] | None = None) -> pd.DataFrame:
    """Accuracy of answered questions by charged-token bin, per policy.

    Args:
        bins: Bin edges in tokens (default: powers of two from 8 to 8192).

    Returns:
        Columns ``policy``, ``tokens_mid`` (geometric bin centre), ``accuracy``,
        ``expected`` (mean ``expected_correct`` if present), ``n``.
    """
    edges = np.array(list(bins) if bins is not None else [0] + [2.0**k for k in range(3, 14)] + [np.inf], dtype=float)
    if steps is None or steps.empty:
        return pd.DataFrame(columns=["policy", "tokens_mid", "accuracy", "expected", "n"])
    s = steps.copy()
    s["bin"] = pd.cut(s["tokens"], edges, right=False, labels=False)
    agg = {"accuracy": ("correct", "mean"), "n": ("correct", "size")}
    if "expected_correct" in s.columns:
        agg["expected"] = ("expected_correct", "mean")
    g = s.groupby(["policy", "bin"]).agg(**agg).reset_index()
    lo = edges[g["bin"].astype(int)]
    hi = edges[g["bin"].astype(int) + 1]
    hi = np.where(np.isinf(hi), lo * 2, hi)
    g["tokens_mid"] = np.sqrt(np.maximum(lo, 1) * hi)
    if "expected" not in g.columns:
        g["expected"] = np.nan
    order = {p: i for i, p in enumerate(policy_order(steps))}
    g["_o"] = g["policy"].map(order)
    return g.sort_values(["_o", "tokens_mid"])[["policy", "tokens_mid", "accuracy", "expected", "n"]].reset_index(
        drop=True
    )


def reward_components(episodes: pd.DataFrame) -> pd.DataFrame:
    """Mean per-episode reward components per policy, long form.

    Returns:
        Columns ``policy``, ``component`` (without the ``reward_`` prefix), ``value``.
    """
    if episodes is None or episodes.empty:
        return pd.DataFrame(columns=["policy", "component", "value"])
    comps = [c for c in episodes.columns if c.startswith("reward_")]
    out = []
    for pol in policy_order(episodes):
        ep = episodes[episodes["policy"] == pol]
        for c in comps:
            out.append({"policy": pol, "component": c[len("reward_") :], "value": float(ep[c].mean())})
    return pd.DataFrame(out)


#: Policy kinds whose answers the solver curves do not model (a person in Play, a real model).
NOT_MODELLED_KINDS = ("human", "llm")
#: Summary figures computed from the solver curves at the tokens spent, not from the answers.
MODEL_BASED = ("expected_accuracy", "regret")


def not_modelled(summary: pd.DataFrame) -> pd.Series:
    """Rows whose policy is a person or a real model (:data:`NOT_MODELLED_KINDS`, or the Play tab's ``human``
    policy name)."""
    kind = summary["kind"].astype(str) if "kind" in summary else pd.Series("", index=summary.index)
    name = summary["policy"].astype(str).str.rsplit(":", n=1).str[-1] if "policy" in summary else kind
    return kind.isin(NOT_MODELLED_KINDS) | (name == "human")


def model_free(summary: pd.DataFrame) -> tuple[pd.DataFrame, list[str]]:
    """The summary as shown: the curve-based figures (:data:`MODEL_BASED`, with their intervals) blank (NaN) in
    the rows of a person or a real model, whose answers the curves do not describe; and the policies blanked.
    ``summary.csv`` keeps the values."""
    blank = not_modelled(summary)
    if not blank.any():
        return summary, []
    shown = summary.copy()
    for metric in MODEL_BASED:
        for col in (metric, *stats.ci_columns(metric)):
            if col in shown:
                shown[col] = shown[col].astype(float).where(~blank)
    return shown, sorted(set(map(str, summary.loc[blank, "policy"])))


def model_free_note(policies: Sequence[str]) -> str:
    """The sentence beside a table whose :func:`model_free` rows are blank."""
    return (
        f"exp_acc and regret are blank for {', '.join(policies)}: a real model's (or a person's) answers are not "
        "the solver curves', so their expectation at its tokens describes neither; read its accuracy (summary.csv "
        "keeps the curve-based values; the benchmark gives a real model's regret against curves calibrated to it)."
    )


_TABLE_COLS = (
    ("policy", "policy", "{}"),
    ("budget_ratio", "ratio", "{:g}"),
    ("token_cap", "cap", "{:.0f}"),
    ("accuracy", "acc", "{:.3f}"),
    ("expected_accuracy", "exp_acc", "{:.3f}"),
    ("unasked_per_episode", "unasked/ep", "{:.2f}"),
    ("tokens_per_question", "tok/q", "{:.0f}"),
    ("acc_per_1k_tokens", "acc/1k", "{:.2f}"),
    ("utilisation", "util", "{:.2f}"),
    ("run_dry_rate", "dry", "{:.2f}"),
    ("reward", "reward", "{:+.3f}"),
    ("regret", "regret", "{:.3f}"),
)
#: Interval formats of the terminal table (the line under each row).
_TABLE_CI = {
    "accuracy": "{:.2f}",
    "expected_accuracy": "{:.2f}",
    "unasked_per_episode": "{:.2f}",
    "tokens_per_question": "{:.0f}",
    "acc_per_1k_tokens": "{:.2f}",
    "utilisation": "{:.2f}",
    "run_dry_rate": "{:.2f}",
    "reward": "{:+.2f}",
    "regret": "{:.2f}",
}
_COMPONENT_COLS = (
    ("policy", "policy", "{}"),
    ("budget_ratio", "ratio", "{:g}"),
    ("token_cap", "cap", "{:.0f}"),
    ("reward", "reward", "{:+.3f}"),
    ("reward_correctness", "correct", "{:+.3f}"),
    ("reward_efficiency_bonus", "effic", "{:+.3f}"),
    ("reward_cost_penalty", "cost", "{:+.3f}"),
    ("reward_overspend_penalty", "oversp", "{:+.3f}"),
    ("reward_episode_bonus", "ep_bonus", "{:+.3f}"),
    ("reward_forfeit", "forfeit", "{:+.3f}"),  # the default reward's charge per question never asked
)
#: Marker after the name of an oracle-informed policy in the terminal table.
INFORMED_MARK = " (oracle-informed)"


def _fmt(v, fmt: str) -> str:
    if v is None or (isinstance(v, float) and math.isnan(v)):
        return "-"
    return fmt.format(v)


def _policy_label(r: pd.Series) -> str:
    informed = r.get("oracle_informed")
    return str(r["policy"]) + (INFORMED_MARK if isinstance(informed, (bool, np.bool_)) and informed else "")


def _layout(heads: list[str], lines: list[list[str]]) -> list[str]:
    widths = [max(len(h), *(len(c[i]) for c in lines)) for i, h in enumerate(heads)]

    def join(cells: list[str]) -> str:
        return "  ".join(v.ljust(w) if i == 0 else v.rjust(w) for i, (v, w) in enumerate(zip(cells, widths)))

    return [join(heads), "  ".join("-" * w for w in widths)] + [join(c) for c in lines]


def format_table(summary: pd.DataFrame) -> str:
    """The summary as fixed-width text tables for the terminal.

    The first table has one line per policy (and per budget ratio or cap of a sweep) and, under
    it, a ``95% CI`` line with the 95% bootstrap interval over episodes of every number: accuracy,
    expected accuracy under the solver curves, questions never asked per episode (forfeits, beside
    the two figures they flatter: tokens per answered question and accuracy per 1k tokens),
    utilisation, run-dry rate, mean episode reward, regret vs the oracle. Oracle-informed policies
    (they read the difficulty label that sets the simulated solver's success probability) carry
    ``(oracle-informed)`` after their name. The second table holds the reward components (means per
    episode, summing to the reward; ``oversp`` only when non-zero, ``forfeit`` when the reward pays it).
    """
    if summary is None or summary.empty:
        return "(no episodes)"
    summary, blanked = model_free(summary)
    drop = set()
    if "budget_ratio" in summary.columns and summary["budget_ratio"].nunique(dropna=True) < 2:
        drop.add("budget_ratio")
    if (
        "reward_overspend_penalty" in summary.columns
        and not summary["reward_overspend_penalty"].fillna(0).abs().gt(0).any()
    ):
        drop.add("reward_overspend_penalty")
    cols = [c for c in _TABLE_COLS if c[0] in summary.columns and c[0] not in drop]
    heads = [h for _k, h, _f in cols]
    lines: list[list[str]] = []
    for _, r in summary.iterrows():
        lines.append([_policy_label(r)] + [_fmt(r[k], f) for k, _h, f in cols[1:]])
        ci = ["  95% CI"]
        for key, _h, _f in cols[1:]:
            lo, hi = stats.ci_columns(key)
            f = _TABLE_CI.get(key)
            ci.append(
                ""
                if f is None or lo not in summary.columns or pd.isna(r[lo])
                else f"[{f.format(r[lo])}, {f.format(r[hi])}]"
            )
        lines.append(ci)
    out = _layout(heads, lines)
    comp = [c for c in _COMPONENT_COLS if c[0] in summary.columns and c[0] not in drop]
    if len(comp) > 2:
        out += ["", "reward components (mean per episode; they sum to reward, whose interval is above):"]
        out += _layout(
            [h for _k, h, _f in comp],
            [[str(r["policy"])] + [_fmt(r[k], f) for k, _h, f in comp[1:]] for _, r in summary.iterrows()],
        )
    if "oracle_informed" in summary.columns and summary["oracle_informed"].fillna(False).astype(bool).any():
        out += [
            "",
            "(oracle-informed): the policy reads the difficulty label that sets the simulated solver's own success "
            "probability, which an LLM never sees; the *_blind variants allocate from problem type and text "
            "length only.",
        ]
    if blanked:
        out += ["", model_free_note(blanked)]
    return "\n".join(out)


def provenance_line(provenance: dict | None) -> str:
    """One line naming where a table's numbers come from, from ``run.json``'s ``provenance``
    (:func:`workbench.evaluation.writer.provenance`): who answered (the simulated solver with its
    curve set, or a model) and which questions (builtin stand-ins or real data). ``""`` when the run
    has no provenance record."""
    prov = provenance or {}
    if not prov:
        return ""
    parts = []
    if prov.get("simulated_policies"):
        parts.append(f"simulated solver for {', '.join(map(str, prov['simulated_policies']))}")
    for name, line in (prov.get("real_models") or {}).items():
        parts.append(f"{name}: {line}")
    answers = "; ".join(parts) or "answers: see the run"
    curves = prov.get("curves")
    data = []
    if prov.get("builtin_sources"):
        data.append(f"builtin stand-in questions ({', '.join(map(str, prov['builtin_sources']))})")
    if prov.get("real_sources"):
        data.append(f"real data ({', '.join(map(str, prov['real_sources']))})")
    unl = prov.get("unlabelled_questions")
    return (
        f"Provenance: {answers}"
        + (f"; solver curves: {curves}" if curves else "")
        + (f"; questions: {' and '.join(data)}" if data else "")
        + (
            f"; {unl['unlabelled']} of {unl['questions']} questions have no difficulty (one solver curve per type)"
            if unl
            else ""
        )
        + "."
    )


def format_comparisons(
    comparisons: pd.DataFrame, summary: pd.DataFrame, *, metrics: Sequence[str] = ("accuracy", "reward")
) -> str:
    """Paired comparisons as text: per condition and metric, the best policy, the policies that
    cannot be told apart from it (Holm-adjusted p >= 0.05: the one criterion), its difference to
    each (``[n=1: no interval], no p-value`` where the pair has too few common episodes), the
    floor of the p-values and the power line of best vs runner-up."""
    if comparisons is None or comparisons.empty:
        return "paired comparison: fewer than two policies with common episodes"
    lines = []
    for metric in metrics:
        for item in indistinguishable(comparisons, summary, metric=metric):
            where = f" ({item['condition']})" if item["condition"] else ""
            tied = ", ".join(item["tied"]) or "none"
            lines.append(f"{metric}{where}: best {item['best']}; not told apart from it (Holm p >= {ALPHA:g}): {tied}")
            for d in item["differences"]:
                # too few common episodes (n=1) give no interval and no p-value: say so, as
                # stats.Interval does, instead of printing NaN bounds
                interval = (
                    f"[n={d['episodes']}: no interval]"
                    if math.isnan(d["ci_low"])
                    else f"[{d['ci_low']:+.3f}, {d['ci_high']:+.3f}]"
                )
                p = "no p-value" if math.isnan(d["p_value"]) else f"p = {d['p_value']:.3g} (Holm {d['p_holm']:.3g})"
                lines.append(
                    f"  {item['best']} - {d['other']}: {d['difference']:+.3f} {interval}, {p}"
                    f"{'' if d['distinguishable'] else '  <- not told apart'}"
                )
            for extra in (format_floor(item), format_power(item)):
                if extra:
                    lines.append("  " + extra)
    return "\n".join(lines)


def _told_apart_order(comparisons: pd.DataFrame, policies: Sequence[str], metric: str) -> dict[tuple[str, str], int]:
    """``(a, b) -> +1`` when ``a`` beats ``b`` and the pair is told apart (Holm), ``-1`` the other way, over the
    pairs of ``policies`` (a < b in ``policies``' order)."""
    out: dict[tuple[str, str], int] = {}
    if comparisons is None or comparisons.empty:
        return out
    rows = comparisons[(comparisons["metric"] == metric) & comparisons["distinguishable"].astype(bool)]
    index = {p: i for i, p in enumerate(policies)}
    for _, r in rows.iterrows():
        a, b, diff = str(r["policy_a"]), str(r["policy_b"]), float(r["difference"])
        if a not in index or b not in index or diff == 0:
            continue
        if index[a] > index[b]:
            a, b, diff = b, a, -diff
        out[(a, b)] = 1 if diff > 0 else -1
    return out


def curve_sensitivity(
    runs: Mapping[str, tuple[pd.DataFrame, pd.DataFrame]], policies: Sequence[str], *, metric: str = "reward"
) -> dict:
    """Does a ranking of policies survive another set of solver curves, on the same episodes?

    Args:
        runs: curve-set label -> ``(summary, comparisons)`` of the same episodes played under those curves (the
            first is the reference).
        policies: The policies ranked.

    Returns:
        ``{"by", "rankings": {label: [{"policy", "value", "ci_low", "ci_high"}, ...] best first}, "verdicts":
        {label: {"survives", "undetermined", "reversed", "ties_reordered", "told_apart_pairs"}}}``: a ranking
        **changes** only when a pair told apart (Holm p < 0.05) under both sets is ordered the other way
        (``reversed``); a different order among pairs not told apart under one of them is a reordering of ties
        (``ties_reordered``), not a change; when no pair is told apart under the other set it ranks nothing
        (``undetermined``): there is no ranking there to survive or change.
    """
    labels = list(runs)
    rankings: dict[str, list[dict]] = {}
    orders: dict[str, dict[tuple[str, str], int]] = {}
    for label, (summary, comparisons) in runs.items():
        rows = summary[summary["policy"].isin(policies)].sort_values(metric, ascending=False)
        lo, hi = stats.ci_columns(metric)
        rankings[label] = [
            {
                "policy": str(r["policy"]),
                "value": float(r[metric]),
                "ci_low": None if pd.isna(r.get(lo)) else float(r[lo]),
                "ci_high": None if pd.isna(r.get(hi)) else float(r[hi]),
            }
            for _, r in rows.iterrows()
        ]
        orders[label] = _told_apart_order(comparisons, policies, metric)
    first = labels[0]
    verdicts = {}
    for label in labels[1:]:
        reversed_ = [list(pair) for pair, sign in orders[first].items() if orders[label].get(pair, sign) == -sign]
        same_order = [r["policy"] for r in rankings[label]] == [r["policy"] for r in rankings[first]]
        verdicts[label] = {
            "survives": not reversed_ and bool(orders[label]),
            "undetermined": not reversed_ and not orders[label],
            "reversed": reversed_,
            "ties_reordered": not same_order and not reversed_,
            "told_apart_pairs": {first: len(orders[first]), label: len(orders[label])},
        }
    return {
        "by": f"mean episode {metric}, 95% bootstrap intervals; told apart: Holm p < {ALPHA:g}",
        "rankings": rankings,
        "verdicts": verdicts,
    }


def format_curve_sensitivity(result: dict) -> str:
    """:func:`curve_sensitivity` as text: each set's ranking with intervals, then each verdict in words."""
    lines = [f"curve sensitivity (same episodes; by {result['by']}):"]
    for label, ranking in result["rankings"].items():
        cells = [
            f"{r['policy']} {r['value']:+.3f}"
            + ("" if r["ci_low"] is None else f" [{r['ci_low']:+.2f}, {r['ci_high']:+.2f}]")
            for r in ranking
        ]
        lines.append(f"  {label}: " + " > ".join(cells))
    first = next(iter(result["rankings"]))
    for label, v in result["verdicts"].items():
        pairs = v["told_apart_pairs"]
        if v["reversed"]:
            flips = ", ".join(f"{a} vs {b}" for a, b in v["reversed"])
            word = f"the ranking changes: told apart under both, ordered the other way: {flips}"
        elif v.get("undetermined"):
            word = (
                f"undetermined: no pair is told apart under {label}, so it ranks nothing (its order by the mean is "
                "within the noise)"
            )
        elif v["ties_reordered"]:
            word = "the ranking survives: the order differs only among pairs not told apart under one of the sets"
        else:
            word = "the same ranking"
        lines.append(
            f"  {label} vs {first}: {word} ({pairs[first]} pairs told apart under {first}, {pairs[label]} "
            f"under {label})"
        )
    return "\n".join(lines)
