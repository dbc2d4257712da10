"""Export a trained policy as a plain Hugging Face checkpoint (LoRA adapters merged).

    python -m training.export --checkpoint runs/grpo-qwen05/final --output runs/grpo-qwen05/merged
    python -m training.export --checkpoint runs/x/final --base_model Qwen/Qwen2.5-0.5B-Instruct --output merged/

``--checkpoint`` is what ``training.grpo_train`` saved (``<output_dir>/final`` or a
``checkpoint-N`` folder). A LoRA adapter (``adapter_config.json``) is loaded onto its base model
(``base_model_name_or_path`` from the adapter config, or ``--base_model``), merged with PEFT's
``merge_and_unload()`` and saved with ``save_pretrained`` together with the tokenizer; a full
checkpoint is re-saved as is (in ``--dtype``). For adapters trained with Unsloth on a 4-bit base,
pass the 16-bit base (``--base_model Qwen/...``) so the merge is not done in 4-bit.

The merged folder loads with ``AutoModelForCausalLM.from_pretrained`` and can be evaluated with
``workbench.evaluate`` (local ``transformers`` policy) or served by vLLM (see
docs/training.md).
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from reasoning_env.errors import ReasoningEconomicsError


class ExportError(ReasoningEconomicsError, RuntimeError):
    """The checkpoint cannot be exported (message says why and how to fix it)."""


def _dtype(name: str):
    import torch

    table = {"auto": "auto", "float32": torch.float32, "bfloat16": torch.bfloat16, "float16": torch.float16}
    if name not in table:
        raise ExportError(f"--dtype must be one of {sorted(table)}, got {name!r}")
    return table[name]


def export_checkpoint(checkpoint: str, output: str, *, base_model: str | None = None, dtype: str = "auto") -> dict:
    """Merge (if needed) and save ``checkpoint`` to ``output``.

    Args:
        checkpoint: Folder with a PEFT adapter or a full model.
        output: Folder to write (created).
        base_model: Base model for an adapter (Hub id or folder); default: the adapter's
            ``base_model_name_or_path``.
        dtype: Weights dtype of the saved model.
    Returns:
        ``{"output", "merged_lora", "base_model", "parameters"}``.
    Raises:
        ExportError: missing folder, missing base model, output equal to the checkpoint.
    """
    from transformers import AutoModelForCausalLM, AutoTokenizer

    ckpt = Path(checkpoint)
    out = Path(output)
    if not ckpt.is_dir():
        raise ExportError(f"checkpoint folder {checkpoint!r} does not exist")
    if out.resolve() == ckpt.resolve():
        raise ExportError("--output must differ from --checkpoint")
    torch_dtype = _dtype(dtype)
    adapter_cfg = ckpt / "adapter_config.json"
    merged = adapter_cfg.is_file()
    if merged:
        from peft import PeftModel

        base = base_model or json.loads(adapter_cfg.read_text()).get("base_model_name_or_path")
        if not base:
            raise ExportError(
                f"{checkpoint!r} is a LoRA adapter without base_model_name_or_path; pass "
                "--base_model (Hub id or folder)"
            )
        try:
            model = AutoModelForCausalLM.from_pretrained(base, dtype=torch_dtype)
        except Exception as exc:  # noqa: BLE001 - a Hugging Face load raises many types (OSError, ValueError, Hub HTTP errors)
            raise ExportError(f"could not load base model {base!r}: {type(exc).__name__}: {str(exc)[:300]}") from None
        model = PeftModel.from_pretrained(model, str(ckpt)).merge_and_unload()
    else:
        if not (ckpt / "config.json").is_file():
            raise ExportError(f"{checkpoint!r} holds neither adapter_config.json nor config.json")
        base = None
        model = AutoModelForCausalLM.from_pretrained(str(ckpt), dtype=torch_dtype)
    out.mkdir(parents=True, exist_ok=True)
    model.save_pretrained(str(out))
    tok_src = (
        ckpt if (ckpt / "tokenizer_config.json").is_file() else (Path(base) if base and Path(base).is_dir() else base)
    )
    if tok_src is not None:
        try:
            AutoTokenizer.from_pretrained(str(tok_src)).save_pretrained(str(out))
        except Exception as exc:  # noqa: BLE001 - the model is saved; say what is missing
            print(f"warning: tokenizer not copied ({exc}); copy it into {out} before evaluating", file=sys.stderr)
    from reasoning_env.policies.llm import EPISODE_FORMAT_FILE

    if (ckpt / EPISODE_FORMAT_FILE).is_file():  # the format it was trained in: hf_local evaluates in it
        (out / EPISODE_FORMAT_FILE).write_text((ckpt / EPISODE_FORMAT_FILE).read_text())
    return {
        "output": str(out),
        "merged_lora": merged,
        "base_model": base,
        "parameters": sum(p.numel() for p in model.parameters()),
    }


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m training.export", description=__doc__.splitlines()[0])
    p.add_argument("--checkpoint", required=True, help="Adapter or model folder saved by training.grpo_train.")
    p.add_argument("--output", required=True, help="Folder for the merged Hugging Face checkpoint.")
    p.add_argument(
        "--base_model", default=None, help="Base model of a LoRA adapter (default: from adapter_config.json)."
    )
    p.add_argument("--dtype", default="auto", choices=["auto", "float32", "bfloat16", "float16"])
    args = p.parse_args(argv)
    try:
        result = export_checkpoint(args.checkpoint, args.output, base_model=args.base_model, dtype=args.dtype)
    except ExportError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    print(json.dumps(result))
    return 0


if __name__ == "__main__":
    sys.exit(main())
