"""A no-op OpenEnv server: the same framework (OpenEnv's ``create_app`` on uvicorn), an
environment that does nothing (10 steps per episode, reward 0). ``python -m reasoning_env.bench
server`` plays the same raw WebSocket load against it and against the real server in one run, so
that the ratio says how much of the machine's HTTP/WebSocket capacity the environment reaches,
whatever else the machine is doing.

Run: ``python -m reasoning_env.bench.noop_server PORT``.
"""

from __future__ import annotations

import sys
from typing import Any

from openenv.core.env_server.http_server import create_app
from openenv.core.env_server.interfaces import Environment
from openenv.core.env_server.types import Action, Observation, State

#: Steps per episode of the no-op environment (the real one's default has 10 questions).
STEPS = 10


class NoopAction(Action):
    response: str = ""


class NoopObservation(Observation):
    question: str = ""


class NoopEnv(Environment):
    SUPPORTS_CONCURRENT_SESSIONS = True

    def __init__(self) -> None:
        super().__init__()
        self._state = State(episode_id="noop", step_count=0)

    def reset(self, seed: Any = None, episode_id: Any = None, **kwargs: Any) -> NoopObservation:
        self._state = State(episode_id=str(episode_id or "noop"), step_count=0)
        return NoopObservation(question="noop", done=False, reward=0.0)

    def step(self, action: NoopAction, timeout_s: Any = None, **kwargs: Any) -> NoopObservation:
        self._state.step_count += 1
        return NoopObservation(question="noop", done=self._state.step_count >= STEPS, reward=0.0)

    @property
    def state(self) -> State:
        return self._state


def main(argv: list[str] | None = None) -> int:
    import uvicorn

    port = int((argv or sys.argv[1:])[0])
    app = create_app(NoopEnv, NoopAction, NoopObservation, env_name="noop", max_concurrent_envs=1024)
    uvicorn.run(app, host="127.0.0.1", port=port, log_level="warning", ws_per_message_deflate=False)
    return 0


if __name__ == "__main__":
    sys.exit(main())
