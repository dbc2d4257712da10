"""``vf-eval`` (verifiers 0.4.0) against the real model on vLLM's CPU server (the session's ``vllm_server``), as
docs/integrations.md tells a verifiers user to run it, with no ``max_tokens`` of the run's own: the taskset sends
its cap, so no answer is cut below the cap its prompt states, and the traces' rewards are what a fresh environment
pays for the same replies (with the provider's reported token counts).

Runs in the ``verifiers`` venv (``scripts/ci_venvs.sh``) with the real model and vLLM's CPU venv; skips, saying
which is missing, without them."""

from __future__ import annotations

import json
import os
import re
import subprocess
from pathlib import Path

import pytest
import tomli_w
from ci_venvs import ci_venv_python
from real_model_support import MODEL

from reasoning_env import EnvConfig, ReasoningEconomicsEnv
from reasoning_env.models import ReasoningEconomicsAction

pytestmark = [pytest.mark.slow, pytest.mark.xdist_group("vllm_cpu"), pytest.mark.timeout(1800)]

ROOT = Path(__file__).resolve().parents[1]
SEEDS = (200, 201)
#: Two built-in questions per episode, answers of at most 160 tokens: short enough for the CPU engine.
ENV_FIELDS = {"num_questions": 2, "sources": ["builtin"], "max_tokens_per_step": 160}


def test_vf_eval_on_the_real_model_never_cuts_an_answer_below_its_stated_cap(vllm_server, tmp_path):
    py = ci_venv_python("verifiers")
    config = {
        "model": vllm_server.served_name,
        "client": {"base_url": vllm_server.base_url, "api_key_var": "VLLM_KEY"},
        "sampling": {"temperature": 0.7},
        "env": {
            "taskset": {
                "id": "reasoning_env_verifiers",
                "num_episodes": len(SEEDS),
                "seed": SEEDS[0],
                "tokenizer_name": MODEL,
                "env": ENV_FIELDS,
            },
            "player": {"runtime": {"type": "subprocess"}},
        },
    }
    (tmp_path / "eval.toml").write_text(tomli_w.dumps(config))
    env = dict(os.environ, VLLM_KEY="local", PATH=f"{py.parent}{os.pathsep}{os.environ.get('PATH', '')}")
    env["PYTHONPATH"] = str(ROOT)
    cmd = [str(py.parent / "vf-eval"), "@", "eval.toml", "--no-push", "--no-rich", "-o", "out", "-c", "2"]
    proc = subprocess.run(cmd, cwd=tmp_path, env=env, capture_output=True, text=True, timeout=1500)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    (traces,) = list((tmp_path / "out").glob("*/traces.jsonl"))
    episodes = [json.loads(line) for line in traces.read_text().splitlines() if line.strip()]
    assert sorted(e["task"]["data"]["info"]["seed"] for e in episodes) == list(SEEDS)
    cfg = EnvConfig.build(**ENV_FIELDS)
    for episode in episodes:
        (trace,) = episode["traces"]
        limit = trace["info"]["episode"]["generation_limit"]
        assert limit["source"] == "taskset" and limit["max_tokens"] <= ENV_FIELDS["max_tokens_per_step"]
        users = [str(n["message"]["content"]) for n in trace["nodes"] if n["message"]["role"] == "user"]
        stated = [int(re.search(r"may use at most (\d+) tokens", u).group(1)) for u in users]
        calls = trace["calls"]
        assert len(calls) == len(stated) == len(trace["info"]["steps"])
        replies = []
        for call, cap in zip(calls, stated):
            assert call["sampling"]["max_tokens"] == limit["max_tokens"] >= cap
            out = call["usage"]["completion_tokens"]
            assert out <= limit["max_tokens"]
            if call["finish_reason"] == "length":  # cut: only at the limit, never below the stated cap
                assert out == limit["max_tokens"] >= cap
            replies.append((str(trace["nodes"][call["node"]]["message"]["content"]), out))
        # the trace's reward is what a fresh environment pays for these replies
        paid = ReasoningEconomicsEnv(cfg)
        paid.reset(seed=episode["task"]["data"]["info"]["seed"], tokenizer_name=MODEL)
        for text, out in replies:
            paid.step(ReasoningEconomicsAction(response=text, metadata={"num_generated_tokens": out}))
        assert trace["rewards"]["reasoning_economics"]["score"] == pytest.approx(paid.state.episode_reward, abs=1e-9)
