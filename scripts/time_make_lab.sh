#!/usr/bin/env bash
# Seconds from `make lab` in a fresh clone to JupyterLab answering (the README's figure).
#   scripts/time_make_lab.sh [VAR=value ...]     e.g. scripts/time_make_lab.sh INSTALLER=pip
# Clones this repository's HEAD into a temporary folder, runs `make lab` there on port
# 18888, polls /api/status, prints the time, then stops JupyterLab and removes the clone.
set -u
repo=$(git rev-parse --show-toplevel)
work=$(mktemp -d)
git clone -q "$repo" "$work/clone"
cd "$work/clone"
port=18888
start=$(date +%s.%N)
env "$@" JUPYTER_PORT=$port setsid make lab > "$work/make.log" 2>&1 &
pid=$!
for _ in $(seq 1 1200); do
  code=$(curl -s -o /dev/null -w "%{http_code}" "http://127.0.0.1:$port/api/status" || true)
  if [ "$code" = 200 ] || [ "$code" = 403 ]; then
    echo "make lab $*: JupyterLab answered after $(echo "$(date +%s.%N) - $start" | bc) s"
    break
  fi
  if ! kill -0 "$pid" 2>/dev/null; then echo "make lab failed:"; tail -20 "$work/make.log"; break; fi
  sleep 0.5
done
kill -- -"$pid" 2>/dev/null
sleep 1
rm -rf "$work"
