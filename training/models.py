"""Loading the policy: a Hugging Face model, Unsloth on a GPU, or a tiny random model for CPU smoke runs.

- ``tiny`` (or ``tiny-qwen2``): a randomly initialised Qwen2 (hidden 64, 2 layers, 4 heads) built
  from a config, with the offline embedded Qwen2.5 tokenizer (ChatML template); seeded, so two
  builds are identical. Only for smoke tests: it writes random tokens.
- a Hub id or local folder: ``AutoModelForCausalLM`` + ``AutoTokenizer``.
- ``--unsloth``: ``unsloth.FastLanguageModel.from_pretrained(..., fast_inference=True)`` and
  ``FastLanguageModel.get_peft_model`` (LoRA), following Unsloth's GRPO recipe. Needs a CUDA GPU
  and requirements-gpu.txt; not run in this repository's CI.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from reasoning_env.errors import ReasoningEconomicsError

TINY_NAMES = ("tiny", "tiny-qwen2")

#: LoRA target modules of Qwen2/Qwen3 (Unsloth's GRPO recipe).
LORA_TARGETS = ["q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj"]

GPU_REQUIRED = "requires a CUDA GPU; install requirements-gpu.txt"

#: Share of GPU memory the vLLM engine may take (weights + KV cache): Unsloth's ``gpu_memory_utilization``
#: and TRL's ``vllm_gpu_memory_utilization`` (``--vllm_gpu_memory_utilization``). One value everywhere
#: (the CLI, :func:`load_policy`, notebook 02, docs/training.md); chosen, not measured on a GPU here.
VLLM_GPU_MEMORY_UTILIZATION = 0.6

#: Tokens that can pad a batch without ever ending a turn, tried in order when the tokenizer's pad token
#: is one of the end-of-turn ids (Qwen2.5-Instruct: pad ``<|endoftext|>`` is also in its generation EOS list).
PAD_CANDIDATES = ("<|vision_pad|>", "<|fim_pad|>", "<|PAD_TOKEN|>", "<|finetune_right_pad_id|>", "<pad>", "<|pad|>")


class ModelLoadError(ReasoningEconomicsError, RuntimeError):
    """The model or tokenizer could not be loaded; the message names it and the fix."""


@dataclass
class LoadedPolicy:
    """A policy ready for training.

    Attributes:
        model: The causal LM (a PEFT model when LoRA is on).
        tokenizer: Its tokenizer (pad token set).
        name: The model name or path as given.
        tokenizer_name: What the environment should count tokens with (a Hub id or local folder).
        unsloth: Loaded through Unsloth (its vLLM engine, if any, is ``model.vllm_engine``).
        peft_config: A ``peft.LoraConfig`` for TRL to apply, or ``None``.
    """

    model: Any
    tokenizer: Any
    name: str
    tokenizer_name: str
    unsloth: bool = False
    peft_config: Any = None


def is_tiny(name: str) -> bool:
    """Whether ``name`` asks for the tiny random smoke-test model."""
    return name.strip().lower() in TINY_NAMES


def tiny_tokenizer_dir() -> Path:
    """The embedded offline Qwen2.5 tokenizer folder (built on first use, ~5 s)."""
    from reasoning_env.tokenization import QWEN25, embedded_tokenizer_dir

    return embedded_tokenizer_dir(QWEN25)


def build_tiny_model(tokenizer: Any, *, seed: int = 0, hidden_size: int = 64, num_layers: int = 2) -> Any:
    """A randomly initialised ``Qwen2ForCausalLM`` sized for CPU tests.

    Args:
        tokenizer: The tokenizer whose ids the model must cover (vocabulary = ``len(tokenizer)``).
        seed: Initialisation seed (same seed, same weights).
        hidden_size, num_layers: Size (defaults: hidden 64, 2 layers, 4 heads, 2 KV heads).
    Returns:
        The model in float32, on CPU.
    """
    import torch
    from transformers import Qwen2Config, Qwen2ForCausalLM

    cfg = Qwen2Config(
        vocab_size=len(tokenizer),
        hidden_size=hidden_size,
        intermediate_size=hidden_size * 2,
        num_hidden_layers=num_layers,
        num_attention_heads=4,
        num_key_value_heads=2,
        max_position_embeddings=32768,
        tie_word_embeddings=True,
        pad_token_id=tokenizer.pad_token_id,
        eos_token_id=tokenizer.eos_token_id,
        bos_token_id=None,
    )
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        model = Qwen2ForCausalLM(cfg)
    model.generation_config.pad_token_id = tokenizer.pad_token_id
    model.generation_config.eos_token_id = tokenizer.eos_token_id
    return model


def load_tokenizer(name: str) -> Any:
    """``AutoTokenizer`` for a Hub id or folder, with a pad token.

    Raises:
        ModelLoadError: not found (offline, typo) or not loadable.
    """
    from transformers import AutoTokenizer

    try:
        tok = AutoTokenizer.from_pretrained(str(name))
    except Exception as exc:  # noqa: BLE001 - a Hugging Face load raises many types (OSError, ValueError, Hub HTTP errors)
        raise ModelLoadError(
            f"could not load the tokenizer of {name!r}: {type(exc).__name__}: {str(exc)[:300]}. "
            "Pass a local model folder or a Hub id reachable from here (or pre-fill the HF cache)."
        ) from None
    if tok.pad_token is None:
        tok.pad_token = tok.eos_token
    return tok


def lora_config(rank: int, alpha: int | None = None, dropout: float = 0.0) -> Any:
    """A ``peft.LoraConfig`` on :data:`LORA_TARGETS` (alpha defaults to ``2 * rank``)."""
    from peft import LoraConfig

    return LoraConfig(
        r=rank,
        lora_alpha=alpha or 2 * rank,
        lora_dropout=dropout,
        target_modules=list(LORA_TARGETS),
        task_type="CAUSAL_LM",
    )


def load_policy(
    name: str,
    *,
    lora_rank: int = 0,
    seed: int = 0,
    dtype: str = "auto",
    unsloth: bool = False,
    max_seq_length: int = 8192,
    load_in_4bit: bool = False,
    fast_inference: bool = True,
    gpu_memory_utilization: float = VLLM_GPU_MEMORY_UTILIZATION,
    gradient_checkpointing: bool = True,
) -> LoadedPolicy:
    """Load the policy to train.

    Args:
        name: ``"tiny"``, a Hub id, or a local folder.
        lora_rank: LoRA rank (0 = full fine-tuning; Unsloth always uses LoRA, default rank 32).
        seed: Seed of the tiny model's initialisation.
        dtype: ``"auto"``, ``"float32"``, ``"bfloat16"`` or ``"float16"`` (Hugging Face models).
        unsloth: Load with Unsloth (CUDA only).
        max_seq_length: Unsloth's context length (tokens): the longest episode.
        load_in_4bit: Unsloth 4-bit base weights (QLoRA).
        fast_inference: Unsloth's vLLM engine for rollouts.
        gpu_memory_utilization: Share of GPU memory Unsloth's vLLM may take.
        gradient_checkpointing: Unsloth only: its own checkpointing (``use_gradient_checkpointing="unsloth"``)
            or none; other models get TRL's (``GRPOConfig.gradient_checkpointing``).
    Returns:
        A :class:`LoadedPolicy` whose pad token is none of its end-of-turn ids when the vocabulary has a
        spare pad token (:func:`distinct_pad_token`).
    Raises:
        ModelLoadError: unknown model path or Hub id unreachable; ``--unsloth`` without a CUDA GPU
            or without Unsloth installed (``requires a CUDA GPU; install requirements-gpu.txt``).
    """
    if unsloth:
        return load_unsloth(
            name,
            lora_rank=lora_rank or 32,
            max_seq_length=max_seq_length,
            load_in_4bit=load_in_4bit,
            fast_inference=fast_inference,
            gpu_memory_utilization=gpu_memory_utilization,
            seed=seed,
            gradient_checkpointing=gradient_checkpointing,
        )
    if is_tiny(name):
        tok_dir = tiny_tokenizer_dir()
        tok = load_tokenizer(str(tok_dir))
        model = build_tiny_model(tok, seed=seed)
        return LoadedPolicy(model, tok, name, str(tok_dir), peft_config=lora_config(lora_rank) if lora_rank else None)

    path = os.path.expanduser(name)
    looks_local = name.startswith((".", "/", "~")) or name.count("/") > 1
    if looks_local and not os.path.isdir(path):
        raise ModelLoadError(f"model folder {name!r} does not exist")
    from reasoning_env.errors import ModelNotAvailableError
    from reasoning_env.offline_model import resolve_model

    try:  # a folder, a Hub id (offline: its HF cache, or the offline build of its upstream id), embedded:<key>
        resolved = resolve_model(name)
    except ModelNotAvailableError as exc:
        raise ModelLoadError(str(exc)) from None
    path = resolved.ref
    # what the environment counts with: the folder, the embedded tokenizer of the offline build, or the Hub id
    name_for_env = resolved.tokenizer_name if resolved.origin == "local" or resolved.spec is not None else name
    import torch
    from transformers import AutoModelForCausalLM

    tok = load_tokenizer(path if os.path.isdir(path) else name)
    torch_dtype = {"auto": "auto", "float32": torch.float32, "bfloat16": torch.bfloat16, "float16": torch.float16}.get(
        dtype
    )
    if torch_dtype is None:
        raise ModelLoadError(f"dtype must be auto, float32, bfloat16 or float16, got {dtype!r}")
    try:
        model = AutoModelForCausalLM.from_pretrained(path if os.path.isdir(path) else name, dtype=torch_dtype)
    except Exception as exc:  # noqa: BLE001 - a Hugging Face load raises many types (OSError, ValueError, Hub HTTP errors)
        raise ModelLoadError(
            f"could not load model {name!r}: {type(exc).__name__}: {str(exc)[:300]}. "
            "Pass a local model folder or a Hub id reachable from here."
        ) from None
    distinct_pad_token(tok, model)
    return LoadedPolicy(
        model,
        tok,
        name,
        name_for_env,
        peft_config=lora_config(lora_rank) if lora_rank else None,
    )


def require_cuda(feature: str = "--unsloth") -> None:
    """Raise :class:`ModelLoadError` unless a CUDA GPU and Unsloth are usable."""
    try:
        import torch

        has_cuda = torch.cuda.is_available()
    except (ImportError, RuntimeError):  # no torch, or a broken CUDA install
        has_cuda = False
    if not has_cuda:
        raise ModelLoadError(f"{feature} {GPU_REQUIRED} (torch.cuda.is_available() is False)")


def load_unsloth(
    name: str,
    *,
    lora_rank: int = 32,
    max_seq_length: int = 8192,
    load_in_4bit: bool = False,
    fast_inference: bool = True,
    gpu_memory_utilization: float = VLLM_GPU_MEMORY_UTILIZATION,
    seed: int = 3407,
    gradient_checkpointing: bool = True,
) -> LoadedPolicy:
    """Unsloth's GRPO recipe: ``FastLanguageModel.from_pretrained(name, max_seq_length,
    load_in_4bit, fast_inference, max_lora_rank, gpu_memory_utilization)`` then
    ``FastLanguageModel.get_peft_model(r, target_modules=q,k,v,o,gate,up,down, lora_alpha=2r,
    use_gradient_checkpointing="unsloth")`` (Unsloth docs, GRPO notebooks).

    ``unsloth`` must be imported before ``trl``/``transformers`` build the trainer so its patches
    apply; :func:`training.grpo_train.main` imports it first when ``--unsloth`` is given.

    Raises:
        ModelLoadError: no CUDA GPU, or Unsloth not installed (``requires a CUDA GPU; install
            requirements-gpu.txt``).
    """
    require_cuda("--unsloth")
    try:
        from unsloth import FastLanguageModel
    except ImportError as exc:
        raise ModelLoadError(f"--unsloth {GPU_REQUIRED} (import failed: {exc})") from None
    model, tokenizer = FastLanguageModel.from_pretrained(
        model_name=name,
        max_seq_length=max_seq_length,
        load_in_4bit=load_in_4bit,
        fast_inference=fast_inference,
        max_lora_rank=lora_rank,
        gpu_memory_utilization=gpu_memory_utilization,
    )
    model = FastLanguageModel.get_peft_model(
        model,
        r=lora_rank,
        target_modules=list(LORA_TARGETS),
        lora_alpha=2 * lora_rank,
        use_gradient_checkpointing="unsloth" if gradient_checkpointing else False,
        random_state=seed,
    )
    if tokenizer.pad_token is None:
        tokenizer.pad_token = tokenizer.eos_token
    distinct_pad_token(tokenizer, model)
    return LoadedPolicy(model, tokenizer, name, name, unsloth=True)


def distinct_pad_token(tokenizer: Any, model: Any = None) -> int | None:
    """Make the pad token none of the end-of-turn ids (:func:`eos_token_ids`) when it is one.

    Unsloth's GRPO loss treats every pad-id token as padding (``unsloth_zoo`` ``left_pack_padding``), so a
    turn ended by the pad id would be moved and masked and its log-probs misaligned; the rollout refuses
    that (:class:`training.trl_rollout.GRPORollout`). When the pad id is an end-of-turn id, the first of
    :data:`PAD_CANDIDATES` in the vocabulary becomes the pad token (tokenizer, ``model.config`` and
    ``model.generation_config``). Returns the pad id now in use; unchanged when no candidate exists.
    """
    eos = set(eos_token_ids(tokenizer, model))
    if tokenizer.pad_token_id is None or int(tokenizer.pad_token_id) not in eos:
        return tokenizer.pad_token_id
    vocab = tokenizer.get_vocab()
    for token in PAD_CANDIDATES:
        if token in vocab and int(vocab[token]) not in eos:
            tokenizer.pad_token = token
            for cfg in (getattr(model, "config", None), getattr(model, "generation_config", None)):
                if cfg is not None and hasattr(cfg, "pad_token_id"):
                    cfg.pad_token_id = int(vocab[token])
            return int(vocab[token])
    return tokenizer.pad_token_id


def eos_token_ids(tokenizer: Any, model: Any = None) -> list[int]:
    """Ids that end an assistant turn: the tokenizer's EOS, ``<|im_end|>`` when present, and the
    model's ``generation_config.eos_token_id`` (an int or a list)."""
    ids: list[int] = []
    if tokenizer.eos_token_id is not None:
        ids.append(int(tokenizer.eos_token_id))
    im_end = tokenizer.convert_tokens_to_ids("<|im_end|>") if "<|im_end|>" in tokenizer.get_vocab() else None
    if im_end is not None:
        ids.append(int(im_end))
    gen_eos = getattr(getattr(model, "generation_config", None), "eos_token_id", None)
    if isinstance(gen_eos, int):
        ids.append(gen_eos)
    elif isinstance(gen_eos, (list, tuple)):
        ids.extend(int(x) for x in gen_eos)
    return list(dict.fromkeys(ids))
