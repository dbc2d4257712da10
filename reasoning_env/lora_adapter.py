"""A trained LoRA adapter served beside its base model by vLLM, so the base and the trained model play side by side.

A training run's ``final/`` folder (``python -m training.grpo_train ... --lora_rank 8``) is a PEFT LoRA adapter:
``adapter_config.json`` (``peft_type: LORA``, ``r``, ``base_model_name_or_path``, ``target_modules``) and
``adapter_model.safetensors``. vLLM serves it beside the base model when started with ``--enable-lora`` and
``--lora-modules NAME=PATH`` (:meth:`AdapterInfo.server_args`): a request that names ``NAME`` is answered by the
base model with the adapter, one that names the base model by the base alone. :func:`check_adapter` reads the
folder first and refuses, with the fix named, a missing folder, a folder that is not a PEFT LoRA adapter, and an
adapter trained on another base model than the one served.

    python -m workbench.evaluate --serve-model --adapter runs/grpo/final --policies llm_local   # base vs trained

This module reads files and builds arguments; it never imports torch, PEFT or vLLM.
"""

from __future__ import annotations

import json
import os
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from reasoning_env.errors import ReasoningEconomicsError
from reasoning_env.offline_model import EMBEDDED_MODELS, model_provenance, model_spec_for

__all__ = [
    "ADAPTER_CONFIG",
    "DEFAULT_ADAPTER_NAME",
    "AdapterError",
    "AdapterInfo",
    "check_adapter",
    "served_lora_rank",
]

#: PEFT's adapter settings file in an adapter folder.
ADAPTER_CONFIG = "adapter_config.json"
#: PEFT's weight files (either one).
ADAPTER_WEIGHTS = ("adapter_model.safetensors", "adapter_model.bin")
#: The model name requests use for the adapter unless one is given.
DEFAULT_ADAPTER_NAME = "trained"
#: The LoRA ranks vLLM accepts for ``--max-lora-rank`` (vLLM 0.32's ``MaxLoRARanks``).
VLLM_LORA_RANKS = (1, 8, 16, 32, 64, 128, 256, 320, 512)
_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,63}$")


class AdapterError(ReasoningEconomicsError, ValueError):
    """A LoRA adapter folder cannot be served: missing, not a PEFT LoRA adapter, or trained on another base model;
    the message says which and how to fix it."""


@dataclass(frozen=True)
class AdapterInfo:
    """A checked LoRA adapter folder.

    Attributes: ``path`` (absolute), ``name`` (the model name requests use for it), ``rank`` (``r``),
    ``alpha`` (``lora_alpha``), ``base_model`` (``base_model_name_or_path`` as recorded), ``served_base`` (the
    base model it is served on), ``target_modules``.
    """

    path: Path
    name: str
    rank: int
    alpha: float | None
    base_model: str
    served_base: str
    target_modules: list[str] = field(default_factory=list)

    def server_args(self) -> list[str]:
        """``api_server`` arguments that load the adapter at start under :attr:`name` (with ``--enable-lora``)."""
        return ["--lora-modules", f"{self.name}={self.path}"]

    def describe(self) -> dict[str, Any]:
        """For ``run.json``: where the adapter is, its name, rank and base."""
        return {
            "path": str(self.path),
            "name": self.name,
            "rank": self.rank,
            "alpha": self.alpha,
            "base_model": self.base_model,
            "served_base": self.served_base,
            "target_modules": list(self.target_modules),
        }


def served_lora_rank(rank: int, floor: int = 16) -> int:
    """The ``--max-lora-rank`` that serves an adapter of rank ``rank``: the smallest rank vLLM accepts that is at
    least ``rank`` and ``floor``.

    Raises:
        AdapterError: ``rank`` is above the largest vLLM serves.
    """
    for r in VLLM_LORA_RANKS:
        if r >= max(rank, floor):
            return r
    raise AdapterError(f"the adapter's rank r={rank} is above the largest vLLM serves ({VLLM_LORA_RANKS[-1]})")


def _canonical(model: str) -> str:
    """One name for every spelling of a model: the offline build's name for ``embedded:...``, its upstream Hub
    id, its build folder (on this machine or, by folder name, another one's cache); else the resolved folder
    path; else the name as given."""
    text = str(model).strip()
    spec = model_spec_for(text)
    if spec is not None:
        return spec.name
    path = Path(text).expanduser()
    if path.is_dir():
        built = model_provenance(path).get("name")
        if built:
            return str(built)
        return str(path.resolve())
    for spec in EMBEDDED_MODELS.values():  # a build folder recorded on another machine: <cache>/models/<key>-v<N>
        if re.fullmatch(rf"{re.escape(spec.key)}-v\d+", path.name):
            return spec.name
    return text


def check_adapter(path: str | os.PathLike[str], base_model: str, *, name: str | None = None) -> AdapterInfo:
    """Read a LoRA adapter folder and check that it can be served on ``base_model``.

    Args:
        path: The adapter folder (a training run's ``final/``, or any PEFT LoRA adapter).
        base_model: The model the server serves (a folder, a Hub id or ``embedded:qwen2.5-coder-0.5b``).
        name: The model name requests will use for it (default :data:`DEFAULT_ADAPTER_NAME`).

    Raises:
        AdapterError: the folder is missing; it holds no ``adapter_config.json`` or no adapter weights (not a PEFT
            adapter: a merged model folder is served as a model of its own); the adapter is not LoRA; its
            ``base_model_name_or_path`` names another model than ``base_model``; or ``name`` is not a plain name.
    """
    name = DEFAULT_ADAPTER_NAME if name is None else str(name).strip()
    if not _NAME.match(name):
        raise AdapterError(
            f"adapter name {name!r} must be 1-64 letters, digits, '_', '.' or '-' (it is the model name requests "
            "use), e.g. 'trained'"
        )
    folder = Path(path).expanduser()
    if not folder.is_dir():
        raise AdapterError(
            f"no adapter folder at {str(folder)!r}: give the folder a LoRA training run saved (its final/ folder, "
            "or a checkpoint-N/ folder), e.g. runs/grpo-cpu/final"
        )
    cfg_path = folder / ADAPTER_CONFIG
    if not cfg_path.is_file():
        merged = (folder / "config.json").is_file()
        raise AdapterError(
            f"{str(folder)!r} is not a PEFT adapter (no {ADAPTER_CONFIG})"
            + (
                ": it looks like a full model folder; serve it as the model itself (--serve-model that folder), "
                "not as an adapter"
                if merged
                else ": give the folder a LoRA training run saved (train with --lora_rank; its final/ folder)"
            )
        )
    try:
        cfg = json.loads(cfg_path.read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        raise AdapterError(f"{cfg_path} cannot be read as JSON ({exc}): save the adapter again with PEFT") from None
    if not isinstance(cfg, dict):
        raise AdapterError(f"{cfg_path} is not a JSON object: save the adapter again with PEFT")
    if str(cfg.get("peft_type", "")).upper() != "LORA":
        raise AdapterError(
            f"{str(folder)!r} is a {cfg.get('peft_type') or 'PEFT'} adapter, not LoRA: vLLM serves LoRA adapters only "
            "(train with --lora_rank, or merge it into the model with python -m training.export)"
        )
    if not any((folder / w).is_file() for w in ADAPTER_WEIGHTS):
        raise AdapterError(
            f"{str(folder)!r} has {ADAPTER_CONFIG} but no adapter weights ({' or '.join(ADAPTER_WEIGHTS)}): copy the "
            "whole folder the training run saved"
        )
    recorded = str(cfg.get("base_model_name_or_path") or "").strip()
    if not recorded:
        raise AdapterError(
            f"{cfg_path} names no base model (base_model_name_or_path): set it to the model the adapter was trained "
            f"on, e.g. {base_model!r}"
        )
    if _canonical(recorded) != _canonical(base_model):
        raise AdapterError(
            f"the adapter at {str(folder)!r} was trained on {recorded!r}, not on the served model {base_model!r}: "
            f"serve its base model (--serve-model {recorded}), or give an adapter trained on {base_model!r}"
        )
    try:
        rank = int(cfg.get("r") or 0)
    except (TypeError, ValueError):
        rank = 0
    if rank < 1:
        raise AdapterError(f"{cfg_path} has no LoRA rank r >= 1: save the adapter again with PEFT")
    served_lora_rank(rank)  # refuses a rank vLLM cannot serve
    targets = cfg.get("target_modules") or []
    alpha = cfg.get("lora_alpha")
    return AdapterInfo(
        path=folder.resolve(),
        name=name,
        rank=rank,
        alpha=float(alpha) if isinstance(alpha, (int, float)) else None,
        base_model=recorded,
        served_base=base_model,
        target_modules=sorted(targets) if isinstance(targets, list) else [str(targets)],
    )
