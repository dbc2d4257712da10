"""A short GRPO run on a GPU with no Hub and few packages: a randomly initialised model of
Qwen2.5-0.5B-Instruct's configuration, the embedded offline Qwen2.5 tokenizer, the real environment on
its builtin questions, LoRA and gradient checkpointing, bf16.

    python -m training.gpu_check                      # CUDA: 4 GRPO steps, prints one JSON object
    python -m training.gpu_check --device cpu --tiny  # the same path on CPU with the tiny model (CI)

Each step plays ``--groups`` GRPO groups of ``--num_generations`` identical episodes in lockstep
(:class:`training.rollout.EpisodeRunner`, ``transformers`` generation with sampling log-probs), turns the
environment's episode rewards into advantages (``A = r - group mean``, divided by the batch's std: the
trainer's default ``scale_rewards="batch"``), and takes one AdamW step on the token loss
``-A * exp(logp - logp.detach())`` summed over model tokens and divided by the batch's model tokens (the
trainer's default ``loss_type="dapo"``, on-policy), one episode per forward/backward (gradient
accumulation), through LoRA adapters (``--lora_rank``, default 16; 0 = full fine-tuning) with gradient
checkpointing on (``--no_gradient_checkpointing`` turns it off).

It depends on the project's core only: no TRL, ``datasets``, pyarrow or ``reasoning_gym`` (builtin
questions, no parquet; the result goes to ``<output_dir>/result.json``). It needs torch, transformers,
PEFT and the core's dependencies (``reasoning_env``: openenv, pydantic, PyYAML, math-verify, numpy; openenv
itself imports gradio and pandas). ``tests/test_training_export_bench.py`` runs the CPU path with those
four modules unimportable.

Prints ``step_seconds`` (mean wall time of an optimizer step, rollouts included), the split into
``generate_seconds`` / ``backward_seconds``, ``generated_tokens_per_s`` (model tokens the rollouts generated /
seconds inside generate), ``peak_gpu_memory_gib`` (``torch.cuda.max_memory_allocated``), the settings,
whether gradient checkpointing was active and whether the LoRA weights moved (``lora_B`` starts at zero, so
only a gradient moves it), and the first/last step's reward, accuracy, loss and gradient norm of the
trainable weights. The weights are random, so the answers are noise: this measures the training path's
speed and memory, not learning. What it does not exercise: real weights, TRL's ``GRPOTrainer``, vLLM and
Unsloth.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

#: ``Qwen/Qwen2.5-0.5B-Instruct``'s ``config.json`` (architecture fields; 494M parameters).
QWEN25_05B = dict(
    hidden_size=896,
    intermediate_size=4864,
    num_hidden_layers=24,
    num_attention_heads=14,
    num_key_value_heads=2,
    max_position_embeddings=32768,
    rope_theta=1000000.0,
    rms_norm_eps=1e-6,
    tie_word_embeddings=True,
    vocab_size=151936,
    hidden_act="silu",
)


def build_policy(tiny: bool, dtype: str, device: str, seed: int = 0):
    """The randomly initialised policy (:class:`training.models.LoadedPolicy`) on ``device``."""
    import torch
    from transformers import Qwen2Config, Qwen2ForCausalLM

    from training.models import LoadedPolicy, build_tiny_model, load_tokenizer, tiny_tokenizer_dir

    tok_dir = tiny_tokenizer_dir()
    tok = load_tokenizer(str(tok_dir))
    torch_dtype = {"bfloat16": torch.bfloat16, "float32": torch.float32, "float16": torch.float16}[dtype]
    if tiny:
        model = build_tiny_model(tok, seed=seed)
    else:
        cfg = Qwen2Config(
            **{**QWEN25_05B, "vocab_size": max(QWEN25_05B["vocab_size"], len(tok))},
            pad_token_id=tok.pad_token_id,
            eos_token_id=tok.eos_token_id,
            bos_token_id=None,
        )
        with torch.random.fork_rng(devices=[]):
            torch.manual_seed(seed)
            model = Qwen2ForCausalLM(cfg)
        model.generation_config.pad_token_id = tok.pad_token_id
        model.generation_config.eos_token_id = tok.eos_token_id
    model = model.to(device=device, dtype=torch_dtype)
    return LoadedPolicy(model, tok, "qwen2.5-0.5b-config-random" if not tiny else "tiny", str(tok_dir))


def batch_advantages(rewards: list[float], group_size: int) -> list[float]:
    """``A = r - group mean``, divided by the batch's std (+ 1e-4): TRL's ``scale_rewards="batch"``."""
    import numpy as np

    r = np.asarray(rewards, dtype=np.float64)
    g = r.reshape(-1, group_size)
    centred = (g - g.mean(axis=1, keepdims=True)).reshape(-1)
    std = r.std(ddof=1) if r.size > 1 else 0.0
    return [float(x) for x in centred / (std + 1e-4)]


def grpo_step(model, optimizer, traces, advantages, device) -> float:
    """One optimizer step on played episodes (one forward/backward per episode). Returns the loss."""
    import torch

    total_tokens = max(1, sum(sum(t.env_mask) for t in traces))
    model.train()
    optimizer.zero_grad(set_to_none=True)
    loss_sum = 0.0
    for trace, adv in zip(traces, advantages):
        ids = torch.tensor([trace.prompt_ids + trace.completion_ids], device=device)
        n = len(trace.completion_ids)
        logits = model(input_ids=ids).logits[:, -n - 1 : -1, :].float()
        logp = torch.log_softmax(logits, dim=-1).gather(-1, ids[:, -n:].unsqueeze(-1)).squeeze(-1)
        mask = torch.tensor([trace.env_mask], device=device, dtype=logp.dtype)
        loss = -(adv * torch.exp(logp - logp.detach()) * mask).sum() / total_tokens
        loss.backward()
        loss_sum += float(loss.detach())
    optimizer.step()
    return loss_sum


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m training.gpu_check", description=__doc__.splitlines()[0])
    p.add_argument("--device", default="cuda")
    p.add_argument("--tiny", action="store_true", help="The tiny 2-layer model instead of the 0.5B configuration.")
    p.add_argument("--steps", type=int, default=4)
    p.add_argument("--num_generations", type=int, default=4)
    p.add_argument("--groups", type=int, default=2, help="Episode seeds (GRPO groups) per step.")
    p.add_argument("--num_questions", type=int, default=4)
    p.add_argument("--max_tokens_per_step", type=int, default=256)
    p.add_argument("--total_budget", type=int, default=None, help="Fixed episode budget (default: tokenizer-native).")
    p.add_argument(
        "--beta",
        type=float,
        default=None,
        help="The reward's cost penalty weight (default: the default reward's, 0). A random model never answers "
        "right, so without a cost term its group members tie: --beta 0.05 (the seed's) gives them different rewards.",
    )
    p.add_argument("--lora_rank", type=int, default=16, help="LoRA rank (0 = full fine-tuning).")
    p.add_argument(
        "--no_gradient_checkpointing",
        dest="gradient_checkpointing",
        action="store_false",
        help="Turn gradient checkpointing off (on by default, as in training).",
    )
    p.add_argument("--learning_rate", type=float, default=1e-5)
    p.add_argument("--seed", type=int, default=0, help="Seeds the model, the sampling and the episode seeds.")
    p.add_argument("--output_dir", default="runs/gpu-check")
    args = p.parse_args(argv)

    import torch

    if args.device.startswith("cuda") and not torch.cuda.is_available():
        print(
            "error: --device cuda but torch.cuda.is_available() is False (use --device cpu --tiny for the CPU path)",
            file=sys.stderr,
        )
        return 2
    from reasoning_env.config import EnvConfig
    from reasoning_env.conversation import ChatFormat
    from training.envs import InProcessEnvFactory
    from training.generation import SamplingConfig, TransformersBackend
    from training.models import eos_token_ids, lora_config
    from training.rollout import EpisodeRunner, EpisodeSpec, RolloutLimits
    from training.trl_rollout import check_pad_token, episode_seeds

    torch.manual_seed(args.seed)
    cuda = args.device.startswith("cuda")
    bf16 = cuda and torch.cuda.is_bf16_supported()
    policy = build_policy(args.tiny, "bfloat16" if bf16 else "float32", args.device, seed=args.seed)
    model = policy.model
    if args.lora_rank:
        from peft import get_peft_model

        model = get_peft_model(model, lora_config(args.lora_rank))  # adapters in fp32 (PEFT's autocast)
    if args.gradient_checkpointing:
        model.gradient_checkpointing_enable(gradient_checkpointing_kwargs={"use_reentrant": False})
        model.config.use_cache = False
    trainable = [q for q in model.parameters() if q.requires_grad]
    optimizer = torch.optim.AdamW(trainable, lr=args.learning_rate)
    lora_before = [q.detach().clone() for n, q in model.named_parameters() if "lora_B" in n]

    env = EnvConfig(
        sources=["builtin"],
        num_questions=args.num_questions,
        max_tokens_per_step=args.max_tokens_per_step,
        **({} if args.beta is None else {"beta": args.beta}),
    )
    eos = eos_token_ids(policy.tokenizer, policy.model)
    check_pad_token(policy.tokenizer.pad_token_id, eos)
    backend = TransformersBackend(
        model=model,
        pad_token_id=policy.tokenizer.pad_token_id,
        eos_ids=eos,
        sampling=SamplingConfig(temperature=1.0),
        device=args.device,
    )
    limits = RolloutLimits(
        max_episode_tokens=512 + args.num_questions * (args.max_tokens_per_step + 200),
        tokenizer_name=policy.tokenizer_name,
        total_budget=args.total_budget,
    )
    runner = EpisodeRunner(backend, InProcessEnvFactory(env), ChatFormat(policy.tokenizer), limits=limits)
    seeds = episode_seeds(args.steps * args.groups, args.seed)
    if cuda:
        torch.cuda.reset_peak_memory_stats()
    rows = []
    t0 = time.perf_counter()
    backward_seconds = 0.0
    for step in range(args.steps):
        specs = [
            EpisodeSpec(seed=seeds[step * args.groups + g], group=g, member=m, episode=g)
            for g in range(args.groups)
            for m in range(args.num_generations)
        ]
        traces = runner.play_lockstep(specs)
        for tr in traces:
            tr.check()
        rewards = [tr.reward for tr in traces]
        tb = time.perf_counter()
        loss = grpo_step(model, optimizer, traces, batch_advantages(rewards, args.num_generations), args.device)
        grads = [q.grad.detach().float().norm() for q in trainable if q.grad is not None]
        grad_norm = float(torch.stack(grads).norm()) if grads else 0.0
        if cuda:
            torch.cuda.synchronize()
        backward_seconds += time.perf_counter() - tb
        questions = sum(tr.num_questions for tr in traces)
        rows.append(
            {
                "step": step + 1,
                "reward": sum(rewards) / len(rewards),
                "accuracy": sum(tr.num_correct for tr in traces) / questions if questions else 0.0,
                "loss": loss,
                "grad_norm": grad_norm,
            }
        )
    seconds = time.perf_counter() - t0
    stats = backend.stats
    lora_after = [q.detach() for n, q in model.named_parameters() if "lora_B" in n]
    base = model.get_base_model() if args.lora_rank else model
    result = {
        "device": torch.cuda.get_device_name(0) if cuda else args.device,
        "model": policy.name,
        "parameters": sum(q.numel() for q in policy.model.parameters()),
        "trainable_parameters": sum(q.numel() for q in trainable),
        "dtype": "bfloat16" if bf16 else "float32",
        "lora_rank": args.lora_rank,
        "gradient_checkpointing": bool(getattr(base, "is_gradient_checkpointing", False)),
        # lora_B starts at zero and only a gradient moves it (weight decay keeps zero at zero)
        "lora_weights_changed": any(not torch.equal(a, b) for a, b in zip(lora_before, lora_after))
        if args.lora_rank
        else None,
        "steps": args.steps,
        "episodes_per_step": args.num_generations * args.groups,
        "step_seconds": round(seconds / max(1, args.steps), 3),
        "generate_seconds": round(stats.seconds, 3),
        "backward_seconds": round(backward_seconds, 3),
        "generated_tokens": stats.tokens,
        "generated_tokens_per_s": round(stats.tokens / stats.seconds, 1) if stats.seconds else None,
        "peak_gpu_memory_gib": round(torch.cuda.max_memory_allocated() / 2**30, 2) if cuda else None,
        "first_metrics": rows[0] if rows else None,
        "last_metrics": rows[-1] if rows else None,
    }
    out = Path(args.output_dir)
    out.mkdir(parents=True, exist_ok=True)
    (out / "result.json").write_text(json.dumps(result, indent=2) + "\n")
    print(json.dumps(result, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
