"""Figures of the workbench: live episode charts (workbench.episode_plots) and run comparison
(workbench.compare)."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
from test_app_support import (
    EVERY_KIND_POLICIES,
    fixture_settings,
    make_eval_run,
    make_runs_of_every_kind,
    make_training_run,
    play_session,
)

from workbench import compare, episode_plots, plots

# its tests share run folders of every kind (module fixtures): one worker runs them all (pytest-xdist --dist loadgroup)
pytestmark = pytest.mark.xdist_group("test_app_figures")


@pytest.fixture(scope="module")
def episode_frame():
    s = play_session()
    s.reset(fixture_settings(budget_mode="explicit", total_budget=1200))
    list(s.run_iter("greedy_max"))
    return s.steps_frame(), s.reset_observation


@pytest.fixture(scope="module")
def runs_root(tmp_path_factory):
    root = tmp_path_factory.mktemp("runs")
    make_eval_run(root)
    make_training_run(root)
    (root / "not-a-run").mkdir()
    return root


# ------------------------------------------------------------------------------- episode charts
def test_empty_episode_figures_have_titles_and_reference_lines():
    empty = pd.DataFrame()
    spend = episode_plots.spend_figure(empty, 1000, 10)
    assert "budget" in spend.layout.title.text.lower()
    names = [t.name for t in spend.data]
    assert names == ["fair share", "budget"] and list(spend.data[1].y) == [1000, 1000]
    assert episode_plots.tokens_per_question_figure(empty, 100.0, 10).layout.title.text
    assert episode_plots.step_rewards_figure(empty, 10).layout.title.text


def test_spend_line_is_the_cumulative_charge(episode_frame):
    frame, obs = episode_frame
    fig = episode_plots.spend_figure(frame, obs.total_budget, obs.num_questions)
    spent = next(t for t in fig.data if t.name == "spent")
    assert list(spent.y) == [0] + list(np.cumsum(frame["tokens"]))
    assert list(fig.data[0].y) == [0, obs.total_budget]  # the fair-share line ends at the budget


def test_tokens_bars_show_clipped_tokens_separately(episode_frame):
    frame, obs = episode_frame
    fig = episode_plots.tokens_per_question_figure(frame, obs.total_budget / obs.num_questions, obs.num_questions)
    charged = sum(sum(t.y) for t in fig.data if t.name != "clipped (not charged)")
    assert charged == frame["tokens"].sum()
    if (frame["raw_tokens"] > frame["tokens"]).any():
        clipped = next(t for t in fig.data if t.name == "clipped (not charged)")
        assert sum(clipped.y) == (frame["raw_tokens"] - frame["tokens"]).sum()
    assert list(fig.layout.xaxis.categoryarray) == [f"Q{i}" for i in range(1, 11)]


def test_reward_stack_sums_to_the_step_reward(episode_frame):
    frame, _ = episode_frame
    fig = episode_plots.step_rewards_figure(frame, 10)
    bars = [t for t in fig.data if t.type == "bar"]
    stacked = np.sum([np.asarray(t.y, dtype=float) for t in bars], axis=0)
    assert np.allclose(stacked, frame["reward"].to_numpy())
    assert all(t.name != "overspend_penalty" for t in bars)  # zero everywhere in hard-cap mode: left out


def test_type_colors_are_stable():
    assert episode_plots.type_color("GSM8K") == episode_plots.type_color("GSM8K")
    assert episode_plots.type_color("GSM8K") in episode_plots.TYPE_COLORS


# ------------------------------------------------------------------------------- run comparison
def test_discover_runs_finds_run_folders_only(runs_root):
    found = compare.discover_runs(runs_root)
    assert {e.label for e in found} == {"eval-tiny", "train-tiny"}
    assert {e.kind for e in found} == {"evaluation", "training"}
    assert compare.discover_runs(runs_root / "missing") == []


def test_load_runs_reports_bad_folders_without_raising(runs_root):
    rs = compare.load_runs([runs_root / "eval-tiny", runs_root / "not-a-run", ""])
    assert list(rs.runs) == ["eval-tiny"] and str(runs_root / "not-a-run") in rs.errors
    assert "run.json" in rs.errors[str(runs_root / "not-a-run")]


def test_repeated_folders_get_unique_labels(runs_root):
    rs = compare.load_runs([runs_root / "eval-tiny", runs_root / "eval-tiny"])
    assert list(rs.runs) == ["eval-tiny", "eval-tiny#2"]


def test_summary_has_one_row_per_run_and_policy(runs_root):
    rs = compare.load_runs([runs_root / "eval-tiny", runs_root / "train-tiny"])
    table = rs.summary()
    assert set(zip(table["run"], table["policy"])) == {
        ("eval-tiny", "uniform"),
        ("eval-tiny", "sim_greedy"),
        ("train-tiny", "grpo"),
    }
    assert list(table.columns[:2]) == ["run", "policy"]


def test_combined_frames_tell_runs_apart(runs_root):
    rs = compare.load_runs([runs_root / "eval-tiny", runs_root / "train-tiny"])
    assert set(rs.steps()["policy"]) == {"eval-tiny:uniform", "eval-tiny:sim_greedy", "train-tiny:grpo"}
    single = compare.load_runs([runs_root / "eval-tiny"])
    assert set(single.steps()["policy"]) == {"uniform", "sim_greedy"}


def test_comparison_figures_draw_every_series(runs_root):
    rs = compare.load_runs([runs_root / "eval-tiny", runs_root / "train-tiny"])
    acc = compare.accuracy_vs_tokens(rs)
    assert legend_entries(acc) == {
        "legend": ["uniform", "sim_greedy", "grpo"],
        "legend2": ["eval-tiny (evaluation)", "train-tiny (training)"],
    }
    assert {
        t.hovertemplate.split("</extra>")[0].split("<extra>")[-1]
        for t in acc.data
        if t.legendgroup and "(mean)" not in t.name and t.x[0] is not None
    } == {"eval-tiny · uniform", "eval-tiny · sim_greedy", "train-tiny · grpo"}
    util = compare.utilisation_figure(rs)
    assert [(t.name, list(t.y)) for t in util.data if t.type == "bar"] == [
        ("eval-tiny · uniform", ["uniform"]),
        ("eval-tiny · sim_greedy", ["sim_greedy"]),
        ("train-tiny · grpo", ["grpo"]),
    ]
    assert len([t for t in compare.tokens_by_type(rs).data if t.type == "bar"]) == 3
    assert len([t for t in compare.budget_spend(rs).data if t.x[0] is not None]) == 4  # even spend + 3 series


def legend_entries(fig) -> dict[str, list[str]]:
    """The names each legend of ``fig`` lists (``legend``: policies; ``legend2``: the run key)."""
    out: dict[str, list[str]] = {}
    if fig.layout.showlegend is False:
        return out
    for t in fig.data:
        if t.showlegend is not False and t.name and not (t.type == "scatter" and t.name in ("even spend", "frontier")):
            out.setdefault(t.legend or "legend", []).append(t.name)
    return out


@pytest.fixture(scope="module")
def every_kind(tmp_path_factory):
    root = tmp_path_factory.mktemp("every-kind")
    folders = make_runs_of_every_kind(root)
    return root, compare.load_runs(list(folders.values()))


def test_runs_are_listed_by_kind_and_play_episodes_say_so(every_kind):
    root, rs = every_kind
    found = {e.label: e for e in compare.discover_runs(root)}
    assert {k: e.kind for k, e in found.items()} == {
        "eval-a": "evaluation",
        "eval-b": "evaluation",
        "sweep": "evaluation",
        "play-episode": "play",
        "train": "training",
    }
    assert "(Play episode, " in found["play-episode"].choice and "(training, " in found["train"].choice
    assert "**play-episode** (Play episode)" in rs.describe() and "**train** (training)" in rs.describe()


def test_a_play_save_of_an_older_version_is_still_listed_as_a_play_episode(tmp_path):

    from workbench.runs import run_kind

    assert run_kind({"kind": "evaluation", "source": "workbench play tab"}) == "play"
    assert run_kind({"kind": "evaluation"}) == "evaluation" and run_kind({}) == "?"


LINE_CHARTS = {
    "accuracy vs tokens": compare.accuracy_vs_tokens,
    "budget spend": compare.budget_spend,
    "frontier": compare.frontier,
}


@pytest.mark.parametrize("name", list(LINE_CHARTS))
def test_a_chart_of_five_runs_lists_each_policy_once_and_each_run_once(every_kind, name):
    """15 series (5 + 5 + 3 + 1 + 1 policies in 5 runs): the legend names each of the 7 policies once,
    the run key each run once with its kind; every series is drawn in its policy's colour."""
    _root, rs = every_kind
    fig = LINE_CHARTS[name](rs)
    legends = legend_entries(fig)
    runs = [
        "eval-a (evaluation)",
        "eval-b (evaluation)",
        "sweep (evaluation)",
        "play-episode (Play episode)",
        "train (training)",
    ]
    drawn = [t for t in fig.data if t.legendgroup and t.legend != "legend2"]
    assert legends["legend2"] == runs
    assert (
        len(legends["legend"]) == len(set(legends["legend"])) <= len(EVERY_KIND_POLICIES) + 2
    )  # + the Play label and grpo
    assert len(legends["legend"]) + len(legends["legend2"]) <= 12 < 15
    colours = {}
    for t in drawn:
        colour = t.marker.color if t.mode == "markers" or t.mode == "markers+text" else t.line.color
        assert colours.setdefault(t.legendgroup, colour) == colour  # one colour per policy, in every run
    assert len(set(colours.values())) == len(colours)


def test_accuracy_against_budget_draws_the_sweeps_among_the_runs(every_kind):
    _root, rs = every_kind
    fig = compare.accuracy_vs_budget(rs)
    assert legend_entries(fig) == {
        "legend": ["uniform", "sim_greedy", "oracle_allocation"]
    }  # the sweep's; one run: no key
    assert all(list(t.x) == [2, 4] for t in fig.data) and all("sweep · " in t.hovertemplate for t in fig.data)
    labelled = [t for t in compare.frontier(rs).data if t.mode == "markers+text"]
    assert {t.hovertemplate.split("<br>")[0] for t in labelled} == {
        "sweep · uniform",
        "sweep · sim_greedy",
        "sweep · oracle_allocation",
    }


def test_bar_charts_of_five_runs_get_one_panel_per_run_with_a_readable_row_per_bar(every_kind):
    _root, rs = every_kind
    util = compare.utilisation_figure(rs)
    bars = [t for t in util.data if t.type == "bar"]
    assert len(bars) == 15 and all(t.orientation == "h" for t in bars) and not legend_entries(util)
    titles = [a.text for a in util.layout.annotations]
    assert titles[:5] == [
        "eval-a (evaluation)",
        "eval-b (evaluation)",
        "sweep (evaluation)",
        "play-episode (Play episode)",
        "train (training)",
    ]
    plot_px = util.layout.height - 110 - 40 * 5
    assert plot_px / len(bars) >= 18  # one horizontal label per bar, at least 18 px apart: none overlaps
    assert max(len(t.y[0]) for t in bars) <= 40 and all(t.text[0].count("ran dry") == 1 for t in bars)
    by_type = compare.tokens_by_type(rs)
    assert len({t.xaxis for t in by_type.data}) == 5  # one panel per run
    assert len(legend_entries(by_type)["legend"]) == 7
    arrays = {tuple(getattr(by_type.layout, ax).categoryarray) for ax in by_type.layout if ax.startswith("xaxis")}
    assert len(arrays) == 1  # every panel lists the problem types in the same order
    forest = compare.intervals(rs)
    rows = sum(len(t.y) for t in forest.data)
    assert rows == 5 + 5 + 3 * 2 + 1 + 1  # the sweep: one row per budget ratio
    assert all(
        t.error_x.array is not None for t in forest.data if t.name != "play-episode · human+sim_greedy"
    )  # one episode: no interval
    assert (forest.layout.height - 110 - 40 * 5) / rows >= 18


def test_narrowing_to_some_policies_draws_only_those(every_kind):
    _root, rs = every_kind
    assert rs.policies()[:5] == list(EVERY_KIND_POLICIES) and len(rs.policies()) == 7
    few = rs.only(["sim_greedy", "uniform"])
    assert set(few.summary()["policy"]) == {"sim_greedy", "uniform"}
    fig = compare.budget_spend(few)
    assert legend_entries(fig)["legend"] == ["uniform", "sim_greedy"] and legend_entries(fig)["legend2"] == [
        "eval-a (evaluation)",
        "eval-b (evaluation)",
        "sweep (evaluation)",
    ]
    assert len(few.runs) == 5 and not few.runs["train"].metrics.empty  # training curves are not a policy's: kept


def test_one_run_is_drawn_as_before(runs_root):
    """A single run (the report, the tab with one run): one legend entry per policy, no run key."""
    rs = compare.load_runs([runs_root / "eval-tiny"])
    assert legend_entries(compare.accuracy_vs_tokens(rs)) == {"legend": ["uniform", "sim_greedy"]}
    util = compare.utilisation_figure(rs)
    assert list(util.data[0].x) == ["uniform", "sim_greedy"] and util.data[0].orientation is None
    assert plots.series_styles(rs.steps())["uniform"].dash == "solid"


def test_training_curves_come_from_metrics(runs_root):
    rs = compare.load_runs([runs_root / "eval-tiny", runs_root / "train-tiny"])
    fig = compare.training_curves_figure(rs)
    lines = [t for t in fig.data if t.mode and "lines" in t.mode]
    assert len(lines) == 4 and all(t.name == "train-tiny" for t in lines)
    assert list(lines[0].x) == list(range(1, 13))
    smooth = compare.training_curves_figure(rs, smooth=4)
    assert "rolling mean" in smooth.layout.title.text


def test_training_curves_without_training_runs_say_so(runs_root):
    fig = compare.training_curves_figure(compare.load_runs([runs_root / "eval-tiny"]))
    texts = [a.text for a in fig.layout.annotations]
    assert [t for _k, t in compare.TRAINING_METRICS] == texts[:-1]  # the panel titles stay
    assert "no training runs" in texts[-1]


def test_held_out_figure_without_evaluations_names_the_flag_that_writes_them(runs_root):
    fig = compare.held_out_figure(compare.load_runs([runs_root / "eval-tiny"]))
    assert "--eval_every" in fig.layout.annotations[-1].text
    assert fig.layout.height == 420


def test_known_problem_types_get_distinct_colours():
    """Every type the shipped sources produce (reasoning_gym generators included) has its own colour,
    so a legend never shows two types in one colour."""
    colours = [episode_plots.type_color(t) for t in episode_plots.KNOWN_TYPES]
    assert len(set(colours)) == len(colours)
    assert episode_plots.type_color("reasoning_gym/gcd") != episode_plots.type_color("reasoning_gym/lcm")


def _held_out_run(root, name: str = "train-eval"):
    """A training run folder whose evaluations.jsonl is written by training.evaluation's own formatter."""
    import json

    from training.evaluation import evaluation_metrics

    folder = make_training_run(root, name)

    def record(ep: int, step: int) -> dict:
        steps = [
            {
                "step": i,
                "difficulty": d,
                "problem_type": "t",
                "tokens": 40 * d + 10 * ep + 5 * step * (d - 2),
                "correct": (ep + i) % 2 == 0,
                "forfeit": False,
            }
            for i, d in enumerate((1, 2, 3))
        ]
        return {
            "episode": ep,
            "num_correct": sum(s["correct"] for s in steps),
            "num_questions": 3,
            "num_answered": 3,
            "answered_tokens": sum(s["tokens"] for s in steps),
            "cap_hits": 0,
            "num_turns": 3,
            "ran_dry": 0,
            "forfeited": 0,
            "regret": 0.5 - 0.1 * step + 0.02 * ep,
            "steps": steps,
        }

    with open(folder / "evaluations.jsonl", "w", encoding="utf-8") as fh:
        for step in (0, 2, 4):
            for row in evaluation_metrics([record(e, step) for e in range(6)], step):
                fh.write(json.dumps(row) + "\n")
    return folder


def test_held_out_figure_plots_tokens_by_difficulty_and_regret_with_intervals(tmp_path):
    folder = _held_out_run(tmp_path)
    rs = compare.load_runs([folder])
    ev = compare.held_out_evaluations(rs)
    assert set(ev["metric"]) >= {"tokens_by_difficulty", "regret", "accuracy"}
    fig = compare.held_out_figure(rs)
    by_name = {t.name: t for t in fig.data}
    assert set(by_name) == {"difficulty 1", "difficulty 2", "difficulty 3", "regret"}
    d3 = by_name["difficulty 3"]
    assert list(d3.x) == [0, 2, 4] and d3.y[2] > d3.y[0]  # more tokens on the hardest questions as training goes
    assert list(by_name["regret"].y) == pytest.approx([0.55, 0.35, 0.15])
    assert all(v >= 0 for v in by_name["regret"].error_y.array) and max(by_name["regret"].error_y.array) > 0


def test_held_out_figure_without_evaluations_says_how(runs_root):
    fig = compare.held_out_figure(compare.load_runs([runs_root / "train-tiny"]))
    assert any("--eval_every" in (a.text or "") for a in fig.layout.annotations)


def test_an_empty_figure_is_a_note_without_axes():
    """The Runs tab's budget-sweep placeholder read as a chart of nothing with axes -1..6."""
    from workbench.plots import empty_figure

    fig = empty_figure("Accuracy against budget", "one budget only")
    assert fig.layout.xaxis.visible is False and fig.layout.yaxis.visible is False
    assert [a.text for a in fig.layout.annotations] == ["one budget only"] and not fig.data


def test_several_runs_draw_accuracy_by_length_as_markers_without_lines(tmp_path):
    runs = compare.load_runs([make_eval_run(tmp_path, "eval-a", seed=1), make_eval_run(tmp_path, "eval-b", seed=2)])
    drawn = [t for t in compare.accuracy_vs_tokens(runs).data if list(t.x) != [None]]  # not the run key
    binned = [t for t in drawn if not t.name.endswith("(mean)")]
    assert len(binned) == 4 and all(t.mode == "markers" for t in binned)
    one = compare.load_runs([tmp_path / "eval-a"])
    assert {t.mode for t in compare.accuracy_vs_tokens(one).data if not t.name.endswith("(mean)")} == {"lines+markers"}


def _lab(hex_colour: str) -> tuple[float, float, float]:
    """CIELAB of an sRGB ``#RRGGBB`` (D65)."""
    r, g, b = (int(hex_colour[i : i + 2], 16) / 255 for i in (1, 3, 5))
    lin = [((c + 0.055) / 1.055) ** 2.4 if c > 0.04045 else c / 12.92 for c in (r, g, b)]
    x = (0.4124 * lin[0] + 0.3576 * lin[1] + 0.1805 * lin[2]) / 0.95047
    y = 0.2126 * lin[0] + 0.7152 * lin[1] + 0.0722 * lin[2]
    z = (0.0193 * lin[0] + 0.1192 * lin[1] + 0.9505 * lin[2]) / 1.08883
    f = [v ** (1 / 3) if v > 0.008856 else 7.787 * v + 16 / 116 for v in (x, y, z)]
    return 116 * f[1] - 16, 500 * (f[0] - f[1]), 200 * (f[1] - f[2])


def test_the_problem_types_of_one_episode_get_colours_far_apart():
    """GSM_Rephrased and MATH_AnsAug were two near-identical pinks (Plotly's Dark24)."""
    import itertools
    import math

    types = episode_plots.KNOWN_TYPES[:12]  # MetaMathQA's 8, NuminaMath-TIR, GSM8K, MATH-500, reasoning_gym
    colours = [episode_plots.type_color(t) for t in types]
    gaps = {
        (a, b): math.dist(_lab(ca), _lab(cb)) for (a, ca), (b, cb) in itertools.combinations(zip(types, colours), 2)
    }
    assert min(gaps.values()) >= 25, min(gaps, key=gaps.get)
    assert (
        math.dist(_lab(episode_plots.type_color("GSM_Rephrased")), _lab(episode_plots.type_color("MATH_AnsAug"))) > 60
    )


def test_the_length_histogram_draws_written_off_answers_apart():
    """The report's histogram had an unexplained spike of ~47 wrong answers at 0 tokens: the
    allocators' minimum-length guesses on questions they write off."""
    steps = pd.DataFrame(
        {
            "policy": ["sim_greedy"] * 6,
            "tokens": [6, 7, 10, 120, 300, 450],
            "correct": [False, False, False, True, False, True],
        }
    )
    fig = plots.length_histogram_figure(steps)
    by_name = {t.name: sorted(t.x) for t in fig.data}
    assert by_name["correct"] == [120, 450] and by_name["wrong"] == [300]
    assert by_name["bare answers, <= 16 tokens (3, 3 wrong)"] == [6, 7, 10]
