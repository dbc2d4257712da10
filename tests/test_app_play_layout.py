"""The Play tab on the review's screen (1440x1000, a real browser: Debian chromium, headless, Playwright): while an
episode plays, the answer box, the live line and the spend chart are on screen together, without scrolling (the
review scrolled between the answer and the spend: the charts began ~1,700 px down). A scripted OpenAI-compatible
server on loopback plays the model (``llm_local``), so no real model runs. ``REE_SCREENSHOTS=folder`` keeps the
screenshots."""

from __future__ import annotations

import os
from pathlib import Path

import evalpol_fixtures as fx
import pytest
from test_app_support import fake_openai_app, headless_chromium, needs_chromium, open_app, serve_in_thread, start_app

pytestmark = [pytest.mark.slow, needs_chromium, pytest.mark.xdist_group("test_app_play_layout")]

VIEWPORT = {"width": 1440, "height": 1000}
#: Each element's box at the top of the page (scrolled to 0), and the viewport's size.
_BOXES_JS = """sels => {
  window.scrollTo(0, 0);
  const box = s => { const e = document.querySelector(s); if (!e) return null;
    const r = e.getBoundingClientRect(); return {top: r.top, bottom: r.bottom, left: r.left, right: r.right}; };
  return {boxes: Object.fromEntries(sels.map(s => [s, box(s)])), width: innerWidth, height: innerHeight,
          live: document.querySelector('#ree-live')?.innerText || ''};
}"""


@pytest.fixture(scope="module")
def live(tmp_path_factory):
    # a word every 1.5 s: an answer streams for about 18 s, time to measure it on a loaded machine
    url, model = serve_in_thread(fake_openai_app({q.text: q.gold_answer for q in fx.questions()}, chunk_delay_s=1.5))
    app = start_app(
        tmp_path_factory.mktemp("layout-runs"),
        environ={"BASELINE_LOCAL_BASE_URL": url + "v1", "BASELINE_LOCAL_MODEL": "scripted"},
    )
    yield app
    app.stop()
    model.stop()


def _shot(page, name: str) -> None:
    """The viewport as the player sees it (not the whole page), when ``REE_SCREENSHOTS`` names a folder."""
    folder = os.environ.get("REE_SCREENSHOTS")
    if folder:
        Path(folder).mkdir(parents=True, exist_ok=True)
        page.screenshot(path=str(Path(folder) / name))


def _on_screen(measured: dict, sels: tuple[str, ...]) -> dict:
    """The selectors whose box is missing, empty or not wholly inside the viewport (empty: all on screen)."""
    out = {}
    for sel in sels:
        b = measured["boxes"][sel]
        inside = (
            b is not None
            and b["bottom"] > b["top"]
            and b["top"] >= 0
            and b["left"] >= 0
            and b["bottom"] <= measured["height"]
            and b["right"] <= measured["width"]
        )
        if not inside:
            out[sel] = b
    return out


def _start_episode_with_the_model(page) -> None:
    page.click("#ree-reset")
    page.wait_for_function(
        "document.querySelector('#ree-question')?.innerText.includes('Question 1 of')", timeout=90_000
    )
    page.wait_for_selector("#ree-spend-plot svg.main-svg", timeout=60_000)
    page.locator("#ree-policy input").click()
    page.get_by_role("option", name="llm_local", exact=False).first.click()
    page.wait_for_selector("#ree-llm-url", state="visible", timeout=30_000)


def test_while_a_model_answers_its_answer_the_live_line_and_the_spend_chart_are_on_screen(live):
    with headless_chromium() as browser:
        page = open_app(browser, live.url, width=VIEWPORT["width"])
        assert page.viewport_size == VIEWPORT
        _start_episode_with_the_model(page)
        page.click("#ree-policy-step")
        page.wait_for_function(
            "document.querySelector('#ree-live')?.innerText.includes('is answering')", timeout=60_000
        )
        sels = ("#ree-live .ree-live-text", "#ree-live .ree-live-line", "#ree-spend-plot")
        measured = page.evaluate(_BOXES_JS, list(sels))
        _shot(page, "play-1440x1000-streaming.png")
        assert "is answering" in measured["live"], measured["live"]  # measured while the answer streams
        assert _on_screen(measured, sels) == {}, measured


def test_answering_by_hand_the_response_box_the_live_line_and_the_spend_chart_are_on_screen(live):
    with headless_chromium() as browser:
        page = open_app(browser, live.url, width=VIEWPORT["width"])
        _start_episode_with_the_model(page)
        page.click("#ree-policy-step")  # the model answers the first question; the live line stays
        page.wait_for_function(
            "document.querySelector('#ree-live')?.innerText.includes('answered by')", timeout=90_000
        )
        page.get_by_role("tab", name="Answer it yourself").click()
        page.wait_for_selector("#ree-response textarea", state="visible")
        sels = ("#ree-response textarea", "#ree-live .ree-live-line", "#ree-spend-plot")
        measured = page.evaluate(_BOXES_JS, list(sels))
        _shot(page, "play-1440x1000-by-hand.png")
        assert _on_screen(measured, sels) == {}, measured
