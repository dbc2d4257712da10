"""Several processes (one per GPU in real runs; here 2 CPU processes joined with gloo): a group reward
sees every member of its group, even when the group is split across the processes."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

REPO = Path(__file__).resolve().parents[1]


@pytest.fixture(scope="module")
def two_process_run(tmp_path_factory):
    out = tmp_path_factory.mktemp("mp") / "run"
    # --standalone: a free rendezvous port, not 29500 (which a concurrent run on the machine may hold)
    cmd = [
        sys.executable,
        "-m",
        "torch.distributed.run",
        "--standalone",
        "--nproc_per_node",
        "2",
        "-m",
        "training.grpo_train",
        "--smoke",
        "--num_generations",
        "4",
        "--per_device_train_batch_size",
        "2",
        "--max_steps",
        "2",
        "--group_reward",
        "kimi_length",
        "--output_dir",
        str(out),
    ]
    env = {**os.environ, "OMP_NUM_THREADS": "1", "PYTHONPATH": str(REPO)}
    proc = subprocess.run(cmd, cwd=REPO, env=env, capture_output=True, text=True, timeout=900)
    assert proc.returncode == 0, (proc.stdout + proc.stderr)[-4000:]
    return out


def _lines(path: Path) -> list[dict]:
    return [json.loads(line) for line in path.read_text().splitlines()]


@pytest.mark.slow
def test_group_reward_sees_the_whole_group_across_two_processes(two_process_run):
    from reasoning_env.rewards import build_reward
    from reasoning_env.rewards.batch import StepBatch

    out = two_process_run
    rank0, rank1 = _lines(out / "episodes.jsonl"), _lines(out / "episodes.rank1.jsonl")
    logged = _lines(out / "group_rewards.jsonl")
    reward = build_reward("kimi_length", context="training")
    for step in (0, 1):
        eps = [e for e in rank0 + rank1 if e["train_step"] == step]
        # one group of 4, split: members 0-1 on process 0, members 2-3 on process 1
        assert sorted(e["member"] for e in rank0 if e["train_step"] == step) == [0, 1]
        assert sorted(e["member"] for e in rank1 if e["train_step"] == step) == [2, 3]
        assert len({e["group"] for e in eps}) == 1 and len({e["seed"] for e in eps}) == 1
        # the group reward recomputed offline over all four members, question by question
        rows = [(e["member"], i, s) for e in eps for i, s in enumerate(e["steps"]) if not s["forfeit"]]
        batch = StepBatch.build(
            len(rows),
            correct=[s["correct"] for _, _, s in rows],
            tokens=[s["tokens"] for _, _, s in rows],
            raw_tokens=[s["raw_tokens"] for _, _, s in rows],
            total_budget=40,
            num_questions=3,
            group=[i for _, i, _ in rows],
        )
        per_step = reward.step_batch(batch)["kimi_length"]
        expected = {m: 0.0 for m in range(4)}
        for (m, _, _), v in zip(rows, per_step):
            expected[m] += float(v)
        got = {r["member"]: r["group_reward"] for r in logged if r["train_step"] == step}
        assert got == pytest.approx(expected)
    metrics = _lines(out / "metrics.jsonl")
    assert [m["step"] for m in metrics] == [1, 2]
    for m, step in zip(metrics, (0, 1)):
        mean = np.mean([r["group_reward"] for r in logged if r["train_step"] == step])
        assert m["rewards/group_kimi_length/mean"] == pytest.approx(mean, abs=1e-6)  # what TRL normalised
    run = json.loads((out / "run.json").read_text())
    assert run["group_reward"] == "kimi_length"
