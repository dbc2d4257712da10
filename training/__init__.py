"""GRPO training on the Reasoning Economics environment (TRL; Unsloth/vLLM on a GPU)."""
