"""The workbench's handlers called as plain functions (one behaviour each): Play, Reward lab, Runs."""

from __future__ import annotations

from pathlib import Path

import evalpol_fixtures as fx
import gradio as gr
import pandas as pd
import plotly.graph_objects as go
import pytest
from test_app_support import TOKENIZER, make_eval_run, make_training_run, play_config

from workbench.app.common import AppContext
from workbench.app.lab_tab import SYNTHETIC, LabTab
from workbench.app.play_tab import VIEW, VIEW_FIRST, VIEW_REST, PlayTab, render_gauges
from workbench.app.runs_tab import RunsTab
from workbench.reward_lab import tuning as rt

# its tests share an app context with run folders (module fixture): one worker runs them all (pytest-xdist --dist
# loadgroup)
pytestmark = pytest.mark.xdist_group("test_app_handlers")

FORM = dict(
    sources=["gsm8k"],
    budget_mode="tokenizer_native",
    budget_ratio=4,
    total_budget="",
    tokenizer_name=TOKENIZER,
    seed="5",
    hard_cap_mode=True,
    num_questions=10,
    data_dir="",
)


@pytest.fixture(scope="module")
def ctx(tmp_path_factory):
    root = tmp_path_factory.mktemp("runs")
    make_eval_run(root)
    make_training_run(root)
    return AppContext(
        base_config=play_config(),
        runs_root=str(root),
        pools=fx.pools(),
        download_dir=tmp_path_factory.mktemp("downloads"),
        environ={},
    )


@pytest.fixture
def play(ctx):
    return PlayTab(ctx)


def reset(play, **changes):
    form = dict(FORM, **changes)
    return play.reset(None, *form.values())


def file_of(button) -> Path:
    """The file a DownloadButton update offers (its value is a path or Gradio's file dict)."""
    v = button.value
    return Path(v["path"] if isinstance(v, dict) else v)


def as_dict(out):
    """Handler output (session, *view) -> (session, {name: value}); Markdown updates unwrapped."""
    view = {k: (v.value if isinstance(v, gr.Markdown) else v) for k, v in zip(VIEW, out[1:])}
    return out[0], view


# ------------------------------------------------------------------------------- Play
def test_reset_returns_the_session_and_every_view_output(play):
    out = reset(play)
    assert len(out) == 1 + len(VIEW)
    session, view = as_dict(out)
    assert session.started and "Question 1 of 10" in view["question"]
    assert "Budget left" in view["gauges"] and f"{session.observation.total_budget:,}" in view["gauges"]
    assert all(isinstance(view[k], go.Figure) for k in ("spend_plot", "type_plot", "reward_plot"))
    assert isinstance(view["history"], pd.DataFrame) and view["history"].empty


def test_non_numeric_budget_is_a_gradio_error(play):
    with pytest.raises(gr.Error, match="total budget"):
        reset(play, budget_mode="explicit", total_budget="lots")


def test_unknown_tokenizer_is_a_gradio_error(play):
    with pytest.raises(gr.Error, match="cannot be loaded"):
        reset(play, tokenizer_name="nobody/nothing-tokenizer")


@pytest.fixture
def bare_play(tmp_path):
    """A Play tab on the default config and no preloaded pools: sources load for real (offline)."""
    return PlayTab(AppContext(runs_root=str(tmp_path), download_dir=tmp_path / "downloads", environ={}))


def test_gsm8k_without_a_data_folder_points_at_the_data_folder_field(bare_play):
    with pytest.raises(gr.Error) as err:
        reset(bare_play, sources=["gsm8k"], data_dir="")
    message = err.value.message
    assert "Fill “Data folder” on the left with a folder holding gsm8k_test.jsonl" in message
    assert "untick gsm8k" in message and "Hub is unreachable" in message
    assert "options." not in message and "data_dir" not in message  # no config-file fix on the page


def test_a_data_folder_without_the_files_is_named_in_the_message(bare_play, tmp_path):
    empty = tmp_path / "empty"
    empty.mkdir()
    with pytest.raises(gr.Error) as err:
        reset(bare_play, sources=["math500"], data_dir=str(empty))
    assert f"the Data folder '{empty}' holds no math500*.jsonl" in err.value.message


def test_play_actions_show_busy_and_refused_on_the_status_line_only(ctx):
    """A refused action marks one place (the status line), not every output panel; the second
    pass of a step (charts, table...) shows no busy mark at all."""
    from workbench.app import build_workbench

    demo = build_workbench(ctx)
    c = demo.workbench["play"][1]
    triggers = {c[name]._id for name in ("reset_btn", "answer_btn", "response", "policy_btn", "run_btn")}
    deps = demo.get_config_file()["dependencies"]
    page = [d for d in deps if any(target in triggers for target, _ in d["targets"])]
    assert len(page) == 4  # reset, answer (button and Enter: one event), policy step, run to the end
    assert all(d["show_progress_on"] == [c["status"]._id] for d in page)
    second = [d for d in deps if d.get("trigger_after") in {p["id"] for p in page}]
    # the second pass of a typed answer and of a policy step, and the live panel cleared after a reset
    assert len(second) == 3 and all(d["show_progress"] == "hidden" and d["trigger_only_on_success"] for d in second)


@pytest.mark.parametrize("tab, status", [("lab", "status"), ("runs", "busy")])
def test_lab_and_runs_actions_show_busy_and_refused_on_their_status_line_only(ctx, tab, status):
    """As in Play (one mechanism, ``common.marks_on``): every event of the Reward lab and Runs tabs
    that can be refused marks its tab's status line only, and follow-ups run only after a success."""
    from workbench.app import build_workbench

    demo = build_workbench(ctx)
    c = demo.workbench[tab][1]
    comps = [v for v in c.values() if hasattr(v, "_id")] + [
        x for v in c.values() if isinstance(v, list) for x in v if hasattr(x, "_id")
    ]
    ids = {x._id for x in comps}
    deps = [
        d
        for d in demo.get_config_file()["dependencies"]  # (API-only endpoints have no trigger in the page)
        if d["outputs"] and set(d["outputs"]) <= ids and (d["targets"] or d.get("trigger_after") is not None)
    ]
    assert len(deps) >= 8
    for d in deps:
        assert d["show_progress_on"] == [c[status]._id] or d["show_progress"] == "hidden", d["api_name"]
        if d.get("trigger_after") is not None:
            assert d["trigger_only_on_success"], d["api_name"]


def test_a_step_in_the_page_draws_the_verdict_first_then_the_rest(play):
    session = reset(play)[0]
    first = play.answer_first(session, "I think \\boxed{8}")
    assert len(first) == 1 + len(VIEW_FIRST) + 1 and first[-1] == ""
    assert "answered by you" in first[1 + VIEW_FIRST.index("verdict")]
    rest = dict(zip(VIEW_REST, play.view_rest(session)))
    assert len(rest["history"]) == 1 and isinstance(rest["spend_plot"], go.Figure)
    whole = dict(zip(VIEW, play.view(session)))
    assert whole["verdict"] == first[1 + VIEW_FIRST.index("verdict")] and whole["history"].equals(rest["history"])


def test_the_api_step_endpoints_return_the_whole_view(ctx):
    from workbench.app import build_workbench

    demo = build_workbench(ctx)
    deps = {
        d["api_name"]: d
        for d in demo.get_config_file()["dependencies"]
        if d.get("api_visibility", "public") == "public"
    }
    c = demo.workbench["play"][1]
    view_ids = [c[name]._id for name in VIEW]
    assert deps["answer"]["outputs"] == [c["state"]._id, *view_ids, c["response"]._id]
    assert deps["policy_step"]["outputs"] == [c["state"]._id, *view_ids]


def test_answer_before_reset_is_a_gradio_error(play):
    with pytest.raises(gr.Error, match="press Reset"):
        play.answer(None, "\\boxed{3}")


def test_policy_step_before_reset_is_a_gradio_error(play):
    with pytest.raises(gr.Error, match="press Reset"):
        play.policy_step(None, "uniform")


def test_typed_answer_updates_the_view_and_clears_the_box(play):
    session, _ = as_dict(reset(play))
    out = play.answer(session, "I think \\boxed{8}")
    _, view = as_dict(out[:-1])
    assert out[-1] == ""
    assert "answered by you" in view["verdict"] and "correctness" in view["components"]
    assert len(view["history"]) == 1 and view["history"].iloc[0]["by"] == "human"
    spans = view["tokens"].value if hasattr(view["tokens"], "value") else view["tokens"]
    assert spans and file_of(view["download"]).is_file()


def test_empty_answer_is_a_gradio_error(play):
    session, _ = as_dict(reset(play))
    with pytest.raises(gr.Error, match="empty"):
        play.answer(session, "")


def test_unknown_policy_is_a_gradio_error(play):
    session, _ = as_dict(reset(play))
    with pytest.raises(gr.Error, match="unknown policy"):
        play.policy_step(session, "mind_reader")


def test_policy_step_answers_one_question(play):
    session, _ = as_dict(reset(play))
    session, view = as_dict(play.policy_step(session, "sim_greedy"))
    assert len(session.results) == 1 and "sim_greedy" in view["verdict"]


def test_question_math_renders_except_for_money_questions():
    from workbench.app.play_tab import question_latex

    assert any(d["left"] == "$" for d in question_latex("MATH-500"))
    assert not any(d["left"] == "$" for d in question_latex("GSM_FOBAR"))


def test_run_to_end_yields_after_every_step(play):
    session, _ = as_dict(reset(play))
    outs = list(play.run_to_end(session, "uniform"))
    assert len(outs) == len(session.results) + 1 and session.done
    _, last = as_dict(outs[-1])
    assert "Episode over" in last["gauges"] and "Episode over" in last["question"]


def test_step_after_done_is_a_gradio_error(play):
    session, _ = as_dict(reset(play))
    list(play.run_to_end(session, "uniform"))
    with pytest.raises(gr.Error, match="episode is over"):
        play.answer(session, "\\boxed{1}")


def test_save_run_writes_a_folder_and_says_where(play, tmp_path):
    session, _ = as_dict(reset(play))
    play.policy_step(session, "uniform")
    msg = play.save_run(session, str(tmp_path))
    assert "Saved to" in msg and "not finished" in msg
    assert len(list(tmp_path.glob("play-*/run.json"))) == 1


def test_save_before_playing_is_a_gradio_error(play, tmp_path):
    session, _ = as_dict(reset(play))
    with pytest.raises(gr.Error, match="nothing to save"):
        play.save_run(session, str(tmp_path))


def test_gauges_before_reset_are_placeholders():
    html = render_gauges(None)
    assert "Budget left" in html and "–" in html


def test_llm_policies_appear_when_configured(ctx):
    env = {"BASELINE_API_BASE_URL": "http://127.0.0.1:9/v1", "BASELINE_API_MODEL": "m"}
    tab = PlayTab(AppContext(base_config=ctx.base_config, pools=ctx.pools, environ=env, download_dir=ctx.download_dir))
    assert "llm_api" in tab.policies and "llm_api" not in PlayTab(ctx).policies


# ------------------------------------------------------------------------------- Reward lab
@pytest.fixture
def lab(ctx):
    return LabTab(ctx)


def defaults(lab):
    return [c.default for c in lab.controls]


def test_lab_lists_the_synthetic_run_and_the_runs_folder(lab, ctx):
    values = [v for _label, v in lab.run_choices()]
    assert values[0] == SYNTHETIC and any(v.endswith("eval-tiny") for v in values)


def test_lab_opens_on_the_newest_real_run_not_the_demo(lab, ctx):
    from workbench.compare import discover_runs

    newest = str(discover_runs(ctx.runs_root)[0].path)
    assert lab.default_choice() == newest
    data, text, picker = lab.ensure_loaded(None, SYNTHETIC, ctx.runs_root)
    assert picker.value == newest and Path(newest).name in text and isinstance(data, rt.LabRun)


def test_lab_opens_on_the_demo_when_there_is_no_run(lab, tmp_path):
    empty = tmp_path / "no-runs"
    empty.mkdir()
    _, text, picker = lab.ensure_loaded(None, SYNTHETIC, str(empty))
    assert picker.value == SYNTHETIC and "synthetic" in text


def test_lab_loads_a_run_folder(lab, ctx):
    data, text = lab.load(str(Path(ctx.runs_root) / "eval-tiny"))
    assert isinstance(data, rt.LabRun) and "eval-tiny" in text


def test_lab_load_of_a_bad_path_is_a_gradio_error(lab, tmp_path):
    with pytest.raises(gr.Error, match="not a folder"):
        lab.load(str(tmp_path / "nothing"))


def test_lab_update_rescores_and_offers_the_yaml(lab, ctx):
    data, _ = lab.load(str(Path(ctx.runs_root) / "eval-tiny"))
    values = defaults(lab)
    values[[c.key for c in lab.controls].index("economics.gamma")] = 0.5
    yaml_text, notes, table, comparison, curves, download = lab.update(data, ["economics"], *values)
    assert "gamma: 0.5" in yaml_text and set(table["policy"]) == {"uniform", "sim_greedy"}
    assert isinstance(comparison, go.Figure) and isinstance(curves, go.Figure)
    assert file_of(download).read_text(encoding="utf-8").count("gamma: 0.5") == 1


def test_lab_page_passes_give_what_the_whole_update_gives(lab, ctx):
    """The page draws a slider change in passes (table first, then figures): together they are
    the API's whole /lab_update."""
    data, _ = lab.load(str(Path(ctx.runs_root) / "eval-tiny"))
    values = defaults(lab)
    values[[c.key for c in lab.controls].index("economics.gamma")] = 0.5
    whole = lab.update(data, ["economics"], *values)
    yaml_text, notes, table = lab.update_table(data, ["economics"], *values)
    comparison, curves, download = lab.update_figures(data, ["economics"], *values)
    assert (yaml_text, notes) == whole[:2]
    pd.testing.assert_frame_equal(table, whole[2])
    assert comparison.to_json() == whole[3].to_json() and curves.to_json() == whole[4].to_json()
    assert file_of(download).read_text(encoding="utf-8") == file_of(whole[5]).read_text(encoding="utf-8")


def test_lab_induced_reuses_the_oracle_and_the_recorded_reward_when_a_slider_moves(lab):
    """Only the tuned reward changes with a slider: the oracle, the frontier and the recorded reward
    come from the tab's allocation cache, and the figures and table are those of a fresh tab."""
    values = defaults(lab)
    beta = [c.key for c in lab.controls].index("economics.beta")
    lab.induced(None, ["economics"], "1000, 2000", *values)
    values[beta] = 0.5
    before = lab.allocations.hits
    _fig, _pareto, table, _notes = lab.induced(None, ["economics"], "1000, 2000", *values)
    # per budget: the oracle and the recorded reward; the frontier's budgets 1000 and 2000
    assert lab.allocations.hits - before >= 2 * 2 + 2
    fresh = LabTab(lab.ctx).induced(None, ["economics"], "1000, 2000", *values)[2]
    pd.testing.assert_frame_equal(table, fresh)


def test_lab_update_with_nothing_selected_is_a_gradio_error(lab):
    with pytest.raises(gr.Error, match="at least one"):
        lab.update(None, [], *defaults(lab))


def test_lab_group_reward_cannot_be_downloaded_as_env_config(lab):
    out = lab.update(None, ["kimi_length"], *defaults(lab))
    assert "cannot save as an environment config" in out[1] and out[-1].interactive is False


def test_lab_induced_returns_figures_and_a_table(lab):
    tokens_fig, pareto, table, notes = lab.induced(None, ["l1_max"], "1000, 4000", *defaults(lab))
    assert isinstance(tokens_fig, go.Figure) and isinstance(pareto, go.Figure)
    assert set(table["budget"]) == {1000, 4000} and {"oracle", "tuned", "recorded"} <= set(table["reward"])


def test_lab_bad_budgets_are_a_gradio_error(lab):
    with pytest.raises(gr.Error, match="budget"):
        lab.induced(None, ["economics"], "lots", *defaults(lab))


def test_lab_recorded_controls_load_the_run_reward(lab, ctx):
    data, _ = lab.load(str(Path(ctx.runs_root) / "eval-tiny"))
    selected, *values = lab.recorded_controls(data)
    assert selected == ["economics"] and rt.values_to_spec(selected, values) == data.recorded


def test_lab_save_writes_yaml_the_config_loader_reads(lab, tmp_path):
    from reasoning_env.config import EnvConfig

    msg = lab.save(None, ["l1_max"], str(tmp_path / "cfg" / "tuned"), *defaults(lab))
    path = tmp_path / "cfg" / "tuned.yaml"
    assert "Saved" in msg and EnvConfig.from_yaml(path).reward["type"] == "l1_max"


def test_lab_save_of_a_group_reward_is_a_gradio_error(lab, tmp_path):
    with pytest.raises(gr.Error, match="group reward"):
        lab.save(None, ["shorter_better"], str(tmp_path / "x.yaml"), *defaults(lab))


def test_lab_visibility_follows_the_selection(lab):
    ups = lab.visibility(["l1_max"])
    assert [u.visible for u in ups] == [n == "l1_max" for n in lab.names]


# ------------------------------------------------------------------------------- Runs
@pytest.fixture
def runs(ctx):
    return RunsTab(ctx)


def test_refresh_lists_runs_and_selects_the_newest(runs, ctx):
    picker, status = runs.refresh(ctx.runs_root, [])
    assert len(picker.choices) == 2 and len(picker.value) == 2 and "2 run folder(s)" in status
    kept, _ = runs.refresh(ctx.runs_root, [picker.choices[1][1]])
    assert kept.value == [picker.choices[1][1]]


def _aged(folder: Path, seconds_ago: float) -> Path:
    """``folder``'s ``run.json`` dated ``seconds_ago`` (the runs folder is listed newest first by it)."""
    import os
    import time

    t = time.time() - seconds_ago
    os.utime(folder / "run.json", (t, t))
    return folder


def test_each_page_load_lists_the_folder_as_it_is_now_and_selects_its_newest(tmp_path):
    """Not the list (or selection) the app was built with: a run made after start-up is listed and selected."""
    from workbench.app.runs_tab import DEFAULT_SELECTION

    root = tmp_path / "runs"
    old = [_aged(make_training_run(root, f"old-{i}"), 100 + i) for i in range(DEFAULT_SELECTION)]
    tab = RunsTab(AppContext(base_config=play_config(), runs_root=str(root), pools=fx.pools()))
    first, _status, listed = tab.on_load(str(root))
    assert first.value == [str(f) for f in old] and listed == {"root": str(root), "paths": first.value}
    new = make_training_run(root, "made-after-start")
    picker, status, listed = tab.on_load(str(root))
    assert picker.value == [str(new)] + [str(f) for f in old[:-1]] and str(new) in listed["paths"]
    assert "4 run folder(s)" in status and "new" not in status  # a fresh page has nothing to compare with


def test_relisting_keeps_the_selection_and_adds_the_runs_that_appeared_since(tmp_path):
    root = tmp_path / "runs"
    a, b = _aged(make_training_run(root, "a"), 200), _aged(make_training_run(root, "b"), 100)
    tab = RunsTab(AppContext(base_config=play_config(), runs_root=str(root), pools=fx.pools()))
    _picker, _status, listed = tab.on_load(str(root))
    new = make_training_run(root, "from-another-shell")
    picker, status, listed = tab.relist(str(root), [str(a)], listed)
    assert picker.value == [str(a), str(new)] and "1 new since the last listing, selected" in status
    assert [v for _l, v in picker.choices] == [str(new), str(b), str(a)]
    again, status, _ = tab.relist(str(root), [str(a)], listed)  # nothing new: the user's choice stands
    assert again.value == [str(a)] and "new" not in status
    other = tmp_path / "other"
    c = make_training_run(other, "c")
    moved, _status, _ = tab.relist(str(other), [str(a)], listed)  # another folder: its newest, none "new"
    assert moved.value == [str(c)]


def test_refresh_of_an_empty_folder_explains_what_to_do(runs, tmp_path):
    picker, status = runs.refresh(str(tmp_path), [])
    assert picker.choices == [] and "workbench.evaluate" in status


def test_compare_with_nothing_chosen_is_a_gradio_error(runs):
    with pytest.raises(gr.Error, match="at least one"):
        runs.compare([], "")


def test_compare_of_unloadable_paths_is_a_gradio_error(runs, tmp_path):
    with pytest.raises(gr.Error, match="no run could be loaded"):
        runs.compare([], str(tmp_path))


def test_compare_draws_the_table_and_figures(runs, ctx):
    root = Path(ctx.runs_root)
    out = runs.compare([str(root / "eval-tiny")], str(root / "train-tiny"), 3)
    describe, table, *figs, training, held_out, allocation, drawn, picker = out
    assert not allocation["visible"]  # no held-out episodes (eval_episodes.jsonl): no before/after figure
    assert "eval-tiny" in describe and "train-tiny" in describe
    assert len(table) == 3 and "tokens/answered question [95% CI]" in table.columns
    assert len(figs) == 4 and all(isinstance(f, go.Figure) for f in figs)
    assert training["visible"] and "rolling mean over 3" in training["value"].layout.title.text
    assert (
        not held_out["visible"] and "Held-out evaluation" in held_out["value"].layout.title.text
    )  # no evaluations.jsonl: hidden
    assert picker.value == ["uniform", "sim_greedy", "grpo"] == [v for _l, v in picker.choices]  # every policy drawn


def test_the_runs_table_has_an_interval_on_every_number_and_provenance_beside_it(runs, ctx):
    root = Path(ctx.runs_root)
    describe, table, *_rest = runs.compare([str(root / "eval-tiny")], "", 1)
    for col in (
        "exp. accuracy (solver curves, not the answers)",
        "tokens/answered question",
        "utilisation",
        "ran dry",
        "acc/1k tokens",
    ):
        cells = table[f"{col} [95% CI]"].astype(str)
        assert cells.str.contains(r"\[").all(), col  # "value [low, high]" in every row
    assert "Provenance:" in describe and "simulated solver" in describe


def test_compare_draws_only_the_chosen_policies_and_offers_all(runs, ctx):
    root = Path(ctx.runs_root)
    describe, table, *figs, training, _held_out, _allocation, drawn, picker = runs.compare(
        [str(root / "eval-tiny")], str(root / "train-tiny"), 1, ["sim_greedy"]
    )
    assert list(table["policy"]) == ["sim_greedy"] and picker.value == drawn["policies"] == ["sim_greedy"]
    assert (
        runs.uncertainty_of(drawn)[1].to_json()
        == runs.uncertainty([str(root / "eval-tiny")], str(root / "train-tiny"), ["sim_greedy"])[1].to_json()
    )
    assert [v for _l, v in picker.choices] == ["uniform", "sim_greedy", "grpo"]
    assert training["visible"]  # the training run's curves stay: they are not a policy's
    _md, intervals, *_ = runs.uncertainty([str(root / "eval-tiny")], str(root / "train-tiny"), ["sim_greedy"])
    assert {t.name for t in intervals.data} == {"sim_greedy"}
    *_, picker = runs.compare([str(root / "eval-tiny")], "", 1, ["grpo"])  # none of the chosen is there: all
    assert picker.value == ["uniform", "sim_greedy"]


@pytest.mark.parametrize("smooth", [float("inf"), float("nan"), "abc", 0])
def test_compare_with_a_bad_smoothing_value_is_a_gradio_error(runs, ctx, smooth):
    with pytest.raises(gr.Error, match="smoothing must be"):
        runs.compare([str(Path(ctx.runs_root) / "train-tiny")], "", smooth)


def test_compare_if_any_skips_without_a_selection(runs):
    out = runs.compare_if_any([], "")
    assert len(out) == 11


def test_a_saved_episode_is_added_to_the_runs_selection(play, runs, ctx, tmp_path):
    session, _ = as_dict(reset(play))
    play.policy_step(session, "uniform")
    play.save_run(session, str(tmp_path))
    picker, status = runs.include_saved(session, ctx.runs_root, [])
    assert str(session.saved_to) in picker.value and "added" in status
    assert str(session.saved_to) in [v for _l, v in picker.choices]


def test_uncertainty_shows_the_paired_comparison_and_the_frontier(runs, ctx):
    root = Path(ctx.runs_root)
    md, intervals, frontier, budget = runs.uncertainty([str(root / "eval-tiny")], "")
    assert "Paired comparison" in md and "not told apart" in md
    assert all(isinstance(f, go.Figure) for f in (intervals, frontier, budget))
    assert frontier.data[0].name == "frontier"
    assert any("one budget only" in (a.text or "") for a in budget.layout.annotations)
    assert len(runs.uncertainty([], "")) == 4  # nothing chosen: the outputs are left as they are


def test_the_runs_table_shows_intervals(runs, ctx):
    root = Path(ctx.runs_root)
    _describe, table, *_ = runs.compare([str(root / "eval-tiny")], "", 1)
    cell = table["accuracy [95% CI]"].iloc[0]
    assert cell.count("[") == 1 and cell.endswith("]")


def test_shipped_example_runs_are_listed_after_the_folders_own_and_shown_when_it_has_none(tmp_path):
    """A fresh clone or the Space has no runs of its own: the example runs shipped in the repository are
    listed (labelled as examples) and selected; once the runs folder has runs, those are selected first."""
    examples, root = tmp_path / "examples", tmp_path / "runs"
    shipped = make_training_run(examples, "learning-run")
    tab = RunsTab(
        AppContext(base_config=play_config(), runs_root=str(root), pools=fx.pools(), example_runs_root=str(examples))
    )
    picker, status, _ = tab.on_load(str(root))
    assert picker.value == [str(shipped)] and "example run(s) shipped" in status
    assert [label.split("  (")[0] for label, _v in picker.choices] == ["example: learning-run"]
    own = make_training_run(root, "mine")
    picker, _status, _ = tab.on_load(str(root))
    assert picker.value == [str(own)] and [v for _l, v in picker.choices] == [str(own), str(shipped)]
    # pointing the tab at the examples folder itself lists them once
    picker, _status, _ = tab.on_load(str(examples))
    assert [v for _l, v in picker.choices] == [str(shipped)]


def test_the_app_server_lists_the_repositorys_example_runs():
    from workbench.app.common import EXAMPLE_RUNS_ROOT

    assert EXAMPLE_RUNS_ROOT.name == "runs" and EXAMPLE_RUNS_ROOT.parent.name == "examples"
    assert (EXAMPLE_RUNS_ROOT.parent / "training").is_dir()  # resolved inside this repository


def test_a_training_runs_held_out_change_is_in_the_paired_comparison(runs, ctx):
    """A training run with held-out evaluations at two steps: the Runs tab's paired section shows before vs
    after on the same episodes, with intervals."""
    from test_app_support import write_held_out

    run = write_held_out(make_training_run(Path(ctx.runs_root), "train-held-out"))
    md, *_figs = runs.uncertainty([str(run)], "")
    assert "Held-out, before vs after training (train-held-out)" in md
    assert "| accuracy (correct / questions) | 0 [0, 0] | 0.167 [" in md and "step 30" in md


def test_a_training_run_with_held_out_evaluations_opens_with_its_before_after_allocation(runs, ctx):
    """The before/after figure is shown (it sits above the table, outside any accordion) and draws the run's
    first and last held-out evaluations by difficulty, with whiskers."""
    from test_app_support import write_held_out

    run = write_held_out(make_training_run(Path(ctx.runs_root), "train-allocation"))
    *_, allocation, _drawn, _picker = runs.compare([str(run)], "", 1)
    fig = allocation["value"]
    assert allocation["visible"] and "Before vs after training" in fig.layout.title.text
    tokens = {t.name: list(t.y) for t in fig.data if t.xaxis == "x"}
    assert tokens == {"before (step 0)": [300.0], "after (step 30)": [120.0, 105.5]}  # difficulty 1, then 2
    assert all(t.error_y.array is not None for t in fig.data)


def test_runs_table_leaves_the_expected_accuracy_blank_for_a_person_and_a_real_model():
    """A person's 8/10 Play episode showed 'exp. accuracy 0.212' from the solver curves."""
    from workbench.app.runs_tab import _display_table, not_modelled

    summary = pd.DataFrame(
        {
            "run": ["play-1", "eval-1", "eval-1"],
            "policy": ["human", "llm_local", "uniform"],
            "kind": ["human", "llm", "budget_baseline"],
            "accuracy": [0.8, 0.1, 0.5],
            "expected_accuracy": [0.212, 0.3, 0.574],
            "expected_accuracy_ci_low": [0.2, 0.25, 0.55],
            "expected_accuracy_ci_high": [0.22, 0.35, 0.6],
        }
    )
    assert not_modelled(summary).tolist() == [True, True, False]
    shown = _display_table(summary)["exp. accuracy (solver curves, not the answers) [95% CI]"].tolist()
    assert shown == ["", "", "0.574 [0.550, 0.600]"]


def test_runs_tab_reuses_a_loaded_selection_until_a_file_changes(ctx, tmp_path, monkeypatch):
    """Compare loaded its runs twice (table, then paired comparison); the second load, and the
    next Compare of the same folders, reuse the first while no file changed."""
    from workbench import compare
    from workbench.app import runs_tab

    run = make_eval_run(tmp_path, "eval-cached")
    calls = []
    real = compare.load_runs
    monkeypatch.setattr(compare, "load_runs", lambda paths: calls.append(list(paths)) or real(paths))
    tab = runs_tab.RunsTab(ctx)
    out = tab.compare([str(run)], "", 1, None)
    tab.uncertainty_of(out[9])
    tab.compare([str(run)], "", 1, None)
    assert len(calls) == 1
    (run / "notes.txt").write_text("a file more: load again", encoding="utf-8")
    tab.compare([str(run)], "", 1, None)
    assert len(calls) == 2
