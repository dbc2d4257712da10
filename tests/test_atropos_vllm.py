"""The Atropos adapter against the real model on a stock vLLM OpenAI-compatible server (vLLM's CPU engine, the
session's ``vllm_server``), with ``server_type: openai`` as a user who already runs ``vllm serve`` would: generating
through ``/v1/completions`` with token-id prompts, in ``process`` mode and in ``serve`` mode (its groups sent to
atroposlib's trajectory API, ``run-api``, from which a batch is pulled as a trainer would). Checked against the
environment and the server itself: each score is what a fresh environment pays for the sequence's answers, and
every trained token's log-prob is the one vLLM gives that token in exactly the ids before it (``prompt_logprobs``
of the whole sequence), so the trainer gets the ids that were sampled, in the context they were sampled in.

Runs in the ``atropos`` venv (``scripts/ci_venvs.sh``) with the real model and vLLM's CPU venv
(``scripts/real_model.sh``); skips, saying which is missing, without them."""

from __future__ import annotations

import json
import math
import os
import time
from pathlib import Path

import httpx
import pytest
import yaml
from atropos_support import model_turns, replay_reward, start_process, start_trajectory_api, stop_process
from ci_venvs import ci_venv_python
from real_model_support import MODEL

from reasoning_env.config import EnvConfig
from reasoning_env.tokenization import get_tokenizer

REPO = Path(__file__).resolve().parents[1]
EXAMPLE = REPO / "examples" / "atropos" / "reasoning_economics.yaml"
SEED = 300
#: Short episodes: 2 builtin questions, answers capped at 48 tokens.
ENV_SETTINGS = {"sources": [{"name": "builtin"}], "num_questions": 2, "max_tokens_per_step": 48}
#: ``serve`` keeps only groups whose scores differ (Atropos's rule); this model sampled at temperature 1.0 is often
#: wrong on every member, so the serve test pays LCPO's L1-Exact, whose length term separates members by every token
#: they wrote. With the default reward all-wrong groups tied; so did they with the seed's (its cost term pays only
#: tokens past a question's share, which 48-token answers never reach): the test waited out its deadline.
SERVE_SETTINGS = {**ENV_SETTINGS, "reward": {"type": "l1_exact"}}
#: How far the sampled log-prob may be from the one vLLM computes again for the same ids (CPU kernels batch
#: differently between decoding and prefill; a token from another context would be off by far more).
LOGPROB_TOLERANCE = 0.08

pytestmark = [pytest.mark.slow, pytest.mark.xdist_group("vllm_cpu"), pytest.mark.timeout(1500)]


def _prompt_logprobs(server, ids: list[int]) -> list[float | None]:
    """vLLM's log-prob of each id of ``ids`` given the ids before it (``prompt_logprobs``; None for the first)."""
    body = {
        "model": server.served_name,
        "prompt": ids,
        "max_tokens": 1,
        "prompt_logprobs": 0,
        "temperature": 1.0,
    }
    r = httpx.post(f"{server.base_url}/completions", json=body, timeout=600)
    r.raise_for_status()
    entries = r.json()["choices"][0]["prompt_logprobs"]
    out: list[float | None] = []
    for tok, entry in zip(ids, entries):
        out.append(None if entry is None else float(entry[str(tok)]["logprob"]))
    return out


def _subprocess_env() -> dict:
    env = {k: v for k, v in os.environ.items() if k != "VIRTUAL_ENV"}
    env.update(HF_HUB_OFFLINE="1", TRANSFORMERS_OFFLINE="1", HF_DATASETS_OFFLINE="1", WANDB_MODE="disabled")
    return env


def _overrides(server, tmp_path: Path, settings: dict = ENV_SETTINGS, **extra: str) -> list[str]:
    """Command-line overrides of the shipped example (``server_type: openai``) for the real server and short
    episodes (``settings``: the environment's)."""
    (tmp_path / "env.yaml").write_text(yaml.safe_dump(settings))
    overrides = {
        "--env.env_config_path": str(tmp_path / "env.yaml"),
        "--env.tokenizer_name": MODEL,
        "--env.seed": str(SEED),
        "--env.max_token_length": "4096",
        "--openai.base_url": server.base_url,
        "--openai.model_name": server.served_name,
        "--openai.server_type": "openai",
        **extra,
    }
    return [x for kv in overrides.items() for x in kv]


def _check_group(server, group: dict, settings: dict = ENV_SETTINGS) -> set[int]:
    """Every sequence of a scored group: masks and log-probs in Atropos's shapes, the score what a fresh
    environment pays for the sequence's answers, each trained token's log-prob vLLM's for it after exactly the
    ids before it. Returns the group's seeds."""
    tokenizer = get_tokenizer(MODEL).tokenizer
    eos = {tokenizer.convert_tokens_to_ids("<|im_end|>"), tokenizer.eos_token_id}
    config = EnvConfig.from_dict(settings)
    seeds = set()
    for tokens, masks, lps, score, over in zip(
        group["tokens"], group["masks"], group["inference_logprobs"], group["scores"], group["overrides"]
    ):
        assert len(tokens) == len(masks) == len(lps) and any(m != -100 for m in masks)
        assert all(m in (-100, t) for t, m in zip(tokens, masks))
        assert all((lp == 1.0) == (m == -100) for lp, m in zip(lps, masks)), "1.0 exactly where not trained"
        summary = over["reasoning_env"]
        seeds.add(summary["seed"])
        assert summary["reward"] == pytest.approx(score)
        paid = replay_reward(config, summary["seed"], model_turns(tokens, masks), tokenizer, MODEL, eos)
        assert score == pytest.approx(paid, abs=1e-9), "the score is not what the environment pays for these answers"
        # every trained token: its sampled log-prob is vLLM's for that token after exactly the ids before it
        again = _prompt_logprobs(server, tokens)
        trained = [(lp, ref) for lp, ref, m in zip(lps, again, masks) if m != -100]
        assert all(math.isfinite(lp) and lp <= 0 for lp, _ in trained)
        worst = max(abs(lp - ref) for lp, ref in trained)
        assert worst <= LOGPROB_TOLERANCE, f"a trained token's log-prob differs from vLLM's by {worst:.3f}"
    assert len(seeds) == 1, "a group is one episode (seed) played by each member"
    return seeds


def test_process_against_a_stock_vllm_server(vllm_server, tmp_path):
    atropos_python = ci_venv_python("atropos")
    out = tmp_path / "rollouts.jsonl"
    extra = {"--env.group_size": "2", "--env.total_steps": "1", "--env.data_path_to_save_groups": str(out)}
    cmd = [str(atropos_python), "-m", "training.atropos_env", "process", "--config", str(EXAMPLE)]
    proc = start_process(
        cmd + _overrides(vllm_server, tmp_path, **extra), tmp_path / "process.log", env=_subprocess_env(), cwd=REPO
    )
    try:
        rc = proc.wait(timeout=900)
    finally:
        stop_process(proc)
    log = (tmp_path / "process.log").read_text()
    assert rc == 0, log[-4000:]
    (group,) = [json.loads(line) for line in out.read_text().splitlines()]
    assert _check_group(vllm_server, group) == {SEED}


def test_serve_sends_real_model_groups_a_trainer_pulls_from_run_api(vllm_server, tmp_path):
    """``serve`` as a user runs it beside a trainer: atroposlib's ``run-api`` up, a trainer registered (one group of
    4 a batch), the environment generating on the stock vLLM server; the batch the trainer pulls is checked like
    ``process``'s output."""
    atropos_python = ci_venv_python("atropos")
    api, api_url = start_trajectory_api(atropos_python, tmp_path, batch_size=4)
    env_proc = None
    try:
        extra = {
            "--env.group_size": "4",
            "--env.batch_size": "4",
            "--env.total_steps": "10",
            "--env.rollout_server_url": api_url,
        }
        cmd = [str(atropos_python), "-m", "training.atropos_env", "serve", "--config", str(EXAMPLE)]
        env_proc = start_process(
            cmd + _overrides(vllm_server, tmp_path, SERVE_SETTINGS, **extra),
            tmp_path / "env.log",
            env=_subprocess_env(),
            cwd=REPO,
        )
        started, batch = time.monotonic(), None
        while batch is None and time.monotonic() - started < 1200:
            if env_proc.poll() is not None:
                pytest.fail(f"serve exited ({env_proc.returncode}):\n{(tmp_path / 'env.log').read_text()[-4000:]}")
            time.sleep(2)
            batch = httpx.get(f"{api_url}/batch", timeout=10).json()["batch"]
        assert batch is not None, f"no batch in 1200 s:\n{(tmp_path / 'env.log').read_text()[-4000:]}"
        assert sum(len(g["tokens"]) for g in batch) == 4
        for group in batch:
            assert all(s >= SEED for s in _check_group(vllm_server, group, SERVE_SETTINGS))
            assert len(set(group["scores"])) > 1, "serve keeps Atropos's rule: groups with one score are dropped"
    finally:
        if env_proc is not None:
            stop_process(env_proc)
        stop_process(api)
