"""The project's ``GRPOTrainer``: TRL's, with the diagnostics episode-long completions need.

:func:`episode_trainer_class` subclasses whatever ``trl.GRPOTrainer`` is at call time (Unsloth
replaces it with its patched class on import, so the subclass keeps Unsloth's patches). After
TRL's own ``_generate_and_score_completions`` it:

- logs ``sampling/is_masked_fraction``: under vLLM's importance-sampling correction, the share of
  model tokens (token modes) or episodes (sequence modes) whose ratio was zeroed (``*_mask``) or
  clipped at the cap (``*_truncate``); above :data:`IS_WARN_FRACTION` it logs a warning naming the
  mode. A completion here is a whole episode (1-3k model tokens), so TRL's default
  ``sequence_mask`` (ratio = exp of the summed per-token log-ratio) masks most of them from noise
  alone (huggingface/trl#5814, #4772); :data:`DEFAULT_IS_MODE` is token-level.
- drops TRL's ``completions/clipped_ratio`` ("the last token is not EOS"): every episode that ran
  out of budget ends in a turn cut at the remaining budget, so it reads 1.0 in any budget-bound run.
  The project's ``cap_hit_rate`` (turns cut by their per-turn cap) is logged by the reward function.

Unsloth's trainer is generated from TRL's source; this subclass only post-processes the output
dict and the metrics, so it does not depend on TRL's internals beyond the ``_metrics`` dict and
the output keys ``importance_sampling_ratio``, ``completion_mask`` and ``tool_mask``.
"""

from __future__ import annotations

import logging
import math
from typing import Any

logger = logging.getLogger("training.trainer")

#: Importance-sampling modes of TRL 1.15/1.16 (``GRPOConfig.vllm_importance_sampling_mode``).
IS_MODES = ("token_truncate", "token_mask", "sequence_truncate", "sequence_mask")
#: The project's default: per-token ratios clipped at the cap (an episode is never dropped whole).
DEFAULT_IS_MODE = "token_truncate"
#: Warn when more than this share of tokens/episodes is masked or clipped in a step.
IS_WARN_FRACTION = 0.05


def is_masked_fraction(
    ratio: Any, mask: Any, mode: str, clip_max: float | None, clip_min: float | None = None
) -> float:
    """Share of the importance-sampling weights that TRL zeroed or clipped.

    Args:
        ratio: The weights TRL applies (``output["importance_sampling_ratio"]``): shape ``(B, T)``
            in token modes, ``(B, 1)`` in sequence modes (a torch tensor or nested lists).
        mask: ``(B, T)`` 1 for model tokens in the loss (``completion_mask * tool_mask``).
        mode: One of :data:`IS_MODES`.
        clip_max, clip_min: TRL's ``vllm_importance_sampling_clip_max`` / ``_min``.
    Returns:
        For ``*_mask``: the share with weight 0; for ``*_truncate``: the share at a bound (clipped).
        Token modes count model tokens; sequence modes count episodes (those with a model token).
        0.0 when there is nothing to count.
    Raises:
        ValueError: unknown mode.
    """
    import torch

    if mode not in IS_MODES:
        raise ValueError(f"unknown importance-sampling mode {mode!r}; choose one of {IS_MODES}")
    r = torch.as_tensor(ratio, dtype=torch.float64)
    m = torch.as_tensor(mask, dtype=torch.float64) > 0
    if mode.startswith("sequence"):
        r = r.reshape(-1)
        keep = m.any(dim=-1).reshape(-1)
    else:
        keep = m
    vals = r[keep]
    if vals.numel() == 0:
        return 0.0
    if mode.endswith("_mask"):
        hit = vals == 0
    else:
        hit = torch.zeros_like(vals, dtype=torch.bool)
        if clip_max is not None:
            hit |= torch.isclose(vals, torch.tensor(float(clip_max), dtype=vals.dtype))
        if clip_min is not None:
            hit |= torch.isclose(vals, torch.tensor(float(clip_min), dtype=vals.dtype))
    return float(hit.double().mean())


def episode_trainer_class():
    """A subclass of the current ``trl.GRPOTrainer`` with the diagnostics of the module docstring."""
    import trl

    base = trl.GRPOTrainer

    class EpisodeGRPOTrainer(base):  # type: ignore[misc, valid-type]
        """TRL's ``GRPOTrainer`` plus ``sampling/is_masked_fraction`` and without
        ``completions/clipped_ratio`` (see :mod:`training.trainer`)."""

        def _generate_and_score_completions(self, inputs):
            output = super()._generate_and_score_completions(inputs)
            mode = "train" if self.model.training else "eval"
            metrics = self._metrics[mode]
            metrics.pop("completions/clipped_ratio", None)
            ratio = output.get("importance_sampling_ratio")
            if ratio is not None:
                mask = output["completion_mask"]
                if output.get("tool_mask") is not None:
                    mask = mask * output["tool_mask"]
                args = self.args
                local = is_masked_fraction(
                    ratio,
                    mask,
                    args.vllm_importance_sampling_mode,
                    args.vllm_importance_sampling_clip_max,
                    args.vllm_importance_sampling_clip_min,
                )
                import torch

                value = float(self.accelerator.gather(torch.tensor([local], device=self.accelerator.device)).mean())
                metrics["sampling/is_masked_fraction"].append(value)
                if value > IS_WARN_FRACTION and math.isfinite(value):
                    logger.warning(
                        "step %d: %.1f%% of the %s were masked or clipped by vLLM importance sampling "
                        "(mode %s, cap %s); "
                        "the policy learns from the rest only. Check "
                        "sampling/importance_sampling_ratio/* and consider "
                        "--vllm_importance_sampling_mode token_truncate",
                        self.state.global_step,
                        100 * value,
                        "episodes" if args.vllm_importance_sampling_mode.startswith("sequence") else "model tokens",
                        args.vllm_importance_sampling_mode,
                        args.vllm_importance_sampling_clip_max,
                    )
            return output

    return EpisodeGRPOTrainer
