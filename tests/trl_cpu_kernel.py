"""Pytest plugin for the GPU-pins CPU venv: TRL 1.15 on CPU (``tests/test_gpu_pins.py`` loads it
with ``-p trl_cpu_kernel``).

TRL 1.15 (the GPU pin) computes the GRPO loss's per-token log-probs with a Triton kernel
(``trl.kernels.ChunkedLogProbFunction``) and has no CPU path: ``trl.trainer.utils`` imports it
under ``try``, so without Triton (CPU torch ships none) ``_ChunkedLogProbFunction`` is ``None``
and the first loss step fails with ``'NoneType' object has no attribute 'apply'``. On a GPU the
kernel is there (CUDA torch ships Triton). TRL 1.16 added the CPU path.

To run the training tests (rollout, rewards, masks, loss, logging) against TRL 1.15 on CPU, this
plugin puts a plain-PyTorch function with the kernel's contract in its place, only when the
kernel is missing: ``apply(hidden [N, H], weight [V, H], bias [V] | None, targets [N],
temperature, chunk_size, final_logit_softcapping, logit_scale, outputs) -> (logprobs [N],
entropy [N] | None, log_sum_sq_probs | None, mean_logits | None, is_top1 | None)``, with the
kernel's transform ``z = softcap * tanh(logit_scale * x / softcap) / temperature``. The Triton
kernel itself is TRL's code and stays untested here.
"""

from __future__ import annotations


class ReferenceChunkedLogProb:
    """The log-prob head of TRL 1.15's ``ChunkedLogProbFunction`` in plain PyTorch (autograd)."""

    @staticmethod
    def apply(
        hidden,
        weight,
        bias,
        targets,
        temperature,
        chunk_size,
        final_logit_softcapping=None,
        logit_scale=1.0,
        outputs=("entropy",),
    ):
        import torch

        z = hidden.float() @ weight.float().t()
        if bias is not None:
            z = z + bias.float()
        z = z * logit_scale
        if final_logit_softcapping:
            z = final_logit_softcapping * torch.tanh(z / final_logit_softcapping)
        z = z / temperature
        logp = torch.log_softmax(z, dim=-1)
        lp = logp.gather(1, targets.long().unsqueeze(1)).squeeze(1)
        entropy = -(logp.exp() * logp).sum(-1) if "entropy" in outputs else None
        log_sum_sq = torch.logsumexp(2 * logp, dim=-1).detach() if "log_sum_sq_probs" in outputs else None
        mean_logits = z.mean(-1).detach() if "mean_logits" in outputs else None
        is_top1 = (z.argmax(-1) == targets).detach() if "is_top1" in outputs else None
        return lp, entropy, log_sum_sq, mean_logits, is_top1


def pytest_configure(config):
    try:
        import trl.trainer.utils as utils
    except ImportError:
        return
    if getattr(utils, "_ChunkedLogProbFunction", "absent") is None:
        utils._ChunkedLogProbFunction = ReferenceChunkedLogProb
