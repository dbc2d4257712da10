"""GRPO training on the Reasoning Economics environment (TRL; Unsloth/vLLM on a GPU).

Modules (one job each):

- :mod:`training.grpo_train`: the command line and :func:`~training.grpo_train.build_trainer`.
- :mod:`training.trl_rollout`: the episode-seed dataset, TRL's ``rollout_func`` and the reward.
- :mod:`training.trl_env`: those three for a user's own ``trl.GRPOTrainer`` script (docs/integrations.md, "TRL").
- :mod:`training.rollout`: playing episodes in lockstep as token ids with ``env_mask``.
- :mod:`training.trainer`: TRL's ``GRPOTrainer`` with the importance-sampling and cap-hit diagnostics.
- :mod:`training.distributed`: gathering the generation batch of every process (group rewards).
- The episode's chat format (first prompt, between-turn text) is :mod:`reasoning_env.conversation`,
  shared with the evaluation policies.
- :mod:`training.generation`: batched, per-sequence-capped generation (transformers, vLLM via TRL).
- :mod:`training.envs`: in-process or remote (OpenEnv server) environment sessions.
- :mod:`training.models`: the tiny CPU model, Hugging Face models, Unsloth loading.
- :mod:`training.run_folder`: the workbench run folder, ``episodes.jsonl`` and ``metrics.jsonl``.
- :mod:`training.export`: merge LoRA adapters into a Hugging Face checkpoint.
- :mod:`training.evaluation`: held-out evaluation while training (``--eval_every``), metrics with intervals.
- :mod:`training.bench.rollout`: lockstep vs one-episode-at-a-time benchmark (with stop-token stragglers).
- :mod:`training.advantage_study`: the measurement behind ``--scale_rewards`` / ``--loss_type`` defaults.
- :mod:`training.gpu_check`: the prepared short GRPO run on a GPU (random Qwen2.5-0.5B-shaped model).

Heavy dependencies (torch, transformers, TRL, Unsloth, vLLM) are imported lazily inside functions.
"""
