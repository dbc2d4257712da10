"""Helpers and fixtures of the workbench app tests (no tests here).

- :func:`play_session`: a :class:`workbench.play.PlaySession` on the small offline fixture pool.
- :func:`make_eval_run` / :func:`make_training_run`: tiny run folders (an evaluation of two
  policies; a training-style folder with GRPO groups and ``metrics.jsonl``).
- :func:`start_app`: the whole app (OpenEnv API + workbench) served by uvicorn in a thread on a
  free loopback port.
"""

from __future__ import annotations

import json
import socket
import threading
import time
from pathlib import Path

import evalpol_fixtures as fx

TOKENIZER = fx.TOKENIZER


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
    root: Path, name: str = "eval-tiny", policies=("uniform", "sim_greedy"), n_episodes: int = 2
) -> Path:
    """A tiny evaluation run folder (fixture pool, no report)."""
    from reasoning_env.policies import make_policy
    from workbench.evaluate import evaluate

    res = evaluate(
        [make_policy(p) for p in policies],
        config=play_config(),
        n_episodes=n_episodes,
        seed=1,
        out=Path(root) / name,
        progress=False,
        report=False,
        pools=fx.pools(),
    )
    return res.run_dir


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


def free_port() -> int:
    """A free TCP port on 127.0.0.1."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class LiveApp:
    """The app served by uvicorn in a daemon thread; ``url`` ends with ``/``."""

    def __init__(self, app, port: int) -> None:
        import uvicorn

        self.app = app
        self.port = port
        self.url = f"http://127.0.0.1:{port}/"
        self.server = uvicorn.Server(
            uvicorn.Config(app, host="127.0.0.1", port=port, log_level="warning", lifespan="on")
        )
        self.thread = threading.Thread(target=self.server.run, daemon=True)

    def start(self, timeout_s: float = 60.0) -> LiveApp:
        import httpx

        self.thread.start()
        deadline = time.monotonic() + timeout_s
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
    """Build the whole app (API + workbench) and serve it on a free loopback port."""
    from workbench.app.server import create_app

    app = create_app(config, runs_root=str(runs_root), environ=environ or {})
    return LiveApp(app, free_port()).start()


#: The repository root (where ``app.py`` lives).
REPO_ROOT = Path(__file__).resolve().parents[1]


def fake_openai_app(golds: dict):
    """A minimal OpenAI-compatible ``/v1/chat/completions``: answers ``\\boxed{gold}`` for the
    question found in the last user message (``golds``: question text -> gold), ``0`` otherwise."""
    from starlette.applications import Starlette
    from starlette.responses import JSONResponse
    from starlette.routing import Route

    async def chat(request):
        body = await request.json()
        user = body["messages"][-1]["content"]
        gold = next((g for q, g in golds.items() if q in user), "0")
        text = "Working it out step by step. The result is \\boxed{" + gold + "}."
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
    """Serve a plain ASGI app on a free loopback port (no /health needed); returns ``(base url, server)``."""
    import uvicorn

    port = free_port()
    live = LiveApp.__new__(LiveApp)
    live.app, live.port, live.url = app, port, f"http://127.0.0.1:{port}/"
    live.server = uvicorn.Server(uvicorn.Config(app, host="127.0.0.1", port=port, log_level="error", lifespan="off"))
    live.thread = threading.Thread(target=live.server.run, daemon=True)
    live.thread.start()
    deadline = time.monotonic() + 30
    while not live.server.started and time.monotonic() < deadline:
        time.sleep(0.05)
    if not live.server.started:
        raise RuntimeError("loopback server did not start")
    return live.url, live
