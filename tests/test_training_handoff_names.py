"""The LoRA hand-off's bookkeeping without a server: adapter names unique per training process, and the check of
an external server's log-prob mode from what vLLM's ``/server_info`` answers (the real server's behaviour is in
tests/test_training_vllm_server.py)."""

from __future__ import annotations

import json
import logging

import httpx
import pytest

from reasoning_env.errors import ModelServerError
from training.generation import SamplingConfig
from training.vllm_server_backend import VLLMServerBackend, adapter_run_id, check_logprobs_mode


def test_adapter_names_start_with_the_run_folder_and_differ_per_process(tmp_path):
    a, b = adapter_run_id(tmp_path / "grpo cpu/run"), adapter_run_id(tmp_path / "grpo cpu/run")
    assert a.startswith("run-") and b.startswith("run-") and a != b
    assert all(ch.isalnum() or ch in "._-" for ch in adapter_run_id(tmp_path / "a b:c"))


def _backend(answer: httpx.Response | None, sampling: SamplingConfig) -> VLLMServerBackend:
    backend = VLLMServerBackend("http://127.0.0.1:9/v1", "m", [0], sampling)

    def handler(request: httpx.Request) -> httpx.Response:
        assert request.url.path == "/server_info" and request.url.params["config_format"] == "json"
        return answer if answer is not None else httpx.Response(404, json={"detail": "Not Found"})

    backend._client = httpx.Client(transport=httpx.MockTransport(handler))
    return backend


def _info(mode: str) -> httpx.Response:
    return httpx.Response(200, content=json.dumps({"vllm_config": {"model_config": {"logprobs_mode": mode}}}))


def test_a_server_in_the_sampling_distributions_mode_passes():
    assert check_logprobs_mode(_backend(_info("processed_logprobs"), SamplingConfig(temperature=0.7))) == (
        "processed_logprobs"
    )


def test_raw_logprobs_are_refused_where_sampling_changes_the_distribution():
    with pytest.raises(ModelServerError, match="--logprobs-mode processed_logprobs"):
        check_logprobs_mode(_backend(_info("raw_logprobs"), SamplingConfig(temperature=0.7)))
    with pytest.raises(ModelServerError, match="top-p 0.9"):
        check_logprobs_mode(_backend(_info("raw_logprobs"), SamplingConfig(temperature=1.0, top_p=0.9)))


def test_raw_logprobs_are_a_warning_at_temperature_one_without_truncation(caplog):
    with caplog.at_level(logging.WARNING, logger="training.vllm_server_backend"):
        assert check_logprobs_mode(_backend(_info("raw_logprobs"), SamplingConfig(temperature=1.0))) == "raw_logprobs"
    assert "raw_logprobs" in caplog.text


def test_a_server_that_does_not_tell_is_logged_as_unchecked(caplog):
    with caplog.at_level(logging.WARNING, logger="training.vllm_server_backend"):
        assert check_logprobs_mode(_backend(None, SamplingConfig(temperature=0.7))) is None
    assert "VLLM_SERVER_DEV_MODE" in caplog.text


@pytest.mark.slow
def test_the_trainer_unloads_the_last_adapter_when_training_fails(tmp_path):
    """``train`` ends (here: a rollout error) with the hand-off's ``unload_adapter``, so a shared server does not
    keep the adapter of a run that stopped."""
    from types import SimpleNamespace

    from training.grpo_train import build_trainer, parse_args

    setup = build_trainer(parse_args(["--smoke", "--output_dir", str(tmp_path / "run"), "--max_steps", "1"]))
    unloaded = []
    setup.trainer.vllm_generation = SimpleNamespace(unload_adapter=lambda: unloaded.append(True))

    def failing_rollout(prompts, trainer):
        raise RuntimeError("the server went away")

    setup.trainer.rollout_func = failing_rollout
    with pytest.raises(RuntimeError, match="went away"):
        setup.trainer.train()
    assert unloaded == [True]


def test_merged_weights_compute_what_the_adapter_computes_and_leave_the_training_model_alone():
    """The merged-weights hand-off's checkpoint: loaded into a fresh copy of the base model it gives the adapter's
    logits (float32), under the base checkpoint's names; the training model's own weights are unchanged."""
    import copy

    import torch
    from peft import get_peft_model

    from training.models import load_policy, lora_config
    from training.vllm_server_backend import merged_state_dict

    # a model of its own: the shared tiny_policy() may already carry another test's trained adapter
    base = load_policy("tiny", seed=0).model.float()
    fresh = copy.deepcopy(base)
    model = get_peft_model(base, lora_config(8))
    torch.manual_seed(0)
    with torch.no_grad():
        for name, p in model.named_parameters():
            if "lora_B" in name:
                p.normal_(0, 0.05)
    before = {k: v.clone() for k, v in model.state_dict().items()}
    state = merged_state_dict(model)
    assert all(torch.equal(v, model.state_dict()[k]) for k, v in before.items())
    assert set(state) <= set(fresh.state_dict()) and not any("lora" in k for k in state)
    missing, unexpected = fresh.load_state_dict(state, strict=False)
    assert not unexpected and all("lm_head" in k for k in missing)  # only the tied head, tied again
    ids = torch.tensor([[1, 5, 9, 200, 31, 7]])
    with torch.no_grad():
        want = model(input_ids=ids).logits
        got = fresh(input_ids=ids).logits
        with model.disable_adapter():
            base_logits = model(input_ids=ids).logits
    assert (want - base_logits).abs().max() > 1e-3  # the adapter changes the outputs
    torch.testing.assert_close(got, want, rtol=1e-5, atol=1e-5)
