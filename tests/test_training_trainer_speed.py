"""The trainer's two savings (training/trainer.py), each against TRL's own path on the tiny model:

- the importance-sampling fold: with one generation per optimizer step the trainer's log-probs "before the update"
  are the loss forward's own, so the vLLM correction's weights come from that forward and TRL's extra no-grad
  forward is skipped; the loss, its gradient and TRL's sampling metrics stay those of TRL's path on the same batch;
- micro-batches whose advantages are all zero are not run: TRL's gradient for them is exactly zero."""

from __future__ import annotations

import copy
from types import SimpleNamespace

import pytest

from training.grpo_train import build_trainer, parse_args

pytestmark = pytest.mark.slow

SAMPLING_METRICS = (
    "sampling/sampling_logp_difference/mean",
    "sampling/sampling_logp_difference/max",
    "sampling/importance_sampling_ratio/min",
    "sampling/importance_sampling_ratio/mean",
    "sampling/importance_sampling_ratio/max",
    "sampling/is_masked_fraction",
)


@pytest.fixture(scope="module")
def trainer_and_batch(tmp_path_factory):
    """The smoke run's trainer (tiny model, real TRL 1.16) made to take the vLLM correction path as
    ``training.vllm_server_backend.attach`` does, and a replayed rollout: one real rollout whose sampling
    log-probs are moved off the trainer's (noise, sd 0.7 nats) so the weights vary and some hit the cap 3."""
    import torch

    out = tmp_path_factory.mktemp("fold") / "run"
    setup = build_trainer(parse_args(["--smoke", "--output_dir", str(out), "--max_steps", "1"]))
    trainer = setup.trainer
    trainer.use_vllm = True
    trainer.vllm_importance_sampling_correction = True
    trainer.args.vllm_importance_sampling_clip_max = 3.0
    trainer.vllm_generation = SimpleNamespace(sync_weights=lambda: None)
    trainer._last_loaded_step = 0
    trainer.current_gradient_accumulation_steps = 1  # what Trainer's loop sets before a loss
    recorded = {}

    def replay(prompts, tr):
        if "output" not in recorded:
            tr.use_vllm = False  # played by the smoke run's transformers backend
            try:
                output = setup.rollout(prompts, tr)
            finally:
                tr.use_vllm = True
            gen = torch.Generator().manual_seed(0)
            output["logprobs"] = [
                [lp + float(n) for lp, n in zip(row, torch.randn(len(row), generator=gen) * 0.7)]
                for row in output["logprobs"]
            ]
            recorded["output"] = output
        return copy.deepcopy(recorded["output"])

    trainer.rollout_func = replay
    g = trainer.args.num_generations
    rows = [trainer.train_dataset[i // g] for i in range(trainer.args.per_device_train_batch_size)]
    return trainer, rows


def _one_path(trainer, rows, fold: bool):
    """Generation step + loss + backward on ``rows``: the output, its keys after the generation step, the loss,
    the gradients, the forward passes (``compute_entropy`` of each) in the generation step and in the loss, the
    sampling metrics."""
    calls = []
    own = type(trainer)._get_per_token_logps_and_entropies

    def counting(*args, **kwargs):
        calls.append(bool(kwargs.get("compute_entropy")))
        return own(trainer, *args, **kwargs)

    trainer._get_per_token_logps_and_entropies = counting
    trainer.fold_importance_sampling = fold
    trainer._metrics["train"].clear()
    try:
        trainer.model.train()
        output = trainer._generate_and_score_completions(rows)
        generation_calls = list(calls)
        generated_keys = set(output)
        trainer.model.zero_grad(set_to_none=True)
        loss = trainer.compute_loss(trainer.model, output)
        loss.backward()
    finally:
        del trainer._get_per_token_logps_and_entropies
    grads = {n: p.grad.detach().clone() for n, p in trainer.model.named_parameters() if p.grad is not None}
    metrics = {k: trainer._metrics["train"][k][-1] for k in SAMPLING_METRICS if trainer._metrics["train"].get(k)}
    trainer.model.zero_grad(set_to_none=True)
    return output, generated_keys, loss.detach(), grads, generation_calls, calls[len(generation_calls) :], metrics


def test_folded_weights_give_trls_loss_and_gradient_without_the_extra_forward(trainer_and_batch):
    import torch

    trainer, rows = trainer_and_batch
    out_trl, keys_trl, loss_trl, grads_trl, gen_trl, calls_trl, metrics_trl = _one_path(trainer, rows, False)
    out_fold, keys_fold, loss_fold, grads_fold, gen_fold, calls_fold, metrics_fold = _one_path(trainer, rows, True)
    assert torch.equal(out_trl["completion_ids"], out_fold["completion_ids"])  # the same batch on both paths
    # TRL's path: one no-grad forward in the generation step for old_per_token_logps; the fold: none
    assert gen_trl == [False] and gen_fold == []
    assert {"old_per_token_logps", "importance_sampling_ratio"} <= keys_trl
    assert not {"old_per_token_logps", "importance_sampling_ratio"} & keys_fold
    assert calls_trl == [True] and calls_fold == [True]  # the loss forward, once each
    w = out_trl["importance_sampling_ratio"]
    mask = out_trl["completion_mask"].bool()
    assert 0 < (w[mask] == 3.0).sum() < mask.sum()  # some weights capped, most not: a real correction
    assert loss_fold.item() != 0.0
    assert loss_fold.item() == pytest.approx(loss_trl.item(), rel=1e-5, abs=1e-7)
    assert grads_trl.keys() == grads_fold.keys() and grads_trl
    for name, g in grads_trl.items():
        torch.testing.assert_close(grads_fold[name], g, rtol=1e-4, atol=1e-7, msg=name)
    # TRL's sampling metrics and the project's masked fraction, logged from the loss forward
    assert metrics_trl.keys() == metrics_fold.keys() == set(SAMPLING_METRICS)
    for key in SAMPLING_METRICS:
        assert metrics_fold[key] == pytest.approx(metrics_trl[key], rel=1e-4, abs=1e-6), key
    assert metrics_fold["sampling/is_masked_fraction"] > 0


def test_the_fold_is_off_where_generations_are_reused(trainer_and_batch):
    """num_iterations 2: the second pass trains on weights the batch was not sampled from, so TRL's old
    log-probs (its extra forward) are needed and kept."""
    trainer, _ = trainer_and_batch
    assert trainer._is_fold_active()
    trainer.num_iterations = 2
    try:
        assert not trainer._is_fold_active()
    finally:
        trainer.num_iterations = 1
    trainer.model.eval()
    try:
        assert not trainer._is_fold_active()  # evaluation keeps TRL's path
    finally:
        trainer.model.train()


def test_a_micro_batch_without_advantage_is_skipped_where_trls_gradient_is_exactly_zero(trainer_and_batch):
    import torch

    trainer, rows = trainer_and_batch
    trainer.fold_importance_sampling = True
    trainer.model.train()
    output = trainer._generate_and_score_completions(rows)
    output["advantages"] = torch.zeros_like(output["advantages"])  # every group tied
    calls = []
    own = type(trainer)._get_per_token_logps_and_entropies

    def counting(*args, **kwargs):
        calls.append(True)
        return own(trainer, *args, **kwargs)

    trainer._get_per_token_logps_and_entropies = counting
    try:
        trainer.skip_zero_advantage = False  # TRL's path: a forward and a backward for a zero gradient
        trainer.model.zero_grad(set_to_none=True)
        trainer.compute_loss(trainer.model, dict(output)).backward()
        grads = [p.grad for p in trainer.model.parameters() if p.requires_grad]
        assert calls == [True] and grads and all(g is not None and not g.any() for g in grads)
        trainer.skip_zero_advantage = True
        trainer.model.zero_grad(set_to_none=True)
        loss = trainer.compute_loss(trainer.model, dict(output))
        loss.backward()
        assert calls == [True] and loss.item() == 0.0  # no forward
        assert all(p.grad is None for p in trainer.model.parameters())  # AdamW leaves such weights alone
        assert trainer._metrics["train"]["zero_advantage_skipped"][-1] == 1.0
    finally:
        del trainer._get_per_token_logps_and_entropies
