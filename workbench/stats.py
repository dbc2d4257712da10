"""Uncertainty of per-policy figures: bootstrap intervals over episodes and paired comparisons.

The unit of resampling is the **episode**: an evaluation plays independent seeded episodes, and the
questions of one episode share a budget, so they are not independent of each other. Every interval
here resamples whole episodes (Efron & Tibshirani, *An Introduction to the Bootstrap*, 1993, ch. 6
and 14; computed with :func:`scipy.stats.bootstrap`).

- :func:`mean_interval`: a per-episode quantity (episode reward, utilisation, regret, ran-dry 0/1).
- :func:`ratio_interval`: a pooled ratio over episodes, e.g. accuracy = ``sum(correct) /
  sum(questions)`` or tokens per question = ``sum(tokens) / sum(answered)``: each episode's numerator
  and denominator are resampled together.
- :func:`paired_difference`: two policies played on the same episode seeds, compared episode by
  episode: the mean difference, its bootstrap interval and a two-sided sign-flip permutation p-value
  (:func:`scipy.stats.permutation_test`; exact for up to 16 pairs).

Intervals are 95% BCa by default; where BCa is undefined (all values equal, or too few distinct
values) the percentile interval is used, and a constant sample gets the zero-width interval at its
value. Fewer than two episodes give NaN bounds: one episode says nothing about spread.
Every function is deterministic for a given ``seed``.
"""

from __future__ import annotations

import math
import warnings
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
from scipy import stats as _st

__all__ = [
    "CONFIDENCE",
    "N_RESAMPLES",
    "Interval",
    "PairedComparison",
    "check_bootstrap_arguments",
    "ci_columns",
    "mean_interval",
    "paired_difference",
    "ratio_interval",
]

#: Default confidence level of every interval shown to users.
CONFIDENCE = 0.95
#: Default number of bootstrap resamples (and of random sign flips for larger permutation tests).
N_RESAMPLES = 2000
# Up to this many pairs the permutation test enumerates all 2**n sign flips.
_EXACT_PAIRS = 16


@dataclass(frozen=True)
class Interval:
    """A point estimate with its bootstrap interval.

    Attributes: ``estimate`` (the statistic on the observed episodes), ``low`` / ``high`` (interval
    bounds, NaN when ``n < 2``), ``n`` (episodes), ``confidence`` (e.g. 0.95), ``method``
    (``"BCa"``, ``"percentile"``, ``"constant"`` or ``"none"``).
    """

    estimate: float
    low: float
    high: float
    n: int
    confidence: float = CONFIDENCE
    method: str = "BCa"

    def contains(self, value: float) -> bool:
        """Whether ``value`` lies inside the closed interval (False when the bounds are NaN)."""
        return bool(self.low <= value <= self.high)

    def __str__(self) -> str:
        if math.isnan(self.low):
            return f"{self.estimate:.4g} [n={self.n}: no interval]"
        return f"{self.estimate:.4g} [{self.low:.4g}, {self.high:.4g}]"


@dataclass(frozen=True)
class PairedComparison:
    """Policy ``a`` minus policy ``b`` on the same episodes.

    ``difference`` is the :class:`Interval` of the mean per-episode difference ``a - b``;
    ``p_value`` the two-sided sign-flip permutation p-value of "no difference" (NaN when ``n < 2``);
    ``distinguishable`` is True when the interval excludes 0 (the two policies can be told apart at
    this confidence level on these episodes).
    """

    difference: Interval
    p_value: float

    @property
    def distinguishable(self) -> bool:
        """The interval of the difference excludes 0 (False when it has no interval, n < 2)."""
        d = self.difference
        return not math.isnan(d.low) and (d.low > 0 or d.high < 0)


def ci_columns(metric: str) -> tuple[str, str]:
    """The column names of a metric's interval bounds: ``(<metric>_ci_low, <metric>_ci_high)``."""
    return f"{metric}_ci_low", f"{metric}_ci_high"


def _as_array(values: Sequence[float], what: str) -> np.ndarray:
    arr = np.asarray(values, dtype=float).reshape(-1)
    if np.isnan(arr).any():
        raise ValueError(f"{what} holds NaN; drop the episodes without a value before asking for an interval")
    return arr


def check_bootstrap_arguments(confidence: float, n_resamples: int) -> None:
    """Raise ``ValueError`` unless ``0 < confidence < 1`` and ``n_resamples >= 100`` (callers that
    turn a failed interval into a missing one check these first, so that a bad argument is not
    mistaken for an undefined interval)."""
    if not 0 < confidence < 1:
        raise ValueError(f"confidence must be in (0, 1), got {confidence!r}")
    if n_resamples < 100:
        raise ValueError(f"n_resamples must be at least 100, got {n_resamples!r}")


def _bootstrap(
    data: tuple[np.ndarray, ...], statistic, estimate: float, *, confidence: float, n_resamples: int, seed: int
) -> Interval:
    n = len(data[0])
    if n < 2:
        return Interval(estimate, math.nan, math.nan, n, confidence, "none")
    if all(np.all(d == d[0]) for d in data):
        return Interval(estimate, estimate, estimate, n, confidence, "constant")
    for method in ("BCa", "percentile"):
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # scipy warns on degenerate BCa; we fall back instead
            res = _st.bootstrap(
                data,
                statistic,
                paired=len(data) > 1,
                vectorized=True,
                confidence_level=confidence,
                n_resamples=n_resamples,
                method=method,
                rng=np.random.default_rng(seed),
            )
        low, high = float(res.confidence_interval.low), float(res.confidence_interval.high)
        if not (math.isnan(low) or math.isnan(high)):
            return Interval(estimate, min(low, estimate), max(high, estimate), n, confidence, method)
    return Interval(estimate, math.nan, math.nan, n, confidence, "none")  # pragma: no cover - defensive


def _mean(x: np.ndarray, axis: int = -1) -> np.ndarray:
    return np.mean(x, axis=axis)


def mean_interval(
    values: Sequence[float], *, confidence: float = CONFIDENCE, n_resamples: int = N_RESAMPLES, seed: int = 0
) -> Interval:
    """Mean of a per-episode quantity with its bootstrap interval over episodes.

    Args:
        values: one value per episode, shape ``(n_episodes,)`` (any unit: reward, tokens, 0/1).
        confidence: interval level in (0, 1).
        n_resamples: bootstrap resamples (>= 100).
        seed: seed of the resampling.

    Returns:
        :class:`Interval`; NaN bounds when fewer than two episodes.

    Raises:
        ValueError: empty input, NaN values, or bad ``confidence`` / ``n_resamples``.
    """
    check_bootstrap_arguments(confidence, n_resamples)
    x = _as_array(values, "values")
    if x.size == 0:
        raise ValueError("mean_interval needs at least one episode")
    return _bootstrap((x,), _mean, float(x.mean()), confidence=confidence, n_resamples=n_resamples, seed=seed)


def _ratio(num: np.ndarray, den: np.ndarray, axis: int = -1) -> np.ndarray:
    d = np.sum(den, axis=axis)
    with np.errstate(invalid="ignore", divide="ignore"):
        return np.where(d > 0, np.sum(num, axis=axis) / np.where(d > 0, d, 1), np.nan)


def ratio_interval(
    numerators: Sequence[float],
    denominators: Sequence[float],
    *,
    confidence: float = CONFIDENCE,
    n_resamples: int = N_RESAMPLES,
    seed: int = 0,
) -> Interval:
    """Pooled ratio ``sum(numerators) / sum(denominators)`` with its bootstrap interval over episodes.

    Use it for figures defined as totals over episodes (accuracy = correct / questions served,
    tokens per question = tokens / questions answered): each episode's pair is resampled together.

    Args:
        numerators, denominators: one value per episode each, shape ``(n_episodes,)``; denominators
            must be >= 0 with a positive sum.

    Returns:
        :class:`Interval` (NaN bounds with fewer than two episodes).

    Raises:
        ValueError: lengths differ, empty input, NaN, a negative denominator, or a zero total.
    """
    check_bootstrap_arguments(confidence, n_resamples)
    num = _as_array(numerators, "numerators")
    den = _as_array(denominators, "denominators")
    if num.shape != den.shape:
        raise ValueError(f"numerators and denominators differ in length ({num.size} vs {den.size})")
    if num.size == 0:
        raise ValueError("ratio_interval needs at least one episode")
    if (den < 0).any():
        raise ValueError("denominators must be non-negative (counts of questions or tokens)")
    if den.sum() <= 0:
        raise ValueError("the denominators sum to 0: the ratio is undefined (no question served or answered)")
    estimate = float(num.sum() / den.sum())
    if num.size >= 2 and not np.all(den > 0):
        # A resample may draw only zero-denominator episodes; the percentile interval ignores such
        # (NaN) resamples poorly, so drop them from the bootstrap where the estimate is unaffected.
        keep = den > 0
        if keep.sum() >= 2 and np.all(num[~keep] == 0):
            num, den = num[keep], den[keep]
    return _bootstrap((num, den), _ratio, estimate, confidence=confidence, n_resamples=n_resamples, seed=seed)


def paired_difference(
    a: Sequence[float],
    b: Sequence[float],
    *,
    confidence: float = CONFIDENCE,
    n_resamples: int = N_RESAMPLES,
    seed: int = 0,
) -> PairedComparison:
    """Compare two policies played on the same episode seeds, episode by episode.

    Args:
        a, b: the per-episode values of policies A and B, shape ``(n_episodes,)``, in the same
            episode order (episode i of A and of B share their seed).

    Returns:
        :class:`PairedComparison` of ``a - b``: the mean difference with its bootstrap interval and
        the two-sided sign-flip permutation p-value (exact enumeration for <= 16 pairs, else
        ``n_resamples`` random flips; Good, *Permutation Tests*, 2000, sec. 3.1).

    Raises:
        ValueError: lengths differ, empty input or NaN.
    """
    check_bootstrap_arguments(confidence, n_resamples)
    x = _as_array(a, "a")
    y = _as_array(b, "b")
    if x.shape != y.shape:
        raise ValueError(f"paired comparison needs the same episodes for both policies ({x.size} vs {y.size} values)")
    if x.size == 0:
        raise ValueError("paired_difference needs at least one episode")
    d = x - y
    diff = _bootstrap((d,), _mean, float(d.mean()), confidence=confidence, n_resamples=n_resamples, seed=seed)
    if d.size < 2:
        p = math.nan
    elif np.all(d == 0):
        p = 1.0
    else:
        exact = d.size <= _EXACT_PAIRS
        res = _st.permutation_test(
            (d,),
            _mean,
            permutation_type="samples",
            vectorized=True,
            n_resamples=np.inf if exact else n_resamples,
            alternative="two-sided",
            rng=np.random.default_rng(seed),
        )
        p = float(res.pvalue)
    return PairedComparison(diff, p)
