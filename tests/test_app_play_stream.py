"""A model's answers streamed into the Play tab: the session's stream_policy and the tab's streaming
handlers against a small OpenAI-compatible streaming server on loopback (server-sent events, as vLLM
sends them), the saved run's provenance, and the local engine's start button."""

from __future__ import annotations

import json
import time

import evalpol_fixtures as fx
import gradio as gr
import pandas as pd
import pytest
from test_app_support import fake_openai_app, fixture_settings, free_port, play_config, play_session, serve_in_thread

from workbench.app import play_tab as pt
from workbench.app.common import AppContext
from workbench.app.play_tab import VIEW, VIEW_FIRST, PlayTab
from workbench.play import LocalEngine, PlayError, StepResult, StreamProgress, available_policies

pytestmark = pytest.mark.xdist_group("test_app_play_stream")  # one fake server per worker


@pytest.fixture(scope="module")
def server():
    golds = {q.text: q.gold_answer for q in fx.questions()}
    url, live = serve_in_thread(fake_openai_app(golds, chunk_delay_s=0.01))
    yield url + "v1"
    live.stop()


@pytest.fixture
def llm(server):
    return {"base_url": server, "model": "fake", "timeout_s": 10, "retries": 0}


@pytest.fixture
def tab(tmp_path, monkeypatch):
    monkeypatch.setattr(pt, "STREAM_REDRAW_S", 0.0)  # every chunk redrawn (the page keeps 0.1 s apart)
    ctx = AppContext(
        base_config=play_config(), runs_root=str(tmp_path), pools=fx.pools(), download_dir=tmp_path, environ={}
    )
    return PlayTab(ctx)


def reset_tab(tab):
    form = (["gsm8k"], "tokenizer_native", 4, "", fx.TOKENIZER, "3", True, 10, "")
    return tab.reset(None, *form)[0]


def _texts(items):
    return [i.text for i in items if isinstance(i, StreamProgress)]


def _comparable(frame: pd.DataFrame) -> pd.DataFrame:
    """A saved run's steps without what differs between two plays of the same steps (timings, ids)."""
    drop = [c for c in frame.columns if "latency" in c or c in ("run_id", "episode_id")]
    return frame.drop(columns=drop).reset_index(drop=True)


# ------------------------------------------------------------------------------- the session
def test_streamed_text_grows_and_ends_in_the_step(llm):
    s = play_session()
    s.reset(fixture_settings())
    items = list(s.stream_policy("llm_local", llm=llm))
    texts, result = _texts(items), items[-1]
    assert len(texts) >= 5 and all(b.startswith(a) and len(b) > len(a) for a, b in zip(texts, texts[1:]))
    assert isinstance(result, StepResult) and result.response == texts[-1] and s.results == [result]


def test_a_streamed_episode_is_the_non_streamed_one(llm, tmp_path):
    streamed, plain = play_session(), play_session()
    streamed.reset(fixture_settings())
    plain.reset(fixture_settings())
    while not streamed.done:
        list(streamed.stream_policy("llm_local", llm=llm))
    list(plain.run_iter("llm_local", llm=llm))
    a = pd.read_parquet(streamed.save_run(tmp_path, name="a") / "trajectories.parquet")
    b = pd.read_parquet(plain.save_run(tmp_path, name="b") / "trajectories.parquet")
    assert len(a) == len(streamed.results) > 1
    pd.testing.assert_frame_equal(_comparable(a), _comparable(b))


def test_progress_counts_the_text_against_the_turn_cap_and_the_budget(llm):
    s = play_session()
    obs = s.reset(fixture_settings())
    items = list(s.stream_policy("llm_local", llm=llm))
    p = [i for i in items if isinstance(i, StreamProgress)][-1]
    cap = s._episode.policies["llm_local"].turn_cap(obs)
    assert p.tokens == s.tokenizer.count(p.text) and p.cap == cap == items[-1].meta["max_tokens"]
    assert p.budget_left == obs.remaining_budget - p.tokens and p.total_budget == obs.total_budget
    left = f"budget {p.budget_left:,} of {obs.total_budget:,} left"
    assert p.line() == f"answer {p.tokens:,} / cap {cap:,} tokens · {left}"


def test_other_actions_wait_for_a_streaming_answer_and_stop_drops_it(llm):
    s = play_session()
    s.reset(fixture_settings())
    stream = s.stream_policy("llm_local", llm=llm)
    assert isinstance(next(stream), StreamProgress)
    with pytest.raises(PlayError, match="llm_local is answering question 1"):
        s.step("\\boxed{1}")
    stream.close()  # the page's Stop
    assert s.results == []
    items = list(s.stream_policy("llm_local", llm=llm))  # the same question, asked again
    assert isinstance(items[-1], StepResult) and items[-1].observation.last_step.index == 0


def test_a_policy_that_cannot_stream_gives_its_step_at_once():
    s = play_session()
    s.reset(fixture_settings())
    items = list(s.stream_policy("sim_greedy"))
    assert len(items) == 1 and isinstance(items[0], StepResult) and items[0].actor == "sim_greedy"


def test_the_saved_run_names_the_model_where_simulated_runs_say_simulated_solver(llm, tmp_path):
    s = play_session()
    s.reset(fixture_settings())
    s.step("I think \\boxed{8}")
    list(s.stream_policy("llm_local", llm=llm))
    list(s.stream_policy("sim_greedy"))
    meta = json.loads((s.save_run(tmp_path, name="mixed") / "run.json").read_text())
    warnings = meta["provenance"]["warnings"]
    assert any(w.startswith("human: answers typed") for w in warnings)
    assert "llm_local: real model: fake, openai-compatible server." in warnings
    assert any(w.startswith("Simulated solver: sim_greedy") for w in warnings)
    assert meta["policies"][0]["models"] == {"llm_local": "real model: fake, openai-compatible server"}
    steps = pd.read_parquet(tmp_path / "mixed" / "trajectories.parquet")
    assert steps["policy_max_tokens"].notna().tolist() == [False, True, False]


# ------------------------------------------------------------------------------- the tab's handlers
def test_the_policy_button_streams_the_answer_then_draws_the_step(tab, server):
    session = reset_tab(tab)
    outs = list(tab.policy_stream(session, "llm_local", server, "fake"))
    partial, last = outs[:-1], outs[-1]
    assert len(partial) >= 5 and all(len(o) == 1 + len(VIEW_FIRST) + 1 for o in outs)
    lives = [o[-1] for o in partial]
    assert all("is answering" in h and "/ cap " in h and " left" in h for h in lives)
    assert len(lives[-1]) > len(lives[0]) and "Working it out" in lives[-1]
    assert last[0] is session and len(session.results) == 1
    assert "answered by" in last[-1] and "llm_local" in last[1 + VIEW_FIRST.index("verdict")]


def test_the_gauges_count_the_answer_while_it_streams(tab, server):
    """The budget card says what the live line says while the model writes (it kept the pre-answer value)."""
    import re

    session = reset_tab(tab)
    before = session.observation.remaining_budget
    outs = list(tab.policy_stream(session, "llm_local", server, "fake"))
    at = 1 + VIEW_FIRST.index("gauges")
    partial = [o for o in outs[:-1] if "budget " in o[-1]]
    assert partial
    for o in partial:
        left = re.search(r"budget ([\d,]+) of [\d,]+ left", o[-1]).group(1)  # the live line's count
        assert isinstance(o[at], str) and f">{left}<" in o[at] and "in the answer being written" in o[at]
    assert f">{before:,}<" not in partial[-1][at]  # not the value before the answer


def test_run_to_the_end_streams_every_answer(tab, server):
    session = reset_tab(tab)
    outs = list(tab.run_stream(session, "llm_local", server, "fake"))
    assert session.done and all(len(o) == 1 + len(VIEW) + 1 for o in outs)
    lives = [o[-1] for o in outs if isinstance(o[-1], str) and "is answering" in o[-1]]
    asked = {h.split("Q", 1)[1].split(" ", 1)[0] for h in lives}
    assert asked == {str(i + 1) for i in range(len(session.results))}
    assert "Episode over" in outs[-1][1 + VIEW.index("gauges")]


def test_an_unreachable_server_is_a_message_naming_the_url(tab):
    session = reset_tab(tab)
    url = f"http://127.0.0.1:{free_port()}/v1"
    with pytest.raises(gr.Error, match="127.0.0.1") as exc:
        list(tab.policy_stream(session, "llm_local", url, "fake"))
    assert "Traceback" not in str(exc.value) and "no server answers" in str(exc.value)
    assert session.results == []


def test_the_real_model_is_always_offered_with_the_local_server_as_default(tab):
    assert "llm_local" in tab.policies and "llm_local" not in available_policies({})
    llm = tab._llm("llm_local")
    assert llm["base_url"] == "http://127.0.0.1:8001/v1" and llm["model"] == "embedded:qwen2.5-coder-0.5b"
    env = {"BASELINE_LOCAL_BASE_URL": "http://h:1/v1", "BASELINE_LOCAL_MODEL": "m"}
    ctx = AppContext(base_config=play_config(), pools=fx.pools(), environ=env, download_dir=tab.ctx.download_dir)
    other = PlayTab(ctx)
    assert other._llm("llm_local")["base_url"] == "http://h:1/v1"
    assert other._llm("llm_local", " http://x/v1 ", "")["base_url"] == "http://x/v1"


def test_the_server_fields_show_only_for_the_real_model(tab):
    assert tab.real_model_visible("llm_local").visible is True
    assert tab.real_model_visible("sim_greedy").visible is False


# ------------------------------------------------------------------------------- the local engine
def test_without_vllm_the_start_button_is_hidden_and_refuses(tab, tmp_path):
    tab.engine = LocalEngine(python=tmp_path / "no-python")
    assert not tab.engine.available()
    with pytest.raises(gr.Error, match="not installed here"):
        list(tab.start_engine("", ""))


def test_an_engine_that_cannot_start_says_why_in_one_line(tab, tmp_path):
    tab.engine = LocalEngine(python="/bin/false", log_path=str(tmp_path / "vllm.log"))
    deadline = time.monotonic() + 60
    outputs = []
    for out in tab.start_engine("", ""):
        outputs.append(out)
        assert time.monotonic() < deadline
    msg = outputs[-1][2]  # written into the status line, which keeps it
    assert msg.startswith("**The engine did not start**") and "\n" not in msg and "Traceback" not in msg


def test_run_to_the_end_redraws_the_charts_at_most_every_redraw_interval_and_at_the_end(tab, monkeypatch):
    """Quick simulated steps: each one shows its verdict and gauges, but the charts, token view and
    steps table (VIEW_REST) are drawn once at the end, not after every step."""
    monkeypatch.setattr(pt, "RUN_REDRAW_S", 3600.0)
    session = reset_tab(tab)
    outs = list(tab.run_stream(session, "sim_greedy"))
    steps = [o for o in outs if o[0] is session]
    rest = [1 + VIEW.index(name) for name in pt.VIEW_REST]
    drawn = [o for o in steps if not any(_skipped(o[i]) for i in rest)]
    assert session.done and len(steps) == len(session.results) + 1
    assert drawn == [outs[-1]]  # the whole view once, after the last step
    gauges = [o[1 + VIEW.index("gauges")] for o in steps]
    assert all(f"answered {k}" in g for k, g in enumerate(gauges[:-1], start=1))
    monkeypatch.setattr(pt, "RUN_REDRAW_S", 0.0)
    session = reset_tab(tab)
    redrawn = [o for o in tab.run_stream(session, "sim_greedy") if o[0] is session]
    assert all(not _skipped(o[1 + VIEW.index("spend_plot")]) for o in redrawn[:-2])


def _skipped(output) -> bool:
    return isinstance(output, dict) and output == gr.skip()
