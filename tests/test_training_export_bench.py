"""training.export (LoRA merge) and training.bench_rollout."""

from __future__ import annotations

import json

import pytest
import torch

from training import bench_rollout
from training.export import ExportError, export_checkpoint
from training.export import main as export_main
from training_helpers import tiny_policy


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
    assert bench_rollout.main(["--config", str(cfg), "--episodes", "4", "--group_size", "2"]) == 0
    result = json.loads(capsys.readouterr().out)
    assert result["lockstep"]["generate_calls"] == 2
    assert result["sequential"]["generate_calls"] == 8
    assert result["call_ratio"] == 4.0
    assert result["same_episodes"] is True
    assert result["lockstep"]["episodes_per_s"] > 0 and result["sequential"]["calls_per_episode"] == 2.0
