"""training.export (LoRA merge) and training.bench.rollout."""

from __future__ import annotations

import json

import pytest
import torch
from training_helpers import tiny_policy

from training.bench import rollout as bench_rollout
from training.export import ExportError, export_checkpoint
from training.export import main as export_main


def test_export_merges_a_lora_adapter(tmp_path):
    from peft import get_peft_model
    from transformers import AutoModelForCausalLM

    from training.models import build_tiny_model, lora_config

    tok = tiny_policy().tokenizer
    base_dir, adapter_dir, out_dir = tmp_path / "base", tmp_path / "adapter", tmp_path / "merged"
    base = build_tiny_model(tok, seed=3)
    base.save_pretrained(base_dir)
    tok.save_pretrained(base_dir)
    peft_model = get_peft_model(build_tiny_model(tok, seed=3), lora_config(4))
    with torch.no_grad():  # make the adapter non-trivial (LoRA B starts at zero)
        for name, p in peft_model.named_parameters():
            if "lora_B" in name:
                p.normal_(0, 0.05)
    peft_model.save_pretrained(adapter_dir)
    x = torch.tensor([[10, 20, 30, 40]])
    with torch.no_grad():
        expected = peft_model.eval()(x).logits

    result = export_checkpoint(str(adapter_dir), str(out_dir), base_model=str(base_dir))
    assert result["merged_lora"] and result["base_model"] == str(base_dir)
    merged = AutoModelForCausalLM.from_pretrained(out_dir).eval()
    assert not any("lora" in n for n, _ in merged.named_parameters())
    with torch.no_grad():
        assert torch.allclose(merged(x).logits, expected, atol=1e-4)
    assert (out_dir / "tokenizer_config.json").is_file()


def test_export_errors(tmp_path, capsys):
    with pytest.raises(ExportError, match="does not exist"):
        export_checkpoint(str(tmp_path / "nope"), str(tmp_path / "out"))
    (tmp_path / "empty").mkdir()
    assert export_main(["--checkpoint", str(tmp_path / "empty"), "--output", str(tmp_path / "out")]) == 2
    assert "neither adapter_config.json nor config.json" in capsys.readouterr().err
    (tmp_path / "adapter").mkdir()
    (tmp_path / "adapter" / "adapter_config.json").write_text(json.dumps({"base_model_name_or_path": None}))
    with pytest.raises(ExportError, match="--base_model"):
        export_checkpoint(str(tmp_path / "adapter"), str(tmp_path / "out"))


def test_bench_rollout_counts_calls(tmp_path, capsys):
    cfg = tmp_path / "env.yaml"
    cfg.write_text("sources: [reasoning_gym]\nnum_questions: 2\nmax_tokens_per_step: 4\n")
    assert bench_rollout.main(["--config", str(cfg), "--episodes", "4", "--group_size", "1", "--repeats", "2"]) == 0
    result = json.loads(capsys.readouterr().out)
    fixed, stop = result["fixed"], result["stop_token"]
    assert fixed["lockstep"]["generate_calls"] == 2 and fixed["sequential"]["generate_calls"] == 8
    assert result["call_ratio"] == fixed["call_ratio"] == 4.0 and result["speedup"] == fixed["speedup"]
    assert result["same_episodes"] is True and stop["same_episodes"] is True
    assert fixed["lockstep"]["episodes_per_s"] > 0 and fixed["sequential"]["calls_per_episode"] == 2.0
    assert len(fixed["lockstep"]["all_seconds"]) == 2 and fixed["speedup_spread"][0] <= fixed["speedup_spread"][1]
    # every fixed turn runs to its cap; stop-token turns end early at their own lengths: stragglers
    assert fixed["straggler_waste"] == 0.0 and 0.0 < stop["straggler_waste"] < 1.0
    assert stop["mean_turn_tokens"] < fixed["mean_turn_tokens"] == 4.0
    assert result["torch_threads"] == 1 and "before" in result["load_average"]


def test_stop_length_depends_on_episode_and_turn_only():
    from training.bench.rollout import stop_length

    ctx = list(range(200))
    assert stop_length(ctx, 7, 16) == stop_length(ctx + [999, 998], 7, 16)  # what was sampled later does not matter
    lengths = {stop_length(list(range(s, s + 200)), 7, 16) for s in range(50)}
    assert lengths <= set(range(1, 17)) and len(lengths) > 5


def test_gpu_check_refuses_cuda_without_a_gpu(capsys):
    from training import gpu_check

    if torch.cuda.is_available():
        pytest.skip("a CUDA GPU is present")
    assert gpu_check.main(["--device", "cuda"]) == 2
    assert "--device cpu --tiny" in capsys.readouterr().err


#: What a bare CUDA machine with a few carried wheels lacks: gpu_check must run without them.
NOT_ON_A_BARE_GPU = ("trl", "datasets", "pyarrow", "reasoning_gym")

_BLOCKED_RUN = """
import importlib.abc, json, sys
class Block(importlib.abc.MetaPathFinder):
    def find_spec(self, name, path, target=None):
        if name.split(".")[0] in {blocked!r}:
            raise ImportError("not installed on this machine: " + name)
sys.meta_path.insert(0, Block())
from training import gpu_check
rc = gpu_check.main({argv!r})
print("RC", rc)
"""


@pytest.mark.slow
def test_gpu_check_cpu_path_runs_grpo_steps_and_reports(tmp_path):
    """The prepared GPU check (random Qwen2.5-0.5B-shaped model on CUDA in bf16) on its CPU path, with TRL,
    datasets, pyarrow and reasoning_gym unimportable: the tiny model, the real environment on builtin
    questions, LoRA and gradient checkpointing, one GRPO step, one JSON object out."""
    import subprocess
    import sys
    from pathlib import Path

    from training import gpu_check

    assert gpu_check.QWEN25_05B["hidden_size"] == 896 and gpu_check.QWEN25_05B["num_hidden_layers"] == 24
    argv = [
        "--device",
        "cpu",
        "--tiny",
        "--steps",
        "1",
        "--num_generations",
        "2",
        "--groups",
        "1",
        "--num_questions",
        "3",
        "--max_tokens_per_step",
        "16",
        "--total_budget",
        "40",  # members overspend differently and pay the seed's cost penalty: rewards differ (as in the smoke run)
        "--beta",
        "0.05",
        "--output_dir",
        str(tmp_path / "run"),
    ]
    code = _BLOCKED_RUN.format(blocked=set(NOT_ON_A_BARE_GPU), argv=argv)
    repo = str(Path(__file__).resolve().parents[1])
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=600, cwd=repo)
    assert "RC 0" in proc.stdout, proc.stdout[-2000:] + proc.stderr[-3000:]
    result = json.loads((tmp_path / "run" / "result.json").read_text())
    assert result["steps"] == 1 and result["generated_tokens"] > 0 and result["generated_tokens_per_s"] > 0
    assert result["step_seconds"] > 0 and result["peak_gpu_memory_gib"] is None and result["dtype"] == "float32"
    assert result["lora_rank"] == 16 and result["trainable_parameters"] < result["parameters"]
    assert result["gradient_checkpointing"] is True
    assert result["last_metrics"]["grad_norm"] > 0 and result["lora_weights_changed"] is True
