#!/usr/bin/env bash
# Build server/Dockerfile without a container registry or a Docker engine, run it and play an
# episode against it from the host: the check that the image works (docs/server.md gives the
# figures this printed).
#
#   bash scripts/docker_image.sh [--port 18000] [--rebuild-base] [--no-cache] [--keep]
#
# 1. installs podman, mmdebstrap and runc with apt-get when missing (as root);
# 2. builds a Debian bookworm base from Debian packages (python3, python3-venv, ca-certificates)
#    with mmdebstrap and imports it as localhost/ree-base:bookworm (kept; --rebuild-base redoes it);
# 3. builds server/Dockerfile on it (`--build-arg BASE_IMAGE=...`), pip reaching PyPI over the
#    host's network; the host's CA bundle goes in as the build secret `pip_ca` (it never enters
#    the image), for networks that intercept TLS;
# 4. runs the container with its port published on 127.0.0.1 (or, if publishing fails, on the
#    host's network), times `run` -> /health answering, runs the image's HEALTHCHECK once;
# 5. plays one episode from the host with the typed client (reasoning_env.client), reset to done;
# 6. stops the container (SIGTERM; the server exits 0) and prints the image's size, the start
#    time and the load average.
#
# The container runtime is probed first: this sandbox has no CAP_SYS_RESOURCE (podman's default
# rlimits are refused) and mixes cgroup v1 with a cgroup2 hierarchy that crun 1.8 refuses; the
# probe finds the flags that work (explicit --ulimit, runc) and says which, or stops with every
# error it met. Environment: PYTHON (a Python with this project installed, for the client; default
# .venv/bin/python, then python3), IMAGE (default localhost/reasoning-economics-env:debian),
# BASE (default localhost/ree-base:bookworm), DEBIAN_MIRROR (default http://deb.debian.org).
set -euo pipefail

repo=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$repo"

port=18000
rebuild_base=0
no_cache=()
keep=0
while [[ $# -gt 0 ]]; do
  case "$1" in
    --port) port=$2; shift 2 ;;
    --rebuild-base) rebuild_base=1; shift ;;
    --no-cache) no_cache=(--no-cache); shift ;;
    --keep) keep=1; shift ;;
    -h|--help) sed -n '2,26p' "$0"; exit 0 ;;
    *) echo "docker_image.sh: unknown argument '$1' (see --help)" >&2; exit 2 ;;
  esac
done

image=${IMAGE:-localhost/reasoning-economics-env:debian}
base=${BASE:-localhost/ree-base:bookworm}
mirror=${DEBIAN_MIRROR:-http://deb.debian.org}
name=ree-image-check-$$
work=$(mktemp -d /tmp/ree-image.XXXXXX)
NICE=(nice -n 19)

say() { printf '[docker_image] %s\n' "$*"; }
die() { printf '[docker_image] FAILED: %s\n' "$*" >&2; exit 1; }
now() { date +%s.%N; }
secs() { awk -v a="$1" -v b="$2" 'BEGIN { printf "%.1f", b - a }'; }
load() { cut -d' ' -f1-3 /proc/loadavg; }

cleanup() {
  if [[ $keep == 0 ]] && command -v podman >/dev/null && podman container exists "$name" 2>/dev/null; then
    podman rm -f -t 5 "$name" >/dev/null 2>&1 || true
  fi
  rm -rf "$work"
}
trap cleanup EXIT

# ---- 0. the client's Python -------------------------------------------------------------
python=${PYTHON:-}
if [[ -z $python ]]; then
  if [[ -x $repo/.venv/bin/python ]]; then python=$repo/.venv/bin/python; else python=python3; fi
fi
export PYTHONPATH="$repo${PYTHONPATH:+:$PYTHONPATH}"
"$python" -c "import reasoning_env.client" 2>/dev/null \
  || die "'$python' cannot import reasoning_env.client: set PYTHON to a Python with this project installed (bash scripts/setup.sh makes .venv)"

# ---- 1. tools ------------------------------------------------------------------------------
need=()
command -v podman >/dev/null || need+=(podman)
command -v mmdebstrap >/dev/null || need+=(mmdebstrap)
command -v runc >/dev/null || need+=(runc)
if [[ ${#need[@]} -gt 0 ]]; then
  [[ $(id -u) == 0 ]] || die "missing ${need[*]}: install them (apt-get install ${need[*]}) or run this as root"
  say "installing ${need[*]} (apt-get)"
  export DEBIAN_FRONTEND=noninteractive
  "${NICE[@]}" apt-get update -qq >"$work/apt.log" 2>&1 || { tail -5 "$work/apt.log"; die "apt-get update"; }
  "${NICE[@]}" apt-get install -y -qq --no-install-recommends "${need[@]}" >>"$work/apt.log" 2>&1 \
    || { tail -20 "$work/apt.log"; die "apt-get install ${need[*]}"; }
fi
say "$(podman --version), $(mmdebstrap --version), $(runc --version | head -1)"

# ---- 2. the base image from Debian packages -----------------------------------------------
if [[ $rebuild_base == 1 ]] || ! podman image exists "$base"; then
  say "building $base with mmdebstrap from $mirror (load $(load))"
  t0=$(now)
  "${NICE[@]}" mmdebstrap --variant=minbase --include=python3,python3-venv,ca-certificates \
    --dpkgopt='path-exclude=/usr/share/doc/*' --dpkgopt='path-exclude=/usr/share/man/*' \
    --dpkgopt='path-exclude=/usr/share/locale/*' --dpkgopt='path-exclude=/usr/share/info/*' \
    bookworm "$work/base.tar" \
    "deb $mirror/debian bookworm main" "deb $mirror/debian bookworm-updates main" \
    "deb $mirror/debian-security bookworm-security main" >"$work/mmdebstrap.log" 2>&1 \
    || { tail -20 "$work/mmdebstrap.log"; die "mmdebstrap (log above)"; }
  podman import -q --change 'ENV LANG=C.UTF-8' --change 'CMD ["/bin/bash"]' "$work/base.tar" "$base" >/dev/null \
    || die "podman import $work/base.tar"
  rm -f "$work/base.tar"
  say "base built in $(secs "$t0" "$(now)") s"
else
  say "reusing $base (--rebuild-base rebuilds it)"
fi

# ---- 3. which runtime flags work here ------------------------------------------------------
hard_nofile=$(ulimit -Hn)
hard_nproc=$(ulimit -Hu)
[[ $hard_nproc == unlimited || $hard_nproc -gt 32768 ]] && hard_nproc=32768  # podman lowers its own to 32768
ulimits=(--ulimit "nofile=$hard_nofile:$hard_nofile" --ulimit "nproc=$hard_nproc:$hard_nproc")
candidates=(
  ""
  "${ulimits[*]}"
  "--runtime runc ${ulimits[*]}"
  "--runtime runc ${ulimits[*]} --cgroups=disabled"
)
runtime=()
errors=""
found=0
for c in "${candidates[@]}"; do
  read -r -a flags <<<"$c"
  if out=$(podman run --rm "${flags[@]}" "$base" python3 -c "print('ok')" 2>&1) && [[ $out == ok ]]; then
    runtime=("${flags[@]}")
    found=1
    say "containers run with: podman run ${c:-(no extra flags)}"
    break
  fi
  errors+="  podman run --rm ${c:+$c }$base python3 -c ...: $(tail -1 <<<"$out")"$'\n'
done
if [[ $found == 0 ]]; then
  printf '%s' "$errors" >&2
  die "no way to run a container here (every attempt's error above)"
fi
[[ -n $errors ]] && printf '[docker_image] refused first:\n%s' "$errors"

# ---- 4. the project's image ----------------------------------------------------------------
secret=()
ca=${PIP_CERT:-${SSL_CERT_FILE:-/etc/ssl/certs/ca-certificates.crt}}
[[ -f $ca ]] && secret=(--secret "id=pip_ca,src=$ca")
say "building $image on $base (load $(load))"
t0=$(now)
"${NICE[@]}" podman build --format docker --network host "${runtime[@]}" "${secret[@]}" "${no_cache[@]}" \
  -f server/Dockerfile --build-arg "BASE_IMAGE=$base" -t "$image" . >"$work/build.log" 2>&1 \
  || { tail -30 "$work/build.log"; die "podman build (log above)"; }
build_s=$(secs "$t0" "$(now)")
size=$(podman image inspect --format '{{.Size}}' "$image")
base_size=$(podman image inspect --format '{{.Size}}' "$base")
say "built in $build_s s (load $(load))"

# ---- 5. run, health -----------------------------------------------------------------------
url=http://127.0.0.1:$port
t0=$(now)
if ! "${NICE[@]}" podman run -d --name "$name" "${runtime[@]}" -p "127.0.0.1:$port:8000" "$image" >/dev/null 2>"$work/run.err"; then
  say "publishing the port failed ($(tail -1 "$work/run.err")); using the host's network"
  podman rm -f "$name" >/dev/null 2>&1 || true
  t0=$(now)
  "${NICE[@]}" podman run -d --name "$name" "${runtime[@]}" --network host -e "PORT=$port" "$image" >/dev/null \
    || die "podman run --network host"
fi
healthy=""
for _ in $(seq 1 600); do
  if curl -fsS -m 2 "$url/health" >/dev/null 2>&1; then healthy=$(now); break; fi
  if [[ $(podman inspect --format '{{.State.Running}}' "$name") != true ]]; then
    podman logs "$name" 2>&1 | tail -20
    die "the container exited before /health answered (logs above)"
  fi
  sleep 0.5
done
[[ -n $healthy ]] || { podman logs "$name" 2>&1 | tail -20; die "/health did not answer within 300 s"; }
start_s=$(secs "$t0" "$healthy")
start_load=$(load)
say "healthy $start_s s after podman run (load $start_load)"
podman healthcheck run "$name" >/dev/null 2>&1 && hc=passed || hc="failed (rc $?)"
say "the image's HEALTHCHECK: $hc; runs as $(podman exec "$name" id -un) ($(podman exec "$name" id -u))"

# ---- 6. an episode from the host -----------------------------------------------------------
"$python" - "$url" <<'PY' || die "the episode against $url failed"
import sys

from reasoning_env.client import ReasoningEconomicsClient

with ReasoningEconomicsClient(base_url=sys.argv[1]).sync() as env:
    result = env.reset(seed=7)
    print(f"[docker_image] reset: budget {result.observation.remaining_budget}, first question {result.observation.question[:60]!r}")
    steps, total = 0, 0.0
    while not result.done:
        result = env.step("Adding up carefully, the answer is \\boxed{42}")
        steps += 1
        total += result.reward or 0.0
    print(f"[docker_image] episode done: {steps} steps, total reward {total:.3f}, budget left {result.observation.remaining_budget}")
PY

# ---- 7. stop -------------------------------------------------------------------------------
if [[ $keep == 1 ]]; then
  say "left running: $name on $url (podman rm -f $name)"
else
  # (podman 4.3 without systemd logs an error about the healthcheck timer it could not remove)
  podman stop -t 30 "$name" >/dev/null 2>"$work/stop.err" || { cat "$work/stop.err"; die "podman stop"; }
  code=$(podman inspect --format '{{.State.ExitCode}}' "$name")
  [[ $code == 0 ]] || { podman logs "$name" 2>&1 | tail -20; die "the server exited $code on SIGTERM"; }
  say "stopped (SIGTERM, exit 0)"
fi
awk -v s="$size" -v b="$base_size" -v img="$image" 'BEGIN {
  printf "[docker_image] image %s: %.0f MB (base %.0f MB)\n", img, s / 1e6, b / 1e6 }'
say "build $build_s s; run -> healthy $start_s s at load $start_load"
