"""The Atropos adapter (training/atropos_env.py) against ``atroposlib`` 0.4 itself, on loopback: Atropos's
trajectory API (``run-api``) and the environment's ``serve`` / ``process`` commands run as processes of the
``atropos`` venv (``scripts/ci_venvs.sh`` builds it from requirements-atropos.txt). The policy is a stub model
server on loopback (tests/atropos_support.py: a real HTTP server, not a model) speaking both protocols the
adapter uses: the OpenAI completions API with token ids as vLLM's stock server speaks it (``server_type:
openai``, the shipped example's) and Atropos's own ``/generate`` (``server_type: vllm``). What the trainer would
read back is checked against the environment itself: each sequence's score is what a fresh environment pays
for the answers in it, and every trained id is one the model server sampled, in the context it was sampled in.
The same ``process`` run against the real model on vLLM's CPU server is tests/test_atropos_vllm.py."""

from __future__ import annotations

import json
import os
import time
from pathlib import Path

import httpx
import pytest
import yaml
from atropos_support import (
    model_turns,
    replay_reward,
    start_process,
    start_trajectory_api,
    stop_process,
    stub_generate_app,
)
from ci_venvs import ci_venv_python
from test_app_support import serve_in_thread

from reasoning_env.config import EnvConfig
from reasoning_env.env import ReasoningEconomicsEnv
from reasoning_env.tokenization import get_tokenizer

REPO = Path(__file__).resolve().parents[1]
EXAMPLE = REPO / "examples" / "atropos" / "reasoning_economics.yaml"
TOKENIZER = "embedded:qwen2.5"
SEED = 100
#: Short episodes: 3 builtin questions, answers capped at 24 tokens (some stub answers are cut, so graded wrong).
ENV_SETTINGS = {"sources": [{"name": "builtin"}], "num_questions": 3, "max_tokens_per_step": 24}

#: Seconds a process of the atropos venv may take: importing the adapter alone (atroposlib, wandb, openenv's
#: gradio) took 33 s at load ~8 and over 3 minutes at load ~10 on this 2-core machine, before any work.
PROCESS_TIMEOUT_S = 600

pytestmark = [pytest.mark.slow, pytest.mark.xdist_group("atropos"), pytest.mark.timeout(1500)]


@pytest.fixture(scope="module")
def atropos_python() -> Path:
    return ci_venv_python("atropos")


@pytest.fixture(scope="module")
def tokenizer():
    return get_tokenizer(TOKENIZER).tokenizer


@pytest.fixture(scope="module")
def env_config() -> EnvConfig:
    return EnvConfig.from_dict(ENV_SETTINGS)


@pytest.fixture(scope="module")
def stub(tokenizer, env_config):
    """The stub model server: ``(base_url, calls)``."""
    pools = ReasoningEconomicsEnv(env_config).pools
    golds = {q.text: q.gold_answer for qs in pools.pools.values() for q in qs}
    app, calls = stub_generate_app(tokenizer, golds, p_gold=0.5, seed=7)
    url, live = serve_in_thread(app)
    yield url.rstrip("/"), calls
    live.server.should_exit = True


def _subprocess_env() -> dict:
    env = {k: v for k, v in os.environ.items() if k != "VIRTUAL_ENV"}
    env.update(HF_HUB_OFFLINE="1", TRANSFORMERS_OFFLINE="1", HF_DATASETS_OFFLINE="1", WANDB_MODE="disabled")
    return env


def _write_configs(tmp: Path, stub_url: str, env_settings: dict, **env_keys) -> Path:
    """The environment's own YAML and the Atropos YAML (``env:`` / ``openai:``) pointing at it, with Atropos's
    ``/generate`` protocol (``server_type: vllm``)."""
    (tmp / "env.yaml").write_text(yaml.safe_dump(ENV_SETTINGS))
    atropos = {
        "env": {
            "tokenizer_name": TOKENIZER,
            "env_config_path": str(tmp / "env.yaml"),
            "seed": SEED,
            "use_wandb": False,
            "max_token_length": 2048,
            "max_num_workers": 2,
            **env_settings,
            **env_keys,
        },
        "openai": {"base_url": f"{stub_url}/v1", "model_name": "stub", "server_type": "vllm", "api_key": "x"},
    }
    path = tmp / "atropos.yaml"
    path.write_text(yaml.safe_dump(atropos))
    return path


def _check_group(group: dict, size: int, calls: list[dict], tokenizer, env_config: EnvConfig) -> list[int]:
    """Shapes, masks, log-probs, scores of one scored group; returns its seeds."""
    eos = {tokenizer.convert_tokens_to_ids("<|im_end|>"), tokenizer.eos_token_id}
    sampled = {(tuple(c["prompt_ids"]), tuple(out)) for c in calls for out in c["outputs"]}
    assert len(group["tokens"]) == len(group["masks"]) == len(group["scores"]) == size
    assert len(group["inference_logprobs"]) == len(group["overrides"]) == size
    seeds = []
    first_prompts = set()
    for tokens, masks, lps, score, over in zip(
        group["tokens"], group["masks"], group["inference_logprobs"], group["scores"], group["overrides"]
    ):
        assert len(tokens) == len(masks) == len(lps)
        assert all(m in (-100, t) for t, m in zip(tokens, masks))
        assert all((lp == 1.0) == (m == -100) for lp, m in zip(lps, masks)), "1.0 exactly where not trained"
        first = next(i for i, m in enumerate(masks) if m != -100)
        first_prompts.add(tuple(tokens[:first]))
        # every model turn is ids the server sampled (cut at the turn's cap), from exactly the ids before it
        starts = [i for i, m in enumerate(masks) if m != -100 and (i == 0 or masks[i - 1] == -100)]
        for start, turn in zip(starts, model_turns(tokens, masks)):
            assert any(ctx == tuple(tokens[:start]) and out[: len(turn)] == tuple(turn) for ctx, out in sampled), (
                f"the turn at {start} is not what the server sampled from the ids before it"
            )
        summary = over["reasoning_env"]
        seeds.append(summary["seed"])
        assert summary["reward"] == pytest.approx(score)
        paid = replay_reward(env_config, summary["seed"], model_turns(tokens, masks), tokenizer, TOKENIZER, eos)
        assert score == pytest.approx(paid, abs=1e-9), "the score is not what the environment pays for these answers"
    assert len(set(seeds)) == 1 and len(first_prompts) == 1, "a group is one episode (seed) played several times"
    return seeds


def test_serve_sends_scored_groups_to_the_trajectory_api(atropos_python, stub, tokenizer, env_config, tmp_path):
    stub_url, calls = stub
    # what a trainer does first: register (batch of 2 groups of 4), then ask for a batch (marks it started)
    api, api_url = start_trajectory_api(atropos_python, tmp_path, batch_size=8, timeout_s=PROCESS_TIMEOUT_S)
    env_proc = None
    try:
        config = _write_configs(
            tmp_path, stub_url, {"group_size": 4, "rollout_server_url": api_url, "total_steps": 10, "batch_size": 8}
        )
        started = time.monotonic()
        env_proc = start_process(
            [str(atropos_python), "-m", "training.atropos_env", "serve", "--config", str(config)],
            tmp_path / "env.log",
            env=_subprocess_env(),
            cwd=REPO,
        )
        batch = None
        while batch is None and time.monotonic() - started < PROCESS_TIMEOUT_S:
            if env_proc.poll() is not None:
                pytest.fail(f"serve exited ({env_proc.returncode}):\n{(tmp_path / 'env.log').read_text()[-4000:]}")
            time.sleep(1)
            batch = httpx.get(f"{api_url}/batch", timeout=10).json()["batch"]
        assert batch is not None, f"no batch in {PROCESS_TIMEOUT_S} s:\n{(tmp_path / 'env.log').read_text()[-4000:]}"
        seeds = []
        for group in batch:
            seeds += _check_group(group, 4, list(calls), tokenizer, env_config)
            assert len(set(group["scores"])) > 1, "serve keeps Atropos's rule: groups with one score are dropped"
            assert group["generation_params"]["temperature"] == 1.0
        assert sum(len(g["tokens"]) for g in batch) == 8
        assert all(s >= SEED for s in seeds)
    finally:
        if env_proc is not None:
            stop_process(env_proc)
        stop_process(api)


def _process_cmd(atropos_python: Path, tmp: Path, stub_url: str, *extra: str) -> list[str]:
    """``process`` with the shipped example config (``server_type: openai``: /v1/completions with token ids),
    pointed at the stub and the short episodes."""
    (tmp / "env.yaml").write_text(yaml.safe_dump(ENV_SETTINGS))
    overrides = {
        "--env.env_config_path": str(tmp / "env.yaml"),
        "--env.tokenizer_name": TOKENIZER,
        "--env.seed": str(SEED),
        "--env.max_token_length": "2048",
        "--openai.base_url": f"{stub_url}/v1",
        "--openai.model_name": "stub",
    }
    cmd = [str(atropos_python), "-m", "training.atropos_env", "process", "--config", str(EXAMPLE)]
    return cmd + [x for kv in overrides.items() for x in kv] + list(extra)


def test_process_writes_rollouts_a_reader_gets_back(atropos_python, stub, tokenizer, env_config, tmp_path):
    """The shipped example as a user of a stock OpenAI-compatible server (vLLM) runs it: /v1/completions with
    the context's token ids, the sampled ids and log-probs back."""
    stub_url, calls = stub
    out = tmp_path / "rollouts.jsonl"
    extra = ("--env.data_path_to_save_groups", str(out), "--env.total_steps", "2", "--env.group_size", "3")
    before = len(calls)
    proc = start_process(
        _process_cmd(atropos_python, tmp_path, stub_url, *extra),
        tmp_path / "process.log",
        env=_subprocess_env(),
        cwd=REPO,
    )
    try:
        rc = proc.wait(timeout=PROCESS_TIMEOUT_S)
    finally:
        stop_process(proc)
    log = (tmp_path / "process.log").read_text()
    assert rc == 0, log[-4000:]
    mine = list(calls)[before:]
    assert mine and {c["route"] for c in mine} == {"/v1/completions"}, "server_type openai: the completions API"
    eos = {tokenizer.convert_tokens_to_ids("<|im_end|>"), tokenizer.eos_token_id}
    for c in mine:  # the request a stock vLLM server needs to give back token ids
        body = c["body"]
        assert isinstance(body["prompt"], list) and all(isinstance(t, int) for t in body["prompt"])
        assert body["logprobs"] == 0 and body["return_tokens_as_token_ids"] is True and body["model"] == "stub"
        assert set(body["stop_token_ids"]) <= eos and body["max_tokens"] >= 1
    groups = [json.loads(line) for line in out.read_text().splitlines()]
    assert len(groups) == 2
    seeds = [_check_group(g, 3, mine, tokenizer, env_config)[0] for g in groups]
    assert seeds == [SEED, SEED + 1], "process plays the configured seeds in order"
    for g in groups:  # process mode adds the decoded sequences as messages (Atropos's include_messages)
        assert len(g["messages"]) == 3 and all(m[0]["content"] for m in g["messages"])
    assert (tmp_path / "rollouts.html").is_file(), "Atropos writes its HTML viewer next to the jsonl"


def _run_refused(atropos_python: Path, tmp: Path, stub_url: str, *extra: str) -> str:
    proc = start_process(
        _process_cmd(atropos_python, tmp, stub_url, *extra, "--env.data_path_to_save_groups", str(tmp / "x.jsonl")),
        tmp / "process.log",
        env=_subprocess_env(),
        cwd=REPO,
    )
    try:
        rc = proc.wait(timeout=PROCESS_TIMEOUT_S)
    finally:
        stop_process(proc)
    log = (tmp / "process.log").read_text()
    assert rc != 0, log[-3000:]
    assert not (tmp / "x.jsonl").exists() or not (tmp / "x.jsonl").read_text().strip(), "nothing written"
    return log


def test_a_server_that_returns_no_token_ids_is_refused_with_the_fix(atropos_python, tokenizer, tmp_path):
    """A completions server that ignores return_tokens_as_token_ids (token strings back, as a text-only API
    gives): the sampled ids cannot be known exactly, so the environment refuses at start-up, saying why."""
    app, _ = stub_generate_app(tokenizer, {}, text_tokens=True, protocols=("completions",))
    url, live = serve_in_thread(app)
    try:
        log = _run_refused(atropos_python, tmp_path, url.rstrip("/"))
    finally:
        live.server.should_exit = True
    assert "return_tokens_as_token_ids" in log and "not 'token_id:<id>'" in log, log[-3000:]


def test_the_start_up_probe_names_the_fix_for_each_mismatch(atropos_python, tokenizer, tmp_path):
    """The adapter's 1-token probe (training.atropos_env.probe_token_server), in the atropos venv, against the
    stub serving one protocol at a time: the server type that fits passes; ``vllm`` against a stock
    OpenAI-compatible server (no /generate) and ``openai`` against a server without /v1/completions, or with a
    wrong model name, are refused with the fix."""
    completions_app, ccalls = stub_generate_app(tokenizer, {}, protocols=("completions",))
    generate_app, _ = stub_generate_app(tokenizer, {}, protocols=("generate",))
    curl, clive = serve_in_thread(completions_app)
    gurl, glive = serve_in_thread(generate_app)
    script = tmp_path / "probe.py"
    script.write_text(
        """
import asyncio, json, sys
from atroposlib.envs.server_handling.server_baseline import APIServerConfig
from atroposlib.envs.server_handling.vllm_server import VLLMServer
from training.atropos_env import AtroposSetupError, CompletionsTokenServer, probe_token_server

curl, gurl, folder = sys.argv[1:4]
def server(kind, url, model="stub"):
    cfg = APIServerConfig(base_url=url + "/v1", model_name=model, api_key="x", server_type=kind, tokenizer_name=folder)
    return CompletionsTokenServer(cfg) if kind == "openai" else VLLMServer(cfg)
async def main():
    out = {}
    cases = {"openai_ok": server("openai", curl), "vllm_ok": server("vllm", gurl),
             "vllm_on_stock": server("vllm", curl), "openai_on_generate": server("openai", gurl),
             "wrong_model": server("openai", curl, "nope")}
    for name, srv in cases.items():
        try:
            await probe_token_server(srv, 151645, wait_s=5)
            out[name] = "ok"
        except AtroposSetupError as exc:
            out[name] = str(exc)
    print(json.dumps(out))
asyncio.run(main())
"""
    )
    folder = str(get_tokenizer(TOKENIZER).tokenizer.name_or_path)
    proc = start_process(
        [str(atropos_python), str(script), curl.rstrip("/"), gurl.rstrip("/"), folder],
        tmp_path / "probe.log",
        env={**_subprocess_env(), "PYTHONPATH": str(REPO)},  # this checkout's adapter, not an installed copy's
        cwd=REPO,
    )
    try:
        rc = proc.wait(timeout=PROCESS_TIMEOUT_S)
    finally:
        stop_process(proc)
        clive.server.should_exit = True
        glive.server.should_exit = True
    log = (tmp_path / "probe.log").read_text()
    assert rc == 0, log[-3000:]
    out = json.loads(log.strip().splitlines()[-1])
    assert out["openai_ok"] == "ok" and out["vllm_ok"] == "ok", out
    assert "has no such route" in out["vllm_on_stock"] and "server_type: openai" in out["vllm_on_stock"]
    assert (
        "HTTP 404" in out["openai_on_generate"]
        and "/v1/completions with token-id prompts" in out["openai_on_generate"]
    )
    assert "does not exist" in out["wrong_model"] and "openai.model_name" in out["wrong_model"]
    body = ccalls[0]["body"]
    assert body["prompt"] == [151645] and body["max_tokens"] == 1 and body["return_tokens_as_token_ids"] is True
