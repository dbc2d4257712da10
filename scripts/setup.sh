#!/usr/bin/env bash
# One-time set-up of the current Python environment (use a venv). Idempotent.
#   bash scripts/setup.sh          # everything the main job needs (CPU)
#   bash scripts/setup.sh --test   # plus what the tests need (Debian chromium for the browser test)
set -euo pipefail
cd "$(dirname "$0")/.."
python -m pip install -q --disable-pip-version-check -r requirements.txt
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
# Build the embedded offline tokenizers once (cached under ~/.cache/reasoning_env).
python -m reasoning_env prepare
