"""Helpers and fixtures of the workbench app tests (no tests here).

- :func:`play_session`: a :class:`workbench.play.PlaySession` on the small offline fixture pool.
- :func:`make_eval_run` / :func:`make_training_run`: tiny run folders (an evaluation of two
  policies; a training-style folder with GRPO groups and ``metrics.jsonl``).
- :func:`make_runs_of_every_kind`: five runs as a user gathers them (two evaluations of five
  policies, a budget sweep, a saved Play episode, a training run), for the Runs tab at scale.
- :func:`start_app`: the whole app (OpenEnv API + workbench) served by uvicorn in a thread on a
  free loopback port.
- :data:`needs_chromium`, :func:`headless_chromium`, :func:`open_app`, :data:`ERROR_MARKS`: the real
  browser of the app tests (Debian chromium driven by Playwright, headless).
"""

from __future__ import annotations

import contextlib
import json
import socket
import threading
import time
from pathlib import Path

import evalpol_fixtures as fx
import pytest

TOKENIZER = fx.TOKENIZER
CHROMIUM = "/usr/bin/chromium"
CHROMIUM_ARGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--no-first-run",
]
#: Gradio's "Error" marks (one per output panel of a failed event, unless it shows them elsewhere).
ERROR_MARKS = "[data-testid=status-tracker] span.error"
needs_chromium = pytest.mark.skipif(
    not Path(CHROMIUM).exists(),
    reason=f"no Chromium at {CHROMIUM} (install Debian's chromium: apt-get install chromium)",
)


@contextlib.contextmanager
def headless_chromium():
    """Debian's chromium, headless, through Playwright (skips the test without Playwright); closed
    when the block ends."""
    sync_api = pytest.importorskip("playwright.sync_api", reason="playwright (Python) is not installed")
    with sync_api.sync_playwright() as p:
        browser = p.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
        try:
            yield browser
        finally:
            browser.close()


def open_app(browser, url: str, *, width: int = 1440):
    """A new page (its own browser session) on the app at ``url``, once the Play tab has rendered."""
    page = browser.new_page(viewport={"width": width, "height": 1000})
    page.goto(url, timeout=60_000)
    page.wait_for_selector("#ree-reset", timeout=60_000)
    return page


def play_config(**changes):
    """The fixture config (sources are irrelevant: sessions get the fixture pools)."""
    return fx.config(**changes)


def play_session(**changes):
    """A PlaySession whose episodes draw from the fixture pool."""
    from workbench.play import PlaySession

    return PlaySession(play_config(**changes), pools=fx.pools())


def fixture_settings(**changes):
    """PlaySettings matching :func:`play_config` (so the fixture pools are used)."""
    from workbench.play import PlaySettings

    base = dict(sources=("gsm8k",), tokenizer_name=TOKENIZER, seed=3)
    base.update(changes)
    return PlaySettings(**base)


def make_eval_run(
    root: Path,
    name: str = "eval-tiny",
    policies=("uniform", "sim_greedy"),
    n_episodes: int = 2,
    seed: int = 1,
    budget_ratios=None,
) -> Path:
    """A tiny evaluation run folder (fixture pool, no report); ``budget_ratios``: a budget sweep."""
    from reasoning_env.policies import make_policy
    from workbench.evaluate import evaluate

    res = evaluate(
        [make_policy(p) for p in policies],
        config=play_config(),
        n_episodes=n_episodes,
        seed=seed,
        budget_ratios=budget_ratios,
        out=Path(root) / name,
        progress=False,
        report=False,
        pools=fx.pools(),
    )
    return res.run_dir


#: The policies of :func:`make_runs_of_every_kind`'s evaluations.
EVERY_KIND_POLICIES = ("uniform", "greedy_max", "sim_uniform", "sim_greedy", "oracle_allocation")


def make_runs_of_every_kind(root: Path) -> dict[str, Path]:
    """Five run folders under ``root``, as a user gathers them: two evaluations of the five
    :data:`EVERY_KIND_POLICIES` (seeds 1 and 2), a budget sweep (three policies at ratios 2 and 4),
    an episode played in the Play tab (a typed answer, then policies) and saved, and a
    training-style run. Returns ``{label: folder}``."""
    out = {
        "eval-a": make_eval_run(root, "eval-a", EVERY_KIND_POLICIES, n_episodes=3, seed=1),
        "eval-b": make_eval_run(root, "eval-b", EVERY_KIND_POLICIES, n_episodes=3, seed=2),
        "sweep": make_eval_run(
            root, "sweep", ("uniform", "sim_greedy", "oracle_allocation"), n_episodes=2, seed=3, budget_ratios=(2, 4)
        ),
    }
    session = play_session()
    session.reset(fixture_settings())
    session.step("Let me think: \\boxed{7}")
    list(session.run_iter("sim_greedy"))
    out["play"] = session.save_run(root, name="play-episode")
    out["train"] = make_training_run(root, "train")
    return out


def make_training_run(root: Path, name: str = "train-tiny", steps: int = 12) -> Path:
    """A training-style run folder: synthetic GRPO-group trajectories and a ``metrics.jsonl``."""
    from reasoning_env.config import EnvConfig
    from workbench.reward_lab.synthetic import synthetic_episodes, synthetic_steps
    from workbench.runs import RunWriter

    folder = Path(root) / name
    frame = synthetic_steps(200, group_size=4, seed=2, policy="grpo")
    writer = RunWriter(folder, kind="training", config=EnvConfig(), meta={"run_id": name})
    writer.write()
    frame.to_parquet(folder / "trajectories.parquet", index=False)
    synthetic_episodes(frame).to_parquet(folder / "episodes.parquet", index=False)
    with open(folder / "metrics.jsonl", "w", encoding="utf-8") as fh:
        for s in range(1, steps + 1):
            fh.write(
                json.dumps(
                    {
                        "step": s,
                        "reward": 0.2 + 0.05 * s,
                        "reward_std": 0.3,
                        "accuracy": 0.3 + 0.02 * s,
                        "tokens_per_question": 300 - 5 * s,
                        "episode_length": 9 + (s % 2),
                    }
                )
                + "\n"
            )
    return folder


def eval_episode(
    i: int, step: int, correct: list[bool], tokens: list[int], *, ran_dry=False, regret=0.1, forfeited=0
) -> dict:
    """One held-out episode record of a training run's ``eval_episodes.jsonl`` (as
    ``training.evaluation.episode_record`` writes it) with 2 questions, ``len(correct)`` of them answered by the
    model and ``forfeited`` answered empty because the context was full; the rest were never asked."""
    steps = [
        {"step": j, "tokens": t, "correct": c, "difficulty": (j % 2) + 1, "problem_type": "GSM8K" if j else "MATH-500"}
        for j, (c, t) in enumerate(zip(correct, tokens))
    ] + [{"step": len(correct) + k, "tokens": 0, "correct": False, "forfeit": True} for k in range(forfeited)]
    return {
        "train_step": step,
        "episode": i,
        "num_correct": sum(correct),
        "num_questions": 2,
        "num_answered": len(correct),
        "answered_tokens": sum(tokens),
        "cap_hits": 1 if ran_dry else 0,
        "num_turns": len(correct),
        "ran_dry": ran_dry,
        "forfeited": forfeited,
        "regret": regret,
        "steps": steps,
    }


def write_held_out(folder: Path, n: int = 12) -> Path:
    """``eval_episodes.jsonl`` of ``n`` held-out episodes at steps 0 and 30: before, every episode runs dry after
    one wrong 300-token answer; after, two shorter answers, a third of the first ones right."""
    rows = []
    for i in range(n):
        rows.append(eval_episode(i, 0, [False], [300], ran_dry=True, regret=0.5))
        rows.append(eval_episode(i, 30, [i % 3 == 0, False], [120, 100 + i], regret=0.2))
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "eval_episodes.jsonl").write_text("\n".join(json.dumps(r) for r in rows) + "\n")
    return folder


def free_port() -> int:
    """A free TCP port on 127.0.0.1."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class LiveApp:
    """The app served by uvicorn in a daemon thread; ``url`` ends with ``/``.

    ``port=0`` (the default) binds a port the OS picks, read back once the server listens: no race
    with other processes (parallel test workers) for a port found free a moment before."""

    def __init__(self, app, port: int = 0) -> None:
        import uvicorn

        self.app = app
        self.port = port
        self.url = f"http://127.0.0.1:{port}/"
        # open page connections (Gradio's event streams) would hold a graceful shutdown for minutes
        self.server = uvicorn.Server(
            uvicorn.Config(
                app, host="127.0.0.1", port=port, log_level="warning", lifespan="on", timeout_graceful_shutdown=1
            )
        )
        self.thread = threading.Thread(target=self.server.run, daemon=True)

    def start(self, timeout_s: float = 60.0) -> LiveApp:
        import httpx

        self.thread.start()
        deadline = time.monotonic() + timeout_s
        while not self.server.started and self.thread.is_alive() and time.monotonic() < deadline:
            time.sleep(0.05)
        if not self.server.started:
            raise RuntimeError(f"the app did not start within {timeout_s} s")
        self.port = self.server.servers[0].sockets[0].getsockname()[1]
        self.url = f"http://127.0.0.1:{self.port}/"
        while time.monotonic() < deadline:
            try:
                if httpx.get(self.url + "health", timeout=2).status_code == 200:
                    return self
            except httpx.HTTPError:
                pass
            time.sleep(0.2)
        raise RuntimeError(f"the app did not answer on {self.url} within {timeout_s} s")

    def stop(self) -> None:
        self.server.should_exit = True
        self.thread.join(timeout=10)


def start_app(runs_root: Path, config=None, environ: dict | None = None) -> LiveApp:
    """Build the whole app (API + workbench) and serve it on a free loopback port. The repository's example runs
    are not listed (``WORKBENCH_EXAMPLE_RUNS=0``) unless ``environ`` says otherwise: the tests count the runs of
    their own folder."""
    from workbench.app.server import create_app

    app = create_app(config, runs_root=str(runs_root), environ={"WORKBENCH_EXAMPLE_RUNS": "0", **(environ or {})})
    return LiveApp(app).start()


#: The repository root (where ``app.py`` lives).
REPO_ROOT = Path(__file__).resolve().parents[1]


def fake_openai_app(golds: dict, *, chunk_delay_s: float = 0.0):
    """A minimal OpenAI-compatible ``/v1/chat/completions``: answers ``\\boxed{gold}`` for the
    question found in the last user message (``golds``: question text -> gold), ``0`` otherwise.
    With ``"stream": true`` it sends the same answer as server-sent events, a word per chunk
    (``choices[0].delta.content``; ``chunk_delay_s`` apart), a last chunk with ``usage``, then
    ``data: [DONE]``, as vLLM does."""
    import asyncio

    from starlette.applications import Starlette
    from starlette.responses import JSONResponse, StreamingResponse
    from starlette.routing import Route

    def sse(obj) -> str:
        return "data: " + (obj if isinstance(obj, str) else json.dumps(obj)) + "\n\n"

    async def chat(request):
        body = await request.json()
        user = body["messages"][-1]["content"]
        gold = next((g for q, g in golds.items() if q in user), "0")
        text = "Working it out step by step. The result is \\boxed{" + gold + "}."
        if body.get("stream"):

            async def events():
                words = text.split(" ")
                for i, word in enumerate(words):
                    piece = word if i == len(words) - 1 else word + " "
                    yield sse({"choices": [{"index": 0, "delta": {"content": piece}, "finish_reason": None}]})
                    await asyncio.sleep(chunk_delay_s)
                yield sse({"choices": [{"index": 0, "delta": {}, "finish_reason": "stop"}]})
                usage = {"prompt_tokens": 10, "completion_tokens": 12, "total_tokens": 22}
                yield sse({"choices": [], "usage": usage})
                yield sse("[DONE]")

            return StreamingResponse(events(), media_type="text/event-stream")
        return JSONResponse(
            {
                "id": "x",
                "object": "chat.completion",
                "model": body["model"],
                "choices": [{"index": 0, "message": {"role": "assistant", "content": text}, "finish_reason": "stop"}],
                "usage": {"prompt_tokens": 10, "completion_tokens": 12, "total_tokens": 22},
            }
        )

    return Starlette(routes=[Route("/v1/chat/completions", chat, methods=["POST"])])


def serve_in_thread(app) -> tuple[str, LiveApp]:
    """Serve a plain ASGI app on a loopback port the OS picks (no /health needed); returns ``(base url, server)``."""
    import uvicorn

    live = LiveApp.__new__(LiveApp)
    live.app = app
    live.server = uvicorn.Server(uvicorn.Config(app, host="127.0.0.1", port=0, log_level="error", lifespan="off"))
    live.thread = threading.Thread(target=live.server.run, daemon=True)
    live.thread.start()
    deadline = time.monotonic() + 30
    while not live.server.started and time.monotonic() < deadline:
        time.sleep(0.05)
    if not live.server.started:
        raise RuntimeError("loopback server did not start")
    live.port = live.server.servers[0].sockets[0].getsockname()[1]
    live.url = f"http://127.0.0.1:{live.port}/"
    return live.url, live
