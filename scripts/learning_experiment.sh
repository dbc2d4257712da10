#!/usr/bin/env bash
# The pre-registered learning experiment (docs/training.md, "The learning experiment"): GRPO on the real model
# (embedded:qwen2.5-coder-0.5b, built by scripts/real_model.sh) through vLLM's CPU server, 200 optimizer steps on
# examples/training/cpu_allocation.yaml, held-out evaluations of 192 episodes (other questions:
# cpu_allocation_heldout.yaml) at steps 0, 50, 100, 150 and 200. Resumable: run it again and it continues from the
# newest checkpoint in the same folder (each resume is recorded in run.json). Extra arguments are appended
# (the step-0 baseline was measured first with --eval_only). Step 1 ran with micro-batches of 4 episodes and
# gradient checkpointing; from step 2 one episode a micro-batch without it: the same loss, computed faster
# (docs/training.md, "Amendment").
#   bash scripts/learning_experiment.sh                 # into runs/learning-qwen0.5b-allocation
#   REE_RUN_DIR=runs/mine bash scripts/learning_experiment.sh
set -euo pipefail
cd "$(dirname "$0")/.."
export VLLM_CPU_KVCACHE_SPACE="${VLLM_CPU_KVCACHE_SPACE:-2}"  # GiB of KV cache (64 episodes in flight used 1)
exec python -m training.grpo_train --model embedded:qwen2.5-coder-0.5b --backend vllm_server \
  --weight_handoff merged --dtype float32 --bf16 false --lora_rank 8 --learning_rate 1e-4 \
  --config examples/training/cpu_allocation.yaml --eval_config examples/training/cpu_allocation_heldout.yaml \
  --temperature 0.7 --curves qwen2.5-coder-0.5b-curriculum \
  --num_generations 4 --groups_per_step 4 --per_device_train_batch_size 1 --no_gradient_checkpointing \
  --num_episodes 1000 --max_steps 200 --save_steps 1 --save_total_limit 2 --logging_steps 1 \
  --eval_every 50 --eval_seeds 192 --eval_temperature 0 --report_to none --seed 42 \
  --output_dir "${REE_RUN_DIR:-runs/learning-qwen0.5b-allocation}" "$@"
