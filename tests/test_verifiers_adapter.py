"""The verifiers adapter (reasoning_env_verifiers) end to end: ``vf-eval`` of verifiers 0.4.0 plays this
environment's episodes against an OpenAI-compatible stub model on loopback, and the rewards and metrics
in its traces equal what the environment pays for the same answers, played here in the core venv.

Runs in the ``verifiers`` venv of ``scripts/ci_venvs.sh`` (skipped with the fix when it is not built).
"""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

import openai_stub
import pytest
import tomli_w
from ci_venvs import ci_venv_python

from reasoning_env import EnvConfig, ReasoningEconomicsEnv
from reasoning_env.models import ReasoningEconomicsAction

pytestmark = [pytest.mark.slow, pytest.mark.xdist_group("verifiers_adapter")]

ROOT = Path(__file__).resolve().parents[1]
SEEDS = (100, 101, 102)
TOKENIZER = "Qwen/Qwen2.5-0.5B-Instruct"
ENV_FIELDS = {
    "num_questions": 3,
    "sources": ["builtin"],
    "reward": {
        "type": "combined",
        "rewards": [
            {"type": "economics", "label": "econ"},
            {"type": "accuracy", "weight": 0.5},
            {"type": "l1_max", "weight": 0.2},
        ],
    },
}


def _episode_questions(seed: int) -> list:
    env = ReasoningEconomicsEnv(EnvConfig.build(**ENV_FIELDS))
    env.reset(seed=seed, tokenizer_name=TOKENIZER)
    return env.questions


def _toml(url: str) -> str:
    """The eval config (as examples/verifiers/eval.toml, pointed at the stub)."""
    return tomli_w.dumps(
        {
            "model": "stub-model",
            "client": {"base_url": url, "api_key_var": "STUB_API_KEY"},
            "env": {
                "taskset": {
                    "id": "reasoning_env_verifiers",
                    "num_episodes": len(SEEDS),
                    "seed": SEEDS[0],
                    "tokenizer_name": TOKENIZER,
                    "env": ENV_FIELDS,
                },
                "player": {"runtime": {"type": "subprocess"}},
            },
        }
    )


@pytest.fixture(scope="module")
def vf_run(tmp_path_factory):
    """Run ``vf-eval`` once; yield the episodes of its ``traces.jsonl`` (by seed) and the stub."""
    py = ci_venv_python("verifiers")
    tmp = tmp_path_factory.mktemp("vf")
    questions = {q.text: q.gold_answer for seed in SEEDS for q in _episode_questions(seed)}
    stub, server = openai_stub.start(questions)
    try:
        (tmp / "eval.toml").write_text(_toml(stub.url))
        env = dict(os.environ, STUB_API_KEY="stub", PATH=f"{py.parent}{os.pathsep}{os.environ.get('PATH', '')}")
        env["PYTHONPATH"] = str(ROOT)
        proc = subprocess.run(
            [str(py.parent / "vf-eval"), "@", "eval.toml", "--no-push", "--no-rich", "-o", "out", "-c", "3"],
            cwd=tmp,
            env=env,
            capture_output=True,
            text=True,
            timeout=480,
        )
    finally:
        server.shutdown()
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    (traces,) = list((tmp / "out").glob("*/traces.jsonl"))
    episodes = [json.loads(line) for line in traces.read_text().splitlines() if line.strip()]
    return {e["task"]["data"]["info"]["seed"]: e for e in episodes}, stub


def _paid(seed: int) -> tuple[ReasoningEconomicsEnv, list]:
    """The episode played in the core venv with the stub's answers (its rule, its reported token counts)."""
    env = ReasoningEconomicsEnv(EnvConfig.build(**ENV_FIELDS))
    obs = env.reset(seed=seed, tokenizer_name=TOKENIZER)
    steps = []
    while not obs.done:
        q = env.questions[obs.question_index]
        text = openai_stub.reply_for(q.text, q.gold_answer)
        obs = env.step(ReasoningEconomicsAction(response=text, metadata={"num_generated_tokens": len(text.split())}))
        steps.append(obs)
    return env, steps


def test_every_episode_ran_and_ended_with_the_environment(vf_run):
    episodes, stub = vf_run
    assert sorted(episodes) == list(SEEDS)
    for episode in episodes.values():
        assert episode["ok"], episode.get("errors")
        (trace,) = episode["traces"]
        assert trace["stop_condition"] == "user_closed"  # the env ended the exchange when the episode was done
        assert len([n for n in trace["nodes"] if n["message"]["role"] == "user"]) == ENV_FIELDS["num_questions"]
    assert len(stub.replies) == len(SEEDS) * ENV_FIELDS["num_questions"]


def test_trace_rewards_and_metrics_equal_what_the_environment_pays(vf_run):
    episodes, _ = vf_run
    totals = set()
    for seed, episode in episodes.items():
        (trace,) = episode["traces"]
        env, steps = _paid(seed)
        assert trace["rewards"] == {"reasoning_economics": {"score": env.state.episode_reward, "weight": 1.0}}
        components: dict[str, float] = {}
        for obs in steps:
            for name, value in obs.last_step.reward_components.items():
                components[f"reward/{name}"] = components.get(f"reward/{name}", 0.0) + value
        metrics = trace["metrics"]
        assert {k: v for k, v in metrics.items() if k.startswith("reward/")} == components
        assert metrics["num_correct"] == env.state.total_correct
        assert metrics["tokens_spent"] == env.state.spent_budget
        assert [s["reward"] for s in trace["info"]["steps"]] == [o.reward for o in steps]
        assert [s["tokens"] for s in trace["info"]["steps"]] == [o.last_step.tokens for o in steps]
        totals.add(env.state.episode_reward)
    assert len(totals) > 1  # the stub's right and wrong answers make the episodes differ
    assert any(k.startswith("reward/econ.") for k in metrics) and "reward/accuracy" in metrics


def test_load_environment_builds_the_env_from_keyword_arguments():
    py = ci_venv_python("verifiers")
    code = (
        "import reasoning_env_verifiers as m\n"
        "e = m.load_environment(num_episodes=2, seed=7, env={'num_questions': 2, 'sources': ['builtin']})\n"
        "print(type(e).__name__, [t.data.info['seed'] for t in e.taskset.load()])\n"
        "try:\n"
        "    m.load_environment(env={'num_questions': 0})\n"
        "except ValueError as exc:\n"
        "    print('refused:', ' '.join(str(exc).split()))\n"
    )
    proc = subprocess.run(
        [str(py), "-c", code], env=dict(os.environ, PYTHONPATH=str(ROOT)), capture_output=True, text=True, timeout=300
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    first, refused = proc.stdout.strip().splitlines()[-2:]
    assert first == "ReasoningEconomicsVfEnv [7, 8]"
    assert refused.startswith("refused:") and "num_questions" in refused
