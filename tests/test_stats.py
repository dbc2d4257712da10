"""Contract of workbench.stats: intervals over episodes and paired comparisons."""

from __future__ import annotations

import math

import numpy as np
import pytest
from scipy import stats as _st

from workbench import stats
from workbench.stats import ci_columns, mean_interval, paired_difference, ratio_interval


def test_mean_interval_covers_the_true_mean_about_95_percent_of_the_time():
    rng = np.random.default_rng(0)
    hits = sum(mean_interval(rng.normal(1.0, 0.5, 40), n_resamples=500, seed=i).contains(1.0) for i in range(200))
    assert 0.88 <= hits / 200 <= 0.99


def test_mean_interval_is_deterministic_for_a_seed():
    x = np.random.default_rng(3).normal(size=30)
    assert mean_interval(x, seed=7) == mean_interval(x, seed=7)


def test_a_constant_sample_has_a_zero_width_interval_at_its_value():
    iv = mean_interval([0.25, 0.25, 0.25])
    assert (iv.estimate, iv.low, iv.high, iv.method) == (0.25, 0.25, 0.25, "constant")


def test_one_episode_gives_no_interval():
    iv = mean_interval([3.0])
    assert iv.estimate == 3.0 and math.isnan(iv.low) and math.isnan(iv.high) and iv.n == 1


def test_ratio_interval_estimate_is_the_pooled_ratio_and_brackets_it():
    correct, served = [3, 5, 10, 0, 7], [10, 10, 10, 10, 10]
    iv = ratio_interval(correct, served)
    assert iv.estimate == pytest.approx(25 / 50)
    assert iv.low <= 0.5 <= iv.high and iv.low > 0 and iv.high < 1


def test_ratio_interval_refuses_a_zero_total_and_mismatched_lengths():
    with pytest.raises(ValueError, match="sum to 0"):
        ratio_interval([0, 0], [0, 0])
    with pytest.raises(ValueError, match="differ in length"):
        ratio_interval([1, 2], [3])


def test_nan_values_are_refused_with_a_fix():
    with pytest.raises(ValueError, match="drop the episodes"):
        mean_interval([1.0, float("nan")])


def test_paired_difference_exact_p_value_for_all_positive_differences():
    # 5 pairs, all differences +1: of the 2**5 sign flips only the all-+ and all-- are as extreme.
    cmp = paired_difference([2, 2, 2, 2, 2], [1, 1, 1, 1, 1])
    assert cmp.p_value == pytest.approx(2 / 32)
    assert cmp.difference.estimate == 1.0


def test_identical_policies_cannot_be_told_apart():
    x = np.random.default_rng(1).normal(size=20)
    cmp = paired_difference(x, x)
    assert cmp.p_value == 1.0 and not cmp.distinguishable


def test_a_clear_paired_gain_is_distinguishable_even_when_marginal_intervals_overlap():
    rng = np.random.default_rng(2)
    base = rng.normal(0.5, 0.3, 30)
    better = base + 0.05 + rng.normal(0, 0.01, 30)
    a, b = mean_interval(better), mean_interval(base)
    assert a.low < b.high  # marginal intervals overlap...
    cmp = paired_difference(better, base)
    assert cmp.distinguishable and cmp.p_value < 0.01  # ...but the paired comparison separates them


def test_paired_difference_needs_the_same_episodes():
    with pytest.raises(ValueError, match="same episodes"):
        paired_difference([1, 2, 3], [1, 2])


def test_ci_column_names():
    assert ci_columns("accuracy") == ("accuracy_ci_low", "accuracy_ci_high")


# ---------------------------------------------------------------- issue 22: p-value floor, Holm verdicts, power
def test_exact_sign_flip_enumeration_matches_scipy_and_reaches_far_below_the_old_floor():
    rng = np.random.default_rng(3)
    d = np.round(rng.normal(0.1, 1.0, 12), 1)  # ties included
    p, floor, method = stats.sign_flip_p_value(d)
    ref = _st.permutation_test((d,), np.mean, permutation_type="samples", n_resamples=np.inf, alternative="two-sided")
    assert method == "exact" and floor == 2.0**-12 and p == pytest.approx(ref.pvalue)
    # 20 pairs, all the same sign: exact p = 2 / 2**20, a thousand times below 2,000 random flips' floor
    cmp = stats.paired_difference(np.ones(20) + np.arange(20) / 100, np.zeros(20))
    assert cmp.p_method == "exact" and cmp.p_value == pytest.approx(2 / 2**20) and cmp.p_floor == 2.0**-20


def test_random_flips_are_sized_so_the_floor_is_far_below_holms_strictest_threshold():
    m = 55  # 11 policies
    flips = stats.flips_for(m)
    assert 1 / (flips + 1) <= 0.05 / m / 100
    cmp = stats.paired_difference(np.ones(40), np.zeros(40), n_flips=flips)
    assert cmp.p_method == "random" and cmp.p_floor == pytest.approx(1 / (flips + 1))
    assert cmp.p_value * m < 0.05  # a clear effect survives Holm over 55 pairs


def test_power_helpers_follow_the_normal_approximation():
    z = _st.norm.ppf(0.975) + _st.norm.ppf(0.8)
    assert stats.detectable_difference(0.08, 20) == pytest.approx(z * 0.08 / np.sqrt(20))
    assert stats.episodes_to_detect(0.025, 0.077) == np.ceil((z * 0.077 / 0.025) ** 2)  # ~75, as the audit found
    assert stats.episodes_to_detect(0.0, 0.1) == np.inf
