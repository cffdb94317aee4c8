#!/usr/bin/env bash
# go_build_linked.sh OUT -- COMMAND...
#
# Runs a `go build` COMMAND whose -o argument is written @OUT@, with @OUT@ standing for a file (or, when OUT ends
# in /, a directory) in $GO_LINKS, outside the clone, then copies the result to OUT.
#
# Why: Go caches compiled packages (GOCACHE) but not linked binaries, so a fresh clone re-links every binary of the
# test tiers (kcp, both KServe controllers, KEDA, Argo CD, ...: minutes of CPU). `go build -o FILE` skips the link
# when FILE already carries the build ID of what it would link, so linking into a fixed place outside the clone
# makes a later clone of the same sources copy its binaries instead (kwok here: 12.6 s -> 0.9 s). A changed source
# relinks as before: Go decides, from the same build IDs it uses for its own cache.
#
# Builds of one name from two clones at once take turns (flock on the name), so a copy never reads a half-written
# binary.
set -euo pipefail
out=$1
shift
usage="usage: $0 OUT -- COMMAND (with @OUT@ for go build's -o)"
[ "${1:-}" = "--" ] || { echo "$usage" >&2; exit 2; }
shift
case " $* " in *@OUT@*) ;; *) echo "$usage" >&2; exit 2 ;; esac
links=${GO_LINKS:-${XDG_CACHE_HOME:-$HOME/.cache}/inference-blueprints/go-links}
name=$(basename "$out")
mkdir -p "$links"
if [ "${out%/}" != "$out" ]; then
  target="$links/$name/"
else
  target="$links/$name"
fi
args=()
for a in "$@"; do args+=("${a//@OUT@/$target}"); done
exec 9>"$links/$name.lock"
flock 9
"${args[@]}"
if [ "${out%/}" != "$out" ]; then
  mkdir -p "$out"
  for f in "$target"*; do
    cp "$f" "$out/$(basename "$f").tmp" && mv "$out/$(basename "$f").tmp" "$out/$(basename "$f")"
  done
else
  mkdir -p "$(dirname "$out")"
  cp "$target" "$out.tmp" && mv "$out.tmp" "$out"
fi
