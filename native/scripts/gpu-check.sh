#!/usr/bin/env bash
# gpu-check.sh - every liboea check that needs a GPU, as ONE command with a
# hard deadline, for a lent machine with a small time budget:
#
#   native/scripts/gpu-check.sh [--dry-run]      (from the repository root)
#
# Steps, each with its own time limit, all clipped to one deadline (default
# 330 s after the start, OEA_GPU_DEADLINE to change; the whole run stays
# under 6 minutes, packing included):
#   build        cmake native/ with CUDA for this GPU's architecture only
#   correctness  oea_cuda_test: random cases (plain, ABI 1 struct, graphs
#                replayed with new valid-row counts and new inputs), the shape
#                sweep (n to 1024, E to 512, K to 16, fp32/bf16/fp16,
#                int32/int64), case pairs on two streams; bit for bit vs CPU
#   sanitizers   compute-sanitizer memcheck, racecheck, initcheck, synccheck
#                on a short oea_cuda_test run; a tool that cannot run here is
#                reported NOT RUN, never as a pass
#   latency      oea_bench_cuda: single launch and per launch in a graph, each
#                next to an empty kernel's, PASS/FAIL at 1.5x
#   torch        oea_torch.py: vectorised torch OEA against liboea (ids exact),
#                then torch OEA and torch top-k next to liboea in graphs
#                (goal: liboea >= 20x faster than torch OEA)
#   moe          moe_bench.py: a fused-MoE layer with the framework's ids and
#                with OEA's, Qwen3-30B-A3B and DeepSeek-V3 shapes, n 1..256,
#                k0 2..6, T before/after (it says which MoE kernel it used)
# Results: at most 8 files in $OUT (default ./gpu-out): summary.txt (device,
# clocks, driver, commit, one line per step), correctness.txt,
# sanitizers.txt, latency.md, torch.md, moe.md, logs.tar.gz (every raw log).
# --dry-run prints the plan and what this machine has, runs nothing.
# Exit status: 0 every check that ran passed, 1 a check failed, 2 no GPU or
# the build failed.
set -uo pipefail

start=$(date +%s)
deadline=$((start + ${OEA_GPU_DEADLINE:-330}))
here=$(cd "$(dirname "$0")/.." && pwd) # native/
root=$(cd "$here/.." && pwd)
out=${OUT:-$PWD/gpu-out}
build=${OEA_GPU_BUILD:-$root/build-gpu}
py=${PYTHON:-python3}
dry=0
[ "${1:-}" = "--dry-run" ] && dry=1

# name:seconds of each step (the deadline clips them further).
plan="build:100 correctness:50 memcheck:20 racecheck:20 initcheck:20 synccheck:20 latency:25 torch:35 moe:55"

have() { command -v "$1" >/dev/null 2>&1; }
if ! have nvcc && [ -x /usr/local/cuda/bin/nvcc ]; then
	export CUDACXX=/usr/local/cuda/bin/nvcc
	export PATH="/usr/local/cuda/bin:$PATH"
fi
gpu_present() { have nvidia-smi && nvidia-smi -L 2>/dev/null | grep -q '^GPU '; }

if [ $dry -eq 1 ]; then
	echo "gpu-check plan (deadline $((deadline - start)) s): $plan"
	for t in nvidia-smi nvcc cmake compute-sanitizer "$py" tar; do
		printf '  %-18s %s\n' "$t" "$(command -v "$t" || echo 'not found')"
	done
	"$py" -c 'import torch; print("  torch", torch.__version__, "cuda", torch.cuda.is_available())' 2>/dev/null ||
		echo "  torch              not importable (torch and moe steps would be NOT RUN)"
	gpu_present && echo "  GPU: $(nvidia-smi -L | head -1)" || echo "  GPU: none (a real run exits 2 here)"
	exit 0
fi

mkdir -p "$out"
logs=$(mktemp -d)
trap 'rm -rf "$logs"' EXIT
summary="$out/summary.txt"
: >"$summary"
fail=0 notrun=0
note() { echo "$*" | tee -a "$summary" >&2; }
budget() { echo "$plan" | tr ' ' '\n' | sed -n "s/^$1://p"; }

# step NAME CMD...: runs CMD under min(its budget, time to the deadline - 15 s)
# with its output in $logs/NAME.log; 124 = cut by the limit; 125 = not started.
step() {
	local name=$1 want left t rc s0
	shift
	want=$(budget "$name")
	left=$((deadline - $(date +%s) - 15))
	t=$((want < left ? want : left))
	if [ "$t" -lt 5 ]; then
		echo "not started: the deadline is reached" >"$logs/$name.log"
		return 125
	fi
	s0=$(date +%s)
	timeout -k 5 "$t" "$@" >"$logs/$name.log" 2>&1
	rc=$?
	echo "$name: exit $rc after $(($(date +%s) - s0)) s (limit $t s)" >>"$logs/steps.log"
	return $rc
}

finish() {
	local verdict
	if [ "${1:-0}" = 2 ]; then
		verdict="NOT RUN (no GPU, or the build failed)"
	elif [ $fail -ne 0 ]; then
		verdict=FAIL
	else
		verdict="PASS$([ $notrun -gt 0 ] && echo ", but $notrun check(s) NOT RUN")"
	fi
	note "overall: $verdict in $(($(date +%s) - start)) s"
	tar -czf "$out/logs.tar.gz" -C "$logs" . 2>/dev/null
	exit "${1:-$fail}"
}

# ---- the machine
{
	echo "gpu-check of liboea, $(date -u '+%Y-%m-%d %H:%M:%S UTC')"
	commit=$(git -C "$root" rev-parse HEAD 2>/dev/null || echo "unknown (no git metadata here)")
	dirty=$(git -C "$root" status --porcelain 2>/dev/null | grep -c . || true)
	echo "commit: $commit$([ "${dirty:-0}" != 0 ] && echo " (plus $dirty uncommitted paths)")"
	if gpu_present; then
		nvidia-smi --query-gpu=name,compute_cap,driver_version,memory.total,clocks.sm,clocks.max.sm,clocks.mem,clocks.max.mem,power.limit,persistence_mode \
			--format=csv 2>/dev/null | sed 's/^/device: /'
	fi
	echo "nvcc: $("${CUDACXX:-nvcc}" --version 2>/dev/null | tail -1)"
} >>"$summary"
cat "$summary" >&2
if ! gpu_present; then
	note "no GPU found (nvidia-smi lists none): nothing was run"
	finish 2
fi
nvidia-smi -q >"$logs/nvidia-smi.log" 2>&1

# ---- build, for this GPU only (the four shipped architectures cost build
# time and are covered statically by scripts/kernel-report.sh)
arch=${OEA_GPU_ARCHS:-$(nvidia-smi --query-gpu=compute_cap --format=csv,noheader 2>/dev/null | head -1 | tr -d ' .')}
step build bash -c "cmake -S '$here' -B '$build' -DOEA_CUDA=ON -DOEAPATCH_TESTS=OFF \
	-DCMAKE_BUILD_TYPE=Release '-DCMAKE_CUDA_ARCHITECTURES=${arch:-90}' &&
	cmake --build '$build' -j '$(nproc)' --target oea oea_cuda_test oea_bench_cuda"
rc=$?
if [ $rc -ne 0 ]; then
	note "build: FAIL (exit $rc; see logs.tar.gz build.log)"
	tail -30 "$logs/build.log" >&2
	fail=1
	finish 2
fi
note "build: ok for sm_${arch:-90}"
lib="$build/liboea.so"

# ---- correctness
step correctness "$build/oea_cuda_test" --cases 1500 --sweep --streams 40
rc=$?
cp "$logs/correctness.log" "$out/correctness.txt"
case $rc in
0) note "correctness: PASS ($(grep -c 'bit-identical' "$out/correctness.txt") parts bit-identical to the CPU)" ;;
124 | 137) note "correctness: FAIL (cut by its time limit)"; fail=1 ;;
*) note "correctness: FAIL (exit $rc; correctness.txt)"; fail=1 ;;
esac

# ---- sanitizers: PASS only on a clean "ERROR SUMMARY: 0 errors"
: >"$out/sanitizers.txt"
san() {
	local tool=$1 rc verdict
	shift
	if ! have compute-sanitizer; then
		verdict="NOT RUN (compute-sanitizer not installed)"
		notrun=$((notrun + 1))
	else
		step "$tool" compute-sanitizer --tool "$tool" --error-exitcode 3 "$@" \
			"$build/oea_cuda_test" --cases 12 --streams 1
		rc=$?
		if [ $rc -eq 3 ]; then
			verdict="FAIL (errors found)"
			fail=1
		elif [ $rc -eq 0 ] && grep -q 'ERROR SUMMARY: 0 errors' "$logs/$tool.log"; then
			verdict="PASS"
		elif [ $rc -eq 1 ] && grep -q 'MISMATCH' "$logs/$tool.log"; then
			verdict="FAIL (results differ under the tool)"
			fail=1
		else
			verdict="NOT RUN (the tool did not complete here, exit $rc: $(grep -v '^\s*$' "$logs/$tool.log" | tail -1 | cut -c1-120))"
			notrun=$((notrun + 1))
		fi
	fi
	echo "$tool: $verdict" >>"$out/sanitizers.txt"
	note "sanitizer $tool: $verdict"
}
san memcheck --leak-check full
san racecheck --racecheck-report all
san initcheck
san synccheck

# ---- latency next to the floor
step latency "$build/oea_bench_cuda" --launches 50 --reps 21
rc=$?
cp "$logs/latency.log" "$out/latency.md"
case $rc in
0 | 1) note "latency: $(grep -o 'latency [A-Z]*: .*' "$out/latency.md" | tail -1 || echo 'no verdict line')"
	[ $rc -eq 1 ] && fail=1 ;;
*) note "latency: FAIL (exit $rc; latency.md)"; fail=1 ;;
esac

# ---- torch: exactness of the vectorised version, then the yardsticks
if "$py" -c 'import sys, torch; sys.exit(0 if torch.cuda.is_available() else 1)' >/dev/null 2>&1; then
	step torch bash -c "'$py' '$here/bench/oea_torch.py' --check --device cuda --lib '$lib' --cases 200 &&
		'$py' '$here/bench/oea_torch.py' --bench --device cuda --lib '$lib'"
	rc=$?
	cp "$logs/torch.log" "$out/torch.md"
	if [ $rc -eq 0 ]; then
		note "torch: $(grep -o 'oea_torch.py --check: .*' "$out/torch.md" | tail -1)"
		note "torch: $(grep -o 'liboea vs vectorised torch OEA: .*' "$out/torch.md" | tail -1)"
	else
		note "torch: FAIL (exit $rc; torch.md)"
		fail=1
	fi
	step moe "$py" "$here/bench/moe_bench.py" --lib "$lib" --reps 10
	rc=$?
	cp "$logs/moe.log" "$out/moe.md"
	case $rc in
	0) note "moe: done ($(grep -o 'kernel: .*' "$out/moe.md" | head -1))" ;;
	124 | 137) note "moe: cut by its time limit after $(grep -c '^| [0-9]' "$out/moe.md") rows (moe.md has them)" ;;
	*) note "moe: FAIL (exit $rc; moe.md)"; fail=1 ;;
	esac
else
	note "torch: NOT RUN (torch with CUDA is not importable by $py)"
	note "moe: NOT RUN (needs torch with CUDA)"
	notrun=$((notrun + 2))
fi

finish
