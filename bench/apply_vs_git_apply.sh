#!/usr/bin/env bash
# Benchmark (not a test): oeapatch's read-only commands side by side with
# `git apply --check` of the equivalent unified diff, in ONE run, alternating
# the commands round by round (A B C D A B C D ...), so that the machine's load
# falls on all of them alike: the ratios, not the absolute times, are what a
# shared machine can report.
#   bench/apply_vs_git_apply.sh [BUILD_DIR] [ROUNDS]
#
# The file: the newest real topk.py in the cache of the release tests
# (~/.cache/oeapatch/sglang-<version>/checkout/..., written by tests/sglang),
# else the largest fixture (tests/fixtures/variants/large.py); the first line
# printed says which. Timed, per round:
#   git apply --check   the diff `oeapatch apply --full-diff` prints, on the clean checkout
#   apply --check       oeapatch apply --check on the clean checkout
#   verify              oeapatch verify on an applied copy
#   status              oeapatch status on the applied copy
# Each time is one process, start-up included (date +%s%N around it). Printed:
# min and median per command, and each oeapatch command's ratio to git apply
# --check (of the medians, and of the mins), with the goal (issue 16): <= 2.5x.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
build=${1:-$root/build}
rounds=${2:-30}
cli="$build/src/oeapatch"
lib=$(ls "$build"/native/liboea.so | head -1)
tmp=$(mktemp -d); trap 'rm -rf "$tmp"' EXIT
target=python/sglang/srt/layers/moe/topk.py
# The settings verify checks are the environment's: none here.
for v in $(env | sed -n 's/^\(SGLANG_OEA_[A-Za-z0-9_]*\)=.*/\1/p'); do unset "$v"; done

source_file="" source_what=""
cache=${OEAPATCH_CACHE:-$HOME/.cache/oeapatch}
newest=$(ls -d "$cache"/sglang-[0-9]*/checkout/"$target" 2>/dev/null | sort -V | tail -1 || true)
if [ -n "$newest" ]; then
  source_file=$newest
  source_what="the real topk.py of $(basename "$(dirname "${newest%/checkout/*}/x")")"
else
  source_file=$root/tests/fixtures/variants/large.py
  source_what="the fixture tests/fixtures/variants/large.py (no release in $cache)"
fi

# c: clean (apply --check, git apply --check); a: applied (verify, status).
for d in c a; do
  mkdir -p "$tmp/$d/$(dirname $target)"
  cp "$source_file" "$tmp/$d/$target"
  git -C "$tmp/$d" -c init.defaultBranch=main init -q
  git -C "$tmp/$d" add -A
  git -C "$tmp/$d" -c user.name=b -c user.email=b@example.invalid commit -qm base
done
"$cli" apply --full-diff -C "$tmp/c" --library "$lib" > "$tmp/oea.diff"
"$cli" apply -q -C "$tmp/a" --library "$lib"
git -C "$tmp/c" apply --check "$tmp/oea.diff"
"$cli" verify -q -C "$tmp/a"
lines=$(wc -l < "$tmp/c/$target")

names=(git_check apply_check verify status)
run() { # NAME
  case $1 in
    git_check) git -C "$tmp/c" apply --check "$tmp/oea.diff" ;;
    apply_check) "$cli" apply --check -C "$tmp/c" --library "$lib" >/dev/null ;;
    verify) "$cli" verify -C "$tmp/a" >/dev/null ;;
    status) "$cli" status -C "$tmp/a" >/dev/null ;;
  esac
}
for n in "${names[@]}"; do : > "$tmp/t.$n"; run "$n"; done # warm the page cache
for _ in $(seq "$rounds"); do
  for n in "${names[@]}"; do
    a=$(date +%s%N); run "$n"; b=$(date +%s%N)
    echo $(( (b - a) / 1000 )) >> "$tmp/t.$n" # microseconds
  done
done
git -C "$tmp/c" diff --quiet || { echo "bench: the clean checkout changed" >&2; exit 1; }

stat() { # FILE -> "min median" in ms
  sort -n "$1" | awk '{ v[NR] = $1 } END { m = (NR % 2) ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2;
                                            printf "%.2f %.2f", v[1] / 1000, m / 1000 }'
}
read -r gmin gmed <<<"$(stat "$tmp/t.git_check")"
printf 'file: %s (%d lines): %s\n' "$target" "$lines" "$source_what"
printf '%d rounds, commands alternating; ms per process, start-up included\n' "$rounds"
printf '%-34s %8s %8s %10s %10s\n' "command" "min" "median" "x git(med)" "x git(min)"
for n in "${names[@]}"; do
  read -r mn md <<<"$(stat "$tmp/t.$n")"
  label=$n
  case $n in git_check) label="git apply --check (same diff)" ;; apply_check) label="oeapatch apply --check" ;;
    verify) label="oeapatch verify (applied)" ;; status) label="oeapatch status (applied)" ;; esac
  printf '%-34s %8s %8s %10s %10s\n' "$label" "$mn" "$md" \
    "$(awk -v a="$md" -v b="$gmed" 'BEGIN { printf "%.2f", a / b }')" \
    "$(awk -v a="$mn" -v b="$gmin" 'BEGIN { printf "%.2f", a / b }')"
done
printf 'goal (issue 16): each oeapatch command <= 2.5x git apply --check\n'
