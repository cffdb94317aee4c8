#!/usr/bin/env bash
# Record a terminal session of `blueprints converge` with tmux (docs/converge-session.txt):
# the screen while a stage runs (its live bar) and at the end (the summary).
#
#   KUBECONFIG_FILE=.cluster/kubeconfig scripts/record_converge.sh [out] [converge args...]
#
# Needs tmux (apt-get install tmux) and a cluster to converge (make cluster-up).
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)
OUT=${1:-$ROOT/docs/converge-session.txt}
shift || true
ARGS=("$@")
[ ${#ARGS[@]} -gt 0 ] || ARGS=(--site inventories/example-chat)
KC=${KUBECONFIG_FILE:-$ROOT/.cluster/kubeconfig}
SESSION=converge-rec-$$
WIDTH=110
HEIGHT=36

RUN=$(mktemp /tmp/record-converge-XXXX.sh)
{
  echo "cd '$ROOT'"
  echo "export PATH='$ROOT/.venv/bin':\"\$PATH\" ANSIBLE_COLLECTIONS_PATH='$ROOT/.cache/collections'"
  echo "export ANSIBLE_CONFIG='$ROOT/ansible.cfg' K8S_AUTH_KUBECONFIG='$KC'"
  echo "clear"
  echo "echo '\$ blueprints converge ${ARGS[*]}'"
  echo "blueprints converge ${ARGS[*]}"
  echo "echo \"[exit \$?]\""
  echo "sleep 3600"
} >"$RUN"
tmux new-session -d -s "$SESSION" -x "$WIDTH" -y "$HEIGHT" "bash $RUN"
trap 'tmux kill-session -t "$SESSION" 2>/dev/null || true; rm -f "$RUN"' EXIT

snap() { tmux capture-pane -p -t "$SESSION" | sed -e 's/[[:space:]]*$//' | sed -e :a -e '/^\n*$/{$d;N;ba' -e '}'; }
running=""
for _ in $(seq 1 2400); do
  sleep 0.5
  screen=$(snap)
  if grep -q '^\[exit ' <<<"$screen"; then break; fi
  # a stage in progress: its bar ends with the current task, not "done"
  live=$(grep -P '^\w+ +\[[#.]+\] +\d+/\d+ +\d+:\d\d  (?!done$|FAILED$|waiting$).+$' <<<"$screen" || true)
  if [ -n "$live" ] && { [ -z "$running" ] || grep -Eq '^(platform|serving) ' <<<"$live"; }; then
    running=$screen
  fi
done
final=$(snap)
{
  echo "# blueprints converge, recorded with tmux capture-pane (${WIDTH}x${HEIGHT}) by scripts/record_converge.sh"
  echo
  echo "## while it runs"
  echo
  echo '```'
  echo "$running"
  echo '```'
  echo
  echo "## at the end"
  echo
  echo '```'
  echo "$final"
  echo '```'
} >"$OUT"
echo "recorded: $OUT"
