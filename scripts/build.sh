#!/usr/bin/env bash
# Installs what is missing (scripts/setup-deps.sh), then configures and builds
# oeapatch, liboea and the tests into BUILD_DIR (default: build/).
# Extra arguments go to cmake's configure step, e.g. -DOEA_CUDA=OFF.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
build=${BUILD_DIR:-$root/build}
"$root/scripts/setup-deps.sh"
cmake -S "$root" -B "$build" "$@" >/dev/null
cmake --build "$build" -j"$(nproc)"
