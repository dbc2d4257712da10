"""Same config and seed, same episode (question ids, order, budget) in another process."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from reasoning_env import EnvConfig, ReasoningEconomicsEnv

REPO = Path(__file__).resolve().parents[1]
SCRIPT = """
import json, sys
from reasoning_env import ReasoningEconomicsEnv, EnvConfig
out = []
for seed in (0, 1, 42, 123456):
    env = ReasoningEconomicsEnv(EnvConfig())
    md = env.reset(seed=seed, tokenizer_name="Qwen/Qwen2.5-0.5B-Instruct").metadata
    out.append([md["question_ids"], md["total_budget"], md["budget_source"]])
print(json.dumps(out))
"""


def _episodes_here():
    out = []
    for seed in (0, 1, 42, 123456):
        md = ReasoningEconomicsEnv(EnvConfig()).reset(seed=seed, tokenizer_name="Qwen/Qwen2.5-0.5B-Instruct").metadata
        out.append([md["question_ids"], md["total_budget"], md["budget_source"]])
    return out


@pytest.mark.slow
def test_same_seed_same_episode_across_processes():
    env = dict(os.environ, PYTHONHASHSEED="12345", PYTHONPATH=str(REPO))
    proc = subprocess.run(
        [sys.executable, "-c", SCRIPT], capture_output=True, text=True, env=env, cwd=REPO, timeout=300
    )
    assert proc.returncode == 0, proc.stderr[-2000:]
    other = json.loads(proc.stdout.strip().splitlines()[-1])
    here = _episodes_here()
    assert other == here
    assert len({tuple(ids) for ids, _, _ in here}) == 4  # different seeds, different episodes
