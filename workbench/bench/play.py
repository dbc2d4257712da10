"""Benchmark of the Play tab's typed-answer latency: ``python -m workbench.bench play [options]``.

A typed answer goes through three layers, each timed separately (milliseconds per answer):

- ``handler``: :meth:`workbench.app.play_tab.PlayTab.answer` in-process (the step plus building
  every output of the view: gauges, verdict, token spans, three figures, the steps table);
- ``client``: ``gradio_client`` ``/answer`` against the whole app on a loopback port (adds
  Gradio's queue, pre/post-processing and the JSON transport);
- ``browser``: headless Chromium (Playwright, Debian ``chromium``) on the same app: type the
  answer, press *Submit answer*, and wait until the verdict and the gauges show the new step
  (polled at every animation frame: the first frame that shows it); ``charts``: until the spend
  chart also shows the new step's marker and the page has painted twice more.

Each repeat starts a new episode (default config, offline stand-ins, seed = repeat) and submits
``--answers`` typed answers. Prints the median, the 10th-90th percentile range, min and max per
layer, with the machine's load average before and after; ``--json FILE`` also writes them.
The machine is shared: compare runs made in the same window, and read the spread.
"""

from __future__ import annotations

import argparse
import json
import os
import socket
import statistics
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Sequence

ANSWER = "Let me think. 3 + 4 = 7, so the answer is \\boxed{7}."
FORM = (["metamathqa", "numina_tir"], "tokenizer_native", 4, "", "Qwen/Qwen2.5-0.5B-Instruct", "0", True, 10, "")
CHROMIUM = "/usr/bin/chromium"
LAYERS = ("handler", "client", "browser")
#: Figures printed per layer (the browser layer gives two).
_ROWS = ("handler", "client", "browser", "charts")


def _form(seed: int) -> tuple:
    form = list(FORM)
    form[5] = str(seed)
    return tuple(form)


def _summary(times_s: Sequence[float]) -> dict:
    ms = sorted(1000 * t for t in times_s)
    q = statistics.quantiles(ms, n=10) if len(ms) >= 2 else [ms[0]] * 9
    return {
        "n": len(ms),
        "median_ms": statistics.median(ms),
        "p10_ms": q[0],
        "p90_ms": q[-1],
        "min_ms": ms[0],
        "max_ms": ms[-1],
    }


def bench_handler(answers: int, repeats: int) -> list[float]:
    """Seconds per ``PlayTab.answer`` call (in-process, view included)."""
    from workbench.app.common import AppContext
    from workbench.app.play_tab import PlayTab

    tab = PlayTab(AppContext(runs_root=tempfile.mkdtemp(prefix="bench-play-"), environ={}))
    tab.reset(None, *_form(0))  # warm-up: pools, tokenizer, grader
    out: list[float] = []
    for rep in range(repeats):
        session = tab.reset(None, *_form(rep))[0]
        for _ in range(answers):
            t0 = time.perf_counter()
            tab.answer(session, ANSWER)
            out.append(time.perf_counter() - t0)
        session.close()
    return out


class _App:
    """The whole app (OpenEnv API + workbench) served by uvicorn in a thread on a free port."""

    def __init__(self) -> None:
        import uvicorn

        from workbench.app.server import create_app

        with socket.socket() as s:
            s.bind(("127.0.0.1", 0))
            port = s.getsockname()[1]
        self.url = f"http://127.0.0.1:{port}/"
        app = create_app(None, runs_root=tempfile.mkdtemp(prefix="bench-play-runs-"), environ={})
        self.server = uvicorn.Server(
            uvicorn.Config(app, host="127.0.0.1", port=port, log_level="warning", lifespan="on")
        )
        self.thread = threading.Thread(target=self.server.run, daemon=True)

    def __enter__(self) -> _App:
        import httpx

        self.thread.start()
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline:
            try:
                if httpx.get(self.url + "health", timeout=2).status_code == 200:
                    return self
            except httpx.HTTPError:
                pass
            time.sleep(0.2)
        raise RuntimeError(f"the app did not start on {self.url}")

    def __exit__(self, *exc: object) -> None:
        self.server.should_exit = True
        self.thread.join(timeout=10)


def bench_client(app: _App, answers: int, repeats: int) -> list[float]:
    """Seconds per ``gradio_client`` ``/answer`` round trip."""
    from gradio_client import Client

    client = Client(app.url, verbose=False, analytics_enabled=False)
    try:
        client.predict(*_form(0), api_name="/reset")
        out: list[float] = []
        for rep in range(repeats):
            client.predict(*_form(rep), api_name="/reset")
            for _ in range(answers):
                t0 = time.perf_counter()
                client.predict(ANSWER, api_name="/answer")
                out.append(time.perf_counter() - t0)
        return out
    finally:
        client.close()


#: True once the verdict names step ``k`` (1-based) and the gauges count ``k`` answers.
_DONE_JS = """k => {
  const v = document.querySelector('#ree-verdict')?.innerText || '';
  const g = document.querySelector('#ree-gauges')?.innerText || '';
  return v.includes('Q' + k + ' ') && g.includes('answered ' + k);
}"""
#: True once the spend chart shows ``k`` answer markers.
_CHARTS_JS = "k => document.querySelectorAll('#ree-spend-plot .scatterlayer path.point').length >= k"
_PAINT_JS = "() => new Promise(r => requestAnimationFrame(() => requestAnimationFrame(() => r(true))))"


def bench_browser(app: _App, answers: int, repeats: int) -> tuple[list[float], list[float]]:
    """Seconds from pressing *Submit answer* to the verdict shown, and to the charts drawn, in
    headless Chromium: ``(answer_times, chart_times)``."""
    from playwright.sync_api import sync_playwright

    args = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking", "--no-first-run"]
    out: list[float] = []
    charts: list[float] = []
    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=CHROMIUM, args=args)
        try:
            page = browser.new_page(viewport={"width": 1440, "height": 1000})
            page.goto(app.url, timeout=120_000)
            page.wait_for_selector("#ree-reset", timeout=120_000)
            for rep in range(repeats):
                page.get_by_label("Seed", exact=True).fill(str(rep))
                page.click("#ree-reset")
                page.wait_for_function(
                    "document.querySelector('#ree-question')?.innerText.includes('Question 1 of') && "
                    "document.querySelector('#ree-verdict')?.innerText.includes('No answer yet')",
                    timeout=120_000,
                )
                page.get_by_role("tab", name="Answer it yourself").click()
                for k in range(1, answers + 1):
                    page.fill("#ree-response textarea", ANSWER)
                    t0 = time.perf_counter()
                    page.click("#ree-answer")
                    page.wait_for_function(_DONE_JS, arg=k, timeout=60_000, polling="raf")
                    out.append(time.perf_counter() - t0)
                    page.wait_for_function(_CHARTS_JS, arg=k, timeout=60_000, polling="raf")
                    page.evaluate(_PAINT_JS)
                    charts.append(time.perf_counter() - t0)
                page.get_by_role("tab", name="Let a policy answer").click()
        finally:
            browser.close()
    return out, charts


def _load() -> tuple[float, float, float] | None:
    try:
        return os.getloadavg()
    except OSError:
        return None


def measure(layers: Sequence[str], answers: int, repeats: int) -> dict:
    """Time the chosen layers; returns ``{"load_before", "load_after", layer: summary...}``."""
    result: dict = {"load_before": _load(), "answers": answers, "repeats": repeats}
    if "handler" in layers:
        result["handler"] = _summary(bench_handler(answers, repeats))
    if "client" in layers or "browser" in layers:
        with _App() as app:
            if "client" in layers:
                result["client"] = _summary(bench_client(app, answers, repeats))
            if "browser" in layers:
                if not os.path.exists(CHROMIUM):
                    result["browser"] = f"skipped: no Chromium at {CHROMIUM}"
                else:
                    answer_times, chart_times = bench_browser(app, answers, repeats)
                    result["browser"], result["charts"] = _summary(answer_times), _summary(chart_times)
    result["load_after"] = _load()
    return result


def _print(result: dict, emit: Callable[[str], None] = print) -> None:
    lb, la = result["load_before"], result["load_after"]
    emit(
        f"typed answer in Play: {result['repeats']} episodes x {result['answers']} answers; "
        f"load average {lb[0]:.2f} before, {la[0]:.2f} after"
        if lb and la
        else "typed answer in Play"
    )
    for layer in _ROWS:
        s = result.get(layer)
        if isinstance(s, dict):
            emit(
                f"  {layer:8s} median {s['median_ms']:7.1f} ms   p10-p90 {s['p10_ms']:7.1f}-{s['p90_ms']:7.1f}   "
                f"min {s['min_ms']:7.1f}   max {s['max_ms']:7.1f}   (n={s['n']})"
            )
        elif s is not None:
            emit(f"  {layer:8s} {s}")


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """Add this benchmark's options to ``parser`` (the :mod:`workbench.bench` protocol)."""
    parser.add_argument("--layers", default=",".join(LAYERS), help=f"comma list of {', '.join(LAYERS)} (default: all)")
    parser.add_argument("--answers", type=int, default=8, help="typed answers per episode (1-9; default 8)")
    parser.add_argument("--repeats", type=int, default=3, help="episodes (default 3)")
    parser.add_argument("--json", dest="json_path", help="also write the figures to this JSON file")


def run(args: argparse.Namespace) -> int:
    """Measure the chosen layers (see :func:`add_arguments`), print the figures; returns the exit
    status (2 for bad options)."""
    layers = [x.strip() for x in args.layers.split(",") if x.strip()]
    bad = sorted(set(layers) - set(LAYERS))
    if bad or not 1 <= args.answers <= 9 or args.repeats < 1:
        print(
            f"error: --layers from {list(LAYERS)}, --answers 1-9, --repeats >= 1 (got layers {bad or layers})",
            file=sys.stderr,
        )
        return 2
    result = measure(layers, args.answers, args.repeats)
    _print(result)
    if args.json_path:
        with open(args.json_path, "w", encoding="utf-8") as fh:
            json.dump(result, fh, indent=2)
    return 0


def main(argv: Sequence[str] | None = None) -> int:
    """``python -m workbench.bench play [options]`` with ``argv`` as the options; returns the exit status."""
    from workbench.bench import main as bench_main

    return bench_main(["play", *(sys.argv[1:] if argv is None else argv)])


if __name__ == "__main__":
    sys.exit(main())
