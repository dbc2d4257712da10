# Sourced by scripts/real_model.sh and scripts/ci_venvs.sh: build a folder (a venv) at most once at a time.
#
#   locked_build LABEL DIR STAMP COMMAND...
#
# Takes an exclusive lock on DIR.lock (flock: released when the holder exits, even killed). A second set-up
# that finds the lock held says who holds it and waits, then reuses what the first built. Holding the lock,
# it reuses DIR when DIR/.stamp says STAMP; otherwise it removes DIR (a half-built one included: nobody else
# can be writing to it now), runs COMMAND... (which builds DIR) and writes the stamp. Prints one line on
# stderr when it waits and when it builds, and "LABEL: DIR (reused)" or "LABEL: DIR (built in N s)" on stdout.
locked_build() {
  local label="$1" dir="$2" stamp="$3"
  shift 3
  mkdir -p "$(dirname "$dir")"
  local lock="$dir.lock" fd
  exec {fd}>>"$lock"
  if command -v flock >/dev/null 2>&1; then
    if ! flock -n "$fd"; then
      echo "$label: another set-up ($(cat "$lock.owner" 2>/dev/null || echo "process unknown")) is building $dir;" \
        "waiting for it to finish (lock: $lock)" >&2
      flock "$fd"
    fi
  else
    echo "$label: no flock here, so a second set-up running at the same time could break this build" >&2
  fi
  echo "pid $BASHPID, started $(date '+%H:%M:%S')" >"$lock.owner"
  if [ -f "$dir/.stamp" ] && [ "$(cat "$dir/.stamp")" = "$stamp" ]; then
    echo "$label: $dir (reused)"
    exec {fd}>&-
    return 0
  fi
  echo "$label: building $dir ..." >&2
  local t0=$SECONDS rc=0
  rm -rf "$dir"
  "$@" || rc=$?
  if [ "$rc" -eq 0 ]; then
    echo "$stamp" >"$dir/.stamp"
    echo "$label: $dir (built in $((SECONDS - t0)) s)"
  else
    echo "$label: building $dir failed (exit $rc); run the set-up again to rebuild it" >&2
  fi
  exec {fd}>&-
  return "$rc"
}
