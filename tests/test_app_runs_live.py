"""The Runs tab at scale and refusals in the Reward lab and Runs tabs, in a real browser (Debian
chromium, headless, Playwright) on the whole app served on a loopback port.

The runs folder holds five runs of every kind (two evaluations of five policies, a budget sweep, a
saved Play episode, a training run: :func:`test_app_support.make_runs_of_every_kind`). What the
page draws is measured, not eyed: legend entries per chart, and the boxes of every tick label,
legend entry and bar label (none may overlap another on the same axis or legend).
"""

from __future__ import annotations

import pytest
from test_app_support import (
    ERROR_MARKS,
    headless_chromium,
    make_eval_run,
    make_runs_of_every_kind,
    make_training_run,
    needs_chromium,
    open_app,
    start_app,
)

pytestmark = [needs_chromium, pytest.mark.slow, pytest.mark.xdist_group("app_runs_live")]

PLOTS = (
    "ree-runs-acc",
    "ree-runs-spend",
    "ree-runs-util",
    "ree-runs-intervals",
    "ree-runs-type",
    "ree-runs-train",
    "ree-runs-frontier",
    "ree-runs-budget",
)
#: Legend entries that name a reference line, not a series.
REFERENCE_LINES = {"even spend", "frontier"}
RUN_KEY = [
    "eval-a (evaluation)",
    "eval-b (evaluation)",
    "sweep (evaluation)",
    "play-episode (Play episode)",
    "train (training)",
]

#: Per plot: every legend's entry texts, and the boxes of tick labels (by axis), legend entries (by
#: legend), bar labels and the title, in page pixels, with the plot's own box.
MEASURE = """(id) => {
  const el = document.getElementById(id);
  const plot = el && el.querySelector('.js-plotly-plot');
  if (!plot || !el.offsetParent) return null;
  const box = e => { const r = e.getBoundingClientRect(); return [r.left, r.top, r.right, r.bottom]; };
  const out = {box: box(plot), legends: {}, legendBoxes: {}, ticks: {}, bars: [], title: null};
  plot.querySelectorAll('.infolayer > g[class^="legend"]').forEach(g => {
    const name = g.getAttribute('class').split(' ')[0];
    const items = Array.from(g.querySelectorAll('g.traces'));
    const text = t => t.querySelector('text[class$="text"]');
    out.legends[name] = items.map(t => text(t).textContent);
    out.legendBoxes[name] = items.map(t => box(text(t)));
  });
  plot.querySelectorAll('g[class$="tick"] text, g[class$="tick2"] text').forEach(t => {
    const axis = t.parentNode.getAttribute('class');
    if (t.textContent.trim()) (out.ticks[axis] = out.ticks[axis] || []).push(box(t));
  });
  plot.querySelectorAll('text.bartext')
    .forEach(t => out.bars.push([box(t), parseFloat(getComputedStyle(t).fontSize)]));
  const title = plot.querySelector('.gtitle');
  if (title) out.title = box(title);
  return out;
}"""


def overlapping(boxes) -> list:
    """Pairs of boxes that overlap by more than a pixel each way."""
    return [
        (a, b)
        for i, a in enumerate(boxes)
        for b in boxes[i + 1 :]
        if min(a[2], b[2]) - max(a[0], b[0]) > 1 and min(a[3], b[3]) - max(a[1], b[1]) > 1
    ]


@pytest.fixture(scope="module")
def live(tmp_path_factory):
    root = tmp_path_factory.mktemp("runs-of-every-kind")
    make_runs_of_every_kind(root)
    app = start_app(root)
    app.runs_root = root
    yield app
    app.stop()


@pytest.fixture
def page(live):
    with headless_chromium() as browser:
        yield open_app(browser, live.url)


def open_runs_tab_and_compare_all(page) -> None:
    page.get_by_role("tab", name="Runs").click()
    page.wait_for_selector("#ree-runs-picker", timeout=60_000)
    for _ in range(10):  # the newest three are chosen: add the others from the picker
        page.locator("#ree-runs-picker input").click()
        page.wait_for_timeout(200)
        option = page.locator("[role=option]:not(.selected)")
        if not option.count():
            break
        option.first.click()
    page.keyboard.press("Escape")
    assert page.locator("#ree-runs-picker .token").count() == 5
    page.click("#ree-compare")
    # both events drawn (compare, then the uncertainty): the run keys of their charts name all five runs
    page.wait_for_function(
        """() => ['ree-runs-acc', 'ree-runs-frontier'].every(id =>
        document.querySelectorAll(`#${id} .legend2 g.traces`).length === 5)""",
        timeout=120_000,
    )
    page.wait_for_function("!document.querySelector('#ree-runs-status .generating')", timeout=60_000)
    page.wait_for_timeout(1500)  # Gradio redraws each chart once more after it resizes


def test_the_runs_tab_draws_five_runs_grouped_with_legible_labels(page, tmp_path):
    """Five runs, 15 (run, policy) series: each chart's legend names each policy once and each run
    once (with its kind: the Play episode and the training run say so), no tick label, legend entry
    or bar label overlaps another, bar labels stay at a readable size, and titles fit their chart."""
    open_runs_tab_and_compare_all(page)
    page.screenshot(path=str(tmp_path / "runs-tab.png"), full_page=True)
    drawn = {}
    for plot_id in PLOTS:
        m = page.evaluate(MEASURE, plot_id)
        if m is not None:
            drawn[plot_id] = m
    assert set(drawn) >= set(PLOTS) - {"ree-runs-budget"}  # the training run's curves are shown too
    for plot_id, m in drawn.items():
        entries = sum(len([t for t in v if t not in REFERENCE_LINES]) for v in m["legends"].values())
        assert entries <= 7 + 5, (plot_id, m["legends"])  # not one per (run, policy): 15
        for name, texts in m["legends"].items():
            assert len(texts) == len(set(texts)), (plot_id, name, texts)
            assert not overlapping(m["legendBoxes"][name]), (plot_id, name)
        if "legend2" in m["legends"]:
            assert sorted(m["legends"]["legend2"]) == sorted(RUN_KEY), plot_id  # in the order chosen
        for axis, boxes in m["ticks"].items():
            assert not overlapping(boxes), (plot_id, axis)
        assert not overlapping([b for b, _size in m["bars"]]), plot_id
        assert all(size >= 9 for _b, size in m["bars"]), (plot_id, [s for _b, s in m["bars"]])
        left, _top, right, _bottom = m["box"]
        if m["title"]:
            assert left - 1 <= m["title"][0] and m["title"][2] <= right + 1, plot_id
    assert len(drawn["ree-runs-acc"]["legends"]["legend"]) == 7 and len(drawn["ree-runs-util"]["bars"]) == 15
    assert len(drawn["ree-runs-util"]["ticks"]) == 6  # one y axis per run's panel, and the shared x axis
    rows = sum(len(boxes) for axis, boxes in drawn["ree-runs-intervals"]["ticks"].items() if axis.startswith("y"))
    assert rows == 5 + 5 + 3 * 2 + 1 + 1  # every policy (and budget ratio) of every run, drawn by the second pass


def test_narrowing_the_policies_redraws_every_chart_with_those(page):
    open_runs_tab_and_compare_all(page)
    picker = page.locator("#ree-runs-policies")
    for _ in range(10):  # keep uniform and sim_greedy: remove the others, quickly (redraws may lag behind)
        tokens = picker.locator(".token")
        texts = [t.inner_text().strip() for t in tokens.all()]
        drop = next((i for i, t in enumerate(texts) if t not in ("uniform", "sim_greedy")), None)
        if drop is None:
            break
        tokens.nth(drop).locator(".token-remove").click()
        page.wait_for_timeout(100)
    assert sorted(t.inner_text().strip() for t in picker.locator(".token").all()) == ["sim_greedy", "uniform"]
    page.wait_for_function(
        """() => { const l = document.querySelector('#ree-runs-acc .legend');
        return l && l.querySelectorAll('g.traces').length === 2; }""",
        timeout=60_000,
    )
    page.wait_for_function("!document.querySelector('#ree-runs-status .generating')", timeout=60_000)
    acc = page.evaluate(MEASURE, "ree-runs-acc")
    assert acc["legends"]["legend"] == ["uniform", "sim_greedy"]
    assert sorted(acc["legends"]["legend2"]) == sorted(RUN_KEY[:3])  # the runs that hold them
    table = page.inner_text("#ree-runs-table")
    assert "sim_greedy" in table and not any(
        p in table for p in ("greedy_max", "sim_uniform", "oracle_allocation", "grpo")
    )


def test_notebook_03s_figures_of_five_runs_keep_their_labels_apart_at_a_notebooks_width(live, tmp_path):
    """Notebook 03 draws the same figures (library calls) in a notebook's output width (~900 px):
    measured in the browser as in the tab."""
    from workbench import compare, plots

    root = live.runs_root
    runs = compare.load_runs(sorted(str(p.parent) for p in root.glob("*/run.json")))
    figs = [
        compare.accuracy_vs_tokens(runs),
        compare.intervals(runs),
        compare.frontier(runs),
        compare.utilisation_figure(runs),
        compare.budget_spend(runs),
        compare.tokens_by_type(runs),
        plots.regret_figure(runs.episodes()),
        compare.training_curves_figure(runs),
        compare.held_out_figure(runs),
    ]
    html = "".join(
        f"<div id='fig-{i}'>{f.to_html(full_html=False, include_plotlyjs=i == 0, default_width='100%')}</div>"
        for i, f in enumerate(figs)
    )
    page_file = tmp_path / "notebook.html"
    page_file.write_text(f"<!DOCTYPE html><html><body style='width:900px'>{html}</body></html>", encoding="utf-8")
    with headless_chromium() as browser:
        page = browser.new_page(viewport={"width": 940, "height": 1000})
        page.goto(page_file.as_uri(), timeout=60_000)
        page.wait_for_function(
            f"document.querySelectorAll('.js-plotly-plot .main-svg').length >= {len(figs)}", timeout=60_000
        )
        page.screenshot(path=str(tmp_path / "notebook.png"), full_page=True)
        for i in range(len(figs)):
            m = page.evaluate(MEASURE, f"fig-{i}")
            assert m is not None, i
            assert sum(len([t for t in v if t not in REFERENCE_LINES]) for v in m["legends"].values()) <= 7 + 5, (
                i,
                m["legends"],
            )
            for name, boxes in m["legendBoxes"].items():
                assert not overlapping(boxes), (i, name)
            for axis, boxes in m["ticks"].items():
                assert not overlapping(boxes), (i, axis)
            assert not overlapping([b for b, _s in m["bars"]]) and all(s >= 9 for _b, s in m["bars"]), i
            if m["title"]:
                assert m["box"][0] - 1 <= m["title"][0] and m["title"][2] <= m["box"][2] + 1, i


def panels(page, ids) -> dict:
    return {i: page.inner_text(f"#{i}") for i in ids}


def refused_once(page, text: str, status: str) -> None:
    page.wait_for_selector(f".toast-body:has-text('{text}')", timeout=60_000)
    assert page.locator(f".toast-body:has-text('{text}')").count() == 1
    assert page.locator(ERROR_MARKS).count() == 1 and page.locator(f"#{status} {ERROR_MARKS}").count() == 1


def test_a_refused_compare_shows_its_message_once_and_keeps_the_panels(page):
    open_runs_tab_and_compare_all(page)
    shown = ("ree-runs-table", "ree-runs-acc", "ree-runs-util", "ree-runs-uncertainty")
    before = panels(page, shown)
    page.get_by_label("…or a folder path (commas for several)").fill("/no/such/run")
    page.locator("#ree-runs-picker .remove-all").click()  # nothing chosen but a bad path
    page.click("#ree-compare")
    refused_once(page, "no run could be loaded", "ree-runs-status")
    assert panels(page, shown) == before


def test_a_refused_reward_lab_action_shows_its_message_once_and_keeps_the_panels(page):
    page.get_by_role("tab", name="Reward lab").click()
    page.wait_for_selector("#ree-lab-induced .js-plotly-plot", timeout=120_000)
    page.wait_for_function("!document.querySelector('#ree-lab-status .generating')", timeout=60_000)
    shown = ("ree-lab-table", "ree-lab-curves", "ree-lab-comparison", "ree-lab-induced")
    before = panels(page, shown)
    box = page.get_by_label("Budgets for the induced allocation (tokens, 10 questions)")
    box.fill("lots")
    box.press("Enter")
    refused_once(page, "budgets must be whole numbers", "ree-lab-status")
    assert panels(page, shown) == before


# ------------------------------------------------------------------------------- runs made while the app runs
@pytest.fixture(scope="module")
def growing(tmp_path_factory):
    """The app on a runs folder of its own (runs are added to it while it runs): four old runs."""
    import os
    import time

    root = tmp_path_factory.mktemp("growing-runs")
    for i in range(4):
        t = time.time() - 600 + i
        os.utime(make_training_run(root, f"old-{i}") / "run.json", (t, t))
    app = start_app(root)
    app.runs_root = root
    yield app
    app.stop()


@pytest.fixture
def browser():
    """Headless chromium; each test opens its own pages (one per browser session)."""
    with headless_chromium() as browser:
        yield browser


def open_runs_tab(browser, url: str):
    page = open_app(browser, url)
    page.get_by_role("tab", name="Runs").click()
    page.wait_for_function(
        "document.querySelectorAll('#ree-runs-picker .token').length > 0"
        " && !document.querySelector('#ree-runs-status .generating')",
        timeout=60_000,
    )
    return page


def run_name(text: str) -> str:
    """The run's folder name in a picker entry ``"<name>  (<kind>, <date>)"`` (a selected option has a tick)."""
    return text.split(" (")[0].strip().lstrip("✓").strip()


def chosen(page) -> list[str]:
    return [run_name(t.inner_text()) for t in page.locator("#ree-runs-picker .token").all()]


def listed(page) -> list[str]:
    page.locator("#ree-runs-picker input").click()
    page.wait_for_selector("[role=option]", timeout=10_000)
    names = [run_name(o.inner_text()) for o in page.locator("[role=option]").all()]
    page.keyboard.press("Escape")
    return names


def test_a_run_made_while_the_app_runs_is_listed_and_preselected_in_a_new_page(growing, browser):
    """The list and its newest-three selection are made when each page loads, not when the app started."""
    before = open_runs_tab(browser, growing.url)
    assert "made-while-running" not in listed(before)
    make_eval_run(growing.runs_root, "made-while-running")  # as `python -m workbench.evaluate` would
    page = open_runs_tab(browser, growing.url)
    assert chosen(page)[0] == "made-while-running" and len(chosen(page)) == 3
    assert listed(page)[0] == "made-while-running"
    assert page.locator(ERROR_MARKS).count() == 0


def test_the_refresh_button_adds_a_run_made_since_to_the_selection(growing, browser):
    """An open page keeps the user's choice and gains the run that appeared (listed and selected)."""
    page = open_runs_tab(browser, growing.url)
    page.locator("#ree-runs-picker .token").first.locator(".token-remove").click()  # the user's own choice
    page.keyboard.press("Escape")
    mine = chosen(page)
    assert len(mine) == 2
    make_training_run(growing.runs_root, "made-after-the-page")
    page.get_by_role("button", name="Refresh list").click()
    page.wait_for_function(
        "Array.from(document.querySelectorAll('#ree-runs-picker .token'))"
        ".some(t => t.innerText.includes('made-after-the-page'))",
        timeout=60_000,
    )
    assert chosen(page) == mine + ["made-after-the-page"]
    assert "made-after-the-page" in listed(page)
    assert "1 new since the last listing" in page.inner_text("body")
    assert page.locator(ERROR_MARKS).count() == 0


def test_the_runs_tab_opens_the_shipped_training_run_with_its_before_after_allocation_first(tmp_path):
    """Opening the Runs tab on the shipped CPU training run (held-out episodes at steps 0 and 30): the first
    thing under the controls, above the table and outside any accordion, is the before/after figure: tokens and
    accuracy by difficulty, a grey and a blue bar per tier, whiskers on the bars that have an interval."""
    import shutil

    from test_app_support import REPO_ROOT

    root = tmp_path / "runs"
    shutil.copytree(REPO_ROOT / "examples" / "runs" / "grpo-cpu-qwen0.5b", root / "grpo-cpu-qwen0.5b")
    app = start_app(root)
    try:
        with headless_chromium() as browser:
            page = open_app(browser, app.url)
            page.get_by_role("tab", name="Runs").click()  # selecting the tab draws the newest runs: this one
            page.wait_for_selector("#ree-runs-allocation .js-plotly-plot .main-svg", timeout=120_000)
            page.wait_for_function("!document.querySelector('#ree-runs-status .generating')", timeout=120_000)
            page.wait_for_timeout(1500)
            page.screenshot(path=str(tmp_path / "runs-allocation.png"), full_page=True)
            figure = page.locator("#ree-runs-allocation")
            figure.screenshot(path=str(tmp_path / "allocation-figure.png"))
            assert figure.locator("xpath=ancestor::*[contains(@class, 'accordion')]").count() == 0
            assert figure.bounding_box()["y"] < page.locator("#ree-runs-table").bounding_box()["y"]
            m = page.evaluate(MEASURE, "ree-runs-allocation")
            assert m["legends"]["legend"] == ["before (step 0)", "after (step 30)"]
            ticks = page.eval_on_selector_all("#ree-runs-allocation g.xtick text", "ts => ts.map(t => t.textContent)")
            assert "GSM8K" in ticks and any(t.startswith("difficulty 5") for t in ticks)
            assert page.locator("#ree-runs-allocation g.errorbar").count() >= 4
            for axis, boxes in m["ticks"].items():
                assert not overlapping(boxes), axis
            assert page.locator(ERROR_MARKS).count() == 0
    finally:
        app.stop()
