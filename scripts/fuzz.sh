#!/usr/bin/env bash
# Bounded fuzz run of every libFuzzer target on its seed corpus (CI's stage 4).
#
#   scripts/fuzz.sh BUILD_DIR        a build configured with -DOEAPATCH_FUZZ=ON (clang)
#
# Environment:
#   OEAPATCH_FUZZ_SECONDS   seconds per target (default 15: about a minute in all)
#   OEAPATCH_FUZZ_CORPUS    a directory to keep the working corpora in (one
#                           sub-directory per target; default: a temporary
#                           directory, removed afterwards). Longer runs use it
#                           to carry the corpus from one session to the next.
#   OEAPATCH_FUZZ_TARGETS   the targets to run (default: all five)
#   OEAPATCH_FUZZ_JOBS      targets run side by side (default: the number of
#                           CPUs). Each target is one process on one core for
#                           its OEAPATCH_FUZZ_SECONDS, so two cores run two
#                           targets in the time of one without fewer executions
#                           each (CI's stage 4 ran the five one after another).
#
# The seed corpus is assembled at run time from tests/fixtures (eras,
# variants, refuse), tests/golden/*.expected.py and the recordings of
# tests/fuzz/recording_seeds.py; nothing generated is committed. A crashing input is saved as
# BUILD_DIR/fuzz-artifacts/<target>/crash-<sha1> (replay: BUILD_DIR/tests/fuzz/<target> FILE).
# Prints one line per target (executions, time, result) and ends with
# "N passed, M failed"; exits 1 when a target found a crash, leak or hang.
set -uo pipefail

root=$(cd "$(dirname "$0")/.." && pwd)
if [ $# -ne 1 ]; then
  echo "usage: scripts/fuzz.sh BUILD_DIR" >&2
  exit 2
fi
build=$(cd "$1" 2>/dev/null && pwd) || { echo "fuzz.sh: $1: no such build directory" >&2; exit 2; }
seconds=${OEAPATCH_FUZZ_SECONDS:-15}
case $seconds in ''|*[!0-9]*) echo "fuzz.sh: OEAPATCH_FUZZ_SECONDS must be a number of seconds" >&2; exit 2 ;; esac
targets=${OEAPATCH_FUZZ_TARGETS:-"fuzz_roundtrip fuzz_regions fuzz_native fuzz_envfile fuzz_recording"}
jobs=${OEAPATCH_FUZZ_JOBS:-$(nproc 2>/dev/null || echo 1)}
case $jobs in ''|*[!0-9]*|0) echo "fuzz.sh: OEAPATCH_FUZZ_JOBS must be a positive number" >&2; exit 2 ;; esac

for t in $targets; do
  if [ ! -x "$build/tests/fuzz/$t" ]; then
    echo "fuzz.sh: $build/tests/fuzz/$t not built: configure with CC=clang -DOEAPATCH_FUZZ=ON" >&2
    exit 2
  fi
done

work=$(mktemp -d "${TMPDIR:-/tmp}/oeapatch-fuzz.XXXXXX")
trap 'rm -rf "$work"' EXIT
seeds="$work/seeds"
mkdir -p "$seeds"
for f in "$root"/tests/fixtures/eras/*.py "$root"/tests/fixtures/variants/*.py \
         "$root"/tests/fixtures/refuse/*.py; do
  cp "$f" "$seeds/$(basename "$(dirname "$f")")-$(basename "$f")"
done
for f in "$root"/tests/golden/*.expected.py; do
  cp "$f" "$seeds/golden-$(basename "$f")"
done
for f in "$root"/tests/fuzz/seeds/*.env; do   # EnvironmentFile= shapes (fuzz_envfile)
  cp "$f" "$seeds/env-$(basename "$f")"
done
# Routing recordings (fuzz_recording), written by the binding's own encoder.
python3 "$root/tests/fuzz/recording_seeds.py" "$seeds" || { echo "fuzz.sh: recording seeds failed" >&2; exit 2; }
nseeds=$(ls "$seeds" | wc -l)
corpora=${OEAPATCH_FUZZ_CORPUS:-"$work/corpus"}
echo "fuzz: $nseeds seed files, ${seconds}s per target, build $build"

export OEAPATCH_SOURCE_DIR="$root"
# Leaks count as findings; a UBSan report stops the run like a crash.
export ASAN_OPTIONS="${ASAN_OPTIONS:-detect_leaks=1:abort_on_error=1}"
export UBSAN_OPTIONS="${UBSAN_OPTIONS:-print_stacktrace=1:halt_on_error=1}"

# fuzz_one TARGET: runs one target; writes its line to $work/result.TARGET and,
# when it passed, $work/verdict.TARGET (the lines are printed in the targets'
# order once all have ended, whatever order they end in).
fuzz_one() {
  local t=$1 corpus artifacts log args start end rc elapsed execs rate rss size result found why
  corpus="$corpora/$t"
  artifacts="$build/fuzz-artifacts/$t"
  mkdir -p "$corpus" "$artifacts"
  log="$build/fuzz-artifacts/$t.log"
  args=(-max_total_time="$seconds" -timeout=25 -rss_limit_mb=4096 -print_final_stats=1
        -artifact_prefix="$artifacts/")
  case $t in
    fuzz_roundtrip|fuzz_regions) args+=(-dict="$root/tests/fuzz/oeapatch.dict") ;;
  esac
  start=$(date +%s.%N)
  # The seeds directory comes second: libFuzzer reads it but writes new inputs
  # into the first one only.
  timeout $((seconds + 120)) "$build/tests/fuzz/$t" "${args[@]}" "$corpus" "$seeds" >"$log" 2>&1
  rc=$?
  end=$(date +%s.%N)
  elapsed=$(awk -v a="$start" -v b="$end" 'BEGIN { printf "%.1f", b - a }')
  execs=$(sed -n 's/^stat::number_of_executed_units: *//p' "$log" | tail -n 1)
  rate=$(sed -n 's/^stat::average_exec_per_sec: *//p' "$log" | tail -n 1)
  rss=$(sed -n 's/^stat::peak_rss_mb: *//p' "$log" | tail -n 1)
  size=$(ls "$corpus" | wc -l)
  if [ $rc -eq 0 ]; then
    result=ok
  else
    found=$(ls -t "$artifacts" 2>/dev/null | head -n 1)
    why=$(grep -m1 -E '^(==[0-9]+==ERROR|SUMMARY|fuzz_[a-z]+:|.*runtime error)' "$log" | cut -c1-200)
    result="FAILED (exit $rc): ${why:-see $log}${found:+; input saved as $artifacts/$found}"
  fi
  printf '%-15s %9s execs %8s exec/s %6ss %5s corpus %5s MB  %s\n' "$t" "${execs:-?}" "${rate:-?}" \
    "$elapsed" "$size" "${rss:-?}" "$result" >"$work/result.$t"
  [ $rc -eq 0 ] && echo ok >"$work/verdict.$t"
}

running=0
for t in $targets; do
  if [ "$running" -ge "$jobs" ]; then
    wait -n
    running=$((running - 1))
  fi
  fuzz_one "$t" &
  running=$((running + 1))
done
wait

passed=0
failed=0
for t in $targets; do
  if [ -f "$work/result.$t" ]; then
    cat "$work/result.$t"
    if [ -f "$work/verdict.$t" ]; then passed=$((passed + 1)); else failed=$((failed + 1)); fi
  else
    echo "$t: no result (the run of the target itself failed)"
    failed=$((failed + 1))
  fi
done
echo "$passed passed, $failed failed"
[ $failed -eq 0 ]
