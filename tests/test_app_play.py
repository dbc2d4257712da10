"""workbench.play: the Play tab's library (settings parsing, sessions, token spans, export, runs)."""

from __future__ import annotations

import json

import pytest
from test_app_support import TOKENIZER, fixture_settings, play_session

from workbench.play import HUMAN, PlayError, PlaySettings, available_policies, parse_play_settings, token_spans


# ------------------------------------------------------------------------------- settings
def test_settings_defaults_from_blank_form():
    s = parse_play_settings(None, None, "4", "", "", "", True, "", "")
    assert s == PlaySettings()


@pytest.mark.parametrize("budget", ["abc", "12.5", "-3", "0", "1e12"])
def test_explicit_budget_must_be_a_whole_positive_number(budget):
    with pytest.raises(PlayError, match="total budget"):
        parse_play_settings(["gsm8k"], "explicit", 4, budget)


def test_a_huge_seed_is_an_error_that_does_not_echo_it_whole():
    with pytest.raises(PlayError, match="seed must be") as exc:
        parse_play_settings(None, None, "4", "", "", "9" * 5000)
    assert len(str(exc.value)) < 200


@pytest.mark.parametrize("text, expected", [("false", False), ("True", True), (False, False), ("0", False)])
def test_hard_cap_mode_text_is_read_as_a_boolean(text, expected):
    """bool("false") is True: the text form used to switch the hard cap on."""
    assert parse_play_settings(None, None, "4", "", "", "", text).hard_cap_mode is expected


def test_hard_cap_mode_nonsense_is_an_error():
    with pytest.raises(PlayError, match="hard cap mode must be true or false"):
        parse_play_settings(None, None, "4", "", "", "", "maybe")


def test_explicit_budget_is_required_in_explicit_mode():
    with pytest.raises(PlayError, match="needs a total budget"):
        parse_play_settings(["gsm8k"], "explicit", 4, "  ")


def test_explicit_budget_accepts_thousands_separators():
    assert parse_play_settings(["gsm8k"], "explicit", 4, "2,000").total_budget == 2000


@pytest.mark.parametrize("ratio", ["x", "-1", "0", "nan", ""])
def test_budget_ratio_must_be_positive(ratio):
    with pytest.raises(PlayError, match="budget ratio"):
        parse_play_settings(["gsm8k"], "tokenizer_native", ratio)


def test_seed_must_be_a_non_negative_whole_number():
    with pytest.raises(PlayError, match="seed"):
        parse_play_settings(["gsm8k"], seed="seven")
    assert parse_play_settings(["gsm8k"], seed=" 7 ").seed == 7


def test_unknown_source_and_budget_mode_are_named():
    with pytest.raises(PlayError, match="nope"):
        parse_play_settings(["nope"])
    with pytest.raises(PlayError, match="budget mode"):
        parse_play_settings(["gsm8k"], "sometimes")


def test_missing_data_folder_is_reported(tmp_path):
    with pytest.raises(PlayError, match="does not exist"):
        parse_play_settings(["gsm8k"], data_dir=str(tmp_path / "missing"))


def test_llm_policies_are_offered_only_when_configured():
    assert "llm_api" not in available_policies({})
    env = {"BASELINE_LOCAL_BASE_URL": "http://127.0.0.1:1/v1", "BASELINE_LOCAL_MODEL": "m"}
    names = available_policies(env)
    assert "llm_local" in names and "llm_api" not in names and "sim_greedy" in names


# ------------------------------------------------------------------------------- session
def test_step_before_reset_is_a_clear_error():
    with pytest.raises(PlayError, match="press Reset"):
        play_session().step("\\boxed{1}")
    with pytest.raises(PlayError, match="press Reset"):
        play_session().step_policy("uniform")


def test_reset_reports_budget_and_seed():
    s = play_session()
    obs = s.reset(fixture_settings(seed=11))
    assert obs.metadata["seed"] == 11 and obs.metadata["budget_source"] == "tokenizer_native"
    assert obs.total_budget > 0 and not s.done and s.results == []


def test_same_seed_same_questions():
    a, b = play_session(), play_session()
    assert (
        a.reset(fixture_settings(seed=5)).metadata["question_ids"]
        == b.reset(fixture_settings(seed=5)).metadata["question_ids"]
    )


def test_explicit_budget_is_used():
    obs = play_session().reset(fixture_settings(budget_mode="explicit", total_budget=777))
    assert obs.total_budget == 777 and obs.metadata["budget_source"] == "client"


def test_config_budget_mode_uses_the_formula():
    s = play_session()
    obs = s.reset(fixture_settings(budget_mode="config", budget_ratio=2.0))
    assert obs.metadata["budget_source"] == "config" and obs.total_budget == s.config.config_budget()


def test_unknown_tokenizer_is_a_play_error():
    with pytest.raises(PlayError, match="cannot be loaded"):
        play_session().reset(fixture_settings(tokenizer_name="no-such-org/no-such-tokenizer"))


def test_typed_answer_is_counted_graded_and_paid():
    s = play_session()
    s.reset(fixture_settings())
    gold = s._env.questions[0].gold_answer
    r = s.step(f"It is \\boxed{{{gold}}}")
    ls = r.observation.last_step
    assert r.actor == HUMAN and ls.correct and ls.tokens == s.tokenizer.count(r.response)
    assert abs(sum(ls.reward_components.values()) - ls.reward) < 1e-9


def test_empty_answer_is_refused_and_charges_nothing():
    s = play_session()
    obs = s.reset(fixture_settings())
    with pytest.raises(PlayError, match="empty"):
        s.step("   ")
    assert s.observation.remaining_budget == obs.remaining_budget


def test_policy_can_take_over_mid_episode_and_finish():
    s = play_session()
    s.reset(fixture_settings())
    s.step("no idea \\boxed{0}")
    steps = list(s.run_iter("sim_greedy"))
    assert s.done and len(steps) == len(s.results) - 1
    assert [r.actor for r in s.results] == [HUMAN] + ["sim_greedy"] * len(steps)
    assert s.label() == "human+sim_greedy"


def test_step_after_the_end_is_a_clear_error():
    s = play_session()
    s.reset(fixture_settings())
    list(s.run_iter("uniform"))
    with pytest.raises(PlayError, match="episode is over"):
        s.step("\\boxed{1}")


def test_unknown_policy_is_a_play_error():
    s = play_session()
    s.reset(fixture_settings())
    with pytest.raises(PlayError, match="unknown policy"):
        s.step_policy("telepathy")


def test_unconfigured_llm_policy_is_a_play_error(monkeypatch):
    monkeypatch.delenv("BASELINE_API_BASE_URL", raising=False)
    monkeypatch.delenv("BASELINE_API_MODEL", raising=False)
    s = play_session()
    s.reset(fixture_settings())
    with pytest.raises(PlayError, match="BASELINE_API"):
        s.step_policy("llm_api")


def test_greedy_max_runs_dry_under_a_small_budget():
    s = play_session()
    s.reset(fixture_settings(budget_mode="explicit", total_budget=900))
    list(s.run_iter("greedy_max"))
    assert s.observation.done_reason == "budget_exhausted" and len(s.results) < 10


def test_summary_adds_up():
    s = play_session()
    s.reset(fixture_settings())
    list(s.run_iter("sim_uniform", max_steps=4))
    summ = s.summary()
    assert summ["answered"] == 4 and summ["spent"] == sum(r.row.tokens for r in s.results)
    assert summ["remaining_budget"] == summ["total_budget"] - summ["spent"]
    assert abs(summ["reward"] - sum(summ["reward_components"].values())) < 1e-9


# ------------------------------------------------------------------------------- tokens
def test_token_spans_join_back_to_the_text():
    from reasoning_env.tokenization import get_tokenizer

    tok = get_tokenizer(TOKENIZER)
    text = "Let x = 3.\n\nThen 2x = 6, so \\boxed{6} 你好 🙂"
    spans = token_spans(tok, text)
    assert "".join(p for p, _ in spans) == text
    assert sum(1 for _, lab in spans if lab) == tok.count(text)
    labels = [lab for _, lab in spans if lab]
    assert labels[:2] == ["token", "token·"]


def test_token_spans_mark_the_unpaid_tail():
    from reasoning_env.tokenization import get_tokenizer

    tok = get_tokenizer(TOKENIZER)
    spans = token_spans(tok, "one two three four five six", charged=2)
    labels = [lab for _, lab in spans if lab]
    assert labels[:2] == ["token", "token·"] and set(labels[2:]) == {"unpaid"}


def test_clipped_answer_shows_unpaid_tokens_in_the_session():
    s = play_session()
    s.reset(fixture_settings(budget_mode="explicit", total_budget=30))
    r = s.step("word " * 60 + "\\boxed{1}")
    ls = r.observation.last_step
    assert ls.raw_tokens > ls.tokens == 30 and s.done


# ------------------------------------------------------------------------------- export and runs
def test_export_is_json_with_every_step(tmp_path):
    s = play_session()
    s.reset(fixture_settings())
    list(s.run_iter("uniform", max_steps=3))
    path = s.export_json(tmp_path / "ep.json")
    data = json.loads(path.read_text(encoding="utf-8"))
    assert data["format"] == "reasoning-economics/episode-v1"
    assert len(data["steps"]) == 3 and data["steps"][0]["actor"] == "uniform" and data["steps"][0]["response"]
    assert data["config"]["sources"] and data["summary"]["answered"] == 3


def test_nothing_to_export_or_save_before_playing(tmp_path):
    s = play_session()
    with pytest.raises(PlayError):
        s.export()
    s.reset(fixture_settings())
    with pytest.raises(PlayError, match="nothing to save"):
        s.save_run(tmp_path)


def test_saved_run_loads_with_the_standard_reader(tmp_path):
    from workbench.runs import load_run

    s = play_session()
    s.reset(fixture_settings())
    s.step("\\boxed{0}")
    list(s.run_iter("sim_greedy"))
    folder = s.save_run(tmp_path, name="my-episode")
    run = load_run(folder)
    assert run.meta["kind"] == "play" and run.kind == "play" and run.meta["source"] == "workbench play tab"
    assert len(run.steps) == len(s.results) and set(run.steps["policy"]) == {"human+sim_greedy"}
    assert list(run.steps["actor"])[:2] == [HUMAN, "sim_greedy"]
    assert run.summary.iloc[0]["episodes"] == 1
    assert (
        run.episodes.iloc[0]["oracle_expected_correct"] >= run.episodes.iloc[0]["expected_correct"] - 0.05
    )  # regret >= 0 up to the grid
    assert run.config.sources == s.config.sources


def test_saves_in_the_same_second_do_not_overwrite_each_other(tmp_path):
    s = play_session()
    s.reset(fixture_settings())
    s.step("\\boxed{0}")
    first, second = s.save_run(tmp_path), s.save_run(tmp_path)
    assert first != second and first.is_dir() and second.is_dir()


def test_a_home_relative_folder_is_expanded(tmp_path, monkeypatch):
    """ "~/runs" used to create a literal "~" folder, then fail writing under the real home."""
    monkeypatch.setenv("HOME", str(tmp_path))
    monkeypatch.chdir(tmp_path)
    s = play_session()
    s.reset(fixture_settings())
    s.step("\\boxed{0}")
    folder = s.save_run("~/runs")
    assert folder.parent == tmp_path / "runs" and (folder / "trajectories.parquet").is_file()
    assert not (tmp_path / "~").exists()


# ------------------------------------------------------------------------------- LLM endpoint
def test_llm_settings_read_the_baseline_variables():
    from workbench.play import llm_settings

    env = {"BASELINE_API_BASE_URL": "https://x/v1", "BASELINE_API_MODEL": "m", "BASELINE_API_KEY": "k"}
    assert llm_settings("llm_api", env) == {
        "base_url": "https://x/v1",
        "model": "m",
        "api_key": "k",
        "timeout_s": 120.0,
        "retries": 1,
    }
    assert "api_key" not in llm_settings("llm_local", {"BASELINE_LOCAL_BASE_URL": "http://h/v1"})
    with pytest.raises(ValueError):
        llm_settings("sim_greedy", env)


def test_an_openai_compatible_endpoint_answers_in_the_play_tab():
    import evalpol_fixtures as fx
    from test_app_support import fake_openai_app, serve_in_thread

    from workbench.play import llm_settings

    url, server = serve_in_thread(fake_openai_app({q.text: q.gold_answer for q in fx.questions()}))
    try:
        env = {"BASELINE_LOCAL_BASE_URL": url + "v1", "BASELINE_LOCAL_MODEL": "fake"}
        s = play_session()
        s.reset(fixture_settings())
        r = s.step_policy("llm_local", llm=llm_settings("llm_local", env))
        ls = r.observation.last_step
        assert r.actor == "llm_local" and ls.correct and ls.tokens == s.tokenizer.count(r.response)
        assert r.latency_s is not None
    finally:
        server.stop()


def test_an_unreachable_endpoint_is_a_play_error():
    from test_app_support import free_port

    from workbench.play import llm_settings

    env = {"BASELINE_LOCAL_BASE_URL": f"http://127.0.0.1:{free_port()}/v1", "BASELINE_LOCAL_MODEL": "fake"}
    s = play_session()
    s.reset(fixture_settings())
    with pytest.raises(PlayError, match="llm_local"):
        s.step_policy("llm_local", llm=dict(llm_settings("llm_local", env), retries=0, timeout_s=2))
    assert s.results == []


def test_a_tokenizer_policy_can_refuse_names():
    import evalpol_fixtures as fx
    from test_app_support import play_config

    from workbench.play import PlaySession

    s = PlaySession(
        play_config(),
        pools=fx.pools(),
        tokenizer_policy=lambda n: None if n.startswith("Qwen/") else f"{n!r} is not allowed here",
    )
    with pytest.raises(PlayError, match="not allowed"):
        s.reset(fixture_settings(tokenizer_name="/etc"))
    assert s.reset(fixture_settings()).total_budget > 0
