"""The Play page's "Saved to ..." line belongs to the episode it saved: Reset clears it, so a new,
unsaved episode never looks saved (Chromium)."""

from __future__ import annotations

import csv

import pytest
from test_app_support import TOKENIZER, headless_chromium, needs_chromium, open_app, start_app

from reasoning_env.config import EnvConfig


@pytest.mark.slow
@needs_chromium
def test_reset_clears_the_saved_to_line(tmp_path):
    path = tmp_path / "q.csv"
    with path.open("w", newline="") as f:
        w = csv.writer(f)
        w.writerow(["question", "answer"])
        w.writerows([(f"What is {k} plus {k}?", str(2 * k)) for k in range(1, 9)])
    cfg = EnvConfig(sources=[{"name": "jsonl", "options": {"data_files": str(path)}}], tokenizer_name=TOKENIZER)
    app = start_app(tmp_path / "runs", config=cfg)
    try:
        with headless_chromium() as browser:
            page = open_app(browser, app.url)
            page.click("#ree-reset")
            page.wait_for_function(
                "document.querySelector('#ree-question')?.innerText.includes('Question 1 of')", timeout=60_000
            )
            page.get_by_role("tab", name="Answer it yourself").click()
            page.locator("#ree-response textarea").fill("\\boxed{2}")
            page.click("#ree-answer")
            page.wait_for_function(
                "document.querySelector('#ree-question')?.innerText.includes('Question 2 of')", timeout=60_000
            )
            page.click("#ree-save")
            page.wait_for_function(
                "document.querySelector('#ree-save-status').innerText.includes('Saved to')", timeout=60_000
            )
            page.click("#ree-reset")
            page.wait_for_function(
                "!document.querySelector('#ree-save-status').innerText.includes('Saved to')", timeout=60_000
            )
            assert "Question 1 of" in page.inner_text("#ree-question")
    finally:
        app.stop()
