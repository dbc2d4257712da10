"""GRPO training on the Reasoning Economics environment (TRL ``GRPOTrainer`` + ``rollout_func``).

    python -m training.grpo_train --model Qwen/Qwen2.5-0.5B-Instruct --config env.yaml \\
        --output_dir runs/grpo-qwen05 [--unsloth] [--env_base_url http://127.0.0.1:8000]
    python -m training.grpo_train --smoke --output_dir runs/smoke     # tiny CPU model, 2 steps

Every dataset row is one episode seed; TRL repeats it ``--num_generations`` times and every copy
plays the same episode (a GRPO group). All episodes of a generation batch advance in lockstep,
one batched generate call per turn, each turn capped by the environment's ``step_token_cap``;
turns are appended as token ids with ``env_mask`` (1 = model, 0 = environment text); the episode
reward is the environment's. Logs land in ``--output_dir`` in the workbench's run-folder format
(``run.json`` kind "training", ``trajectories.parquet``, ``episodes.parquet``, ``episodes.jsonl``,
``metrics.jsonl``) plus ``--report_to`` (trackio by default; wandb, tensorboard or none).

Generation: vLLM (TRL's ``vllm_generation``, colocate or server mode) when installed on a CUDA
machine, else ``transformers`` generate; ``--unsloth`` loads the model with Unsloth
(``FastLanguageModel``, LoRA, ``fast_inference``). The GPU paths are written against TRL
1.15/1.16, Unsloth 2026.10.9 and vLLM 0.29 but were not run in this repository's CI (no GPU); the
training tests run on CPU against both TRL 1.15 (the GPU pin) and 1.16.
"""

from __future__ import annotations

import argparse
import dataclasses
import importlib.util
import json
import logging
import os
import shlex
import shutil
import sys
import time
from pathlib import Path
from typing import Any

from reasoning_env.errors import ReasoningEconomicsError
from reasoning_env.policies.turn_cap import TurnCap
from training.models import VLLM_GPU_MEMORY_UTILIZATION
from training.trainer import DEFAULT_IS_MODE, IS_MODES

logger = logging.getLogger("training.grpo_train")

#: Environment settings of ``--smoke`` (overriding ``--config``): 3 short reasoning-gym questions,
#: 16 tokens per turn.
#: The smoke run's environment. Its tiny random model never answers right, and under the default reward (no cost
#: penalty, beta 0) every such episode pays the same: every group would tie and dynamic sampling would drop them all.
#: So the smoke run keeps the seed's cost penalty (beta 0.05): members that spend differently get different rewards.
SMOKE_ENV = {"sources": ["reasoning_gym"], "num_questions": 3, "max_tokens_per_step": 16, "beta": 0.05}


#: TRL 1.15/1.16 ``loss_type`` values that take one advantage per sequence and a token mask.
LOSS_TYPES = ("dapo", "grpo", "dr_grpo", "bnpo", "cispo", "sapo")
#: Defaults chosen from ``python -m training.advantage_study`` (docs/training.md, "Advantages and loss").
DEFAULT_LOSS_TYPE = "dapo"
DEFAULT_SCALE_REWARDS = "batch"
#: GRPO groups per optimizer step when ``--per_device_train_batch_size`` does not set the batch: with one group,
#: ``scale_rewards="batch"`` divides by that group's own std and a 0.001 cost gap becomes a +-1 advantage.
DEFAULT_GROUPS_PER_STEP = 4
#: Bound on dynamic sampling's replacement rounds per step (``--max_resample_rounds``).
DEFAULT_MAX_RESAMPLE_ROUNDS = 2

MASK_TRUNCATED_MESSAGE = (
    "--mask_truncated_completions is refused: TRL treats a completion whose last token is not a stop token as "
    "truncated, and here a completion is a whole episode whose last turn is cut at the remaining budget whenever "
    "the budget runs dry, so TRL would drop every run-dry episode from the loss: the very episodes that teach the "
    "policy not to run dry. Turns cut by their per-turn cap are graded 'no answer' by the environment instead "
    "(logged as cap_hit_rate)."
)


class TrainSetupError(ReasoningEconomicsError, RuntimeError):
    """A training option is invalid or needs hardware/packages that are missing."""


def build_parser() -> argparse.ArgumentParser:
    """The command-line options (see ``--help`` and docs/training.md)."""
    p = argparse.ArgumentParser(
        prog="python -m training.grpo_train",
        description=__doc__.splitlines()[0],
        formatter_class=argparse.ArgumentDefaultsHelpFormatter,
    )
    g = p.add_argument_group("model")
    g.add_argument(
        "--model", default=None, help="Hub id, local folder, or 'tiny' (random 2-layer Qwen2 for CPU smoke runs)."
    )
    g.add_argument(
        "--tokenizer_name", default=None, help="Tokenizer the environment counts with (default: the model's)."
    )
    g.add_argument(
        "--lora_rank", type=int, default=0, help="LoRA rank (0 = full fine-tuning; --unsloth defaults to 32)."
    )
    g.add_argument("--dtype", default="auto", choices=["auto", "float32", "bfloat16", "float16"])
    g.add_argument(
        "--unsloth",
        action="store_true",
        help="Load with Unsloth (FastLanguageModel + LoRA + fast_inference); CUDA only.",
    )
    g.add_argument("--load_in_4bit", action="store_true", help="Unsloth: 4-bit base weights (QLoRA).")
    g.add_argument(
        "--no_fast_inference", action="store_true", help="Unsloth: no vLLM engine (generate with transformers)."
    )
    g.add_argument(
        "--reasoning_mode",
        default="auto",
        choices=["auto", "on", "off"],
        help="Qwen3 thinking: auto = the chat template's default; the text after </think> is graded.",
    )
    g.add_argument(
        "--history_thinking",
        default="keep",
        choices=["keep", "strip"],
        help="Earlier <think> blocks in the episode's history: keep (the only history one training sequence "
        "per episode can hold; TRL's qwen3_training template does the same). strip is refused.",
    )
    g = p.add_argument_group("environment")
    g.add_argument(
        "--config",
        default=None,
        help="Environment YAML (EnvConfig; an 'env:' key is accepted). Default: the project default config.",
    )
    g.add_argument(
        "--env_base_url",
        "--server-url",
        dest="env_base_url",
        nargs="+",
        default=None,
        help="Play against OpenEnv server(s) at these URLs instead of in-process; several replicas spread the "
        "episodes, and an episode whose replica dies is replayed from its seed on another.",
    )
    g.add_argument(
        "--total_budget",
        type=int,
        default=None,
        help="Fixed budget (tokens) for every episode; default: the --config YAML's total_budget where it sets one, "
        "else tokenizer-native (budget_ratio x the question tokens).",
    )
    g.add_argument(
        "--num_episodes",
        type=int,
        default=256,
        help="Distinct episode seeds in the training set (one GRPO group each).",
    )
    g.add_argument(
        "--max_episode_tokens",
        type=int,
        default=8192,
        help="Prompt + completion tokens per episode (model context); when full, remaining questions are forfeited.",
    )
    g.add_argument(
        "--turn_cap",
        choices=["share", "env"],
        default="share",
        help="Per-answer cap: share (default, as evaluation: --turn_factor x the remaining budget per remaining "
        "question, keeping 64 for each later question, at least 64, at most step_token_cap) or env "
        "(step_token_cap alone).",
    )
    g.add_argument("--turn_factor", type=float, default=2.0, help="The share rule's multiple.")
    g = p.add_argument_group("GRPO (TRL GRPOConfig)")
    g.add_argument("--output_dir", default=None, help="Run folder (default runs/grpo-<time>).")
    g.add_argument("--run_name", default=None)
    g.add_argument("--seed", type=int, default=42)
    g.add_argument("--num_generations", type=int, default=4, help="Group size G: rollouts per episode seed.")
    g.add_argument(
        "--groups_per_step",
        type=int,
        default=None,
        help=f"GRPO groups per optimizer step (default {DEFAULT_GROUPS_PER_STEP} unless --per_device_train_batch_size "
        "sets the batch): --groups_per_step x G rollouts per step, split into micro-batches of "
        "--per_device_train_batch_size per process (gradient accumulation makes up the rest).",
    )
    g.add_argument(
        "--per_device_train_batch_size",
        type=int,
        default=None,
        help="Rollouts per device per micro-batch (default: the whole step's, groups_per_step x G / processes).",
    )
    g.add_argument(
        "--gradient_accumulation_steps",
        type=int,
        default=None,
        help="Micro-batches per optimizer step (default: what --groups_per_step needs, else 1).",
    )
    g.add_argument(
        "--dynamic_sampling",
        choices=("auto", "on", "off"),
        default="auto",
        help="Replace GRPO groups without reward variance by freshly played ones before the optimizer step (DAPO); "
        "groups still tied after --max_resample_rounds are masked out of the loss, and a step with none left skips "
        "the optimizer. auto = on unless --group_reward (the rollout judges the environment's reward only) or a "
        "group spans two processes.",
    )
    g.add_argument(
        "--max_resample_rounds",
        type=int,
        default=DEFAULT_MAX_RESAMPLE_ROUNDS,
        help="Dynamic sampling: replacement rounds per step at most (0 = mask tied groups without replaying).",
    )
    g.add_argument(
        "--advantage",
        choices=("episode", "question"),
        default="episode",
        help="episode = one advantage per episode (TRL's); question = each answer credited with its own step reward "
        "plus the episode's terms, normalised per question index within the group (docs/training.md).",
    )
    g.add_argument("--learning_rate", type=float, default=5e-6)
    g.add_argument("--num_train_epochs", type=float, default=1.0)
    g.add_argument("--max_steps", type=int, default=-1)
    g.add_argument("--beta", type=float, default=0.0, help="KL coefficient (TRL default 0).")
    g.add_argument(
        "--loss_type",
        default=DEFAULT_LOSS_TYPE,
        choices=LOSS_TYPES,
        help="How token losses are aggregated (TRL): dapo = every model token of the batch weighs the same "
        "(docs/training.md, 'Advantages and loss').",
    )
    g.add_argument(
        "--scale_rewards",
        default=DEFAULT_SCALE_REWARDS,
        choices=("group", "batch", "none"),
        help="Advantage = reward - group mean, divided by the group's std (group), the batch's std (batch) "
        "or nothing (none). group turns tiny cost gaps of correctness-tied groups into full-size "
        "advantages (docs/training.md).",
    )
    g.add_argument(
        "--vllm_importance_sampling_mode",
        default=DEFAULT_IS_MODE,
        choices=IS_MODES,
        help="vLLM importance-sampling correction. A completion is a whole episode, so sequence modes "
        "(ratio = exp of the summed log-ratio) mask most episodes from noise; token_truncate clips "
        "each token's ratio.",
    )
    g.add_argument(
        "--vllm_importance_sampling_cap",
        type=float,
        default=3.0,
        help="Upper bound of the importance-sampling ratio (TRL's vllm_importance_sampling_clip_max).",
    )
    g.add_argument(
        "--mask_truncated_completions",
        action="store_true",
        help="Refused: TRL would drop every episode that ran out of budget (see the error).",
    )
    g.add_argument(
        "--group_reward",
        default=None,
        help="Add a group reward shape to the environment's reward: kimi_length, shorter_better, "
        "arora_zanette, or a reward spec (YAML/JSON). Scored over whole GRPO groups on every process.",
    )
    g.add_argument("--group_reward_weight", type=float, default=1.0, help="TRL reward weight of --group_reward.")
    g.add_argument("--temperature", type=float, default=1.0)
    g.add_argument("--top_p", type=float, default=1.0)
    g.add_argument("--top_k", type=int, default=0)
    g.add_argument("--logging_steps", type=int, default=1)
    g.add_argument(
        "--save_steps",
        type=int,
        default=0,
        help="Checkpoint every N steps (0 = only at the end). A run started again with the same --output_dir "
        "continues from its last checkpoint (see --fresh).",
    )
    g.add_argument(
        "--save_total_limit",
        type=int,
        default=0,
        help="Keep only the newest N checkpoints (0 = keep all): a long run checkpointed every step needs it "
        "(a rank-8 LoRA checkpoint of the 0.5B model with its optimizer state is ~55 MB).",
    )
    g.add_argument(
        "--fresh",
        action="store_true",
        help="Start over in an --output_dir that holds checkpoints (default: resume from the last one).",
    )
    g.add_argument(
        "--gradient_checkpointing",
        dest="gradient_checkpointing",
        action="store_true",
        default=True,
        help="Recompute activations in the backward pass (on by default, as in TRL's GRPOConfig; with --unsloth, "
        "Unsloth's own checkpointing). Without it, long episodes can run out of GPU memory.",
    )
    g.add_argument(
        "--no_gradient_checkpointing",
        dest="gradient_checkpointing",
        action="store_false",
        help="Turn gradient checkpointing off (faster backward, far more activation memory).",
    )
    g.add_argument(
        "--bf16", default="auto", choices=["auto", "true", "false"], help="auto = on when CUDA supports it."
    )
    g.add_argument("--report_to", default="trackio", help="trackio, wandb, tensorboard, none (comma-separated).")
    g.add_argument("--project", default="reasoning-economics", help="Trackio project.")
    g = p.add_argument_group("held-out evaluation (docs/training.md)")
    g.add_argument(
        "--eval_every",
        type=int,
        default=0,
        help="Evaluate on the held-out seeds every N optimizer steps, before the first and at the end (0 = off).",
    )
    g.add_argument(
        "--eval_seeds", type=int, default=16, help="Held-out episode seeds (fixed, disjoint from training)."
    )
    g.add_argument(
        "--eval_config",
        default=None,
        help="Environment YAML of the held-out episodes (default: --config's). Give one whose sources draw other "
        "questions (e.g. another generator seed: examples/training/cpu_allocation_heldout.yaml) so held-out "
        "episodes hold questions never trained on, not only unseen episode seeds. Its budget follows --config's "
        "rule (--total_budget, else its own total_budget).",
    )
    g.add_argument(
        "--eval_only",
        action="store_true",
        help="Play the step-0 held-out evaluation (the untrained policy) and stop before the first optimizer step. "
        "The same command without --eval_only in the same --output_dir then trains and keeps that evaluation "
        "instead of playing it again, if nothing it depends on changed (model, config, seeds, temperature, "
        "curves, episode format): a pre-registered experiment measures its baseline first (docs/training.md).",
    )
    g.add_argument(
        "--eval_temperature", type=float, default=0.0, help="Sampling temperature of the evaluation (0 = greedy)."
    )
    g.add_argument(
        "--curves",
        default=None,
        help="Solver curves for the regret: a shipped curve set by name (e.g. qwen2.5-coder-0.5b, fitted to the real "
        "model) or a curves.json file (e.g. from a base-model evaluation run); default: the simulated solver's.",
    )
    g = p.add_argument_group("generation backend")
    g.add_argument(
        "--backend",
        default="auto",
        choices=["auto", "transformers", "vllm", "vllm_server"],
        help="auto = vLLM when installed with a CUDA GPU (or Unsloth fast_inference), else transformers. "
        "vllm_server = rollouts through a vLLM OpenAI-compatible server (vLLM's CPU engine here), kept on the "
        "live weights by handing the LoRA adapter over after each step (needs --lora_rank; see docs/training.md).",
    )
    g.add_argument(
        "--rollout_server_url",
        default=None,
        help="--backend vllm_server: a running server started with training.vllm_server_backend.serve_for_training "
        "(LoRA on, processed log-probs); default: start one on --model for the run and stop it after.",
    )
    g.add_argument(  # (issue 29, speed) the hand-off's route; the rest of this file is unchanged by that branch
        "--weight_handoff",
        choices=["lora", "merged"],
        default="lora",
        help="--backend vllm_server: hand the weights over as a LoRA adapter, or merged into the base weights and "
        "reloaded in place (vLLM's dev endpoints: the server started here gets VLLM_SERVER_DEV_MODE=1; exact only "
        "on a float32 server; see docs/training.md, 'Speed').",
    )
    g.add_argument("--vllm_mode", default="colocate", choices=["colocate", "server"])
    g.add_argument("--vllm_server_base_url", default=None, help="vLLM server mode: URL of `trl vllm-serve`.")
    g.add_argument(
        "--vllm_gpu_memory_utilization",
        type=float,
        default=VLLM_GPU_MEMORY_UTILIZATION,
        help="Share of GPU memory the vLLM engine may take (weights + KV cache): Unsloth's gpu_memory_utilization "
        "and TRL's vllm_gpu_memory_utilization (colocate).",
    )
    g.add_argument(
        "--smoke",
        action="store_true",
        help="CPU smoke run: tiny model, 3-question reasoning-gym episodes, budget 40, 16 tokens/turn, "
        "2 steps of 2 groups of 2, no tracker.",
    )
    return p


def apply_smoke_defaults(args: argparse.Namespace, argv: list[str] | None = None) -> argparse.Namespace:
    """Fill the ``--smoke`` settings for every option not given on the command line ``argv``
    (when ``argv`` is ``None``: every option still at its default)."""
    if not args.smoke:
        return args
    defaults = build_parser().parse_args([])
    given = set()
    for token in argv or []:
        if token.startswith("--"):
            given.add(token[2:].split("=", 1)[0])
    # total_budget 40 over 3 questions: members overspend differently (cost penalty) and run dry
    # after 2 turns, so rewards differ within a group and the gradient is not zero. (The logged loss is
    # 0.0: on-policy, equal-length episodes, advantages summing to 0 per group; grad_norm shows the update.)
    smoke = dict(
        model="tiny",
        num_episodes=2,
        num_generations=2,
        per_device_train_batch_size=4,
        max_steps=2,
        max_episode_tokens=2048,
        report_to="none",
        learning_rate=1e-4,
        backend="transformers",
        total_budget=40,
    )
    for key, value in smoke.items():
        user_set = key in given if argv is not None else getattr(args, key) != getattr(defaults, key)
        if not user_set:
            setattr(args, key, value)
    return args


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    """Parse the command line (``sys.argv[1:]`` by default) and apply the ``--smoke`` settings."""
    argv = list(sys.argv[1:] if argv is None else argv)
    args = apply_smoke_defaults(build_parser().parse_args(argv), argv)
    args.argv = argv  # the command line as given (run.json's "command", also when main() is called from Python)
    return args


def load_env_config(path: str | None, smoke: bool = False, *, keep_sources: bool = False):
    """The :class:`EnvConfig` (``--config`` YAML, or the project default) with the ``--smoke``
    overrides (``keep_sources``: all but its sources, for an ``--eval_config`` whose point is its own questions).
    Raises :class:`reasoning_env.config.ConfigError`."""
    from reasoning_env.config import EnvConfig

    cfg = EnvConfig.from_yaml(path) if path else EnvConfig()
    if smoke:
        cfg = cfg.replace(**{k: v for k, v in SMOKE_ENV.items() if not (keep_sources and k == "sources")})
    return cfg


def config_total_budget(path: str | None) -> int | None:
    """The ``total_budget`` a ``--config`` YAML sets itself, or ``None`` (no file, or the key absent).

    Training names its tokenizer at every reset, and a reset naming a tokenizer takes the tokenizer-native budget
    (``budget_ratio`` x the question tokens) over the config's; a config that writes ``total_budget`` means that
    budget, so it is passed to every reset as the explicit one (``--total_budget`` still overrides it)."""
    if not path:
        return None
    import yaml

    with open(path, encoding="utf-8") as fh:
        raw = yaml.safe_load(fh)
    value = raw.get("total_budget") if isinstance(raw, dict) else None
    return int(value) if value is not None else None


def training_total_budget(args: argparse.Namespace) -> int | None:
    """The budget of every training reset: ``--total_budget``, else the ``--config``'s own
    (:func:`config_total_budget`), else ``None`` (tokenizer-native)."""
    return args.total_budget if args.total_budget is not None else config_total_budget(args.config)


def world_size() -> int:
    """Processes of the run (``WORLD_SIZE``, set by ``torchrun`` / ``accelerate launch``; 1 otherwise)."""
    return int(os.environ.get("WORLD_SIZE", "1"))


def batch_layout(args: argparse.Namespace, processes: int = 1) -> tuple[int, int, int]:
    """``(per_device_train_batch_size, gradient_accumulation_steps, groups_per_step)`` for ``args``.

    One generation batch is one optimizer step (TRL's ``steps_per_generation`` = the accumulation steps), so a
    step holds ``per_device x processes x accumulation / G`` groups. ``--groups_per_step`` (default
    :data:`DEFAULT_GROUPS_PER_STEP` when ``--per_device_train_batch_size`` is not given) fixes that number: the
    per-device batch defaults to the whole step's share and the accumulation makes up the rest. With
    ``--per_device_train_batch_size`` alone the step holds what it and ``--gradient_accumulation_steps`` give,
    as before.

    Raises:
        TrainSetupError: the numbers do not divide, or contradict each other (the message names the fix).
    """
    g = int(args.num_generations)
    per_device, accumulation = args.per_device_train_batch_size, args.gradient_accumulation_steps
    groups = args.groups_per_step
    if groups is None and per_device is None:
        groups = DEFAULT_GROUPS_PER_STEP
    if groups is not None and groups < 1:
        raise TrainSetupError(f"--groups_per_step must be >= 1, got {groups}")
    if groups is None:
        accumulation = accumulation or 1
        rows = per_device * processes * accumulation
        if rows % g:
            raise TrainSetupError(
                f"a step of {per_device} x {processes} processes x {accumulation} accumulation = {rows} rollouts is "
                f"not whole groups of --num_generations {g}; use --groups_per_step instead"
            )
        return per_device, accumulation, rows // g
    rows = groups * g
    if per_device is None:
        accumulation = accumulation or 1
        if rows % (processes * accumulation):
            raise TrainSetupError(
                f"--groups_per_step {groups} x G {g} = {rows} rollouts do not split over {processes} processes x "
                f"{accumulation} accumulation steps; pass --per_device_train_batch_size"
            )
        return rows // (processes * accumulation), accumulation, groups
    if rows % (per_device * processes):
        raise TrainSetupError(
            f"--groups_per_step {groups} x G {g} = {rows} rollouts per step are not a multiple of "
            f"--per_device_train_batch_size {per_device} x {processes} processes"
        )
    needed = rows // (per_device * processes)
    if accumulation is not None and accumulation != needed:
        raise TrainSetupError(
            f"--groups_per_step {groups} with --per_device_train_batch_size {per_device} on {processes} process(es) "
            f"needs --gradient_accumulation_steps {needed}, got {accumulation}; drop one of the three"
        )
    return per_device, needed, groups


def cuda_available() -> bool:
    try:
        import torch

        return bool(torch.cuda.is_available())
    except (ImportError, RuntimeError):  # no torch, or a broken CUDA install
        return False


def resolve_backend(args: argparse.Namespace, policy: Any) -> str:
    """``"vllm"`` or ``"transformers"`` for ``--backend`` (see its help).

    Raises:
        TrainSetupError: ``--backend vllm`` without vLLM or without a CUDA GPU.
    """
    unsloth_engine = bool(getattr(policy, "unsloth", False) and getattr(policy.model, "vllm_engine", None) is not None)
    if args.backend == "vllm_server":
        if getattr(policy, "unsloth", False) or not args.lora_rank:
            raise TrainSetupError(
                "--backend vllm_server hands the LoRA adapter to the server after each step: pass --lora_rank "
                "(e.g. 8) and no --unsloth"
            )
        return "vllm_server"
    if args.backend == "transformers":
        if unsloth_engine:
            raise TrainSetupError("--backend transformers with Unsloth fast_inference: add --no_fast_inference")
        return "transformers"
    has_vllm = importlib.util.find_spec("vllm") is not None
    if args.backend == "vllm":
        if args.vllm_mode == "server" and has_vllm:
            return "vllm"
        if not (has_vllm and cuda_available()):
            raise TrainSetupError("--backend vllm requires a CUDA GPU; install requirements-gpu.txt")
        return "vllm"
    if unsloth_engine or (has_vllm and cuda_available()):
        return "vllm"
    return "transformers"


def _grpo_config(args: argparse.Namespace, backend: str, env_cfg: Any, *, unsloth: bool = False):
    """TRL's ``GRPOConfig`` for ``args``. ``unsloth``: the model was loaded by Unsloth, which applied its own
    gradient checkpointing (``get_peft_model(use_gradient_checkpointing="unsloth")``), so TRL's is left off."""
    from trl import GRPOConfig

    per_device, accumulation, _ = batch_layout(args, world_size())
    bf16 = {"true": True, "false": False}.get(args.bf16)
    if bf16 is None:
        bf16 = False
        if cuda_available():
            import torch

            bf16 = bool(torch.cuda.is_bf16_supported())
    report_to = [r.strip() for r in str(args.report_to).split(",") if r.strip()]
    if report_to == ["none"]:
        report_to = []
    values = dict(
        output_dir=args.output_dir,
        run_name=args.run_name or Path(args.output_dir).name,
        seed=args.seed,
        learning_rate=args.learning_rate,
        num_train_epochs=args.num_train_epochs,
        max_steps=args.max_steps,
        per_device_train_batch_size=per_device,
        gradient_accumulation_steps=accumulation,
        num_generations=args.num_generations,
        # One "completion" is a whole episode: Dr.GRPO's normaliser and vLLM's context use this.
        max_completion_length=args.max_episode_tokens,
        temperature=args.temperature,
        top_p=args.top_p,
        top_k=args.top_k,  # TRL and vLLM: 0 = off; vLLM's SamplingParams rejects None
        beta=args.beta,
        loss_type=args.loss_type,
        scale_rewards=args.scale_rewards,
        mask_truncated_completions=False,
        vllm_importance_sampling_correction=True,
        vllm_importance_sampling_mode=args.vllm_importance_sampling_mode,
        vllm_importance_sampling_clip_max=args.vllm_importance_sampling_cap,
        reward_weights=[1.0, args.group_reward_weight] if args.group_reward else None,
        logging_steps=args.logging_steps,
        save_strategy="steps" if args.save_steps else "no",
        save_steps=args.save_steps or 500,
        save_total_limit=args.save_total_limit or None,
        report_to=report_to,
        project=args.project,
        bf16=bf16,
        gradient_checkpointing=bool(args.gradient_checkpointing) and not unsloth,
        remove_unused_columns=False,
        log_completions=False,
        use_vllm=backend == "vllm",
        vllm_mode=args.vllm_mode,
        vllm_server_base_url=args.vllm_server_base_url,
        vllm_gpu_memory_utilization=args.vllm_gpu_memory_utilization,
        vllm_max_model_length=args.max_episode_tokens,
    )
    if bf16 and not cuda_available():
        # bf16 on a CPU (AVX512-BF16 / AMX: 17x the float32 matmul speed on this machine): transformers refuses it
        # ("Your setup doesn't support bf16/gpu") unless the run is declared a CPU run
        values.update(use_cpu=True)
    if int(os.environ.get("WORLD_SIZE", "1")) > 1 and not cuda_available():
        # several CPU processes (torchrun without a GPU): accelerate joins them (MULTI_CPU, gloo) only with use_cpu
        values.update(use_cpu=True, ddp_backend="gloo")
    try:
        known = {f.name for f in dataclasses.fields(GRPOConfig)}
    except TypeError:  # a patched config class that is not a dataclass (e.g. Unsloth's)
        import inspect

        known = set(inspect.signature(GRPOConfig.__init__).parameters)
    dropped = sorted(k for k in values if k not in known)
    if dropped:
        logger.warning("this TRL version's GRPOConfig has no %s; ignored", dropped)
    return GRPOConfig(**{k: v for k, v in values.items() if k in known})


@dataclasses.dataclass
class TrainingSetup:
    """What :func:`build_trainer` made: the trainer, the rollout function, the run writer, the
    environment config and the resolved settings."""

    trainer: Any
    rollout: Any
    writer: Any
    env_config: Any
    policy: Any
    backend: str
    output_dir: Path
    server: Any = None  # --backend vllm_server: the ModelServer started for the run (stopped by main)
    handoff: Any = None  # --backend vllm_server: the LoraHandoff (its stats: adapters loaded, seconds)
    resume_from: str | None = None  # the checkpoint folder a resumed run continues from
    evaluator: Any = None  # --eval_every: the HeldOutEvaluator (main runs it alone under --eval_only)


def step0_fingerprint(meta: dict, config: dict) -> dict:
    """What a step-0 held-out evaluation depends on (``run.json`` fields): a later start may keep an
    ``--eval_only`` evaluation only while these are equal. The LoRA settings are not among them: a fresh
    adapter's B matrices are zero, so step 0 plays the base weights."""
    keys = (
        "model",
        "tokenizer_name",
        "eval_seeds",
        "eval_temperature",
        "curves",
        "episode_format",
        "turn_cap",
        "max_episode_tokens",
        "reasoning_mode",
        "thinking",
    )
    return {**{k: meta.get(k) for k in keys}, "config": config}


def reusable_step0(out: Path, fingerprint: dict) -> dict | None:
    """The ``step0_evaluation`` record of an ``--eval_only`` start in ``out`` whose evaluation a new start
    may keep: ``run.json`` records one with an equal fingerprint and ``evaluations.jsonl`` holds step 0 only."""
    from training.evaluation import _steps_in

    run_json = out / "run.json"
    if not run_json.is_file() or _steps_in(out / "evaluations.jsonl") != {0}:
        return None
    try:
        record = json.loads(run_json.read_text(encoding="utf-8")).get("step0_evaluation") or {}
    except ValueError:
        return None
    if record.get("fingerprint") != json.loads(json.dumps(fingerprint, default=str)):
        return None
    return record


def latest_checkpoint(out: Path) -> tuple[Path, int] | None:
    """The newest complete ``checkpoint-N`` folder of a run folder (one holding ``trainer_state.json``) and N."""
    found = []
    for d in out.glob("checkpoint-*"):
        tail = d.name.split("-", 1)[1]
        if d.is_dir() and tail.isdigit() and (d / "trainer_state.json").is_file():
            found.append((int(tail), d))
    if not found:
        return None
    step, path = max(found)
    return path, step


def build_trainer(args: argparse.Namespace, *, policy: Any = None, env_config: Any = None) -> TrainingSetup:
    """Build the ``GRPOTrainer`` for parsed ``args`` (see :func:`build_parser`).

    Args:
        args: Parsed options (:func:`parse_args`).
        policy: A pre-loaded :class:`~training.models.LoadedPolicy` (tests, notebooks); default:
            loaded from ``--model``.
        env_config: An :class:`EnvConfig` to use instead of ``--config`` (notebooks).
    Raises:
        TrainSetupError / ModelLoadError / ConfigError / ImportError: bad options, missing
            model, GPU or packages (messages say what to fix).
    """
    from reasoning_env.conversation import ChatFormat
    from training.envs import InProcessEnvFactory, RemoteEnvFactory
    from training.models import eos_token_ids, load_policy
    from training.rollout import RolloutLimits
    from training.run_folder import TrainingRunWriter, code_revision, make_metrics_callback
    from training.trainer import episode_trainer_class
    from training.trl_rollout import GRPORollout, build_episode_dataset, environment_reward, group_reward_function

    os.environ.setdefault("TRL_EXPERIMENTAL_SILENCE", "1")  # rollout_func is experimental in TRL; we know
    if not args.model and policy is None:
        raise TrainSetupError("--model is required (a Hub id, a local folder, or 'tiny'; or use --smoke)")
    if args.num_generations < 2:
        raise TrainSetupError("--num_generations must be >= 2 (GRPO compares rollouts within a group)")
    if args.mask_truncated_completions:
        raise TrainSetupError(MASK_TRUNCATED_MESSAGE)
    if args.vllm_importance_sampling_cap <= 1.0:
        raise TrainSetupError(
            f"--vllm_importance_sampling_cap must be > 1 (a ratio bound), got {args.vllm_importance_sampling_cap}"
        )
    if args.history_thinking == "strip":
        raise TrainSetupError(
            "--history_thinking strip cannot be trained: an episode is ONE token sequence (TRL's rollout_func returns "
            "one row per episode), and each token must be scored in the context it was sampled in, so earlier <think> "
            "blocks cannot leave the history; train with keep (evaluate with keep too; strip is an evaluation option)"
        )
    if args.eval_every < 0:
        raise TrainSetupError(f"--eval_every must be >= 0 (0 = no held-out evaluation), got {args.eval_every}")
    if args.eval_only and not args.eval_every:
        raise TrainSetupError("--eval_only plays the step-0 held-out evaluation: give --eval_every N (N >= 1) too")
    if args.eval_every and args.eval_seeds < 1:
        raise TrainSetupError(f"--eval_seeds must be >= 1 with --eval_every, got {args.eval_seeds}")
    curves = None
    if args.curves:
        from reasoning_env.policies.curves import load_curves

        try:
            curves = load_curves(args.curves)
        except (OSError, ValueError, KeyError, TypeError) as exc:
            raise TrainSetupError(f"--curves {args.curves!r} cannot be read as a curves.json: {exc}") from None
    group_reward = None
    if args.group_reward:
        try:
            group_reward_function(args.group_reward)  # validates the spec before anything is loaded
        except ValueError as exc:
            raise TrainSetupError(f"--group_reward {args.group_reward!r}: {exc}") from None
    per_device, accumulation, groups_per_step = batch_layout(args, world_size())
    if args.num_episodes < groups_per_step:
        raise TrainSetupError(
            f"--num_episodes {args.num_episodes} is fewer than the {groups_per_step} GRPO groups of one step: TRL "
            "would train no step. Raise --num_episodes or lower --groups_per_step"
        )
    dynamic = resolve_dynamic_sampling(args, per_device * accumulation)
    if args.advantage == "question":
        if args.group_reward:
            raise TrainSetupError(
                "--advantage question credits each answer with the environment's step rewards; a --group_reward "
                "would be left out of the advantages. Drop one of the two"
            )
        if (per_device * accumulation) % args.num_generations:
            raise TrainSetupError(
                "--advantage question needs every GRPO group on one process: make --per_device_train_batch_size x "
                f"--gradient_accumulation_steps a multiple of --num_generations {args.num_generations}"
            )
    if groups_per_step == 1 and args.scale_rewards in ("batch", "group"):
        logger.warning(
            "one GRPO group per optimizer step with --scale_rewards %s divides each advantage by that one group's "
            "reward std, so a tie-breaking cost gap of 0.001 becomes a +-1 advantage (the first CPU run's steps). "
            "Fix: --groups_per_step %d (or more), or --scale_rewards none",
            args.scale_rewards,
            DEFAULT_GROUPS_PER_STEP,
        )
    env_cfg = env_config if env_config is not None else load_env_config(args.config, smoke=args.smoke)
    explicit_budget = args.total_budget
    if env_config is None:
        args.total_budget = training_total_budget(args)
    eval_cfg = None
    if args.eval_every and args.eval_config:
        eval_cfg = load_env_config(args.eval_config, smoke=args.smoke, keep_sources=True)
    if args.output_dir is None:
        args.output_dir = str(Path("runs") / time.strftime("grpo-%Y%m%d-%H%M%S"))
    out = Path(args.output_dir)
    out.mkdir(parents=True, exist_ok=True)

    if policy is None:
        policy = load_policy(
            args.model,
            lora_rank=args.lora_rank,
            seed=args.seed,
            dtype=args.dtype,
            unsloth=args.unsloth,
            max_seq_length=args.max_episode_tokens,
            load_in_4bit=args.load_in_4bit,
            fast_inference=not args.no_fast_inference,
            gpu_memory_utilization=args.vllm_gpu_memory_utilization,
            gradient_checkpointing=args.gradient_checkpointing,
        )
    backend = resolve_backend(args, policy)
    tokenizer_name = args.tokenizer_name or policy.tokenizer_name
    chat = ChatFormat(policy.tokenizer, reasoning_mode=args.reasoning_mode)
    limits = RolloutLimits(
        max_episode_tokens=args.max_episode_tokens,
        tokenizer_name=tokenizer_name,
        total_budget=args.total_budget,
        turn_cap=TurnCap(args.turn_cap, factor=args.turn_factor),
    )
    env_factory = RemoteEnvFactory(args.env_base_url, env_cfg) if args.env_base_url else InProcessEnvFactory(env_cfg)
    given = getattr(args, "argv", None)
    meta = {
        "run_id": out.name,
        **({"command": "python -m training.grpo_train " + shlex.join(given)} if given else {}),
        "code": code_revision(),
        "seed": args.seed,
        "policies": ["grpo"],
        "model": policy.name,
        "tokenizer_name": tokenizer_name,
        "backend": backend,
        "unsloth": bool(policy.unsloth),
        "reasoning_mode": args.reasoning_mode,
        "turn_cap": limits.turn_cap.describe(),
        "thinking": chat.thinking,
        "env_base_url": args.env_base_url,
        "num_generations": args.num_generations,
        "num_episode_seeds": args.num_episodes,
        "max_episode_tokens": args.max_episode_tokens,
        "learning_rate": args.learning_rate,
        "lora_rank": args.lora_rank or (32 if policy.unsloth else 0),
        "beta": args.beta,
        "loss_type": args.loss_type,
        "scale_rewards": args.scale_rewards,
        "groups_per_step": groups_per_step,
        "dynamic_sampling": {"max_resample_rounds": args.max_resample_rounds} if dynamic else False,
        "advantage": args.advantage,
        "vllm_importance_sampling_mode": args.vllm_importance_sampling_mode
        if backend in ("vllm", "vllm_server")
        else None,
        "vllm_importance_sampling_cap": args.vllm_importance_sampling_cap
        if backend in ("vllm", "vllm_server")
        else None,
        "group_reward": args.group_reward,
        "group_reward_weight": args.group_reward_weight if args.group_reward else None,
        "temperature": args.temperature,
        "top_p": args.top_p,
        "top_k": args.top_k,
        "episode_format": episode_format(chat, args.history_thinking),
        "eval_every": args.eval_every,
        "gradient_checkpointing": ("unsloth" if policy.unsloth else True) if args.gradient_checkpointing else False,
        "vllm_gpu_memory_utilization": args.vllm_gpu_memory_utilization if backend == "vllm" else None,
    }
    resume = None if args.fresh else latest_checkpoint(out)
    if resume is None:
        for stale in [
            *out.glob("episodes*.jsonl"),
            *out.glob("trajectories*.jsonl"),
            out / "metrics.jsonl",
            out / "group_rewards.jsonl",
            *(out.glob("checkpoint-*") if args.fresh else []),
        ]:
            if stale.is_dir():
                shutil.rmtree(stale)
            elif stale.exists():
                stale.unlink()
    if args.group_reward:
        group_reward = group_reward_function(args.group_reward, log_path=out / "group_rewards.jsonl")
    writer = TrainingRunWriter(out, config=env_cfg, meta=meta)
    if resume is not None:
        kept = writer.resume(resume[1])
        logger.info("resuming %s from %s (kept %s)", out, resume[0].name, kept)
    server, server_backend = None, None
    if backend == "vllm_server":
        server, server_backend = _rollout_server(args, policy, out)
        writer.meta["rollout_server"] = (
            server.describe() if server is not None else {"base_url": args.rollout_server_url}
        )
    rollout = GRPORollout(
        env_factory,
        chat,
        limits,
        eos_token_ids(policy.tokenizer, policy.model),
        writer=writer,
        run_id=out.name,
        pad_token_id=policy.tokenizer.pad_token_id,
        backend_factory=(lambda trainer: server_backend) if server_backend is not None else None,
        dynamic_sampling=dynamic,
        max_resample_rounds=args.max_resample_rounds,
        base_seed=args.seed,
        advantage=args.advantage,
    )

    config = _grpo_config(args, backend, env_cfg, unsloth=bool(policy.unsloth))
    dataset = build_episode_dataset(args.num_episodes, base_seed=args.seed)
    from training.trainer import make_step_timer_callback

    step_timer = make_step_timer_callback()
    callbacks = [step_timer, make_metrics_callback(out / "metrics.jsonl", on_save=writer.write)]
    eval_callback = None
    if args.eval_every:
        from reasoning_env.policies import SolverCurves
        from training.evaluation import HeldOutEvaluator, held_out_seeds, make_evaluation_callback

        seeds = held_out_seeds(args.eval_seeds, dataset["seed"])
        rollout.exclude_seeds = set(seeds)  # dynamic sampling's replacement episodes never play a held-out seed
        curves = curves or SolverCurves()
        writer.meta.update(eval_seeds=seeds, eval_temperature=args.eval_temperature, curves=curves.source)
        if eval_cfg is not None:
            writer.meta.update(eval_config=args.eval_config, eval_env_config=eval_cfg.to_dict())
        fingerprint = json.loads(
            json.dumps(step0_fingerprint(writer.meta, (eval_cfg or env_cfg).to_dict()), default=str)
        )
        kept0 = None if (resume is not None or args.eval_only) else reusable_step0(out, fingerprint)
        for stale in ("evaluations.jsonl", "eval_episodes.jsonl"):
            if (out / stale).exists() and resume is None and kept0 is None:
                (out / stale).unlink()
        if kept0 is not None:
            logger.info("keeping the step-0 held-out evaluation of %s (--eval_only at %s)", out, kept0.get("at"))
            writer.meta["step0_evaluation"] = {**kept0, "kept_by": writer.meta.get("command")}
        elif args.eval_only:
            writer.meta["step0_evaluation"] = {
                "eval_only": True,
                "at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
                "command": writer.meta.get("command"),
                "fingerprint": fingerprint,
            }
        elif resume is not None:
            prior = _prior_run_json(out).get("step0_evaluation")
            if prior:
                writer.meta["step0_evaluation"] = prior
        eval_factory = eval_limits = None
        if eval_cfg is not None:
            eval_factory = (
                RemoteEnvFactory(args.env_base_url, eval_cfg) if args.env_base_url else InProcessEnvFactory(eval_cfg)
            )
            eval_budget = explicit_budget if explicit_budget is not None else config_total_budget(args.eval_config)
            eval_limits = dataclasses.replace(limits, total_budget=eval_budget)
        evaluator = HeldOutEvaluator(
            rollout,
            seeds,
            out,
            curves=curves,
            config=eval_cfg or env_cfg,
            temperature=args.eval_temperature,
            tokenizer_name=tokenizer_name,
            env_factory=eval_factory,
            limits=eval_limits,
        )
        eval_callback = make_evaluation_callback(evaluator, args.eval_every)
        callbacks.append(eval_callback)
    trainer = episode_trainer_class()(
        model=policy.model,
        reward_funcs=[environment_reward] + ([group_reward] if group_reward is not None else []),
        args=config,
        train_dataset=dataset,
        processing_class=policy.tokenizer,
        peft_config=None if policy.unsloth else policy.peft_config,
        rollout_func=rollout,
        callbacks=callbacks,
    )
    step_timer.trainer = trainer
    if eval_callback is not None:
        eval_callback.trainer = trainer
    handoff = None
    if server_backend is not None:
        from training.vllm_server_backend import attach

        merged_base = None
        if args.weight_handoff == "merged":
            from reasoning_env.offline_model import resolve_model

            merged_base = resolve_model(args.model).ref
        handoff = attach(trainer, server_backend, out / "lora-handoff", merged_weights_base=merged_base)
    if resume is not None:  # group ids continue where the stopped process left them
        rollout.groups_done = resume[1] * (trainer.args.generation_batch_size // args.num_generations)
    return TrainingSetup(
        trainer,
        rollout,
        writer,
        env_cfg,
        policy,
        backend,
        out,
        server,
        handoff,
        str(resume[0]) if resume else None,
        evaluator=evaluator if args.eval_every else None,
    )


def _prior_run_json(out: Path) -> dict:
    """``run.json`` as an earlier process of this run folder wrote it (``{}`` when absent or unreadable)."""
    try:
        return json.loads((out / "run.json").read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}


def resolve_dynamic_sampling(args: argparse.Namespace, local_rows: int) -> bool:
    """Whether dynamic sampling is on for ``--dynamic_sampling`` (see its help).

    Args:
        local_rows: Rollouts of one process's generation batch (per-device batch x accumulation steps).
    Raises:
        TrainSetupError: ``on`` with ``--group_reward`` or with a group split across processes, or a negative
            ``--max_resample_rounds``.
    """
    if args.max_resample_rounds < 0:
        raise TrainSetupError(f"--max_resample_rounds must be >= 0, got {args.max_resample_rounds}")
    split = local_rows % args.num_generations != 0
    if args.dynamic_sampling == "off":
        return False
    if args.dynamic_sampling == "on":
        if args.group_reward:
            raise TrainSetupError(
                "--dynamic_sampling on judges a group by the environment's reward, and would drop groups a "
                "--group_reward still tells apart. Use --dynamic_sampling off with --group_reward"
            )
        if split:
            raise TrainSetupError(
                "--dynamic_sampling on needs every GRPO group on one process: make --per_device_train_batch_size x "
                f"--gradient_accumulation_steps a multiple of --num_generations {args.num_generations}"
            )
        return True
    if args.group_reward or split:
        logger.info(
            "dynamic sampling off: %s",
            "--group_reward is set" if args.group_reward else "a GRPO group spans two processes",
        )
        return False
    return True


def _rollout_server(args: argparse.Namespace, policy: Any, out: Path) -> tuple[Any, Any]:
    """``--backend vllm_server``: the server (started here unless --rollout_server_url names one) and the
    rollout backend that talks to it."""
    from training.generation import SamplingConfig
    from training.models import eos_token_ids
    from training.vllm_server_backend import VLLMServerBackend, serve_for_training

    server = None
    url, served = args.rollout_server_url, args.model
    if url is None:
        server = serve_for_training(
            args.model,
            max_lora_rank=max(8, int(args.lora_rank)),
            log_path=out / "vllm.log",
            merged_weights=args.weight_handoff == "merged",
        )
        url, served = server.base_url, server.served_name
    sampling = SamplingConfig(
        temperature=args.temperature,
        top_p=args.top_p,
        top_k=args.top_k or None,
        repetition_penalty=getattr(args, "repetition_penalty", 1.0) or 1.0,
    )
    backend = VLLMServerBackend(url, served, eos_token_ids(policy.tokenizer, policy.model), sampling, seed=args.seed)
    return server, backend


def episode_format(chat: Any, history_thinking: str = "keep") -> dict:
    """The episode format a run trains in (``run.json`` and ``<model>/episode_format.json``, which
    ``reasoning_env.policies.TransformersPolicy`` reads so the model is evaluated the same way)."""
    return {
        "format": "multi_turn",
        "history_thinking": history_thinking,
        "reasoning_mode": chat.reasoning_mode,
        "thinking": chat.thinking,
        "system_prompt": chat.system_prompt,
        "history_len": chat.history_len,
    }


def save_final(setup: TrainingSetup, folder: Path) -> None:
    """Save the weights (a LoRA adapter when LoRA is on), the tokenizer and ``episode_format.json``."""
    from reasoning_env.policies.llm import EPISODE_FORMAT_FILE

    setup.trainer.save_model(str(folder))
    if setup.trainer.is_world_process_zero():
        setup.policy.tokenizer.save_pretrained(str(folder))
        (folder / EPISODE_FORMAT_FILE).write_text(json.dumps(setup.writer.meta["episode_format"], indent=2) + "\n")


def main(argv: list[str] | None = None) -> int:
    """Entry point; returns the exit status (2 on a setup error, with the reason on stderr)."""
    args = parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(levelname)s %(name)s: %(message)s")
    os.environ.setdefault("TRL_EXPERIMENTAL_SILENCE", "1")
    if args.unsloth:
        # Unsloth patches TRL/transformers on import: it must come first.
        from training.models import ModelLoadError, require_cuda

        try:
            require_cuda("--unsloth")
            import unsloth  # noqa: F401
        except (ModelLoadError, ImportError) as exc:
            reason = (
                str(exc)
                if isinstance(exc, ModelLoadError)
                else f"--unsloth needs the unsloth package: install requirements-gpu.txt ({exc})"
            )
            print(f"error: {reason}", file=sys.stderr)
            return 2
    t0 = time.time()
    try:
        setup = build_trainer(args)
    except (ReasoningEconomicsError, ImportError, FileNotFoundError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    print(
        f"training: backend={setup.backend} output_dir={setup.output_dir} "
        f"groups/step={setup.trainer.args.generation_batch_size // args.num_generations}",
        flush=True,
    )
    if args.eval_only:
        try:
            setup.evaluator.run(setup.trainer, 0)
        finally:
            if setup.server is not None:
                setup.server.stop()
        if setup.trainer.is_world_process_zero():
            setup.writer.meta["train_seconds"] = 0.0
            setup.writer.write()
        print(
            json.dumps(
                {"output_dir": str(setup.output_dir), "evaluated_step": 0, "seconds": round(time.time() - t0, 2)}
            )
        )
        return 0
    if setup.resume_from:
        print(f"training: resuming from {setup.resume_from}", flush=True)
    try:
        setup.trainer.train(resume_from_checkpoint=setup.resume_from)
    finally:
        if setup.server is not None:
            setup.server.stop()
    if setup.handoff is not None:
        setup.writer.meta["weight_handoff"] = {
            "adapters": setup.handoff.stats.count,
            "seconds": round(setup.handoff.stats.seconds, 2),
        }
    if setup.trainer.is_world_process_zero():
        setup.writer.meta["train_seconds"] = round(time.time() - t0, 2)
        setup.writer.write()
    # final weights (a LoRA adapter when LoRA is on: merge it with `python -m training.export`)
    save_final(setup, setup.output_dir / "final")
    summary = {
        "output_dir": str(setup.output_dir),
        "episodes": len(setup.writer.episodes),
        "seconds": round(time.time() - t0, 2),
        "generate_calls": setup.rollout.backend.stats.calls if setup.rollout.backend else 0,
    }
    print(json.dumps(summary))
    return 0


if __name__ == "__main__":
    sys.exit(main())
