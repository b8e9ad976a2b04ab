#!/usr/bin/env bash
# Installs what is missing (scripts/setup-deps.sh), then configures and builds
# oeapatch, liboea and the tests into BUILD_DIR (default: build/).
# Extra arguments go to cmake's configure step, e.g. -DOEA_CUDA=OFF.
# OEAPATCH_DEPS=build|demo|test says which set-up to install (setup-deps.sh);
# with "build" (the default) the tests are not configured, so cmocka is not needed.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
build=${BUILD_DIR:-$root/build}
deps=${OEAPATCH_DEPS:-build}
"$root/scripts/setup-deps.sh" "$deps"
tests=ON; [ "$deps" = test ] || tests=OFF
cmake -S "$root" -B "$build" -DOEAPATCH_TESTS=$tests "$@" >/dev/null
cmake --build "$build" -j"$(nproc)"
