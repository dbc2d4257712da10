"""The summary table on degenerate episodes: a figure is either computed over every episode it counts,
with its interval, or missing (NaN) -- never a mean over fewer episodes than the ``episodes`` column
says, and never a table without intervals because of a bad bootstrap argument."""

from __future__ import annotations

import math

import evalpol_fixtures as fx
import numpy as np
import pandas as pd
import pytest

from reasoning_env.policies import UniformPolicy
from workbench import analysis
from workbench.evaluate import evaluate


@pytest.fixture(scope="module")
def episodes(tmp_path_factory):
    out = tmp_path_factory.mktemp("degenerate") / "run"
    result = evaluate(
        [UniformPolicy()],
        config=fx.config(num_questions=3),
        n_episodes=4,
        out=out,
        progress=False,
        report=False,
        pools=fx.pools(),
    )
    return result.episodes


@pytest.mark.parametrize("bad", [math.nan, math.inf])
@pytest.mark.parametrize("column, metric", [("episode_reward", "reward"), ("utilisation", "utilisation")])
def test_a_non_finite_episode_value_leaves_the_figure_missing(episodes, column, metric, bad) -> None:
    ep = episodes.copy()
    ep.loc[ep.index[0], column] = bad
    row = analysis.summary_table(ep).iloc[0]
    assert row["episodes"] == 4
    assert math.isnan(row[metric]) and math.isnan(row[f"{metric}_ci_low"]) and math.isnan(row[f"{metric}_ci_high"])


def test_all_correct_gives_the_zero_width_interval(episodes) -> None:
    ep = episodes.copy()
    ep["num_correct"] = ep["num_questions"]
    row = analysis.summary_table(ep).iloc[0]
    assert row["accuracy"] == row["accuracy_ci_low"] == row["accuracy_ci_high"] == 1.0


def test_one_episode_has_no_interval(episodes) -> None:
    row = analysis.summary_table(episodes.iloc[:1]).iloc[0]
    assert row["episodes"] == 1 and np.isfinite(row["reward"]) and math.isnan(row["reward_ci_low"])


@pytest.mark.parametrize("n_resamples", [0, 10])
def test_too_few_resamples_raise_instead_of_dropping_every_interval(episodes, n_resamples) -> None:
    with pytest.raises(ValueError, match="n_resamples must be at least 100"):
        analysis.summary_table(episodes, n_resamples=n_resamples)


def test_one_common_episode_prints_no_interval_instead_of_nan(episodes) -> None:
    one = episodes.iloc[:1]
    other = one.assign(policy="other", episode_reward=one["episode_reward"] - 0.5)
    both = pd.concat([one, other], ignore_index=True)
    text = analysis.format_comparisons(analysis.paired_comparisons(both), analysis.summary_table(both))
    assert "n=1: no interval" in text and "nan" not in text.lower()
    assert "+0.500" in text  # the difference itself is still printed
