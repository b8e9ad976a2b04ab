#!/usr/bin/env bash
# Regenerates the expected outputs of the golden cases with the CLI:
#   tests/golden/regen.sh BUILD_DIR
# Review `git diff tests/golden` afterwards: every change must be intended,
# and run check_golden.py (ctest golden.check): it checks the new files with
# Python alone, since these files are the tool's own output.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
build=${1:?usage: regen.sh BUILD_DIR}
cli="$build/src/oeapatch"
tmp=$(mktemp -d); trap 'rm -rf "$tmp"' EXIT
grep -v '^#' "$here/cases.txt" | while read -r name fixture def target; do
  [ -n "$name" ] || continue
  def=${def:-sglang-oea}
  target=${target:-python/sglang/srt/layers/moe/topk.py}
  rm -rf "$tmp/c" && mkdir -p "$tmp/c/$(dirname $target)"
  cp "$here/../fixtures/$fixture" "$tmp/c/$target"
  "$cli" apply -C "$tmp/c" --patch "$def" >/dev/null
  cp "$tmp/c/$target" "$here/$name.expected.py"
  echo "regenerated $name"
done
