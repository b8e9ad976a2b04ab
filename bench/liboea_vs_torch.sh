#!/usr/bin/env bash
# Benchmark: liboea's CPU reference (oea_route_host) side by side with the
# vectorised torch OEA of native/bench/oea_torch.py, on the CPU, torch on one
# thread, in one run (A B A B per repetition: ratios, not absolute times, are
# what a shared machine can report).
#   bench/liboea_vs_torch.sh [BUILD_DIR] [REPS] [BEFORE_LIB]
# liboea runs with totals (ABI 3: the kept weight and T sums, what the binding
# pays). BEFORE_LIB, an ABI 2 liboea.so (an older build), is timed in the same
# loop and printed beside (A B C per repetition): before/after on a shared
# machine.
# Grid and goal (issue 16): B in {1, 16, 128, 256} x E in {128, 256}, K = 8,
# k0 = 4; liboea >= 20x torch in every cell (ratio of the medians).
#
# Torch comes from the cached environment that tests/sglang/make_env.sh
# creates ($OEAPATCH_CACHE, default ~/.cache/oeapatch, torch-2.9.1), or from
# $OEA_TORCH_PYTHON (a python that imports torch); never from the system.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
build=${1:-$root/build}
reps=${2:-31}
lib="$build/native/liboea.so"
[ -e "$lib" ] || { echo "liboea_vs_torch: $lib not found (build first: scripts/build.sh)" >&2; exit 2; }
cache=${OEAPATCH_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/oeapatch}
py=${OEA_TORCH_PYTHON:-$cache/torch-2.9.1/bin/python}
if [ ! -x "$py" ] || ! "$py" -c 'import torch' 2>/dev/null; then
  echo "liboea_vs_torch: no torch environment at $py" >&2
  echo "  create one with tests/sglang/make_env.sh (it builds $cache/torch-2.9.1)," >&2
  echo "  or set OEA_TORCH_PYTHON to a python that imports torch" >&2
  exit 2
fi
# One thread for torch's intra-op pool and for the BLAS/OpenMP libraries it loads.
export OMP_NUM_THREADS=1 MKL_NUM_THREADS=1
exec "$py" "$root/native/bench/oea_torch.py" --bench-cpu --threads 1 --reps "$reps" --lib "$lib" ${3:+--lib-before "$3"}
