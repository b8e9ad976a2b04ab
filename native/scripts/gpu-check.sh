#!/usr/bin/env bash
# gpu-check.sh - everything about liboea that needs a GPU, as one command:
# configure with CUDA ON, build, run the CUDA test (bit-for-bit against the CPU
# reference, CUDA graphs, repeated launches), the memory and race checkers when
# present, the kernel benchmark (CUDA events over graph replays, empty-kernel
# floor), the CPU benchmark, and the torch comparison when torch with CUDA is
# there. Logs and tables go to "$OUT" if set, else ./gpu-out.
#
#   native/scripts/gpu-check.sh            (from the repository root)
#   OEA_GPU_ARCHS="80;90;100;120" ...      (default: 90, the H200; all four
#                                           only cost build time)
#
# Exit status: 0 all checks passed, 1 a check failed, 2 could not build.
# Total run time on an H200 is meant to stay under about 4 minutes.
set -uo pipefail

here=$(cd "$(dirname "$0")/.." && pwd) # native/
out=${OUT:-$PWD/gpu-out}
build=${OEA_GPU_BUILD:-$here/../build-gpu}
archs=${OEA_GPU_ARCHS:-90}
mkdir -p "$out"
summary="$out/summary.txt"
: >"$summary"
fail=0

note() { echo "gpu-check: $*" | tee -a "$summary" >&2; }

# step NAME TIMEOUT CMD...: runs CMD with its output in $out/NAME.log.
step() {
	local name=$1 limit=$2 rc start
	shift 2
	start=$(date +%s)
	timeout "$limit" "$@" >"$out/$name.log" 2>&1
	rc=$?
	note "$name: exit $rc in $(($(date +%s) - start)) s"
	return $rc
}

if ! command -v nvcc >/dev/null 2>&1 && [ -x /usr/local/cuda/bin/nvcc ]; then
	export CUDACXX=/usr/local/cuda/bin/nvcc
fi
{ nvidia-smi; "${CUDACXX:-nvcc}" --version; } >"$out/machine.log" 2>&1

# cmocka may be missing on the device: the CPU tests run in CI, not here.
step configure 120 cmake -S "$here" -B "$build" -DOEA_CUDA=ON -DOEAPATCH_TESTS=OFF \
	-DCMAKE_BUILD_TYPE=Release "-DCMAKE_CUDA_ARCHITECTURES=$archs" || { cat "$out/configure.log"; exit 2; }
step build 300 cmake --build "$build" -j "$(nproc)" || { tail -40 "$out/build.log"; exit 2; }

step cuda_test 150 "$build/oea_cuda_test" --cases 3000 || fail=1
tail -1 "$out/cuda_test.log" | tee -a "$summary"

if command -v compute-sanitizer >/dev/null 2>&1; then
	# Not fatal if the tool cannot attach (gVisor machines refuse it).
	step memcheck 90 compute-sanitizer --tool memcheck --error-exitcode 3 \
		"$build/oea_cuda_test" --cases 150 || { [ $? -eq 3 ] && fail=1; }
	step racecheck 90 compute-sanitizer --tool racecheck --error-exitcode 3 \
		"$build/oea_cuda_test" --cases 40 || { [ $? -eq 3 ] && fail=1; }
else
	note "compute-sanitizer: not found, skipped"
fi

step bench_cuda 120 "$build/oea_bench_cuda" || fail=1
cp "$out/bench_cuda.log" "$out/bench_cuda.md"
step bench_cpu 60 "$build/oea_bench" --samples 40 || fail=1
cp "$out/bench_cpu.log" "$out/bench_cpu.md"

py=${PYTHON:-python3}
if "$py" -c 'import torch, sys; sys.exit(0 if torch.cuda.is_available() else 1)' >/dev/null 2>&1; then
	step torch_check 120 "$py" "$here/bench/oea_torch.py" --check --device cuda \
		--lib "$build/liboea.so" --cases 300 || fail=1
	tail -1 "$out/torch_check.log" | tee -a "$summary"
	step bench_torch 150 "$py" "$here/bench/oea_torch.py" --bench --device cuda \
		--lib "$build/liboea.so" || fail=1
	cp "$out/bench_torch.log" "$out/bench_torch.md"
else
	note "torch with CUDA: not available, torch comparison skipped"
fi

note "overall: $([ $fail -eq 0 ] && echo PASS || echo FAIL)"
exit $fail
