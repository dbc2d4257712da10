"""workbench.evaluate: the run folder and its schema, reproducibility, seeding, budget modes,
the command line, the remote-server path, and the analysis/plot helpers."""

from __future__ import annotations

import json
import subprocess
import sys

import evalpol_fixtures as fx
import pandas as pd
import plotly.graph_objects as go
import pytest

from reasoning_env.config import EnvConfig
from reasoning_env.policies import (
    DEFAULT_POLICIES,
    POLICY_NAMES,
    GreedyMaxPolicy,
    SimulatedSolverPolicy,
    SolverCurves,
    UniformPolicy,
    make_policy,
)
from reasoning_env.records import EPISODE_COLUMNS, STEP_COLUMNS
from workbench import analysis, plots
from workbench.evaluate import RemoteEnv, episode_seed, evaluate, main
from workbench.runs import EVAL_EPISODE_EXTRAS, EVAL_STEP_EXTRAS, load_run

# its tests share evaluation run folders (module fixtures): one worker runs them all (pytest-xdist --dist loadgroup)
pytestmark = pytest.mark.xdist_group("test_evaluate")


def _run(tmp_path, name="run", n=3, seed=7, policies=DEFAULT_POLICIES, **kw):
    pols = [make_policy(p) for p in policies]
    return evaluate(
        pols,
        config=kw.pop("config", fx.config()),
        pools=fx.pools(),
        n_episodes=n,
        seed=seed,
        out=tmp_path / name,
        progress=False,
        **kw,
    )


@pytest.fixture(scope="module")
def default_run(tmp_path_factory):
    return _run(tmp_path_factory.mktemp("eval"), report=True)


def test_run_folder_files_and_schema(default_run):
    d = default_run.run_dir
    for f in (
        "run.json",
        "config.yaml",
        "trajectories.parquet",
        "trajectories.jsonl",
        "episodes.parquet",
        "summary.csv",
        "curves.json",
        "report.html",
    ):
        assert (d / f).is_file(), f
    run = load_run(d)
    assert run.meta["kind"] == "evaluation" and run.meta["schema_version"] == 1
    assert run.meta["episode_seeds"] == [episode_seed(7, i) for i in range(3)]
    assert [p["name"] for p in run.meta["policies"]] == list(DEFAULT_POLICIES)
    assert list(run.steps.columns[: len(STEP_COLUMNS)]) == list(STEP_COLUMNS)
    assert set(EVAL_STEP_EXTRAS) <= set(run.steps.columns)
    assert list(run.episodes.columns[: len(EPISODE_COLUMNS)]) == list(EPISODE_COLUMNS)
    assert set(EVAL_EPISODE_EXTRAS) <= set(run.episodes.columns)
    assert list(run.summary.columns) == list(analysis.SUMMARY_COLUMNS) + list(analysis.TIMING_COLUMNS)
    assert list(run.summary["policy"]) == list(DEFAULT_POLICIES)
    jsonl = pd.read_json(d / "trajectories.jsonl", lines=True)
    assert len(jsonl) == len(run.steps)
    html = (d / "report.html").read_text(encoding="utf-8")
    assert html.count("plotly-graph-div") >= 7 and "Budget spend across the episode" in html
    assert json.loads((d / "curves.json").read_text())["source"] == "defaults"


def test_every_policy_sees_the_same_questions(default_run):
    s = default_run.steps
    by = s.groupby(["episode", "step"])["question_id"].nunique()
    assert (by == 1).all()
    budgets = default_run.episodes.groupby("episode")["total_budget"].nunique()
    assert (budgets == 1).all()
    assert default_run.episodes["budget_source"].eq("tokenizer_native").all()
    assert "tokenizer-native" in default_run.meta["budget_note"]


def test_summary_metrics_are_consistent(default_run):
    summ = default_run.summary.set_index("policy")
    ep = default_run.episodes
    for pol, row in summ.iterrows():
        e = ep[ep["policy"] == pol]
        assert row["accuracy"] == pytest.approx(e["num_correct"].sum() / e["num_questions"].sum(), abs=1e-6)
        assert row["tokens_per_question"] == pytest.approx(e["total_spent"].sum() / e["num_answered"].sum(), abs=1e-5)
        assert row["run_dry_rate"] == pytest.approx(e["ran_dry"].mean())
        assert row["reward"] == pytest.approx(e["episode_reward"].mean(), abs=1e-6)
    assert summ.loc["greedy_max", "run_dry_rate"] > 0
    assert abs(summ.loc["oracle_allocation", "regret"]) < 0.01
    assert (summ["regret"] > -0.01).all()
    assert summ.loc["sim_greedy", "accuracy"] > summ.loc["uniform", "accuracy"]
    comp_sum = sum(ep[c] for c in ep.columns if c.startswith("reward_"))
    assert (comp_sum - ep["episode_reward"]).abs().max() < 1e-9


def test_reruns_are_identical(tmp_path, default_run):
    again = _run(tmp_path, report=False)
    a = pd.read_csv(default_run.run_dir / "summary.csv").drop(columns=list(analysis.TIMING_COLUMNS))
    b = pd.read_csv(again.run_dir / "summary.csv").drop(columns=list(analysis.TIMING_COLUMNS))
    assert a.to_csv(index=False) == b.to_csv(index=False)
    drop = ["run_id", "latency_s", "policy_latency_s"]
    sa = default_run.steps.drop(columns=[c for c in drop if c in default_run.steps])
    sb = again.steps.drop(columns=[c for c in drop if c in again.steps])
    pd.testing.assert_frame_equal(sa, sb)
    other = _run(tmp_path, name="other", seed=8, policies=("sim_uniform",), report=False)
    assert set(other.steps["question_id"]) != set(
        default_run.steps.loc[default_run.steps["policy"] == "sim_uniform", "question_id"]
    )


def test_workers_give_the_same_results(tmp_path, default_run):
    par = _run(tmp_path, name="par", policies=("sim_greedy", "uniform"), workers=3, report=False)
    a = (
        default_run.summary.set_index("policy")
        .loc[["sim_greedy", "uniform"]]
        .drop(columns=list(analysis.TIMING_COLUMNS))
    )
    b = par.summary.set_index("policy").drop(columns=list(analysis.TIMING_COLUMNS))
    pd.testing.assert_frame_equal(a, b)


def test_episode_seeds_are_stable_and_distinct():
    seeds = [episode_seed(42, i) for i in range(1000)]
    assert len(set(seeds)) == 1000 and all(0 <= s < 2**31 for s in seeds)
    assert episode_seed(42, 0) == episode_seed(42, 0) != episode_seed(43, 0)


def test_budget_modes(tmp_path):
    cfg = fx.config()
    res = _run(tmp_path, name="cfg", n=1, policies=("uniform",), budget_mode="config", report=False)
    assert res.episodes["budget_source"].iloc[0] == "config"
    assert res.episodes["total_budget"].iloc[0] == cfg.config_budget()
    res = _run(tmp_path, name="fixed", n=1, policies=("uniform",), total_budget=1234, report=False)
    assert res.episodes["budget_source"].iloc[0] == "client" and res.episodes["total_budget"].iloc[0] == 1234
    with pytest.raises(ValueError, match="budget_mode"):
        _run(tmp_path, name="bad", n=1, policies=("uniform",), budget_mode="nope")
    with pytest.raises(ValueError, match="unique"):
        evaluate(
            [UniformPolicy(), UniformPolicy()],
            config=cfg,
            pools=fx.pools(),
            n_episodes=1,
            out=tmp_path / "dup",
            progress=False,
        )


# ----------------------------------------------------------------------------- remote server
class _FakeResult:
    def __init__(self, obs):
        self.observation = obs
        self.reward = obs.reward
        self.done = obs.done


class _FakeClient:
    """Stands in for ReasoningEconomicsClient(...).sync(): results wrap observations, and the
    environment lives 'elsewhere' (no questions attribute is reachable)."""

    def __init__(self):
        self._env = fx.make_env()
        self.closed = False

    def reset(self, **kw):
        return _FakeResult(self._env.reset(**kw))

    def step(self, action):
        return _FakeResult(self._env.step(action))

    def close(self):
        self.closed = True


def test_remote_server_path_with_a_fake_client(tmp_path):
    clients = []

    def factory(url):
        assert url == "http://fake:8000"
        clients.append(_FakeClient())
        return RemoteEnv(clients[-1])

    res = evaluate(
        [UniformPolicy()],
        config=fx.config(),
        n_episodes=2,
        seed=1,
        out=tmp_path / "remote",
        server_url="http://fake:8000",
        remote_factory=factory,
        progress=False,
        report=False,
    )
    assert len(res.steps) == 20 and all(c.closed for c in clients)
    assert res.meta["server_url"] == "http://fake:8000"
    assert res.episodes["regret"].notna().all()  # every question answered: its curve is known
    with pytest.raises(ValueError, match="trusted context"):
        evaluate(
            [SimulatedSolverPolicy("uniform")],
            config=fx.config(),
            n_episodes=1,
            out=tmp_path / "r2",
            server_url="http://fake:8000",
            remote_factory=factory,
            progress=False,
        )


def test_remote_server_on_loopback_gives_the_in_process_results(tmp_path):
    """--server-url against a real OpenEnv server: same questions, tokens and rewards as in-process."""
    from test_server import LiveServer

    from reasoning_env.server.app import create_server_app

    cfg = EnvConfig(sources=[{"name": "reasoning_gym", "options": {"size": 30}}])
    policies = lambda: [UniformPolicy(), GreedyMaxPolicy()]  # noqa: E731  (no trusted context needed)
    local = evaluate(
        policies(), config=cfg, n_episodes=2, seed=5, out=tmp_path / "local", progress=False, report=False
    )
    with LiveServer(create_server_app(cfg, max_sessions=4)) as srv:
        remote = evaluate(
            policies(),
            config=cfg,
            n_episodes=2,
            seed=5,
            out=tmp_path / "remote",
            server_url=srv.url,
            progress=False,
            report=False,
        )
    cols = ["policy", "episode", "step", "question_id", "raw_tokens", "tokens", "correct", "reward", "done_reason"]
    pd.testing.assert_frame_equal(local.steps[cols].reset_index(drop=True), remote.steps[cols].reset_index(drop=True))
    assert remote.meta["server_url"] == srv.url


# ----------------------------------------------------------------------------- command line
def test_cli_on_a_config_file(tmp_path, capsys):
    rows = tmp_path / "rows.jsonl"
    rows.write_text(
        "\n".join(
            json.dumps(
                {"question": q.text, "answer": q.gold_answer, "type": q.problem_type, "level": q.difficulty or 2}
            )
            for q in fx.questions()
        ),
        encoding="utf-8",
    )
    cfg = tmp_path / "env.yaml"
    cfg.write_text(
        "env:\n  sources:\n    - name: jsonl\n      options: {data_files: '"
        + str(rows)
        + "', type_field: type, difficulty_field: level}\n",
        encoding="utf-8",
    )
    out = tmp_path / "cli-run"
    code = main(
        [
            "--n_episodes",
            "2",
            "--seed",
            "3",
            "--config",
            str(cfg),
            "--policies",
            "uniform,sim_greedy,oracle_allocation",
            "--out",
            str(out),
            "--no-progress",
        ]
    )
    printed = capsys.readouterr().out
    assert code == 0
    assert "sim_greedy" in printed and "regret" in printed and "tokenizer-native" in printed
    assert (out / "summary.csv").is_file() and (out / "report.html").is_file()
    assert main(["--policies", "nope", "--out", str(tmp_path / "x")]) == 2


def test_cli_fit_curves_from_a_run(tmp_path, default_run, capsys):
    out = tmp_path / "fitted"
    code = main(
        [
            "--n_episodes",
            "1",
            "--policies",
            "uniform",
            "--fit-curves",
            str(default_run.run_dir),
            "--fit-policies",
            "sim_uniform,sim_greedy,sim_proportional,oracle_allocation",
            "--out",
            str(out),
            "--no-progress",
            "--no-report",
            "--config",
            str(_cfg_file(tmp_path)),
        ]
    )
    capsys.readouterr()
    assert code == 0
    assert json.loads((out / "curves.json").read_text())["source"].startswith("fit:")


def _cfg_file(tmp_path):
    rows = tmp_path / "rows2.jsonl"
    rows.write_text(
        "\n".join(json.dumps({"question": q.text, "answer": q.gold_answer}) for q in fx.questions()), encoding="utf-8"
    )
    p = tmp_path / "env2.yaml"
    p.write_text(
        "sources:\n  - name: jsonl\n    options: {data_files: '" + str(rows) + "', problem_type: GSM8K}\n",
        encoding="utf-8",
    )
    return p


@pytest.mark.skipif(not (fx.SHARED_DATA / "gsm8k_test.jsonl").is_file(), reason="../shared/data is not present")
def test_real_gsm8k_and_math500(tmp_path):
    cfg = fx.EnvConfig(sources=["gsm8k", "math500"], data_dir=str(fx.SHARED_DATA))
    res = evaluate(
        [make_policy("sim_greedy"), make_policy("oracle_allocation")],
        config=cfg,
        n_episodes=2,
        seed=42,
        out=tmp_path / "real",
        progress=False,
        report=False,
    )
    assert set(res.steps["problem_type"]) <= {"GSM8K", "MATH-500"} and len(res.steps) == 40
    assert (res.steps["correct"] == res.steps["policy_intended_correct"]).all()


@pytest.mark.slow
def test_module_entry_point_help():
    r = subprocess.run(
        [sys.executable, "-m", "workbench.evaluate", "--help"],
        capture_output=True,
        text=True,
        cwd=fx.REPO,
        timeout=120,
    )
    assert r.returncode == 0 and "--n_episodes" in r.stdout and "--server-url" in r.stdout


# ----------------------------------------------------------------------------- analysis / plots
def test_figures_build_on_data_and_on_empty_frames(default_run):
    s, e, summ = default_run.steps, default_run.episodes, default_run.summary
    empty = pd.DataFrame()
    for fig in (
        plots.budget_spend_figure(s),
        plots.tokens_by_type_figure(s),
        plots.tokens_by_difficulty_figure(s),
        plots.accuracy_vs_tokens_figure(s, summ),
        plots.reward_components_figure(e),
        plots.regret_figure(e),
        plots.length_histogram_figure(s),
    ):
        assert isinstance(fig, go.Figure) and len(fig.data) > 0
    for builder in (
        plots.budget_spend_figure,
        plots.tokens_by_type_figure,
        plots.tokens_by_difficulty_figure,
        plots.accuracy_vs_tokens_figure,
        plots.length_histogram_figure,
    ):
        assert isinstance(builder(empty), go.Figure)
    assert isinstance(plots.reward_components_figure(empty), go.Figure) and isinstance(
        plots.regret_figure(empty), go.Figure
    )


def test_analysis_helpers(default_run):
    s = default_run.steps
    curve = analysis.spend_curve(s)
    final = curve[curve["question"] == 10].set_index("policy")["spent_fraction"]
    assert (final <= 1.0 + 1e-9).all() and final["greedy_max"] == pytest.approx(1.0, abs=0.01)
    g = analysis.by_group(s, "difficulty")
    assert "n/a" in set(g["difficulty"])
    assert set(analysis.accuracy_vs_tokens(s)["policy"]) == set(DEFAULT_POLICIES)
    text = analysis.format_table(default_run.summary)
    # head, rule, then a values line and a 95% CI line per policy; then the reward components
    main = text.split("\n\n")[0].splitlines()
    assert main[0].startswith("policy") and len(main) == 2 + 2 * len(DEFAULT_POLICIES)
    assert analysis.summary_table(pd.DataFrame()).empty


def test_cli_remote_defaults_the_baselines_to_placeholder_answers(tmp_path, capsys):
    """Against a server the gold answers are unknown, so the budget baselines cannot answer like
    the solver: the CLI defaults them to the placeholder there, and to the solver in-process."""
    from test_server import LiveServer

    from reasoning_env.server.app import create_server_app

    cfg = EnvConfig(sources=[{"name": "reasoning_gym", "options": {"size": 30}}])
    cfg_file = tmp_path / "env.yaml"
    cfg.to_yaml(cfg_file)
    with LiveServer(create_server_app(cfg, max_sessions=4)) as srv:
        code = main(
            [
                "--n_episodes",
                "1",
                "--policies",
                "uniform",
                "--config",
                str(cfg_file),
                "--server-url",
                srv.url,
                "--out",
                str(tmp_path / "remote"),
                "--no-progress",
                "--no-report",
            ]
        )
    capsys.readouterr()
    assert code == 0
    assert load_run(tmp_path / "remote").meta["policies"][0]["answer"] == "placeholder"
    code = main(
        [
            "--n_episodes",
            "1",
            "--policies",
            "uniform",
            "--config",
            str(cfg_file),
            "--out",
            str(tmp_path / "local"),
            "--no-progress",
            "--no-report",
        ]
    )
    capsys.readouterr()
    assert code == 0 and load_run(tmp_path / "local").meta["policies"][0]["answer"] == "solver"


def test_cli_default_policies_are_the_baselines_against_a_server():
    """Without --policies, a remote run evaluates only what a server can play (the budget
    baselines); in-process the default is every baseline, solver strategy and the oracle."""
    from reasoning_env.policies import BUDGET_BASELINES, DEFAULT_POLICIES
    from workbench.evaluate import _parser, _policies_from_args

    remote = _policies_from_args(_parser().parse_args(["--server-url", "http://127.0.0.1:1"]), SolverCurves())
    assert [p.name for p in remote] == list(BUDGET_BASELINES)
    local = _policies_from_args(_parser().parse_args([]), SolverCurves())
    assert [p.name for p in local] == list(DEFAULT_POLICIES)


def test_budget_note_without_finished_episodes_says_so():
    from workbench.evaluation.writer import budget_note as _budget_note

    note = _budget_note("tokenizer_native", None, EnvConfig(), ["qwen2.5"], pd.DataFrame({"total_budget": []}))
    assert "nan" not in note and "no episode finished" in note


def test_budget_note_counts_the_questions_the_episodes_had_when_the_data_holds_fewer(tmp_path):
    """A 4-question file under the default num_questions (10) gives 4-question episodes; the note
    must say 4 (and why), not the config's 10."""
    rows = [{"question": f"What is {i} + {i}?", "answer": f"{i} + {i} = {2 * i}\n#### {2 * i}"} for i in range(1, 5)]
    data = tmp_path / "mine.jsonl"
    data.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    options = {"data_files": str(data), "prompt_field": "question", "answer_field": "answer"}
    config = EnvConfig(sources=[{"name": "jsonl", "options": {**options, "answer_extraction": "gsm8k"}}])
    res = evaluate([make_policy("uniform")], config=config, n_episodes=1, seed=3, out=tmp_path / "run", progress=False)
    assert set(res.episodes["num_questions"]) == {4}
    note = res.meta["budget_note"]
    assert "for 4 questions" in note and "num_questions is 10" in note and "for 10 questions" not in note


def test_a_chosen_builtin_source_is_not_reported_as_a_fallback(tmp_path):
    """`sources: [builtin]` (examples/sources/builtin.yaml) serves the builtin set on purpose: the
    provenance says they are project-written questions, not that a source failed to load."""
    config = EnvConfig(sources=[{"name": "builtin", "options": {"subset": "all"}}])
    res = evaluate([make_policy("uniform")], config=config, n_episodes=1, seed=3, out=tmp_path / "run", progress=False)
    warnings = " ".join(res.meta["provenance"]["warnings"])
    assert "could not be loaded" not in warnings
    assert "Builtin questions" in warnings and "not a public dataset" in warnings


@pytest.mark.parametrize(
    "kwargs, says",
    [
        (dict(policies=[]), "no policies to evaluate"),
        (dict(workers=0), "workers must be an integer >= 1"),
        (dict(max_response_chars=-1), "max_response_chars must be >= 0"),
    ],
)
def test_bad_evaluate_arguments_are_clear_errors(kwargs, says, tmp_path):
    args = dict(
        policies=[UniformPolicy()], config=fx.config(), n_episodes=1, out=tmp_path / "r", progress=False, report=False
    )
    args.update(kwargs)
    with pytest.raises(ValueError, match=says):
        evaluate(**args)


def test_cli_out_on_an_existing_file_is_one_error_line(tmp_path, capsys):
    blocker = tmp_path / "afile"
    blocker.write_text("x")
    assert (
        main(["--n_episodes", "1", "--policies", "uniform", "--out", str(blocker), "--no-progress", "--no-report"])
        == 2
    )
    err = capsys.readouterr().err
    assert err.startswith("error: cannot create run folder") and "a file is in the way" in err


@pytest.mark.parametrize("content", [None, "not json", "[1, 2]", '{"families": {"arithmetic": {"nope": 1}}}'])
def test_cli_bad_curves_file_names_the_flag_and_the_format(tmp_path, content, capsys):
    path = tmp_path / "curves.json"
    if content is not None:
        path.write_text(content)
    assert main(["--n_episodes", "1", "--policies", "uniform", "--curves", str(path), "--no-progress"]) == 2
    err = capsys.readouterr().err
    assert err.startswith("error: --curves: ") and str(path) in err and err.count("\n") == 1
    assert "expected a solver curves JSON file" in err and "Traceback" not in err


@pytest.mark.parametrize("given", ["", " , "])
def test_cli_empty_policies_are_refused_listing_the_names(given, capsys):
    assert main(["--n_episodes", "1", "--policies", given, "--no-progress", "--no-report"]) == 2
    err = capsys.readouterr().err
    assert err.startswith("error: --policies") and "names no policy" in err and err.count("\n") == 1
    assert all(name in err for name in POLICY_NAMES)


def test_cli_unreachable_server_is_one_error_line(tmp_path, capsys):
    import socket

    with socket.socket() as s:  # a port nothing listens on
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    assert (
        main(
            [
                "--n_episodes",
                "1",
                "--server-url",
                f"http://127.0.0.1:{port}",
                "--out",
                str(tmp_path / "r"),
                "--no-progress",
                "--no-report",
            ]
        )
        == 2
    )
    err = capsys.readouterr().err
    assert (
        err.startswith("error: cannot connect to the environment server") and "python -m reasoning_env.server" in err
    )


def test_an_llm_policys_progress_counts_answered_questions_and_the_others_count_episodes(tmp_path, capsys):
    """A real model takes minutes an episode: its bar moves per answered question (0/2 for 8 minutes was all
    a user saw), and an episode that runs dry adds its unasked questions when it ends."""
    from reasoning_env.policies.base import BasePolicy, PolicyOutput

    class SlowModel(BasePolicy):  # stands in for an LLM: kind "llm", a long answer that runs the budget dry
        name, kind, tokenizer_name = "fake_llm", "llm", "Qwen/Qwen2.5-0.5B-Instruct"

        def act(self, obs):
            return PolicyOutput(response="thinking " * 300 + "\\boxed{1}")

    cfg = fx.config()
    evaluate(
        [SlowModel(), make_policy("uniform")],
        config=cfg,
        pools=fx.pools(),
        n_episodes=2,
        seed=3,
        out=tmp_path / "run",
        report=False,
    )
    err = capsys.readouterr().err
    n_q = 2 * cfg.num_questions
    # counted in questions, each one as it is answered; the first answer runs the budget dry, so the full count
    # is reached only with the unasked questions added at each episode's end
    assert f"{n_q}/{n_q} [" in err and "q/s]" in err
    assert "2/2 [" in err and "ep/s]" in err  # the simulated baseline still counts episodes
