#!/usr/bin/env bash
# Every benchmark of issue 16 in one run, then their goal lines together:
#   bench/run.sh [BUILD_DIR]
# Each part prints its own table (min and median, commands alternating A B A B);
# docs/performance.md explains the figures and the limits where a goal is missed.
#   bench/apply_vs_git_apply.sh  apply --check, verify, status   vs git apply --check (goal <= 2.5x)
#   bench/check_vs_python.sh     check over a history            vs cat-file + ast.parse (goal >= 5x)
#   bench/liboea_vs_torch.sh     oea_route_host                  vs vectorised torch, 1 thread (goal >= 20x)
# A part that cannot run here (no torch environment, no cached releases for
# the history) says why and the others still run; the exit status is that of
# the first part that failed.
set -uo pipefail
here=$(cd "$(dirname "$0")" && pwd)
build=${1:-$here/../build}
out=$(mktemp -d); trap 'rm -rf "$out"' EXIT
rc=0
for part in apply_vs_git_apply check_vs_python liboea_vs_torch; do
  echo "=== bench/$part.sh"
  "$here/$part.sh" "$build" 2>&1 | tee "$out/$part"
  r=${PIPESTATUS[0]}
  [ "$r" -ne 0 ] && { echo "=== bench/$part.sh: exit $r"; [ "$rc" -eq 0 ] && rc=$r; }
done
echo "=== summary (ratios from the tables above)"
awk '/^oeapatch .*\(applied\)|^oeapatch apply --check/ { printf "%-34s %s x git apply --check (median)\n", $1 " " $2 " " $3, $(NF-1) }' "$out/apply_vs_git_apply"
grep -h '^speed-up over the Python process' "$out/check_vs_python" || true
grep -h -i 'PASS\|MISS' "$out/liboea_vs_torch" | tail -n 9 || true
exit "$rc"
