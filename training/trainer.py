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
  backend, aligned steps), one extra no-grad forward pass over the batch computes them, except on the
  folded path below.
- **folds the importance-sampling ratio into the loss forward** (:data:`FOLD_IS_DEFAULT`): when one
  generation serves one optimizer step (TRL ``num_iterations == 1`` and ``gradient_accumulation_steps`` a
  multiple of ``steps_per_generation``) the trainer's log-probs "before the update" are the loss forward's
  own ``per_token_logps.detach()``, so TRL's extra no-grad forward in ``_generate_and_score_completions``
  (``old_per_token_logps``, 7% of a step in the shipped CPU run) and this module's own pass are skipped: the
  weights (:func:`importance_sampling_weights`, TRL's formula) are computed from the loss forward and handed
  to TRL's loss as ``importance_sampling_ratio``; TRL's ``sampling/sampling_logp_difference/*`` and
  ``sampling/importance_sampling_ratio/*`` and ``sampling/is_masked_fraction`` are logged from them (per
  micro-batch: the same figures as TRL's when a generation batch is one micro-batch, the project's setting).
  Off under Unsloth (its loss is not TRL's ``_compute_loss``), in evaluation, and when generations are reused.
  A completion here is a whole episode (1-3k model tokens), so TRL's default
  ``sequence_mask`` (ratio = exp of the summed per-token log-ratio) masks most of them from noise
  alone (huggingface/trl#5814, #4772); :data:`DEFAULT_IS_MODE` is token-level.
- logs where a step's time goes (``timing/*``, seconds, averaged over the logging interval like TRL's own
  metrics): ``timing/generation_s`` (the rollout: playing the episodes, generation and environment),
  ``timing/weight_handoff_s`` (handing the weights to the generation engine, e.g. the LoRA hand-off of
  ``--backend vllm_server``), ``timing/logprobs_s`` (the rest of TRL's generation step: the trainer's
  log-probs of the sampled tokens for the importance-sampling correction, rewards, advantages),
  ``timing/backward_s`` (the rest of ``training_step``: the loss's forward and backward passes, summed over an
  optimizer step's gradient-accumulation micro-batches);
  :func:`make_step_timer_callback` adds ``timing/step_s``, the whole optimizer step.
- **skips micro-batches whose every advantage is zero** (:data:`ZERO_ADVANTAGE`: a group whose members tied, with
  one episode per micro-batch, ``--per_device_train_batch_size 1``): their policy loss and gradient are exactly
  zero (each token's loss is the advantage times a ratio), so the forward and backward passes are skipped and the
  step's other micro-batches carry the update; a step of only such micro-batches leaves every gradient unset, so
  AdamW does not move the weights on momentum alone. Only where nothing else is in the loss (``beta`` 0, no
  entropy bonus, no router loss). ``zero_advantage_skipped`` (metrics.jsonl) is the share of micro-batches skipped.
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
#: Compute the importance-sampling ratio from the loss forward where it is the same quantity (module docstring).
FOLD_IS_DEFAULT = True
#: Advantages at most this large (absolute) count as zero: a tied group's rewards minus their mean, which float
#: rounding can leave at ~1e-9 instead of 0 (a row's gradient scales with its advantage; a unit advantage is ~1).
ZERO_ADVANTAGE = 1e-6


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

        def train(self, *args, **kwargs):
            """TRL's ``train``; then (also when it fails) the weight hand-off's last LoRA adapter is unloaded from
            the generation server (``--backend vllm_server``: :meth:`~training.vllm_server_backend.LoraHandoff.
            unload_adapter`), so a shared server does not keep it."""
            try:
                return super().train(*args, **kwargs)
            finally:
                unload = getattr(getattr(self, "vllm_generation", None), "unload_adapter", None)
                if callable(unload):
                    unload()

        def training_step(self, *args, **kwargs):
            self._generation_seconds_in_step = 0.0
            t0 = time.perf_counter()
            result = super().training_step(*args, **kwargs)
            spent = time.perf_counter() - t0
            # one figure per optimizer step: the sum over its gradient-accumulation micro-batches (TRL counts them
            # in self._step, as for its own step_time)
            self._backward_seconds_in_step = getattr(self, "_backward_seconds_in_step", 0.0) + max(
                0.0, spent - self._generation_seconds_in_step
            )
            if self._step % max(1, int(getattr(self, "current_gradient_accumulation_steps", 1) or 1)) == 0:
                self._metrics["train"]["timing/backward_s"].append(self._backward_seconds_in_step)
                self._backward_seconds_in_step = 0.0
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
            fold = self._is_fold_active()
            if fold:
                output = self._generate_without_old_logps(inputs)
            else:
                output = super()._generate_and_score_completions(inputs)
            mode = "train" if self.model.training else "eval"
            if mode == "train":
                _use_token_advantages(self, output)
            metrics = self._metrics[mode]
            metrics.pop("completions/clipped_ratio", None)
            if fold:  # the weights and their diagnostics come from the loss forward (_fold_importance_sampling)
                return output
            self._log_is_masked_fraction(self._local_is_masked_fraction(output, mode), metrics)
            return output

        def _log_is_masked_fraction(self, local: float | None, metrics: Any) -> None:
            """Log ``sampling/is_masked_fraction`` (mean over processes); warn above :data:`IS_WARN_FRACTION`."""
            import torch

            # every process takes part in the gather (NaN: this process had nothing to count)
            value = local if local is not None else float("nan")
            gathered = self.accelerator.gather(torch.tensor([value], device=self.accelerator.device))
            if bool(torch.isnan(gathered).all()):
                return
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

        # ------------------------------------------------------------------ zero-advantage micro-batches
        #: Skip the loss of micro-batches whose advantages are all zero (module docstring); False: TRL's path.
        skip_zero_advantage: bool = True

        def compute_loss(self, model, inputs, return_outputs=False, num_items_in_batch=None):
            """TRL's loss, except for a training micro-batch with nothing to learn (no model token in the loss on
            any process, :func:`_nothing_to_learn`) or whose advantages are all zero (:meth:`_skips_zero_advantage`):
            then a scalar zero with no graph to any parameter, so neither forward nor backward runs and no gradient
            is set. Logs ``zero_advantage_skipped`` (1 skipped, 0 run) per training micro-batch."""
            # _nothing_to_learn first: it gathers over processes, so every process must call it on every micro-batch
            skip = _nothing_to_learn(self, inputs) or self._skips_zero_advantage(inputs)
            if self.model.training:
                self._metrics["train"]["zero_advantage_skipped"].append(1.0 if skip else 0.0)
            if not skip:
                return super().compute_loss(
                    model, inputs, return_outputs=return_outputs, num_items_in_batch=num_items_in_batch
                )
            import torch

            # a zero that backward() accepts and that gives no parameter a gradient (no forward, no backward)
            return torch.zeros((), device=self.args.device, requires_grad=True)

        def _skips_zero_advantage(self, inputs: dict) -> bool:
            advantages = inputs.get("advantages")
            return bool(
                self.skip_zero_advantage
                and self.model.training
                and advantages is not None
                and self.beta == 0.0
                and not getattr(self, "_entropy_bonus_enabled", False)
                and not getattr(self, "aux_loss_enabled", False)
                and self.accelerator.num_processes == 1  # every process must run the same collectives
                and float(advantages.abs().max()) <= ZERO_ADVANTAGE
            )

        # ------------------------------------------------------------------ importance-sampling fold
        # With one generation per optimizer step the trainer's log-probs "before the update" are the loss
        # forward's own; the weights are computed there instead of in an extra no-grad forward (module docstring).

        #: Fold the importance-sampling ratio into the loss forward where it applies (set False for TRL's path).
        fold_importance_sampling: bool = FOLD_IS_DEFAULT

        def _is_fold_active(self) -> bool:
            """Whether this training step's importance-sampling weights come from the loss forward."""
            args = self.args
            return (
                bool(self.fold_importance_sampling)
                and self.model.training
                and _trl_loss_path(base)
                and int(self.num_iterations) == 1
                and args.gradient_accumulation_steps % args.steps_per_generation == 0
            )

        def _generate_without_old_logps(self, inputs):
            """TRL's generation step without its no-grad forward for ``old_per_token_logps`` (and without the
            ratio it would compute from them): TRL skips both when its vLLM correction is off and the steps align."""
            saved = self.vllm_importance_sampling_correction
            self.vllm_importance_sampling_correction = False
            try:
                return super()._generate_and_score_completions(inputs)
            finally:
                self.vllm_importance_sampling_correction = saved

        def _compute_loss(self, model, inputs):
            if not (
                self._is_fold_active()
                and inputs.get("sampling_per_token_logps") is not None
                and "old_per_token_logps" not in inputs
                and "importance_sampling_ratio" not in inputs
            ):
                return super()._compute_loss(model, inputs)
            self._is_fold_pending = inputs  # read by the loss forward (_get_per_token_logps_and_entropies)
            try:
                loss = super()._compute_loss(model, inputs)
            finally:
                pending, self._is_fold_pending = getattr(self, "_is_fold_pending", None), None
            if pending is not None:
                raise RuntimeError(
                    "the importance-sampling fold found no loss forward (TRL's _compute_loss no longer calls "
                    "_get_per_token_logps_and_entropies with compute_entropy=True): set "
                    "fold_importance_sampling = False on the trainer"
                )
            return loss

        def _get_per_token_logps_and_entropies(self, *args, **kwargs):
            result = super()._get_per_token_logps_and_entropies(*args, **kwargs)
            pending = getattr(self, "_is_fold_pending", None)
            if pending is not None and kwargs.get("compute_entropy"):
                self._is_fold_pending = None
                self._fold_importance_sampling(pending, result[0].detach())
            return result

        def _fold_importance_sampling(self, inputs: dict, logps: Any) -> None:
            """Put TRL's ``importance_sampling_ratio`` into ``inputs`` (when its vLLM correction is on), computed from
            the loss forward's detached log-probs ``logps``, and log TRL's sampling metrics and
            ``sampling/is_masked_fraction`` from them."""
            import torch

            args = self.args
            metrics = self._metrics["train" if self.model.training else "eval"]
            sampling = inputs["sampling_per_token_logps"]
            mask = inputs["completion_mask"]
            if inputs.get("tool_mask") is not None:
                mask = mask * inputs["tool_mask"]
            mode = args.vllm_importance_sampling_mode
            clip_max, clip_min = args.vllm_importance_sampling_clip_max, args.vllm_importance_sampling_clip_min
            weights = importance_sampling_weights(logps, sampling, mask, mode, clip_max, clip_min)
            if self.use_vllm and self.vllm_importance_sampling_correction:
                weights = weights.to(torch.promote_types(logps.dtype, sampling.dtype))
                inputs["importance_sampling_ratio"] = weights
                self._log_sampling_metrics(logps, sampling, mask, weights, metrics)
            self._log_is_masked_fraction(is_masked_fraction(weights, mask, mode, clip_max, clip_min), metrics)

        def _log_sampling_metrics(self, logps, sampling, mask, weights, metrics) -> None:
            """TRL 1.16's ``sampling/sampling_logp_difference/*`` and ``sampling/importance_sampling_ratio/*``."""
            import torch
            from trl.trainer.utils import nanmax, nanmin

            device = logps.device
            zero = torch.tensor(0.0, device=device)
            m = mask.bool()
            delta = torch.abs(logps - sampling)
            delta = delta[m & ~torch.isnan(delta)]
            gather = self.accelerator.gather
            metrics["sampling/sampling_logp_difference/mean"].append(
                gather(delta.mean() if delta.numel() else zero).mean().item()
            )
            metrics["sampling/sampling_logp_difference/max"].append(
                gather(delta.max() if delta.numel() else zero).max().item()
            )
            flat = weights.flatten() if self.args.vllm_importance_sampling_mode.startswith("sequence") else weights[m]
            empty = flat.numel() == 0
            metrics["sampling/importance_sampling_ratio/min"].append(
                nanmin(gather(zero if empty else flat.min())).item()
            )
            metrics["sampling/importance_sampling_ratio/mean"].append(
                gather(zero if empty else flat.mean()).nanmean().item()
            )
            metrics["sampling/importance_sampling_ratio/max"].append(
                nanmax(gather(zero if empty else flat.max())).item()
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


def _trl_loss_path(cls: type) -> bool:
    """Whether ``cls`` computes its loss, its log-probs and its generation step with TRL's own methods (not
    Unsloth's rewritten ones), which the importance-sampling fold relies on."""
    names = ("_compute_loss", "_get_per_token_logps_and_entropies", "_generate_and_score_completions")
    return all(getattr(getattr(cls, n, None), "__module__", "") == "trl.trainer.grpo_trainer" for n in names)


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
