"""The whole app served on a loopback port: the OpenEnv API beside the page, a whole episode
through ``gradio_client``, independent sessions, and a real browser (Debian chromium, headless,
Playwright) playing an episode with a policy and drawing the charts.

One app is started for the module (uvicorn in a thread); the runs folder is a temporary folder.
"""

from __future__ import annotations

import os
import socket
import subprocess
import sys
from pathlib import Path

import httpx
import pytest
from test_app_support import ERROR_MARKS, REPO_ROOT, headless_chromium, needs_chromium, open_app, start_app

from workbench.app.server import DEFAULT_PORT, default_host, default_port

# its tests share one live app for the module: one worker runs them all (pytest-xdist --dist loadgroup)
pytestmark = pytest.mark.xdist_group("test_app_live")

FORM = (["metamathqa", "numina_tir"], "tokenizer_native", 4, "", "Qwen/Qwen2.5-0.5B-Instruct", "7", True, 10, "")


@pytest.fixture(scope="module")
def runs_root(tmp_path_factory):
    return tmp_path_factory.mktemp("live-runs")


@pytest.fixture(scope="module")
def live(runs_root):
    app = start_app(runs_root)
    yield app
    app.stop()


def new_client(url: str):
    from gradio_client import Client

    return Client(url, verbose=False, analytics_enabled=False)


@pytest.fixture
def client(live):
    c = new_client(live.url)
    yield c
    c.close()


def text_of(value) -> str:
    """A text output as gradio_client returns it (a string, or a component update dict)."""
    return value.get("value", "") if isinstance(value, dict) else value


def local_file(value) -> Path:
    """A file output as gradio_client returns it: a path, a file dict, or a component update
    (``{"__type__": "update", "value": ...}``), all naming a file on this machine."""
    while isinstance(value, dict):
        value = value.get("path") or value.get("value")
    return Path(value)


# ------------------------------------------------------------------------------- flags
def test_port_comes_from_port_then_gradio_server_port():
    assert default_port({}) == DEFAULT_PORT
    assert default_port({"GRADIO_SERVER_PORT": "9000"}) == 9000
    assert default_port({"PORT": "8080", "GRADIO_SERVER_PORT": "9000"}) == 8080
    with pytest.raises(ValueError, match="PORT"):
        default_port({"PORT": "http"})


def test_host_is_loopback_locally_and_public_on_a_space():
    assert default_host({}) == "127.0.0.1"
    assert default_host({"SPACE_ID": "user/space"}) == "0.0.0.0"
    assert default_host({"GRADIO_SERVER_NAME": "10.0.0.2", "SPACE_ID": "x"}) == "10.0.0.2"


def test_app_py_help_lists_the_flags():
    out = subprocess.run(
        [sys.executable, "app.py", "--help"], cwd=REPO_ROOT, capture_output=True, text=True, timeout=120
    )
    assert out.returncode == 0 and "--host" in out.stdout and "--port" in out.stdout and "--runs-root" in out.stdout


def test_app_py_rejects_a_bad_port_variable():
    env = dict(os.environ, PORT="not-a-port")
    out = subprocess.run(
        [sys.executable, "app.py"], cwd=REPO_ROOT, capture_output=True, text=True, timeout=120, env=env
    )
    assert out.returncode == 2 and "PORT" in out.stderr


def test_app_py_refuses_a_port_in_use_before_announcing_itself():
    """A port another server holds: exit 2 with a message naming the port and the flag, and no
    "Workbench on http://...:PORT/" line (that URL would be the other server)."""
    with socket.socket() as busy:
        busy.bind(("127.0.0.1", 0))
        busy.listen()
        port = busy.getsockname()[1]
        out = subprocess.run(
            [sys.executable, "app.py", "--port", str(port)], cwd=REPO_ROOT, capture_output=True, text=True, timeout=120
        )
    assert out.returncode == 2 and f"port {port}" in out.stderr and "--port" in out.stderr
    assert "Workbench on" not in out.stdout


# ------------------------------------------------------------------------------- one process, two faces
def test_page_and_api_share_the_process(live):
    assert httpx.get(live.url + "health", timeout=10).status_code == 200
    page = httpx.get(live.url, timeout=10)
    assert page.status_code == 200 and "gradio" in page.text.lower()


def test_openenv_routes_answer_beside_the_page(live):
    schema = httpx.get(live.url + "schema", timeout=10)
    assert schema.status_code == 200 and "action" in schema.json()
    r = httpx.post(live.url + "reset", json={"seed": 3}, timeout=60)
    assert r.status_code == 200 and r.json()["observation"]["question"]
    assert httpx.get(live.url + "docs", timeout=10).status_code == 200


def test_an_episode_over_the_websocket_beside_the_page(live):
    from reasoning_env.client import ReasoningEconomicsClient
    from reasoning_env.models import ReasoningEconomicsAction

    with ReasoningEconomicsClient(base_url=live.url.rstrip("/")).sync() as env:
        first = env.reset(seed=5, total_budget=300)
        assert first.observation.total_budget == 300 and first.observation.question
        nxt = env.step(ReasoningEconomicsAction(response="Quick guess: \\boxed{1}"))
        assert nxt.observation.last_step is not None and nxt.observation.remaining_budget < 300


# ------------------------------------------------------------------------------- gradio_client
def test_whole_episode_through_gradio_client(client, runs_root):
    out = client.predict(*FORM, api_name="/reset")
    assert "Question 1 of 10" in text_of(out[0]) and "Budget left" in out[1]
    out = client.predict("The answer is \\boxed{7}", api_name="/answer")
    assert "answered by you" in out[2] and out[-1] == ""
    out = client.predict("sim_uniform", api_name="/policy_step")
    assert "sim_uniform" in out[2]
    out = client.predict("sim_greedy", api_name="/run_to_end")
    assert "Episode over" in out[1]
    history = out[8]
    assert len(history["data"]) >= 2 and history["data"][0][3] == "human"
    assert local_file(out[11]).is_file()  # the episode JSON offered for download
    msg = client.predict(str(runs_root), api_name="/save_run")
    assert "Saved to" in msg and list(runs_root.glob("play-*/trajectories.parquet"))
    picker, status = client.predict(str(runs_root), [], api_name="/runs_refresh")
    assert "1 run folder(s)" in status
    describe, table, *figs = client.predict(
        [str(p.parent) for p in runs_root.glob("play-*/run.json")], "", 1, api_name="/runs_compare"
    )
    assert "play-" in describe and table["data"][0][1] == "human+sim_uniform+sim_greedy"


def test_step_before_reset_shows_a_message_not_a_traceback(client):
    from gradio_client.exceptions import AppError

    with pytest.raises(AppError, match="press Reset"):
        client.predict("\\boxed{1}", api_name="/answer")


def test_bad_budget_shows_a_message(client):
    from gradio_client.exceptions import AppError

    form = list(FORM)
    form[1], form[3] = "explicit", "a lot"
    with pytest.raises(AppError, match="total budget"):
        client.predict(*form, api_name="/reset")


def test_sessions_are_independent(live):
    a, b = new_client(live.url), new_client(live.url)
    a.predict(*FORM, api_name="/reset")
    form = list(FORM)
    form[1], form[3] = "explicit", "500"
    b.predict(*form, api_name="/reset")
    out_a = a.predict("uniform", api_name="/policy_step")
    assert "Question 2 of 10" in text_of(out_a[0])
    out_b = b.predict("\\boxed{1}", api_name="/answer")
    a.close(), b.close()
    assert "of 500 tokens" in out_b[1] and "of 500 tokens" not in out_a[1]


def test_reward_lab_through_gradio_client(client):
    from workbench.reward_lab.tuning import controls

    client.predict("synthetic", api_name="/lab_load")
    values = [c.default for c in controls()]
    spec_yaml, notes, table, *_ = client.predict(["l1_max"], *values, api_name="/lab_update")
    assert "type: l1_max" in spec_yaml and table["data"]


# ------------------------------------------------------------------------------- real browser
@pytest.mark.slow
@needs_chromium
def test_browser_plays_an_episode_and_draws_the_charts(live, tmp_path):
    with headless_chromium() as browser:
        page = open_app(browser, live.url)
        page.click("#ree-reset")
        page.wait_for_function(
            "document.querySelector('#ree-question')?.innerText.includes('Question 1 of')", timeout=90_000
        )
        page.click("#ree-run")
        page.wait_for_selector(".ree-done", timeout=120_000)
        for plot in ("#ree-spend-plot", "#ree-type-plot", "#ree-reward-plot"):
            page.wait_for_selector(f"{plot} svg.main-svg", timeout=30_000)
            assert page.locator(f"{plot} svg.main-svg").count() >= 1
        assert page.locator("#ree-spend-plot .scatterlayer .trace").count() >= 3  # fair share, budget, spend
        assert page.locator("#ree-history tbody tr").count() >= 1
        page.screenshot(path=str(tmp_path / "play.png"), full_page=True)
    assert (tmp_path / "play.png").stat().st_size > 10_000


@pytest.mark.slow
@needs_chromium
def test_browser_a_refused_action_shows_its_message_once_and_keeps_the_panels(live, tmp_path):
    """A refused Reset (gsm8k offline, no data folder) and a refused answer (episode over): one
    toast with the message, one mark on the status line, every panel as it was."""

    def panels(page):
        return {
            sel: page.inner_text(sel) for sel in ("#ree-gauges", "#ree-question", "#ree-verdict", "#ree-components")
        }

    def refused(page, before, text):
        page.wait_for_selector(f".toast-body:has-text('{text}')", timeout=60_000)
        assert page.locator(f".toast-body:has-text('{text}')").count() == 1
        assert page.locator(ERROR_MARKS).count() == 1 and page.locator(f"#ree-status {ERROR_MARKS}").count() == 1
        assert panels(page) == before
        page.locator(".toast-body button, .toast-close").first.click()  # close it: the next refusal gets its own

    with headless_chromium() as browser:
        page = open_app(browser, live.url)
        page.get_by_label("gsm8k", exact=True).check()
        before = panels(page)
        page.click("#ree-reset")
        refused(page, before, "Fill “Data folder”")
        page.screenshot(path=str(tmp_path / "refused-reset.png"), full_page=True)

        page.get_by_label("gsm8k", exact=True).uncheck()
        page.click("#ree-reset")
        page.wait_for_function(
            "document.querySelector('#ree-question')?.innerText.includes('Question 1 of')", timeout=90_000
        )
        page.click("#ree-run")
        page.wait_for_selector(".ree-done", timeout=120_000)
        page.wait_for_function("!document.querySelector('#ree-status .generating')", timeout=30_000)
        before = panels(page)
        page.get_by_role("tab", name="Answer it yourself").click()
        page.fill("#ree-response textarea", "one more: \\boxed{1}")
        page.click("#ree-answer")
        refused(page, before, "the episode is over")
        page.screenshot(path=str(tmp_path / "refused-answer.png"), full_page=True)


def test_the_play_tab_follows_the_servers_tokenizer_policy(client):
    from gradio_client.exceptions import AppError

    form = list(FORM)
    form[4] = "/etc"
    with pytest.raises(AppError, match="does not load tokenizer folders"):
        client.predict(*form, api_name="/reset")
