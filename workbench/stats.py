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
  (exact enumeration of all ``2**n`` sign flips for up to :data:`EXACT_PAIRS` pairs, else random
  flips, as many as the caller asks: :func:`sign_flip_p_value`).

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
    "flips_for",
    "EXACT_PAIRS",
    "ci_columns",
    "paired_ratio_difference",
    "detectable_difference",
    "holm_adjust",
    "episodes_to_detect",
    "mean_interval",
    "paired_difference",
    "ratio_interval",
    "sign_flip_p_value",
    "wilson",
    "questions_for_precision",
    "precision_of",
    "nested_calibration_check",
    "share_of_gap",
]

#: Default confidence level of every interval shown to users.
CONFIDENCE = 0.95
#: Default number of bootstrap resamples (and of random sign flips for larger permutation tests).
N_RESAMPLES = 2000
#: Up to this many pairs the sign-flip test enumerates all ``2**n`` flips exactly (meet in the
#: middle: two halves of ``2**(n/2)`` sums, so 24 pairs cost two arrays of 4,096, not 16.7M rows).
EXACT_PAIRS = 24
# Random flips are drawn in blocks of this many rows (memory: block x pairs float64).
_FLIP_BLOCK = 50_000


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
    ``p_floor`` the smallest p-value the test could return (``1 / 2**n`` exact, ``1 / (flips + 1)``
    with random flips; NaN when there is no test); ``p_method`` ``"exact"``, ``"random"`` or
    ``"none"``; ``sd`` the standard deviation of the per-episode differences (``ddof=1``; NaN for
    ``n < 2``), which the power line uses.

    Whether two policies are *told apart* is decided on the (Holm-adjusted) p-value by the caller
    (:func:`workbench.analysis.paired_comparisons`), not on the interval, which is unadjusted.
    """

    difference: Interval
    p_value: float
    p_floor: float = math.nan
    p_method: str = "none"
    sd: float = math.nan

    @property
    def interval_excludes_zero(self) -> bool:
        """The unadjusted interval of the difference excludes 0 (False when it has no interval)."""
        d = self.difference
        return not math.isnan(d.low) and (d.low > 0 or d.high < 0)

    @property
    def distinguishable(self) -> bool:
        """This pair alone: its p-value is below ``1 - confidence`` (0.05). False without a
        p-value. Over several pairs the caller compares the Holm-adjusted p-value instead."""
        return not math.isnan(self.p_value) and self.p_value < 1 - self.difference.confidence


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
    n_flips: int | None = None,
) -> PairedComparison:
    """Compare two policies played on the same episode seeds, episode by episode.

    Args:
        a, b: the per-episode values of policies A and B, shape ``(n_episodes,)``, in the same
            episode order (episode i of A and of B share their seed).

    Returns:
        :class:`PairedComparison` of ``a - b``: the mean difference with its bootstrap interval and
        the two-sided sign-flip permutation p-value (:func:`sign_flip_p_value`: exact for up to
        :data:`EXACT_PAIRS` pairs, else ``n_flips`` random flips, default ``n_resamples``), its
        floor and the SD of the differences.

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
    sd = float(d.std(ddof=1)) if d.size >= 2 else math.nan
    if d.size < 2:
        return PairedComparison(diff, math.nan, math.nan, "none", sd)
    if np.all(d == 0):
        return PairedComparison(diff, 1.0, _floor(d.size, n_flips or n_resamples), _method(d.size), sd)
    p, floor, method = sign_flip_p_value(d, n_flips=n_flips or n_resamples, seed=seed)
    return PairedComparison(diff, p, floor, method, sd)


def _ratio_difference(num_a: np.ndarray, den_a: np.ndarray, num_b: np.ndarray, den_b: np.ndarray, axis: int = -1):
    with np.errstate(invalid="ignore", divide="ignore"):
        return np.sum(num_a, axis=axis) / np.sum(den_a, axis=axis) - np.sum(num_b, axis=axis) / np.sum(
            den_b, axis=axis
        )


def paired_ratio_difference(
    num_a: Sequence[float],
    den_a: Sequence[float],
    num_b: Sequence[float],
    den_b: Sequence[float],
    *,
    confidence: float = CONFIDENCE,
    n_resamples: int = N_RESAMPLES,
    seed: int = 0,
) -> Interval:
    """Difference of two pooled ratios over the same episodes, ``sum(num_a)/sum(den_a) - sum(num_b)/sum(den_b)``,
    with a paired bootstrap interval: each episode's four values are resampled together (e.g. accuracy after
    training minus before, on the same held-out episode seeds).

    Returns:
        :class:`Interval` of the difference (NaN bounds with fewer than two episodes, or when resamples
        leave a ratio undefined often enough that no interval can be formed).

    Raises:
        ValueError: lengths differ, empty input, NaN, a negative denominator, or a zero total on either side.
    """
    check_bootstrap_arguments(confidence, n_resamples)
    arrays = [_as_array(v, w) for v, w in ((num_a, "num_a"), (den_a, "den_a"), (num_b, "num_b"), (den_b, "den_b"))]
    if len({a.size for a in arrays}) != 1:
        raise ValueError(f"paired ratios need the same episodes on both sides ({[a.size for a in arrays]} values)")
    if arrays[0].size == 0:
        raise ValueError("paired_ratio_difference needs at least one episode")
    for den, what in ((arrays[1], "den_a"), (arrays[3], "den_b")):
        if (den < 0).any() or den.sum() <= 0:
            raise ValueError(f"{what} must be >= 0 with a positive total")
    estimate = float(_ratio_difference(*arrays))
    return _bootstrap(
        tuple(arrays), _ratio_difference, estimate, confidence=confidence, n_resamples=n_resamples, seed=seed
    )


def _method(n: int) -> str:
    return "exact" if n <= EXACT_PAIRS else "random"


def _floor(n: int, n_flips: int) -> float:
    return 2.0**-n if n <= EXACT_PAIRS else 1.0 / (int(n_flips) + 1)


def sign_flip_p_value(differences: Sequence[float], *, n_flips: int = N_RESAMPLES, seed: int = 0):
    """Two-sided sign-flip permutation p-value of "mean difference 0" (Good, *Permutation Tests*,
    2000, sec. 3.1): the share of sign patterns whose ``|sum|`` reaches the observed one.

    Up to :data:`EXACT_PAIRS` differences every one of the ``2**n`` patterns is counted (meet in
    the middle: the sums of each half, one sorted, counted with a binary search); above, ``n_flips``
    random patterns are drawn and ``p = (hits + 1) / (n_flips + 1)`` (the observed pattern counts).

    Returns:
        ``(p_value, floor, method)``: ``floor`` is the smallest p the test can return (``2**-n``
        exact, ``1 / (n_flips + 1)`` random), ``method`` ``"exact"`` or ``"random"``.
    """
    d = np.asarray(differences, dtype=float).reshape(-1)
    n = d.size
    observed = abs(float(d.sum()))
    tol = 1e-9 * max(
        1.0, float(np.abs(d).sum())
    )  # float64 sums of up to ~1e3 terms  # sums equal up to rounding count as reaching it
    threshold = observed - tol
    if n <= EXACT_PAIRS:
        h = n // 2
        left = _all_sums(d[:h])
        right = np.sort(_all_sums(d[h:]))
        # |l + r| >= threshold  <=>  r >= threshold - l  or  r <= -threshold - l
        hi = right.size - np.searchsorted(right, threshold - left, side="left")
        lo = np.searchsorted(right, -threshold - left, side="right")
        hits = np.where(threshold <= 0, right.size, np.minimum(hi + lo, right.size))
        return float(hits.sum()) / 2.0**n, 2.0**-n, "exact"
    hits = 0
    for signs in _flip_blocks(n, int(n_flips), int(seed)):
        hits += int(np.count_nonzero(np.abs(signs @ d) >= threshold))
    return (hits + 1) / (int(n_flips) + 1), 1.0 / (int(n_flips) + 1), "random"


_FLIP_CACHE: dict[tuple[int, int, int], list[np.ndarray]] = {}


def _flip_blocks(n: int, n_flips: int, seed: int) -> list[np.ndarray]:
    """The random sign patterns (float64 blocks of at most :data:`_FLIP_BLOCK` rows) of ``seed``;
    the last set is kept, since every pair of a run with the same episode count reuses it."""
    key = (n, n_flips, seed)
    if key not in _FLIP_CACHE:
        rng = np.random.default_rng(seed)
        blocks, left = [], n_flips
        while left > 0:
            k = min(_FLIP_BLOCK, left)
            blocks.append(rng.integers(0, 2, size=(k, n), dtype=np.int8).astype(np.float64) * 2.0 - 1.0)
            left -= k
        if n * n_flips > 20_000_000:  # too big to keep
            return blocks
        _FLIP_CACHE.clear()
        _FLIP_CACHE[key] = blocks
    return _FLIP_CACHE[key]


def _all_sums(values: np.ndarray) -> np.ndarray:
    """The ``2**len(values)`` signed sums ``sum(s_i * v_i)``, ``s_i`` in {-1, +1}."""
    sums = np.zeros(1)
    for v in values:
        sums = np.concatenate([sums + v, sums - v])
    return sums


def flips_for(m: int, alpha: float = 1 - CONFIDENCE, *, margin: float = 100.0, at_least: int = N_RESAMPLES) -> int:
    """Random sign flips that put the p-value floor ``margin`` times below Holm's strictest
    threshold ``alpha / m`` over ``m`` comparisons: ``ceil(margin * m / alpha)`` (at least ``at_least``)."""
    return max(int(at_least), int(math.ceil(margin * max(1, int(m)) / alpha)))


def _z(q: float) -> float:
    return float(_st.norm.ppf(q))


def detectable_difference(sd: float, n: int, *, alpha: float = 1 - CONFIDENCE, power: float = 0.8) -> float:
    """Smallest mean paired difference a two-sided test at ``alpha`` detects with ``power`` over
    ``n`` paired episodes whose differences have standard deviation ``sd`` (normal approximation:
    ``(z_{1-alpha/2} + z_power) * sd / sqrt(n)``). NaN when ``n < 2`` or ``sd`` is NaN."""
    if n < 2 or math.isnan(sd):
        return math.nan
    return (_z(1 - alpha / 2) + _z(power)) * sd / math.sqrt(n)


def episodes_to_detect(difference: float, sd: float, *, alpha: float = 1 - CONFIDENCE, power: float = 0.8) -> float:
    """Paired episodes needed to detect a true mean difference ``difference`` with ``power`` at
    two-sided ``alpha`` when the per-episode differences have standard deviation ``sd``
    (``ceil(((z_{1-alpha/2} + z_power) * sd / difference)**2)``; inf when ``difference`` is 0,
    NaN when ``sd`` is NaN)."""
    if math.isnan(sd) or math.isnan(difference):
        return math.nan
    if difference == 0:
        return math.inf
    return float(math.ceil(((_z(1 - alpha / 2) + _z(power)) * sd / abs(difference)) ** 2))


def holm_adjust(p_values: Sequence[float]) -> np.ndarray:
    """Holm-Bonferroni adjusted p-values (Holm 1979) in the input's order; NaN stays NaN and counts in no family."""
    p = np.asarray(p_values, dtype=float)
    out = np.full(len(p), np.nan)
    ok = np.flatnonzero(~np.isnan(p))
    if not len(ok):
        return out
    order = ok[np.argsort(p[ok], kind="stable")]
    m = len(order)
    running = 0.0
    for rank, i in enumerate(order):
        running = max(running, min(1.0, (m - rank) * p[i]))
        out[i] = running
    return out


def _share(gain: np.ndarray, gap: np.ndarray, axis: int = -1) -> np.ndarray:
    g = np.mean(gap, axis=axis)
    with np.errstate(invalid="ignore", divide="ignore"):
        return np.where(g > 0, np.mean(gain, axis=axis) / np.where(g > 0, g, 1), np.nan)


def share_of_gap(
    gain: Sequence[float],
    gap: Sequence[float],
    *,
    confidence: float = CONFIDENCE,
    n_resamples: int = N_RESAMPLES,
    seed: int = 0,
) -> Interval:
    """``mean(gain) / mean(gap)`` over the same episodes with its paired bootstrap interval: e.g. the share of the
    gap between an even split and the oracle that a policy closes (gain: policy - even split per episode; gap:
    oracle - even split). Per-episode values may be negative (unlike :func:`ratio_interval`'s denominators);
    resamples whose mean gap is not positive are undefined, so the interval is the percentile one when BCa fails.

    Raises:
        ValueError: lengths differ, empty input, NaN, or a mean gap that is not positive.
    """
    check_bootstrap_arguments(confidence, n_resamples)
    a, b = _as_array(gain, "gain"), _as_array(gap, "gap")
    if a.shape != b.shape or a.size == 0:
        raise ValueError(f"share_of_gap needs the same, non-empty episodes ({a.size} vs {b.size} values)")
    if b.mean() <= 0:
        raise ValueError("the mean gap is not positive: its share is undefined")
    return _bootstrap(
        (a, b), _share, float(a.mean() / b.mean()), confidence=confidence, n_resamples=n_resamples, seed=seed
    )


# ----------------------------------------------------------------------------- binomial precision
def wilson(k: int, n: int, z: float = 1.96) -> tuple[float, float]:
    """Wilson score interval of ``k`` successes in ``n`` trials (``(0, 1)`` when ``n`` is 0)."""
    if n == 0:
        return (0.0, 1.0)
    p = k / n
    den = 1 + z * z / n
    mid = (p + z * z / (2 * n)) / den
    half = z * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n)) / den
    return (max(0.0, mid - half), min(1.0, mid + half))


def precision_of(n: int, p: float = 0.5, *, confidence: float = CONFIDENCE) -> float:
    """Half-width of the Wilson ``confidence`` interval of an accuracy ``p`` measured on ``n`` questions (what
    ``n`` buys; at ``p`` 0.5 the widest). NaN when ``n`` is 0."""
    if n <= 0:
        return math.nan
    z = _z(1 - (1 - confidence) / 2)
    return z * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n)) / (1 + z * z / n)


def questions_for_precision(half_width: float, p: float = 0.5, *, confidence: float = CONFIDENCE) -> int:
    """Smallest number of questions whose Wilson ``confidence`` interval of an accuracy ``p`` is at most
    ``half_width`` either side (e.g. 196 for +-0.05 at p 0.15).

    Raises:
        ValueError: ``half_width`` not in (0, 0.5] or ``p`` not in [0, 1].
    """
    if not 0 < half_width <= 0.5 or not 0 <= p <= 1:
        raise ValueError(f"need 0 < half_width <= 0.5 and 0 <= p <= 1, got {half_width!r}, {p!r}")
    n = 1
    while precision_of(n, p, confidence=confidence) > half_width:
        n = n * 2
    lo = n // 2 + 1 if n > 1 else 1
    while lo < n:  # the half-width shrinks with n: bisect for the first n that reaches it
        mid = (lo + n) // 2
        if precision_of(mid, p, confidence=confidence) <= half_width:
            n = mid
        else:
            lo = mid + 1
    return n


# ----------------------------------------------------------------------------- calibration check
def _nested_counts(pred: np.ndarray, u: np.ndarray) -> np.ndarray:
    """Per draw: the right answers over every question and length when one uniform per question answers every
    length (``u < p``), for ``u`` of shape ``(draws, questions)``."""
    total = np.zeros(u.shape[0])
    for i, row in enumerate(pred):
        ordered = np.sort(row)
        total += len(ordered) - np.searchsorted(ordered, u[:, i], side="right")
    return total


def nested_calibration_check(
    predicted: np.ndarray,
    observed: np.ndarray,
    *,
    n_sims: int = 20_000,
    seed: int = 0,
    alpha: float = 1 - CONFIDENCE,
    power: float = 0.8,
) -> dict:
    """Does a curve predict held-out accuracy? A test of the total right answers, with its power.

    One question is answered once and graded at every length (cap), so its verdicts are nested: the model of the
    simulated solver (one uniform ``u`` per question, right at length ``c`` iff ``u < p_c``) is the test's null,
    which is also the most correlated case and so gives the widest spread. The statistic is the observed right
    answers over every question and length minus the predicted ones; its two-sided p-value comes from ``n_sims``
    draws of ``u``. The power: the factors ``r`` by which the true accuracy could differ from the prediction
    (every ``p`` times ``r``, at most 1) and still be caught with probability ``power``, the smallest misfit the
    check would catch each way (NaN where even ``r`` 1/16 or 16 is not caught).

    Args:
        predicted: ``(questions, lengths)`` predicted probabilities.
        observed: ``(questions, lengths)`` verdicts (0/1).

    Returns:
        ``{"questions", "observed", "expected", "p_value", "passes", "catches_low", "catches_high", "sims",
        "method"}``: ``catches_low`` is the largest factor below 1 (true accuracy that share of the prediction)
        and ``catches_high`` the smallest factor above 1 that the check detects with ``power``.
    """
    pred = np.clip(np.asarray(predicted, dtype=float), 0.0, 1.0)
    obs = np.asarray(observed, dtype=float)
    if pred.shape != obs.shape or pred.ndim != 2 or pred.shape[0] == 0:
        raise ValueError(
            f"predicted and observed must be the same (questions, lengths) shape, got {pred.shape}, {obs.shape}"
        )
    rng = np.random.default_rng(seed)
    u = rng.random((n_sims, pred.shape[0]))
    expected = float(pred.sum())
    null = _nested_counts(pred, u).astype(float) - expected
    stat = float(obs.sum()) - expected
    p_value = float((np.sum(np.abs(null) >= abs(stat) - 1e-9) + 1) / (n_sims + 1))
    critical = float(np.quantile(np.abs(null), 1 - alpha))

    def caught(r: float) -> float:
        sims = _nested_counts(np.minimum(1.0, pred * r), u).astype(float) - expected
        return float(np.mean(np.abs(sims) > critical))

    grid = np.exp(np.linspace(0, math.log(16), 25))[1:]
    high = next((float(r) for r in grid if caught(r) >= power), math.nan)
    low = next((float(1 / r) for r in grid if caught(1 / r) >= power), math.nan)
    return {
        "questions": int(pred.shape[0]),
        "observed": int(round(obs.sum())),
        "expected": round(expected, 3),
        "p_value": p_value,
        "passes": bool(p_value >= alpha),
        "catches_low": low,
        "catches_high": high,
        "power": power,
        "sims": n_sims,
        "method": "right answers over every held-out question and length vs the curve's sum; null: one uniform per "
        "question answers every length (nested verdicts), simulated",
    }
