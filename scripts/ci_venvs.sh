#!/usr/bin/env bash
# Builds the extra virtual environments CI tests in (reused while the requirement files are unchanged):
#   $REE_CI_VENVS/app       only requirements.txt: what the Space installs (tests/test_app_requirements.py
#                           starts app.py in it and checks torch is not there)
#   $REE_CI_VENVS/gpu-pins  the pure-Python packages requirements-gpu.txt pins (TRL 1.15, transformers 5.17,
#                           accelerate, PEFT, datasets 4.8, ...) with CPU torch 2.13.0; vLLM, Unsloth, xformers and
#                           bitsandbytes (CUDA builds) are left out. tests/test_gpu_pins.py runs the training tests in it.
#   $REE_CI_VENVS/atropos   requirements.txt + requirements-atropos.txt (atroposlib 0.4.0, no torch): what a user of the
#                           Atropos adapter installs; tests/test_atropos_env.py runs run-api and the environment in it.
#   $REE_CI_VENVS/verifiers requirements-verifiers.txt (verifiers 0.4.0) beside the core's pins, openenv without its
#                           conflicting MCP pin (see that file); tests/test_verifiers_adapter.py runs vf-eval in it.
# Needs only the package index. Prints the paths (and, on stderr, each venv it builds or waits for); safe to run twice
# at once (scripts/locked_build.sh). `--where` prints the paths only. `setup.sh --test` runs it; the tests find
# the venvs in the same folder (tests/ci_venvs.py).
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/locked_build.sh
# REE_CI_VENVS, else ci-venvs under the project's cache (REE_CACHE_DIR, default ~/.cache/reasoning_env)
ROOT="${REE_CI_VENVS:-${REE_CACHE_DIR:-${XDG_CACHE_HOME:-$HOME/.cache}/reasoning_env}/ci-venvs}"
if [ "${1:-}" = "--where" ]; then  # print where the venvs are, build nothing
  shift
  for name in ${*:-app gpu_pins atropos verifiers}; do echo "REE_$(echo "$name" | tr '[:lower:]' '[:upper:]')_VENV=$ROOT/$name"; done
  exit 0
fi
mkdir -p "$ROOT"
PIP=(-m pip install -q --disable-pip-version-check --no-compile)
quiet_pip() {  # pip, without this machine's warnings about index folders that do not exist
  "$@" 2> >(grep -v "is ignored: it is neither a file nor a directory" >&2)
}

build() {  # build NAME STAMP-INPUTS... ; then the install commands come from install_NAME
  local name="$1"; shift
  local stamp; stamp="$(cat "$@" | sha256sum | cut -c1-16)"
  locked_build "ci venv $name" "$ROOT/$name" "$stamp" new_venv "$name" >/dev/null
}

new_venv() {  # the venv NAME, made and installed (locked_build runs it holding the lock)
  python3 -m venv "$ROOT/$1"
  "install_$1" "$ROOT/$1/bin/python"
}

install_app() {
  quiet_pip "$1" "${PIP[@]}" -r requirements.txt
}

install_gpu_pins() {
  local reqs="$ROOT/gpu-pins-cpu.txt"
  grep -vE '^(vllm|unsloth|unsloth_zoo|xformers|bitsandbytes)==|^-e ' requirements-gpu.txt > "$reqs"
  quiet_pip "$1" "${PIP[@]}" -r "$reqs" $(grep -E '^(pytest|pytest-timeout|hypothesis)==' requirements-test.txt) \
    $(grep -E '^scipy==' requirements.txt)
  quiet_pip "$1" "${PIP[@]}" --no-deps -e .
}

install_atropos() {
  quiet_pip "$1" "${PIP[@]}" -r requirements.txt -r requirements-atropos.txt
}

install_verifiers() {
  local core="$ROOT/verifiers-core.txt"
  grep -vE '^(openenv|gradio|gradio_client)==|^-e ' requirements.txt > "$core"
  quiet_pip "$1" "${PIP[@]}" -r requirements-verifiers.txt -r "$core"
  quiet_pip "$1" "${PIP[@]}" --no-deps "$(grep -E '^openenv==' requirements.txt)" -e .
}

# the builds run side by side (pip mostly waits on unpacking); a failing one fails the script.
# `bash scripts/ci_venvs.sh atropos` builds (or reuses) only the venvs named.
NAMES="${*:-app gpu_pins atropos verifiers}"
pids=()
for name in $NAMES; do
  case "$name" in
    app) build app requirements.txt pyproject.toml & ;;
    gpu_pins) build gpu_pins requirements-gpu.txt requirements-test.txt pyproject.toml & ;;
    atropos) build atropos requirements.txt requirements-atropos.txt pyproject.toml & ;;
    verifiers) build verifiers requirements-verifiers.txt requirements.txt pyproject.toml & ;;
    *) echo "unknown venv '$name': the venvs are app, gpu_pins, atropos and verifiers" >&2; exit 2 ;;
  esac
  pids+=("$!")
done
for pid in "${pids[@]}"; do wait "$pid"; done
for name in $NAMES; do echo "REE_$(echo "$name" | tr '[:lower:]' '[:upper:]')_VENV=$ROOT/$name"; done
