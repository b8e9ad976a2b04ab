#!/usr/bin/env bash
# Benchmark: oeapatch on the largest fixture (tests/fixtures/variants/large.py,
# ~1,600 lines, the size of today's upstream topk.py), side by side with
# `git apply` of the equivalent unified diff, in the same run (ratios, not
# absolute times, are what this shared machine can report).
#   bench/apply_vs_git_apply.sh [BUILD_DIR] [ROUNDS]
# Goal (issue 3): apply + verify within 3x of git apply's time.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
build=${1:-$root/build}
rounds=${2:-50}
cli="$build/src/oeapatch"
lib=$(ls "$build"/native/liboea.so | head -1)
tmp=$(mktemp -d); trap 'rm -rf "$tmp"' EXIT
target=python/sglang/srt/layers/moe/topk.py

mkdir -p "$tmp/c/$(dirname $target)"
cp "$root/tests/fixtures/variants/large.py" "$tmp/c/$target"
git -C "$tmp/c" -c init.defaultBranch=main init -q
git -C "$tmp/c" add -A
git -C "$tmp/c" -c user.name=b -c user.email=b@example.invalid commit -qm base
"$cli" apply --diff -C "$tmp/c" --library "$lib" > "$tmp/oea.diff"
lines=$(wc -l < "$tmp/c/$target")

# Each measurement: the total wall time of `rounds` runs, in ms (date +%s%N).
ms() { echo $(( ($2 - $1) / 1000000 )); }
t() { date +%s%N; }

a=$(t); for _ in $(seq "$rounds"); do "$cli" apply --check -C "$tmp/c" --library "$lib" >/dev/null; done; b=$(t)
check_ms=$(ms "$a" "$b")
a=$(t); for _ in $(seq "$rounds"); do git -C "$tmp/c" apply --check "$tmp/oea.diff"; done; b=$(t)
git_check_ms=$(ms "$a" "$b")

apply_ms=0; verify_ms=0; git_ms=0
for _ in $(seq "$rounds"); do
  a=$(t); "$cli" apply -C "$tmp/c" --library "$lib" >/dev/null; b=$(t)
  "$cli" verify -C "$tmp/c" >/dev/null; c=$(t)
  apply_ms=$((apply_ms + $(ms "$a" "$b"))); verify_ms=$((verify_ms + $(ms "$b" "$c")))
  "$cli" revert -C "$tmp/c" >/dev/null
  a=$(t); git -C "$tmp/c" apply "$tmp/oea.diff"; b=$(t)
  git_ms=$((git_ms + $(ms "$a" "$b")))
  git -C "$tmp/c" apply -R "$tmp/oea.diff"
done
git -C "$tmp/c" diff --quiet || { echo "bench: the checkout did not come back clean" >&2; exit 1; }

per() { awk -v t="$1" -v n="$rounds" 'BEGIN { printf "%.2f", t / n }'; }
ratio() { awk -v a="$1" -v b="$2" 'BEGIN { printf "%.2f", (b > 0 ? a / b : 0) }'; }
printf 'file: %s (%d lines), %d rounds each, ms per run (process start included)\n' "$target" "$lines" "$rounds"
printf '%-34s %8s\n' "what" "ms/run"
printf '%-34s %8s\n' "oeapatch apply --check" "$(per $check_ms)"
printf '%-34s %8s\n' "git apply --check (same diff)" "$(per $git_check_ms)"
printf '%-34s %8s\n' "oeapatch apply (writes, reads back)" "$(per $apply_ms)"
printf '%-34s %8s\n' "oeapatch verify" "$(per $verify_ms)"
printf '%-34s %8s\n' "git apply (same diff, writes)" "$(per $git_ms)"
printf 'ratio apply --check / git apply --check: %s\n' "$(ratio $check_ms $git_check_ms)"
printf 'ratio (apply + verify) / git apply:      %s   (goal: <= 3)\n' "$(ratio $((apply_ms + verify_ms)) $git_ms)"
