"""Counterfactual re-scoring: equal to the environment's live rewards on recorded runs."""

from __future__ import annotations

import io
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import pytest

from reasoning_env.config import EnvConfig
from reasoning_env.env import ReasoningEconomicsEnv
from reasoning_env.policies.curves import load_curves
from reasoning_env.records import episode_row_from_steps, step_row_from_observation
from reasoning_env.rewards import trl_reward_function
from workbench.reward_lab import RescoreError, Rescorer, compare_to_stored, rescore
from workbench.reward_lab.synthetic import synthetic_steps
from workbench.runs import RunWriter, load_run

SHARED_DATA = Path(__file__).resolve().parents[1].parent / "shared" / "data"
#: GSM8K + MATH-500 from ../shared when present, else offline reasoning-gym questions.
HAVE_SHARED = all((SHARED_DATA / f).is_file() for f in ("gsm8k_test.jsonl", "math500_test.jsonl"))

COUNTERFACTUAL = {
    "type": "combined",
    "rewards": [
        {"type": "budget_aware", "params": {"share": "both", "gamma": 0.3}},
        {"type": "cosine", "weight": 0.1, "params": {"l_max": 300}},
        {"type": "format", "weight": 0.2},
        {"type": "repetition", "weight": 0.5, "params": {"ngram_size": 2}},
        {"type": "l1_max", "params": {"target": "remaining_share"}},
    ],
}


def _config(hard: bool, reward: dict | None = None) -> EnvConfig:
    if HAVE_SHARED:
        return EnvConfig(sources=["gsm8k", "math500"], data_dir=str(SHARED_DATA), hard_cap_mode=hard, reward=reward)
    return EnvConfig(sources=[{"name": "reasoning_gym", "options": {"size": 20}}], hard_cap_mode=hard, reward=reward)


def _response(q, k: int, rng: np.random.Generator) -> str:
    """A response of varying length: right, wrong, unboxed or repetitive."""
    body = " ".join(["Let me think step by step about the quantities."] * int(rng.integers(1, 40)))
    kind = k % 5
    if kind == 1:
        return body + " \\boxed{-98765}"
    if kind == 2:
        return body + " I am not sure."
    if kind == 3:
        return "so so so so so so so " * int(rng.integers(1, 20)) + f"\\boxed{{{q.gold_answer}}}"
    return body + f" Therefore \\boxed{{{q.gold_answer}}}"


def record_run(
    path: Path,
    config: EnvConfig,
    *,
    episodes: int,
    budget: int,
    seed: int = 0,
    group_size: int | None = None,
    responses: dict | None = None,
) -> tuple[Path, dict]:
    """Play real episodes and write a run folder. ``responses`` replays recorded texts
    (``{(episode, member, step): text}``); the texts used are returned."""
    env = ReasoningEconomicsEnv(config)
    writer = RunWriter(path, kind="training" if group_size else "evaluation", config=config, meta={"seed": seed})
    rng = np.random.default_rng(seed)
    used = {}
    members = group_size or 1
    for e in range(episodes):
        for m in range(members):
            obs = env.reset(seed=seed + e, total_budget=budget)
            md = dict(obs.metadata)
            rows = []
            while not obs.done:
                i = obs.question_index
                q = env.questions[i]
                key = (e, m, i)
                text = responses[key] if responses is not None else _response(q, int(rng.integers(0, 5)), rng)
                used[key] = text
                obs = env.step(text)
                rows.append(
                    step_row_from_observation(
                        obs,
                        run_id=path.name,
                        policy="scripted",
                        episode=e * members + m,
                        reset_metadata=md,
                        hard_cap_mode=config.hard_cap_mode,
                        response=text,
                        group=e if group_size else None,
                        member=m if group_size else None,
                    )
                )
            writer.add_steps(rows)
            writer.add_episode(episode_row_from_steps(rows))
    return writer.write(), used


@pytest.fixture(scope="module")
def recorded(tmp_path_factory) -> dict[str, Any]:
    root = tmp_path_factory.mktemp("runs")
    out = {}
    for mode, hard, budget in (("hard", True, 1500), ("soft", False, 1200)):
        path, texts = record_run(root / f"seed_{mode}", _config(hard), episodes=6, budget=budget, seed=11)
        replay, _ = record_run(
            root / f"cf_{mode}", _config(hard, COUNTERFACTUAL), episodes=6, budget=budget, seed=11, responses=texts
        )
        out[mode] = (path, replay)
    out["group"], _ = record_run(root / "grpo", _config(True), episodes=2, budget=2500, seed=5, group_size=3)
    return out


@pytest.mark.parametrize("mode", ["hard", "soft"])
def test_rescoring_with_the_recorded_config_reproduces_live_rewards(recorded, mode):
    path, _ = recorded[mode]
    run = load_run(path)
    steps = run.steps
    if mode == "hard":
        assert (steps["done_reason"] == "budget_exhausted").any(), "the hard-cap run should run dry at least once"
    else:
        assert (steps["reward_overspend_penalty"] < 0).any(), "the soft run should overspend"
    assert (~steps["correct"]).any() and steps["correct"].any() and (~steps["has_answer"]).any()
    res = rescore(path)  # the run's own reward (config.yaml)
    diff = compare_to_stored(steps, res)
    assert diff.max() < 1e-9, diff
    ep = run.episodes.sort_values("episode")["episode_reward"].to_numpy()
    assert np.allclose(res.episodes.sort_values("episode")["reward"].to_numpy(), ep, atol=1e-9)


@pytest.mark.parametrize("mode", ["hard", "soft"])
def test_counterfactual_equals_replaying_the_episodes_under_that_reward(recorded, mode):
    seed_path, cf_path = recorded[mode]
    cf = load_run(cf_path)
    assert compare_to_stored(cf.steps, rescore(cf_path)).max() < 1e-9  # non-default recorded reward
    res = rescore(seed_path, COUNTERFACTUAL)
    assert res.steps["tokens"].tolist() == cf.steps["tokens"].tolist()
    diff = compare_to_stored(cf.steps, res)
    assert diff.max() < 1e-9, diff
    assert "budget_aware.episode_bonus" in res.components and "cosine" in res.components
    # the live environment reported the configured reward's components by name
    assert {"reward_cosine", "reward_format", "reward_budget_aware.cost_penalty", "reward_l1_max"} <= set(
        cf.steps.columns
    )


def test_group_rewards_rescore_like_the_trl_callable(recorded):
    run = load_run(recorded["group"])
    steps = run.steps
    assert steps["group"].nunique() == 2 and steps["member"].nunique() == 3
    for spec in ("kimi_length", {"type": "shorter_better", "beta": 0.002}, "arora_zanette"):
        res = rescore(run, spec)
        fn = trl_reward_function(spec)
        for (g, s), rows in steps.groupby(["group", "step"]):
            expect = fn(
                rows["response"].tolist(),
                prompts=["same"] * len(rows),
                tokens=rows["raw_tokens"].tolist(),
                correct=rows["correct"].tolist(),
            )
            got = res.steps.loc[rows.index, "reward"].to_numpy()
            assert got == pytest.approx(expect, abs=1e-12), (spec, g, s)
    # the rows of one (group, step) are compared, not the whole group
    kimi = rescore(run, "kimi_length").steps
    assert kimi.groupby(["group", "step"])["reward"].max().max() <= 0.5


@pytest.mark.parametrize("hard", [True, False])
@pytest.mark.parametrize(
    "spec",
    [
        None,
        "budget_aware",
        COUNTERFACTUAL,
        {"type": "combined", "rewards": ["accuracy", {"type": "economics", "weight": 0.5}]},
    ],
)
def test_synthetic_runs_round_trip(spec, hard):
    frame = synthetic_steps(
        400, hard_cap_mode=hard, total_budget=2000 if hard else 1500, reward=spec, with_text=True, seed=3
    )
    res = Rescorer(frame).rescore(spec)
    assert compare_to_stored(frame, res).max() < 1e-9
    assert len(res.episodes) == frame["episode"].nunique()
    assert res.episodes["num_answered"].sum() == len(frame)


def test_groups_and_texts_are_explained():
    frame = synthetic_steps(200, seed=1)
    rs = Rescorer(frame)
    with pytest.raises(RescoreError, match="group_by"):
        rs.rescore("kimi_length")
    res = Rescorer(frame, group_by=["step"]).rescore("kimi_length")  # compare all episodes' i-th answers
    assert res.steps["reward"].max() == pytest.approx(0.5)
    res = rs.rescore("format")
    assert any("has_answer" in n for n in res.notes)
    assert res.steps["reward"].tolist() == frame["has_answer"].astype(float).tolist()
    with pytest.raises(RescoreError, match="lacks column"):
        Rescorer(frame.drop(columns=["tokens"]))
    summary = rs.rescore("accuracy").summary()
    assert summary["reward"].iloc[0] == pytest.approx(frame.groupby("episode")["correct"].sum().mean())


def test_rescoring_benchmark_prints_speed():
    """Benchmark-style print of re-scoring speed (not a timed assert)."""
    from workbench.reward_lab.__main__ import bench

    buf = io.StringIO()
    table = bench(10_000, repeat=2, text=False, out=buf)
    print(buf.getvalue())
    assert isinstance(table, pd.DataFrame) and "rescore economics (default)" in buf.getvalue()
    assert "rescore reference (seed)" in buf.getvalue()
    assert (table["ms"] > 0).all()


def test_command_line(recorded, tmp_path, capsys):
    from workbench.reward_lab.__main__ import main

    path, _ = recorded["hard"]
    spec = tmp_path / "l1.yaml"
    spec.write_text("type: l1_max\nparams: {alpha: 0.001}\n")
    assert main(["rescore", str(path), "--reward", str(spec), "--out", str(tmp_path / "out")]) == 0
    out = capsys.readouterr().out
    assert "scripted" in out and "reward_l1_max" in out
    assert len(pd.read_parquet(tmp_path / "out" / "rescored_steps.parquet")) == len(load_run(path).steps)
    assert main(["describe", "cosine"]) == 0
    assert '"r_exceed"' in capsys.readouterr().out
    assert (
        main(
            [
                "induced",
                "--budgets",
                "600",
                "--rewards",
                "economics",
                "l1_max",
                "--orders",
                "1",
                "--html",
                str(tmp_path / "f.html"),
            ]
        )
        == 0
    )
    out = capsys.readouterr().out
    assert "oracle" in out and "mean tokens by difficulty" in out and (tmp_path / "f.html").stat().st_size > 10_000


@pytest.mark.parametrize(
    "argv, says",
    [
        (["rescore", "/no/such/run"], "is not a folder"),
        (["describe", "nope"], "unknown reward 'nope'"),
        (["induced", "--rewards", "nope", "--budgets", "600"], "unknown reward 'nope'"),
        (["bench", "--steps", "0"], "--steps and --repeat must be >= 1"),
        (["bench", "--repeat", "0"], "--steps and --repeat must be >= 1"),
        (["induced", "--budgets", "-100"], "--budgets must be positive"),
        (["induced", "--budgets", "600", "--orders", "0"], "--orders >= 1"),
        (["induced", "--budgets", "600", "--rewards", "kimi_length"], "group rewards"),
        (["induced", "--budgets", "600", "--curves", "no-such-set"], "qwen2.5-coder-0.5b"),  # names the shipped sets
    ],
)
def test_command_line_bad_input_is_one_error_line(argv, says, capsys):
    from workbench.reward_lab.__main__ import main

    assert main(argv) == 2
    err = capsys.readouterr().err
    assert err.startswith("error: ") and says in err and "Traceback" not in err


def test_command_line_induced_reads_a_shipped_curve_set_by_name(capsys):
    from workbench.reward_lab.__main__ import main

    argv = ["induced", "--budgets", "600", "--orders", "1", "--rewards", "accuracy", "--curves", "qwen2.5-coder-0.5b"]
    assert main(argv) == 0
    assert "solver: " + load_curves("qwen2.5-coder-0.5b").provenance in capsys.readouterr().out


def test_command_line_summary_grouping(recorded, capsys):
    from workbench.reward_lab.__main__ import main

    path = recorded["group"]
    assert (
        main(
            [
                "rescore",
                str(path),
                "--reward",
                "kimi_length",
                "--by",
                "member",
                "--group-by",
                "run_id,policy,group,step",
            ]
        )
        == 0
    )
    out = capsys.readouterr().out
    assert out.splitlines()[0].split()[0] == "member" and len(out.splitlines()) >= 4  # header + 3 members
    assert main(["rescore", str(path), "--by", "nope"]) == 2
    assert "cannot group the summary by 'nope'" in capsys.readouterr().err


def test_command_line_out_on_a_run_folder_is_refused_before_rescoring(recorded, tmp_path, capsys):
    from workbench.reward_lab.__main__ import main

    path, _ = recorded["hard"]
    before = sorted(p.name for p in path.iterdir())
    assert main(["rescore", str(path), "--out", str(path)]) == 2
    err = capsys.readouterr().err
    assert err.startswith("error: --out") and "holds a run" in err and "choose another folder" in err
    assert err.count("\n") == 1 and sorted(p.name for p in path.iterdir()) == before


def test_command_line_out_on_a_file_names_out_and_the_fix(recorded, tmp_path, capsys):
    from workbench.reward_lab.__main__ import main

    path, _ = recorded["hard"]
    blocker = tmp_path / "afile"
    blocker.write_text("x")
    assert main(["rescore", str(path), "--out", str(blocker)]) == 2
    err = capsys.readouterr().err
    assert "a file is in the way" in err and "choose another --out" in err and "Errno" not in err
    assert blocker.read_text() == "x"


def test_the_shipped_training_run_rescored_with_its_recorded_reward_reproduces_its_rewards():
    """The example run was paid the seed's reward: its config names it (``reference``), so re-scoring with the
    run's own reward still reproduces every stored reward after the default changed."""
    path = Path(__file__).resolve().parents[1] / "examples" / "runs" / "grpo-cpu-qwen0.5b"
    run = load_run(path)
    assert compare_to_stored(run.steps, rescore(path)).max() < 1e-9
