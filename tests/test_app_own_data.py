"""The Play tab plays a researcher's own data: the sources a config names (a CSV through ``jsonl``,
with its options) and a JSONL/CSV file given on the page with a field mapping; it never swaps in
other questions without saying so. Handlers called as functions, then the page in Chromium."""

from __future__ import annotations

import csv
import json
from pathlib import Path

import gradio as gr
import pytest
from test_app_support import TOKENIZER, headless_chromium, needs_chromium, open_app, start_app

from reasoning_env.config import EnvConfig
from workbench.app.common import AppContext
from workbench.app.play_tab import VIEW, PlayTab, render_gauges

#: Questions no builtin or fixture set holds, so a question on the page proves where it came from.
OWN = [
    (f"Zorblax has {k} glowing pebbles and finds {k + 3} more. How many pebbles now?", str(2 * k + 3))
    for k in range(12)
]


def write_csv(path: Path, question_col: str = "problem", answer_col: str = "solution") -> Path:
    with path.open("w", newline="") as f:
        w = csv.writer(f)
        w.writerow([question_col, answer_col])
        w.writerows(OWN)
    return path


def csv_config(path: Path) -> EnvConfig:
    """What a researcher's REE_CONFIG holds: their CSV through the ``jsonl`` source."""
    spec = {
        "name": "jsonl",
        "options": {"data_files": str(path), "prompt_field": "problem", "answer_field": "solution"},
    }
    return EnvConfig(sources=[spec], tokenizer_name=TOKENIZER)


def form(sources, **changes):
    base = dict(
        sources=sources,
        budget_mode="tokenizer_native",
        budget_ratio=4,
        total_budget="",
        tokenizer_name=TOKENIZER,
        seed="5",
        hard_cap_mode=True,
        num_questions=4,
        data_dir="",
    )
    base.update(changes)
    return base


def reset(play, **kwargs):
    out = play.reset(None, **kwargs)
    return out[0], dict(zip(VIEW, out[1:]))


def text(value) -> str:
    return value.value if isinstance(value, gr.Markdown) else str(value)


def test_a_config_naming_a_csv_source_offers_it_ticked_and_plays_it(tmp_path):
    cfg = csv_config(write_csv(tmp_path / "mine.csv"))
    play = PlayTab(AppContext(base_config=cfg, runs_root=str(tmp_path), download_dir=tmp_path / "dl", environ={}))
    with gr.Blocks():
        c = play.build()
    assert ("jsonl: mine.csv (from the config)", "jsonl") in c["sources"].choices
    assert c["sources"].value == ["jsonl"]
    session, view = reset(play, **form(["jsonl"]))
    assert "Zorblax" in text(view["question"])
    assert "mine.csv" in text(view["info"]) and "stand-in" not in text(view["info"])


def test_a_question_file_with_a_field_mapping_is_played_alone(tmp_path):
    path = tmp_path / "own.jsonl"
    path.write_text("".join(json.dumps({"q": q, "gold": a}) + "\n" for q, a in OWN))
    play = PlayTab(AppContext(runs_root=str(tmp_path), download_dir=tmp_path / "dl", environ={}))
    session, view = reset(play, **form([]), own_file=str(path), prompt_field="q", answer_field="gold")
    assert "Zorblax" in text(view["question"]) and "own.jsonl" in text(view["info"])
    gold = dict(OWN)[session.observation.question]
    session.step(f"\\boxed{{{gold}}}")
    assert session.results[-1].observation.last_step.correct


def test_a_file_holding_fewer_questions_than_asked_says_so_and_why(tmp_path):
    path = tmp_path / "five.jsonl"
    path.write_text("".join(json.dumps({"q": q, "a": a}) + "\n" for q, a in OWN[:5]))
    play = PlayTab(AppContext(runs_root=str(tmp_path), download_dir=tmp_path / "dl", environ={}))
    with pytest.warns(UserWarning, match="This episode has 5 questions, not the 10 asked"):
        session, view = reset(
            play, **form([], num_questions=10), own_file=str(path), prompt_field="q", answer_field="a"
        )
    assert session.observation.num_questions == 5
    info = text(view["info"])  # said where it stays, not only in a toast
    assert "This episode has 5 questions, not the 10 asked: the chosen sources hold only 5 in all (jsonl: 5)" in info


def test_as_many_questions_as_asked_gives_no_notice(tmp_path):
    path = tmp_path / "own.jsonl"
    path.write_text("".join(json.dumps({"q": q, "a": a}) + "\n" for q, a in OWN))
    play = PlayTab(AppContext(runs_root=str(tmp_path), download_dir=tmp_path / "dl", environ={}))
    _, view = reset(play, **form([]), own_file=str(path), prompt_field="q", answer_field="a")
    assert "not the" not in text(view["info"])


def test_worked_solutions_in_a_question_file_name_the_setting_to_choose(tmp_path):
    path = tmp_path / "gsm.jsonl"
    path.write_text("".join(json.dumps({"question": q, "answer": f"{a} so\n#### {a}"}) + "\n" for q, a in OWN))
    play = PlayTab(AppContext(runs_root=str(tmp_path), download_dir=tmp_path / "dl", environ={}))
    with pytest.raises(gr.Error, match="answer_extraction: gsm8k"):
        reset(play, **form([]), own_file=str(path))
    _, view = reset(play, **form([]), own_file=str(path), answer_extraction="gsm8k")
    assert "Zorblax" in text(view["question"])


def test_a_missing_question_file_is_named(tmp_path):
    play = PlayTab(AppContext(runs_root=str(tmp_path), download_dir=tmp_path / "dl", environ={}))
    with pytest.raises(gr.Error, match="does not exist"):
        reset(play, **form([]), own_file=str(tmp_path / "nope.csv"))


def test_no_source_and_no_file_is_refused_not_replaced_by_defaults(tmp_path):
    play = PlayTab(AppContext(runs_root=str(tmp_path), download_dir=tmp_path / "dl", environ={}))
    with pytest.raises(gr.Error, match="no questions to play"):
        reset(play, **form([]))


def test_builtin_stand_ins_are_named_as_such_in_the_episode_info(tmp_path, monkeypatch):
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    play = PlayTab(AppContext(runs_root=str(tmp_path), download_dir=tmp_path / "dl", environ={}))
    _, view = reset(play, **form(["metamathqa"]))
    assert "builtin:metamathqa" in text(view["info"])
    assert "builtin stand-ins, not the real data" in text(view["info"])


def test_the_questions_gauge_counts_the_questions_never_asked_after_running_dry(tmp_path):
    cfg = csv_config(write_csv(tmp_path / "mine.csv"))
    play = PlayTab(AppContext(base_config=cfg, runs_root=str(tmp_path), download_dir=tmp_path / "dl", environ={}))
    session, _ = reset(play, **form(["jsonl"], budget_mode="explicit", total_budget="60", num_questions=10))
    session.step("x " * 200 + "\\boxed{1}")  # far past the budget: clipped, the episode ends dry
    assert session.done and session.observation.done_reason == "budget_exhausted"
    html = render_gauges(session)
    assert "answered 1 · 9 never asked" in html


@needs_chromium
def test_the_page_plays_the_configs_csv_and_a_typed_file(tmp_path):
    csv_path = write_csv(tmp_path / "mine.csv")
    other = tmp_path / "other.csv"
    with other.open("w", newline="") as f:
        w = csv.writer(f)
        w.writerow(["prompt", "ans"])
        w.writerows(
            [(f"Quixotl owns {k} lanterns and buys {k} more. How many lanterns?", str(2 * k)) for k in range(8)]
        )
    app = start_app(tmp_path / "runs", config=csv_config(csv_path))
    try:
        with headless_chromium() as browser:
            page = open_app(browser, app.url)
            sources = page.locator("#ree-sources")
            assert sources.get_by_label("jsonl: mine.csv (from the config)").is_checked()
            page.click("#ree-reset")
            page.wait_for_function(
                "document.querySelector('#ree-question').innerText.includes('Zorblax')", timeout=60_000
            )
            assert "mine.csv" in page.locator(".ree-info").first.inner_text()
            page.screenshot(path=str(tmp_path / "play_config_csv.png"), full_page=False)
            # now a file typed on the page, the config's source unticked
            sources.get_by_label("jsonl: mine.csv (from the config)").uncheck()
            page.locator("#ree-own").get_by_text("Your own questions").click()
            page.locator("#ree-own-file textarea, #ree-own-file input").first.fill(str(other))
            page.locator("#ree-own-prompt textarea, #ree-own-prompt input").first.fill("prompt")
            page.locator("#ree-own-answer textarea, #ree-own-answer input").first.fill("ans")
            page.click("#ree-reset")
            page.wait_for_function(
                "document.querySelector('#ree-question').innerText.includes('Quixotl')", timeout=60_000
            )
            assert "other.csv" in page.locator(".ree-info").first.inner_text()
            page.screenshot(path=str(tmp_path / "play_own_file.png"), full_page=True)
            shots = Path("/tmp/ree-shots")
            shots.mkdir(exist_ok=True)
            for p in tmp_path.glob("*.png"):
                (shots / p.name).write_bytes(p.read_bytes())
    finally:
        app.stop()
