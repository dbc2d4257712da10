"""What the console, report.html and the Runs tab say about policies matches the records: a ranking "changes" only
where policies told apart swap, the report says what the console says, a real model's rows show no numbers the solver
curves made up, and the held-out table says why a number has no interval."""

from __future__ import annotations

import pandas as pd

from workbench import analysis
from workbench.evaluate import _curve_set_folder


def _run(rewards: dict[str, tuple[float, float, float]], told_apart: list[tuple[str, str, float]]):
    summary = pd.DataFrame(
        [{"policy": p, "reward": v, "reward_ci_low": lo, "reward_ci_high": hi} for p, (v, lo, hi) in rewards.items()]
    )
    comparisons = pd.DataFrame(
        [
            {"metric": "reward", "policy_a": a, "policy_b": b, "difference": d, "distinguishable": True}
            for a, b, d in told_apart
        ],
        columns=["metric", "policy_a", "policy_b", "difference", "distinguishable"],
    )
    return summary, comparisons


POLICIES = ["oracle_allocation", "uniform", "greedy_max"]
DEFAULTS = _run(
    {"oracle_allocation": (6.1, 5.4, 6.9), "uniform": (5.7, 4.8, 6.6), "greedy_max": (0.6, 0.4, 0.9)},
    [("oracle_allocation", "greedy_max", 5.5), ("uniform", "greedy_max", 5.1)],
)


def test_a_ranking_changes_only_when_a_pair_told_apart_under_both_sets_swaps():
    other = _run(
        {"oracle_allocation": (1.0, 0.5, 1.5), "greedy_max": (0.9, 0.4, 1.4), "uniform": (-0.5, -0.9, -0.1)},
        [("uniform", "greedy_max", -1.4)],
    )
    v = analysis.curve_sensitivity({"defaults": DEFAULTS, "real": other}, POLICIES)["verdicts"]["real"]
    assert not v["survives"] and v["reversed"] == [["uniform", "greedy_max"]]


def test_a_reordering_of_ties_is_not_a_change():
    other = _run(
        {"oracle_allocation": (6.0, 5.4, 6.9), "greedy_max": (0.6, 0.4, 0.9), "uniform": (5.8, 4.8, 6.6)},
        [("oracle_allocation", "greedy_max", 5.4)],
    )
    v = analysis.curve_sensitivity({"defaults": DEFAULTS, "real": other}, POLICIES)["verdicts"]["real"]
    assert v["survives"] and not v["reversed"]


def test_a_set_under_which_nothing_is_told_apart_ranks_nothing():
    """Under the real model's curves the main job tells no pair apart in reward (0 of 21): the console said the
    ranking 'changes' from the order of the means, while report.html said nothing."""
    other = _run(
        {"oracle_allocation": (-0.1, -0.5, 0.3), "uniform": (-0.4, -0.7, 0.0), "greedy_max": (-0.6, -0.8, -0.4)}, []
    )
    result = analysis.curve_sensitivity({"defaults": DEFAULTS, "real": other}, POLICIES)
    assert result["verdicts"]["real"]["undetermined"] and not result["verdicts"]["real"]["survives"]
    text = analysis.format_curve_sensitivity(result)
    assert "undetermined: no pair is told apart under real" in text
    assert "uniform -0.400 [-0.70, +0.00]" in text  # every mean with its interval


def test_the_report_shows_the_curve_sensitivity_the_console_prints():
    from workbench.report import build_report

    result = analysis.curve_sensitivity({"defaults": DEFAULTS, "real": DEFAULTS}, POLICIES)
    empty = pd.DataFrame()
    html = build_report(empty, empty, empty, {"curve_sensitivity": result})
    assert "Does the ranking survive other solver curves?" not in html  # no summary: no section
    summary = DEFAULTS[0].assign(kind="oracle", episodes=1)
    html = build_report(pd.DataFrame(), pd.DataFrame(), summary, {"curve_sensitivity": result}, comparisons=empty)
    assert "Does the ranking survive other solver curves?" in html
    assert "real vs defaults: the same ranking" in html


def test_a_shipped_set_names_its_sub_run_whole():
    assert _curve_set_folder("qwen2.5-coder-0.5b") == "curves-qwen2.5-coder-0.5b"  # was curves-qwen2.5-coder-0
    assert _curve_set_folder("runs/calib/fitted_curves.json") == "curves-fitted_curves"


def test_the_console_leaves_curve_numbers_blank_for_a_real_model():
    """The CLI printed exp_acc 0.452 and regret 0.881 for a real model from the simulated curves, beside its real
    accuracy 0.150."""
    summary = pd.DataFrame(
        [
            {"policy": "llm_local", "kind": "llm", "accuracy": 0.15, "expected_accuracy": 0.452, "regret": 0.881},
            {
                "policy": "uniform",
                "kind": "budget_baseline",
                "accuracy": 0.5,
                "expected_accuracy": 0.49,
                "regret": 0.3,
            },
        ]
    )
    for col in ("accuracy", "expected_accuracy", "regret"):
        summary[f"{col}_ci_low"], summary[f"{col}_ci_high"] = summary[col] - 0.01, summary[col] + 0.01
    text = analysis.format_table(summary)
    assert "0.452" not in text and "0.881" not in text and "0.150" in text and "0.490" in text
    assert "exp_acc and regret are blank for llm_local" in text
    assert summary.loc[0, "regret"] == 0.881  # the records keep them


def test_the_runs_tab_leaves_the_regret_blank_for_a_real_model_too():
    from workbench.app.runs_tab import _display_table

    summary = pd.DataFrame(
        {"policy": ["llm_local", "uniform"], "kind": ["llm", "budget_baseline"], "regret": [0.881, 0.3]}
        | {"regret_ci_low": [0.8, 0.2], "regret_ci_high": [0.9, 0.4]}
    )
    assert _display_table(summary)["regret [95% CI]"].tolist() == ["", "0.300 [0.200, 0.400]"]


def test_the_held_out_table_says_why_a_tier_has_no_interval():
    from workbench.held_out import run_change_markdown

    text = run_change_markdown("examples/runs/grpo-cpu-qwen0.5b")
    line = next(row for row in text.splitlines() if row.startswith("| tokens per answered question, difficulty 1 |"))
    assert "(no interval: only 1 episode with such questions)" in line
    assert "(no interval)" not in text
    assert "| questions unasked (ran dry) per episode | 0.438" in text  # not the context forfeits' 0
    assert "| context forfeits per episode (context full) | 0 [0, 0]" in text


def test_the_training_docs_quote_the_runs_budgets_and_the_calibrated_accuracy_from_the_records():
    """docs said '225-1,488 tokens an episode' (records: 216-2,499 training, 177-1,212 held-out) and '~19% at 512
    tokens on GSM8K' (record: 7 of 40)."""
    import json
    from pathlib import Path

    root = Path(__file__).resolve().parents[1]
    run = root / "examples/runs/grpo-cpu-qwen0.5b"
    train = pd.read_parquet(run / "episodes.parquet")["total_budget"]
    held = [json.loads(line)["total_budget"] for line in (run / "eval_episodes.jsonl").read_text().splitlines()]
    docs = " ".join((root / "docs/training.md").read_text().split())
    assert f"{train.min():,}-{train.max():,} tokens an episode in training" in docs
    assert f"{min(held):,}-{max(held):,} in the held-out evaluations" in docs
    table = (root / "examples/calibration/qwen2.5-coder-0.5b/table.md").read_text()
    assert "| gsm8k | greedy | 512 | 40 (40 x 1) | 0.17 [0.09-0.32] |" in table  # 7 / 40 = 0.175
    assert "0.175 [0.088, 0.32] at 512 tokens on GSM8K" in docs and "~19%" not in docs
