"""Base vs trained from one command on the real model: `workbench.evaluate --serve-model --adapter DIR` starts vLLM's
CPU engine with a LoRA adapter beside embedded:qwen2.5-coder-0.5b and plays the same episode with both. The adapter
is built here with PEFT on the model's local copy (random lora_B, so it changes the answers). Skipped, with the
reason, where the offline model, vLLM's CPU venv, torch or PEFT is missing."""

from __future__ import annotations

import gc
import json

import pandas as pd
import pytest
from real_model_support import MODEL, vllm_or_skip

from reasoning_env.lora_adapter import check_adapter

# one vLLM start (about a minute on 2 cores, more under load), then 2 x 2 answers of at most 32 tokens
pytestmark = [pytest.mark.slow, pytest.mark.xdist_group("vllm_cpu"), pytest.mark.timeout(1500)]


@pytest.fixture(scope="module")
def tiny_adapter(tmp_path_factory):
    """A rank-8 LoRA adapter of the real model (q_proj, v_proj) whose lora_B is random, as PEFT saves it."""
    from real_model_support import model_dir_or_skip

    vllm_or_skip()
    model_dir = model_dir_or_skip()
    torch = pytest.importorskip("torch")
    peft = pytest.importorskip("peft")
    from transformers import AutoModelForCausalLM

    model = AutoModelForCausalLM.from_pretrained(str(model_dir), dtype=torch.bfloat16)
    lora = peft.get_peft_model(
        model, peft.LoraConfig(r=8, lora_alpha=16, target_modules=["q_proj", "v_proj"], task_type="CAUSAL_LM")
    )
    gen = torch.Generator().manual_seed(0)
    with torch.no_grad():
        for name, param in lora.named_parameters():
            if "lora_B" in name:  # PEFT starts B at 0 (the adapter a no-op): give it weights that change answers
                param.copy_(torch.randn(param.shape, generator=gen) * 0.1)
    folder = tmp_path_factory.mktemp("adapter") / "final"
    lora.save_pretrained(str(folder))
    del lora, model
    gc.collect()  # the weights leave this process before vLLM takes its share of the memory
    return folder


def test_one_command_evaluates_the_base_and_the_trained_model_on_the_same_episode(tiny_adapter, tmp_path):
    from workbench.evaluate import main

    recorded = json.loads((tiny_adapter / "adapter_config.json").read_text())["base_model_name_or_path"]
    assert check_adapter(tiny_adapter, MODEL).base_model == recorded  # PEFT recorded the local folder: same model
    cfg = tmp_path / "cfg.yaml"
    cfg.write_text("num_questions: 2\nsources: [builtin]\n")
    out = tmp_path / "run"
    argv = ["--serve-model", "--adapter", str(tiny_adapter), "--config", str(cfg), "--n_episodes", "1"]
    argv += ["--total-budget", "64", "--llm-max-tokens", "32", "--out", str(out), "--no-progress", "--no-report"]
    assert main(argv) == 0  # a request naming an adapter the server did not serve fails (HTTP 404): rc 1
    meta = json.loads((out / "run.json").read_text())
    policies = {p["name"]: p for p in meta["policies"]}
    assert list(policies) == ["llm_local", "llm_local+trained"]
    trained = policies["llm_local+trained"]
    assert trained["model"] == "trained" and trained["adapter"]["path"] == str(tiny_adapter.resolve())
    assert trained["engine"]["engine"] == "vllm" and "adapter" not in policies["llm_local"]
    steps = pd.read_parquet(out / "trajectories.parquet")
    answers = {p: list(g.sort_values("step")["response"]) for p, g in steps.groupby("policy")}
    assert set(answers) == {"llm_local", "llm_local+trained"}
    assert answers["llm_local"] != answers["llm_local+trained"]  # the adapter changed what the model wrote
    assert set(steps.groupby("policy")["seed"].first()) == {steps["seed"].iloc[0]}  # the same episode
