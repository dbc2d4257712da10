"""Research-grade numbers of an evaluation: intervals in summary.csv, paired comparisons, several
seeds, budget sweeps and the frontier, provenance, the regret function, the report's layout and
``python -m workbench.compare``."""

from __future__ import annotations

import math
import os

import evalpol_fixtures as fx
import numpy as np
import pandas as pd
import pytest

from reasoning_env.config import EnvConfig
from reasoning_env.policies import SolverCurves, episode_regret, make_policy
from workbench import analysis, stats
from workbench.evaluate import evaluate, main

# its tests share evaluation run folders (module fixtures): one worker runs them all (pytest-xdist --dist loadgroup)
pytestmark = pytest.mark.xdist_group("test_evaluate_stats")

POLICIES = ("uniform", "sim_greedy", "oracle_allocation")


def _run(tmp_path, name="run", n=6, **kw):
    return evaluate(
        [make_policy(p) for p in kw.pop("policies", POLICIES)],
        config=kw.pop("config", fx.config()),
        pools=fx.pools(),
        n_episodes=n,
        seed=kw.pop("seed", 5),
        out=tmp_path / name,
        progress=False,
        n_resamples=500,
        **kw,
    )


@pytest.fixture(scope="module")
def run(tmp_path_factory):
    return _run(tmp_path_factory.mktemp("stats"), report=True)


def test_every_rate_and_mean_of_the_summary_has_a_bootstrap_interval(run):
    summ = run.summary.set_index("policy")
    ep = run.episodes
    for metric in analysis.CI_METRICS:
        lo, hi = stats.ci_columns(metric)
        assert lo in summ.columns and hi in summ.columns
        ok = summ[metric].notna()
        assert (summ.loc[ok, lo] <= summ.loc[ok, metric] + 1e-9).all() and (
            summ.loc[ok, metric] <= summ.loc[ok, hi] + 1e-9
        ).all(), metric
    uni = ep[ep["policy"] == "uniform"]
    expect = stats.ratio_interval(uni["num_correct"], uni["num_questions"], n_resamples=500)
    assert summ.loc["uniform", "accuracy_ci_low"] == pytest.approx(expect.low, abs=1e-6)
    assert summ.loc["uniform", "accuracy_ci_high"] == pytest.approx(expect.high, abs=1e-6)
    # the oracle loses (almost) nothing to its own plan: a wrong answer's minimal response can be a token longer
    assert (
        0 <= summ.loc["oracle_allocation", "regret_ci_low"] and summ.loc["oracle_allocation", "regret_ci_high"] < 0.01
    )


def test_policies_on_the_same_seeds_are_compared_in_pairs(run):
    cmp = pd.read_csv(run.run_dir / "comparisons.csv")
    assert list(cmp.columns) == list(analysis.COMPARISON_COLUMNS)
    assert set(cmp["metric"]) == {"accuracy", "reward", "regret"} and len(cmp) == 3 * 3  # 3 pairs x 3 metrics
    row = cmp[
        (cmp["metric"] == "accuracy") & (cmp["policy_a"] == "uniform") & (cmp["policy_b"] == "oracle_allocation")
    ].iloc[0]
    ep = run.episodes
    a = ep[ep["policy"] == "uniform"].sort_values("episode")
    b = ep[ep["policy"] == "oracle_allocation"].sort_values("episode")
    d = (a["num_correct"].to_numpy() - b["num_correct"].to_numpy()) / 10
    assert row["difference"] == pytest.approx(d.mean()) and row["episodes"] == 6
    assert row["p_holm"] >= row["p_value"] and row["ci_low"] <= row["difference"] <= row["ci_high"]
    # "told apart" is one criterion: the Holm-adjusted p-value below 0.05 (not the unadjusted interval)
    assert row["distinguishable"] == (row["p_holm"] < analysis.ALPHA)


def test_the_report_says_where_the_numbers_come_from_first(run):
    html = (run.run_dir / "report.html").read_text(encoding="utf-8")
    head = html[: html.index("<h2>")]
    assert "Simulated solver" in head and "hand-chosen defaults" in head
    assert "Can the policies be told apart?" in html and (
        "is not told apart from" in html or "is told apart from every other" in html
    )
    assert "Pareto frontier" in html and "class='ci'" in html
    prov = run.meta["provenance"]
    assert set(prov["simulated_policies"]) == set(POLICIES) and prov["curves"] == SolverCurves().provenance


def test_the_config_records_the_seed_it_ran_with(run):
    cfg = EnvConfig.from_yaml(run.run_dir / "config.yaml")
    assert cfg.seed == 5 == run.meta["seed"]


def test_several_seeds_are_pooled_with_a_per_seed_table(tmp_path):
    res = _run(tmp_path, n=2, seeds=[3, 4], report=False, policies=("uniform", "sim_greedy"))
    assert res.meta["seeds"] == [3, 4] and len(res.meta["episode_seeds"]) == 4
    assert set(res.episodes["base_seed"]) == {3, 4} and res.episodes.groupby("policy").size().eq(4).all()
    seeds = pd.read_csv(res.run_dir / "seeds.csv")
    assert set(seeds["base_seed"]) == {3, 4} and set(seeds["reward_rank"]) <= {1, 2}
    one = _run(tmp_path, name="one", n=2, seed=3, report=False, policies=("uniform",))
    pooled = res.episodes[(res.episodes["policy"] == "uniform") & (res.episodes["base_seed"] == 3)]
    assert list(pooled["seed"]) == list(one.episodes["seed"])  # seed 3's episodes are the single-seed run's


def test_a_budget_sweep_has_one_row_per_policy_and_ratio_and_a_frontier(tmp_path):
    res = _run(tmp_path, n=3, budget_ratios=[1, 2, 4], report=True, policies=("uniform", "sim_greedy"))
    summ = res.summary
    assert list(zip(summ["policy"], summ["budget_ratio"])) == [
        (p, r) for p in ("uniform", "sim_greedy") for r in (1.0, 2.0, 4.0)
    ]
    for pol in ("uniform", "sim_greedy"):
        acc = summ[summ["policy"] == pol].set_index("budget_ratio")["mean_total_budget"]
        assert acc.is_monotonic_increasing  # the same episodes, budgets scaled
    assert summ["on_frontier"].any() and summ["on_frontier"].dtype == bool
    front = summ[summ["on_frontier"]]
    for _, r in summ.iterrows():  # nothing on the frontier is beaten on both accuracy and tokens
        if r["on_frontier"]:
            beaten = summ[
                (summ["accuracy"] >= r["accuracy"])
                & (summ["tokens_per_question"] <= r["tokens_per_question"])
                & ((summ["accuracy"] > r["accuracy"]) | (summ["tokens_per_question"] < r["tokens_per_question"]))
            ]
            assert beaten.empty
    assert len(front) >= 1
    html = (res.run_dir / "report.html").read_text(encoding="utf-8")
    assert "against budget" in html
    cmp = res.comparisons
    assert set(cmp["condition"]) == {"budget_ratio=1", "budget_ratio=2", "budget_ratio=4"}
    with pytest.raises(ValueError, match="total-budget"):
        _run(tmp_path, name="bad", n=1, budget_ratios=[1, 2], total_budget=500)
    with pytest.raises(ValueError, match="separate sweeps"):
        _run(tmp_path, name="bad2", n=1, budget_ratios=[1, 2], caps=[64])


def test_the_command_line_takes_seeds_ratios_and_a_budget_ratio(tmp_path, capsys):
    cfg = tmp_path / "c.yaml"
    cfg.write_text("sources: [metamathqa]\n", encoding="utf-8")
    code = main(
        [
            "--n_episodes",
            "1",
            "--policies",
            "uniform,sim_greedy",
            "--budget-ratios",
            "2,4",
            "--seeds",
            "1,2",
            "--out",
            str(tmp_path / "r"),
            "--no-progress",
            "--no-report",
            "--resamples",
            "200",
            "--config",
            str(cfg),
        ]
    )
    out = capsys.readouterr().out
    assert code == 0 and "95% CI" in out and "PROVENANCE" in out and "not told apart from it" in out
    summ = pd.read_csv(tmp_path / "r" / "summary.csv")
    assert sorted(set(summ["budget_ratio"])) == [2.0, 4.0]
    code = main(
        [
            "--n_episodes",
            "1",
            "--policies",
            "uniform",
            "--budget-ratio",
            "2",
            "--out",
            str(tmp_path / "r2"),
            "--no-progress",
            "--no-report",
            "--config",
            str(cfg),
        ]
    )
    assert code == 0 and set(pd.read_csv(tmp_path / "r2" / "summary.csv")["budget_ratio"]) == {2.0}
    capsys.readouterr()
    assert main(["--budget-ratios", "2,x", "--out", str(tmp_path / "r3")]) == 2
    assert "comma list of numbers" in capsys.readouterr().err


def test_episode_regret_is_the_public_oracle_function():
    curves = SolverCurves()
    qs = [("GSM8K", None), ("MATH-500", 4), ("MATH-500", 1)]
    r = episode_regret(curves, qs, 600, [100, 300, 150])
    assert r.expected_correct == pytest.approx(sum(float(curves.p(t, p, d)) for (p, d), t in zip(qs, [100, 300, 150])))
    assert r.regret == pytest.approx(r.oracle_expected_correct - r.expected_correct) and r.regret >= -1e-12
    assert sum(r.oracle_tokens) <= 600
    short = episode_regret(curves, qs, 600, [590])  # ran dry after one question: the rest count 0
    assert short.expected_correct == pytest.approx(float(curves.p(590, "GSM8K", None)))
    assert short.oracle_expected_correct == pytest.approx(r.oracle_expected_correct)
    with pytest.raises(ValueError, match="token counts"):
        episode_regret(curves, qs, 600, [1, 2, 3, 4])


def test_summary_intervals_need_two_episodes(tmp_path):
    res = _run(tmp_path, n=1, report=False, policies=("uniform",))
    row = res.summary.iloc[0]
    assert math.isnan(row["accuracy_ci_low"]) and not math.isnan(row["accuracy"])


def test_compare_prints_intervals_and_the_paired_comparison_and_writes_figures(run, tmp_path, capsys):
    from workbench.compare import main as compare_main

    other = _run(tmp_path, name="other", n=6, report=False, policies=("uniform",))
    out = tmp_path / "cmp"
    assert compare_main([str(run.run_dir), str(other.run_dir), "--out", str(out)]) == 0
    text = capsys.readouterr().out
    assert "95% CI" in text and "not told apart from it" in text
    assert (out / "figures.html").stat().st_size > 100_000
    cmp = pd.read_csv(out / "comparisons.csv")
    same = cmp[
        (cmp["metric"] == "accuracy")
        & (cmp["policy_a"].str.endswith(":uniform"))
        & (cmp["policy_b"].str.endswith(":uniform"))
    ]
    assert len(same) == 1 and same.iloc[0]["difference"] == pytest.approx(0.0)  # the same seeds, the same policy
    assert compare_main([str(tmp_path / "missing")]) == 2


CHROMIUM = "/usr/bin/chromium"


@pytest.mark.slow
@pytest.mark.skipif(
    not os.path.exists(CHROMIUM),
    reason=f"no Chromium at {CHROMIUM} (install Debian's chromium: apt-get install chromium)",
)
def test_the_report_fits_1400_pixels_without_horizontal_scrolling(run):
    """Issue: the raw JSON block and the summary table scrolled sideways."""
    sync_api = pytest.importorskip("playwright.sync_api", reason="playwright (Python) is not installed")
    with sync_api.sync_playwright() as p:
        browser = p.chromium.launch(
            executable_path=CHROMIUM,
            args=["--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking"],
        )
        try:
            page = browser.new_page(viewport={"width": 1400, "height": 900})
            page.goto((run.run_dir / "report.html").as_uri(), timeout=120_000)
            page.wait_for_selector("svg.main-svg", timeout=120_000)
            widths = page.evaluate("""() => ({
                doc: document.documentElement.scrollWidth,
                view: document.documentElement.clientWidth,
                over: [...document.querySelectorAll('table, pre, .plot')]
                    .filter(e => e.scrollWidth > e.clientWidth + 1
                        || e.getBoundingClientRect().right > document.documentElement.clientWidth + 1)
                    .map(e => e.tagName + '.' + e.className)})""")
        finally:
            browser.close()
    assert widths["doc"] <= widths["view"], widths
    assert widths["over"] == [], widths


def test_the_best_policy_differences_are_oriented_best_minus_other():
    # comparisons store each pair once, a - b; where the best policy is b, its difference to a is
    # the negated row with the interval's bounds swapped (what the CLI text and the report print)
    summary = pd.DataFrame({"policy": ["a", "b", "c"], "accuracy": [0.4, 0.7, 0.5]})
    comparisons = pd.DataFrame(
        {
            "condition": ["", "", ""],
            "metric": ["accuracy"] * 3,
            "policy_a": ["a", "b", "a"],
            "policy_b": ["b", "c", "c"],
            "difference": [-0.3, 0.2, -0.1],
            "ci_low": [-0.45, -0.05, -0.2],
            "ci_high": [-0.15, 0.4, 0.0],
            "p_value": [0.001, 0.2, 0.05],
            "p_holm": [0.003, 0.2, 0.1],
            "distinguishable": [True, False, False],
            "episodes": [20, 20, 20],
        }
    )
    (item,) = analysis.indistinguishable(comparisons, summary, metric="accuracy")
    assert item["best"] == "b" and item["tied"] == ["c"] and item["separated"] == ["a"]
    vs_a, vs_c = item["differences"]
    assert vs_a["other"] == "a" and vs_a["difference"] == pytest.approx(0.3)
    assert (vs_a["ci_low"], vs_a["ci_high"]) == pytest.approx((0.15, 0.45))
    assert math.isnan(vs_c.pop("sd"))  # this hand-made frame has no sd column
    assert vs_c == {
        "other": "c",
        "difference": 0.2,
        "ci_low": -0.05,
        "ci_high": 0.4,
        "p_value": 0.2,
        "p_holm": 0.2,
        "distinguishable": False,
        "episodes": 20,
    }
    text = analysis.format_comparisons(comparisons, summary, metrics=("accuracy",))
    assert "b - a: +0.300 [+0.150, +0.450], p = 0.001 (Holm 0.003)" in text
    assert "b - c: +0.200 [-0.050, +0.400], p = 0.2 (Holm 0.2)  <- not told apart" in text


def _paired_episodes(diffs_by_policy: dict[str, list[float]]) -> pd.DataFrame:
    rows = []
    for pol, values in diffs_by_policy.items():
        for i, v in enumerate(values):
            rows.append(
                {"policy": pol, "episode": i, "num_correct": v, "num_questions": 1, "episode_reward": v, "regret": 0.0}
            )
    return pd.DataFrame(rows)


def test_told_apart_is_the_holm_adjusted_p_value_not_the_unadjusted_interval():
    # 8 policies (28 pairs): "b" beats "a" on 9 of 10 episodes, so its unadjusted interval excludes 0
    # and p ~ 0.02, but Holm over 28 pairs does not support a separation
    base = [0.0] * 10
    eps = {"a": base, "b": [1.0] * 9 + [0.0]}
    for k in range(6):
        eps[f"c{k}"] = [float((i + k) % 2) for i in range(10)]
    cmp = analysis.paired_comparisons(_paired_episodes(eps), metrics=("accuracy",))
    row = cmp[(cmp["policy_a"] == "a") & (cmp["policy_b"] == "b")].iloc[0]
    assert row["ci_high"] < 0 and row["p_value"] < 0.05 and row["p_holm"] >= 0.05
    assert not row["distinguishable"]
    assert (cmp["distinguishable"] == (cmp["p_holm"] < analysis.ALPHA)).all()


def test_the_comparison_text_states_the_p_value_floor_and_a_power_line_for_best_vs_runner_up():
    rng = np.random.default_rng(0)
    eps = {"a": list(rng.integers(0, 2, 20).astype(float))}
    eps["b"] = [min(1.0, v + (i % 3 == 0)) for i, v in enumerate(eps["a"])]
    eps["c"] = [0.0] * 20
    episodes = _paired_episodes(eps)
    summary = analysis.summary_table(
        episodes.assign(
            num_answered=1,
            total_spent=10.0,
            total_budget=10.0,
            utilisation=1.0,
            ran_dry=False,
            budget_source="fixed",
            tokenizer_name="t",
            expected_correct=0.5,
        )
    )
    text = analysis.format_comparisons(analysis.paired_comparisons(episodes), summary, metrics=("accuracy",))
    assert "exact over all 2^20 sign flips, floor 9.5e-07" in text
    (item,) = analysis.indistinguishable(analysis.paired_comparisons(episodes), summary, metric="accuracy")
    assert item["best"] == "b" and item["power"]["other"] == "a"
    assert "power (b vs runner-up a, 20 paired episodes" in text and "smallest difference detectable" in text
    pw = item["power"]
    assert pw["mde"] == pytest.approx(stats.detectable_difference(pw["sd"], 20))
    assert pw["needed_holm"] > pw["needed"] > 0


def _episodes_with_forfeits() -> pd.DataFrame:
    rows = []
    for pol, answered, informed in (("a", [10, 10, 10, 10], False), ("b", [7, 8, 10, 6], True)):
        for i, n in enumerate(answered):
            rows.append(
                dict(
                    policy=pol,
                    episode=i,
                    num_questions=10,
                    num_answered=n,
                    num_correct=n // 2 + i % 2,
                    total_spent=100.0 * n,
                    total_budget=1000.0,
                    utilisation=n / 10,
                    ran_dry=n < 10,
                    episode_reward=float(n) / 3 + i,
                    expected_correct=n / 2,
                    regret=0.1 * i,
                    budget_source="fixed",
                    tokenizer_name="t",
                    oracle_informed=informed,
                )
            )
    return pd.DataFrame(rows)


def test_forfeits_are_counted_per_policy_with_an_interval():
    s = analysis.summary_table(_episodes_with_forfeits()).set_index("policy")
    assert s.loc["a", "unasked"] == 0 and s.loc["b", "unasked"] == 3 + 2 + 0 + 4
    assert s.loc["b", "unasked_per_episode"] == pytest.approx(9 / 4)
    lo, hi = stats.ci_columns("unasked_per_episode")
    assert s.loc["b", lo] <= 9 / 4 <= s.loc["b", hi] and s.loc["b", lo] < s.loc["b", hi]


def test_every_number_of_the_terminal_table_has_its_interval_and_informed_policies_are_marked():
    text = analysis.format_table(analysis.summary_table(_episodes_with_forfeits()))
    head, _rule, row_a, ci_a, row_b, ci_b = text.splitlines()[:6]
    numbers = len(row_a.split()) - 1
    assert "unasked/ep" in head and ci_a.strip().startswith("95% CI")
    assert ci_b.count("[") == numbers == 9  # acc, exp_acc, unasked/ep, tok/q, acc/1k, util, dry, reward, regret
    assert row_b.startswith("b (oracle-informed)") and not row_a.startswith("a (oracle")
    # the forfeits sit beside the two figures that leave them out
    assert head.split().index("unasked/ep") + 1 == head.split().index("tok/q")


def test_questions_without_difficulty_are_named_in_the_provenance():
    from workbench.evaluation.writer import provenance, unlabelled_questions

    steps = pd.DataFrame(
        {"question_id": ["q1", "q2", "q1"], "difficulty": [None, 3, None], "problem_type": ["GSM8K", "MATH", "GSM8K"]}
    )
    unl = unlabelled_questions(steps, SolverCurves())
    assert unl == {"unlabelled": 1, "questions": 2, "levels": {"GSM8K": 2}}
    prov = provenance([{"name": "sim_greedy", "kind": "simulated"}], [], SolverCurves(), unlabelled=unl)
    assert any("one curve for all of them" in w and "difficulty_field" in w for w in prov["warnings"])
    labelled = steps.assign(difficulty=[2, 3, 2])
    assert unlabelled_questions(labelled, SolverCurves()) is None


def test_the_component_table_shows_the_forfeit_so_the_components_sum_to_the_reward():
    ep = _episodes_with_forfeits()
    unasked = ep["num_questions"] - ep["num_answered"]
    ep["reward_correctness"] = ep["num_correct"] * 1.1 - 0.1 * ep["num_answered"]
    ep["reward_efficiency_bonus"] = 0.0
    ep["reward_cost_penalty"] = 0.0
    ep["reward_episode_bonus"] = 0.2
    ep["reward_forfeit"] = -0.1 * unasked  # the default reward's charge per question never asked
    ep["episode_reward"] = ep[[c for c in ep.columns if c.startswith("reward_")]].sum(axis=1)
    text = analysis.format_table(analysis.summary_table(ep))
    lines = text.splitlines()
    at = lines.index("reward components (mean per episode; they sum to reward, whose interval is above):")
    head = lines[at + 1].split()
    assert head[-1] == "forfeit"
    for line in lines[at + 3 : at + 5]:
        values = [float(v) for v in line.split()[1:]]
        assert values[0] == pytest.approx(sum(values[1:]), abs=2e-3)  # printed to 3 decimals
