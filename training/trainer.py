"""The project's ``GRPOTrainer``: TRL's, with the diagnostics episode-long completions need.

:func:`episode_trainer_class` subclasses whatever ``trl.GRPOTrainer`` is at call time (Unsloth
replaces it with its patched class on import, so the subclass keeps Unsloth's patches). After
TRL's own ``_generate_and_score_completions`` it:

- logs ``sampling/is_masked_fraction``: the share of model tokens (token modes) or episodes
  (sequence modes) whose importance-sampling weight is zeroed (``*_mask``) or clipped at the cap
  (``*_truncate``); above :data:`IS_WARN_FRACTION` it logs a warning naming the mode. The weights are
  computed here (:func:`importance_sampling_weights`, TRL 1.15/1.16's formula) from the trainer's
  log-probs of the sampled tokens and the rollout's sampling log-probs, on every path: TRL's own
  vLLM path, Unsloth (which rewrites TRL's correction block and applies the ratio inside its loss, so
  TRL's ``importance_sampling_ratio`` never exists there), and the ``transformers`` backend (where no
  correction is applied and the figure is the share it would touch: the sampler's and the trainer's
  log-probs agree, so it reads 0). When TRL computed no ``old_per_token_logps`` (the ``transformers``
  backend, aligned steps), one extra no-grad forward pass over the batch computes them.
  A completion here is a whole episode (1-3k model tokens), so TRL's default
  ``sequence_mask`` (ratio = exp of the summed per-token log-ratio) masks most of them from noise
  alone (huggingface/trl#5814, #4772); :data:`DEFAULT_IS_MODE` is token-level.
- logs where a step's time goes (``timing/*``, seconds, averaged over the logging interval like TRL's own
  metrics): ``timing/generation_s`` (the rollout: playing the episodes, generation and environment),
  ``timing/weight_handoff_s`` (handing the weights to the generation engine, e.g. the LoRA hand-off of
  ``--backend vllm_server``), ``timing/logprobs_s`` (the rest of TRL's generation step: the trainer's
  log-probs of the sampled tokens for the importance-sampling correction, rewards, advantages),
  ``timing/backward_s`` (the rest of ``training_step``: the loss's forward and backward passes);
  :func:`make_step_timer_callback` adds ``timing/step_s``, the whole optimizer step.
- drops TRL's ``completions/clipped_ratio`` ("the last token is not EOS"): every episode that ran
  out of budget ends in a turn cut at the remaining budget, so it reads 1.0 in any budget-bound run.
  The project's ``cap_hit_rate`` (turns cut by their per-turn cap) is logged by the reward function.
- takes ``(B, T)`` per-question advantages from the rollout when it offers them (``--advantage question``,
  :func:`_use_token_advantages`), and skips the loss and backward of a micro-batch with no model token in the
  loss on any process, so a step dynamic sampling left nothing to train moves no weight (:func:`_nothing_to_learn`).

Unsloth's trainer is generated from TRL's source; this subclass only post-processes the output
dict and the metrics, so it does not depend on TRL's internals beyond the ``_metrics`` dict, the
output keys ``prompt_ids``, ``prompt_mask``, ``completion_ids``, ``completion_mask``, ``tool_mask``,
``old_per_token_logps`` and ``sampling_per_token_logps``, and ``_get_per_token_logps_and_entropies``
(the same signature in TRL 1.15 and 1.16; its result is used only when it has the completion's shape).
"""

from __future__ import annotations

import logging
import math
import time
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


def importance_sampling_weights(
    old_logps: Any, sampling_logps: Any, mask: Any, mode: str, clip_max: float | None, clip_min: float | None = None
):
    """The vLLM importance-sampling weights, as TRL 1.15/1.16 compute them in
    ``_generate_and_score_completions``.

    Args:
        old_logps: ``(B, T)`` the trainer's log-probs of the sampled tokens before the update.
        sampling_logps: ``(B, T)`` their log-probs under the sampling distribution (the rollout's).
        mask: ``(B, T)`` 1 for model tokens in the loss (``completion_mask * tool_mask``).
        mode: One of :data:`IS_MODES`.
        clip_max, clip_min: TRL's ``vllm_importance_sampling_clip_max`` / ``_min``.
    Returns:
        ``(B, T)`` in token modes, ``(B, 1)`` in sequence modes: ``exp(old - sampling)`` over model tokens
        (NaN differences count as 0, i.e. ratio 1), summed per episode in sequence modes, then clamped
        (``*_truncate``) or zeroed outside ``[clip_min, clip_max]`` (``*_mask``).
    Raises:
        ValueError: unknown mode.
    """
    import torch

    if mode not in IS_MODES:
        raise ValueError(f"unknown importance-sampling mode {mode!r}; choose one of {IS_MODES}")
    m = torch.as_tensor(mask, dtype=torch.float64)
    diff = (torch.as_tensor(old_logps, dtype=torch.float64) - torch.as_tensor(sampling_logps, dtype=torch.float64)) * m
    diff = torch.nan_to_num(diff, nan=0.0)
    if mode.startswith("sequence"):
        diff = diff.sum(dim=-1, keepdim=True)
    ratio = torch.exp(diff)
    if mode.endswith("_truncate"):
        return torch.clamp(ratio, min=clip_min, max=clip_max)
    low = -math.inf if clip_min is None else clip_min
    high = math.inf if clip_max is None else clip_max
    return ratio.masked_fill((ratio < low) | (ratio > high), 0.0)


def episode_trainer_class():
    """A subclass of the current ``trl.GRPOTrainer`` with the diagnostics of the module docstring."""
    import trl

    base = trl.GRPOTrainer

    class EpisodeGRPOTrainer(base):  # type: ignore[misc, valid-type]
        """TRL's ``GRPOTrainer`` plus ``sampling/is_masked_fraction`` and without
        ``completions/clipped_ratio`` (see :mod:`training.trainer`)."""

        def training_step(self, *args, **kwargs):
            self._generation_seconds_in_step = 0.0
            t0 = time.perf_counter()
            result = super().training_step(*args, **kwargs)
            spent = time.perf_counter() - t0
            self._metrics["train"]["timing/backward_s"].append(max(0.0, spent - self._generation_seconds_in_step))
            return result

        def _generate_and_score_completions(self, inputs):
            t0 = time.perf_counter()
            rollout_before = float(getattr(self.rollout_func, "seconds", 0.0) or 0.0)
            handoff_before = _handoff_seconds(self)
            output = self._generate_and_score_with_diagnostics(inputs)
            spent = time.perf_counter() - t0
            self._generation_seconds_in_step = getattr(self, "_generation_seconds_in_step", 0.0) + spent
            generation = float(getattr(self.rollout_func, "seconds", 0.0) or 0.0) - rollout_before
            handoff = _handoff_seconds(self) - handoff_before
            metrics = self._metrics["train" if self.model.training else "eval"]
            if self.rollout_func is not None and hasattr(self.rollout_func, "seconds"):
                metrics["timing/generation_s"].append(generation)
                metrics["timing/logprobs_s"].append(max(0.0, spent - generation - handoff))
            if hasattr(getattr(self, "vllm_generation", None), "stats"):
                metrics["timing/weight_handoff_s"].append(handoff)
            return output

        def _generate_and_score_with_diagnostics(self, inputs):
            output = super()._generate_and_score_completions(inputs)
            mode = "train" if self.model.training else "eval"
            if mode == "train":
                _use_token_advantages(self, output)
            metrics = self._metrics[mode]
            metrics.pop("completions/clipped_ratio", None)
            local = self._local_is_masked_fraction(output, mode)
            import torch

            # every process takes part in the gather (NaN: this process had nothing to count)
            value = local if local is not None else float("nan")
            gathered = self.accelerator.gather(torch.tensor([value], device=self.accelerator.device))
            if bool(torch.isnan(gathered).all()):
                return output
            value = float(gathered.nanmean())
            metrics["sampling/is_masked_fraction"].append(value)
            args = self.args
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

        def _local_is_masked_fraction(self, output: dict, mode: str) -> float | None:
            """This process's masked fraction, or ``None`` when the log-probs it needs are missing."""
            import torch

            sampling = output.get("sampling_per_token_logps")
            completion_ids = output.get("completion_ids")
            if sampling is None or completion_ids is None:
                return None
            mask = output["completion_mask"]
            if output.get("tool_mask") is not None:
                mask = mask * output["tool_mask"]
            old = output.get("old_per_token_logps")
            if old is None:  # TRL computed none (no vLLM correction, aligned steps): one no-grad pass
                batch_size = (
                    self.args.per_device_train_batch_size if mode == "train" else self.args.per_device_eval_batch_size
                )
                with torch.no_grad():
                    got = self._get_per_token_logps_and_entropies(
                        self.model,
                        torch.cat([output["prompt_ids"], completion_ids], dim=1),
                        torch.cat([output["prompt_mask"], output["completion_mask"]], dim=1),
                        completion_ids.size(1),
                        batch_size=batch_size,
                    )
                old = got[0] if isinstance(got, tuple) else got
            if not torch.is_tensor(old) or tuple(old.shape) != tuple(completion_ids.shape):
                if not getattr(self, "_is_fraction_warned", False):
                    self._is_fraction_warned = True
                    logger.warning(
                        "sampling/is_masked_fraction is not logged: this trainer's per-token log-probs have shape %s, "
                        "not the completion's %s",
                        getattr(old, "shape", None),
                        tuple(completion_ids.shape),
                    )
                return None
            args = self.args
            weights = importance_sampling_weights(
                old.detach(),
                sampling,
                mask,
                args.vllm_importance_sampling_mode,
                args.vllm_importance_sampling_clip_max,
                args.vllm_importance_sampling_clip_min,
            )
            return is_masked_fraction(
                weights,
                mask,
                args.vllm_importance_sampling_mode,
                args.vllm_importance_sampling_clip_max,
                args.vllm_importance_sampling_clip_min,
            )

        def compute_loss(self, model, inputs, return_outputs=False, num_items_in_batch=None):
            if _nothing_to_learn(self, inputs):  # see _nothing_to_learn: no forward, no backward, no gradient
                import torch

                return torch.zeros((), device=self.args.device, requires_grad=True)
            return super().compute_loss(
                model, inputs, return_outputs=return_outputs, num_items_in_batch=num_items_in_batch
            )

    return EpisodeGRPOTrainer


def _use_token_advantages(trainer: Any, output: dict) -> None:
    """``--advantage question``: replace TRL's ``(B,)`` advantages by the rollout's ``(B, T)`` per-question ones
    (:meth:`training.trl_rollout.GRPORollout.token_advantages`; TRL 1.16's loss takes either shape). A no-op
    when the rollout gives none (episode advantages, or a rollout_func without the method)."""
    make = getattr(trainer.rollout_func, "token_advantages", None)
    if make is None:
        return
    per_token = make(trainer, output["completion_ids"].size(1))
    if per_token is not None:
        import torch

        output["advantages"] = torch.as_tensor(per_token, dtype=torch.float32, device=output["advantages"].device)


def _nothing_to_learn(trainer: Any, inputs: dict) -> bool:
    """True when no process's micro-batch has a model token in the loss (training only).

    Such a micro-batch's gradient is exactly zero (every loss term is masked), so the loss forward and the
    backward are skipped; when every micro-batch of an optimizer step is, no parameter gets a gradient and
    the optimizer moves nothing (torch's AdamW skips parameters whose ``grad`` is ``None``; a zero gradient
    would still apply its momentum). Dynamic sampling masks a batch this way when no group has reward
    variance (:mod:`training.trl_rollout`). Not with a router auxiliary loss, which is not masked.
    """

    if not trainer.model.training or getattr(trainer, "aux_loss_enabled", False):
        return False
    mask = inputs["completion_mask"]
    if inputs.get("tool_mask") is not None:
        mask = mask * inputs["tool_mask"]
    tokens = trainer.accelerator.gather(mask.sum().reshape(1).float())  # every process decides alike
    return bool(tokens.sum() == 0)


def _handoff_seconds(trainer: Any) -> float:
    """Seconds the weight hand-off has taken so far (:class:`training.vllm_server_backend.HandoffStats`), or 0."""
    stats = getattr(getattr(trainer, "vllm_generation", None), "stats", None)
    return float(getattr(stats, "seconds", 0.0) or 0.0)


def make_step_timer_callback():
    """A ``TrainerCallback`` logging ``timing/step_s``: the wall time of each optimizer step, from TRL's
    ``on_step_begin`` to ``on_step_end`` (generation, backward and the optimizer; held-out evaluations, run
    from ``on_step_end`` by a later callback, are not in it). Set its ``trainer`` attribute after building
    the trainer."""
    from transformers import TrainerCallback

    class StepTimerCallback(TrainerCallback):
        def __init__(self) -> None:
            self.trainer = None
            self._t0: float | None = None

        def on_step_begin(self, args, state, control, **kwargs):
            self._t0 = time.perf_counter()

        def on_step_end(self, args, state, control, **kwargs):
            if self._t0 is not None and self.trainer is not None:
                self.trainer._metrics["train"]["timing/step_s"].append(time.perf_counter() - self._t0)
            self._t0 = None

    return StepTimerCallback()
