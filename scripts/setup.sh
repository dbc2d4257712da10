#!/usr/bin/env bash
# One-time set-up of the current Python environment (use a venv). Idempotent.
#   bash scripts/setup.sh          # the app, the core and CPU training (requirements.txt + requirements-train.txt)
#   bash scripts/setup.sh --test   # plus what the tests need (requirements-test.txt, Debian chromium, the
#                                  # extra venvs of scripts/ci_venvs.sh, and the real model with vLLM's
#                                  # CPU engine: scripts/real_model.sh)
# requirements.txt alone is what the Space (app.py) installs. Says what it is doing at each step, and ends with
# what it installed and the next command.
set -euo pipefail
cd "$(dirname "$0")/.."
START=$SECONDS
TEST=0; [ "${1:-}" = "--test" ] && TEST=1
CACHE="${REE_CACHE_DIR:-$HOME/.cache/reasoning_env}"
say() { echo "setup [$((SECONDS - START)) s]: $*"; }
done_list=()

FILES=(requirements.txt requirements-train.txt)
[ "$TEST" = 1 ] && FILES+=(requirements-test.txt)
REQS=(); for f in "${FILES[@]}"; do REQS+=(-r "$f"); done
say "installing ${FILES[*]} into $(python -c 'import sys; print(sys.prefix)') (about 3 minutes the first time, seconds after; pip is quiet meanwhile) ..."
python -m pip install -q --disable-pip-version-check "${REQS[@]}"
done_list+=("Python packages: ${FILES[*]}")
if [ "$TEST" = 1 ]; then
  if ! command -v chromium >/dev/null 2>&1 && [ ! -x /usr/bin/chromium ]; then
    say "installing Debian's chromium for the browser tests ..."
    if command -v apt-get >/dev/null 2>&1; then
      SUDO=""; [ "$(id -u)" -ne 0 ] && SUDO="sudo"
      if $SUDO apt-get update -qq >/dev/null && $SUDO apt-get install -y -qq chromium >/dev/null; then
        done_list+=("chromium (Debian)")
      else
        echo "setup: could not install Debian chromium; the browser test will be skipped" >&2
      fi
    else
      echo "setup: no apt-get; install chromium yourself for the browser test" >&2
    fi
  fi
fi
# The tests' extra environments (the Space's requirements.txt alone; the GPU pins' pure-Python packages
# on CPU torch; the Atropos adapter's atroposlib; verifiers 0.4.0 beside the core), reused while their requirement
# files are unchanged. REE_SKIP_CI_VENVS=1 skips them (the tests that need them then skip with the reason).
if [ "$TEST" = 1 ] && [ "${REE_SKIP_CI_VENVS:-0}" != "1" ]; then
  say "building the tests' four extra venvs (scripts/ci_venvs.sh; several minutes the first time, reused after) ..."
  bash scripts/ci_venvs.sh >/dev/null
  done_list+=("the tests' extra venvs: $(bash scripts/ci_venvs.sh --where app | sed 's/.*=//; s#/app$##')")
fi
# Build the embedded offline tokenizers once (cached under $REE_CACHE_DIR, default ~/.cache/reasoning_env).
say "building the embedded tokenizers (seconds) ..."
python -m reasoning_env prepare
done_list+=("embedded tokenizers in $CACHE/tokenizers")
# The real model offline (embedded:qwen2.5-coder-0.5b) and vLLM's CPU engine in its own venv, reused once built;
# the real-model tests use them. REE_SKIP_REAL_MODEL=1 skips them (those tests then skip with the reason).
if [ "$TEST" = 1 ] && [ "${REE_SKIP_REAL_MODEL:-0}" != "1" ]; then
  say "building the real model and vLLM's CPU venv (scripts/real_model.sh; about 5 minutes the first time, reused after) ..."
  bash scripts/real_model.sh
  done_list+=("the real model (embedded:qwen2.5-coder-0.5b) and vLLM's CPU venv in $CACHE")
fi

echo
echo "setup: done in $((SECONDS - START)) s. Installed:"
for item in "${done_list[@]}"; do echo "  - $item"; done
echo "Next:"
if [ "$TEST" = 1 ]; then
  echo "  python -m pytest                                         # the test suite (see README: how long it takes)"
fi
echo "  python -m workbench.evaluate --n_episodes 20 --seed 42   # the main job: policies on 20 seeded episodes"
echo "  python app.py                                            # the workbench in a browser, http://127.0.0.1:7860/"
