#!/usr/bin/env bash
# wheel-cuda-aarch64.sh NVCC: prints the path of an nvcc that builds the CUDA
# kernel into the aarch64 wheel's liboea on this x86_64 machine, making it
# on first use (scripts/build-wheel.sh runs it; docs/deployment.md, "CUDA in
# the wheels").
#
# What the kernel needs from the target architecture is small: the device
# code (the fat binary: SASS for each GPU and PTX) is the same bytes whatever
# the host (measured: the .nv_fatbin of an x86_64 and an aarch64 build are
# identical), and only the host side (the launch stubs nvcc generates, the
# static CUDA runtime) is aarch64 code. nvcc cross-compiles that host side
# itself when its host compiler targets aarch64 (cmake/toolchains/
# wheel-sysroot-clang++: clang, the arm64 Debian 11 sysroot): it then looks
# for the target's headers and libraries in TOOLKIT/targets/aarch64-linux,
# which a cross toolkit (NVIDIA's cross packages) provides and an x86_64
# toolkit lacks. So this makes a toolkit beside NVCC's that has it:
#
#   bin/nvcc, bin/nvcc.profile   copies of NVCC's (nvcc finds its toolkit
#                                from where its own file is; a link would
#                                lead it back to NVCC's folder)
#   bin/*, nvvm                  links to NVCC's (ptxas, cicc, fatbinary...:
#                                programs of this machine, as for x86_64)
#   targets/aarch64-linux/lib    the aarch64 CUDA runtime (libcudart_static.a)
#                                from PyPI's nvidia-cuda-runtime wheel for
#                                aarch64, pinned in scripts/deps-pins.txt
#                                (nvidia-cuda-runtime-aarch64) by SHA-256
#   targets/aarch64-linux/include  a link to NVCC's own headers, which must
#                                be byte for byte those of that wheel (checked:
#                                the headers are the runtime's interface, and
#                                they are the same on every architecture)
#
# Cached under ${XDG_CACHE_HOME:-$HOME/.cache}/oeapatch/cuda-aarch64-KEY (KEY:
# the pin and NVCC's version; about 35 MB), the wheel under the deps cache
# (${OEAPATCH_DEPS_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/oeapatch/deps}).
# Exit 2: refused (no such nvcc, a digest mismatch, headers that differ),
# 3: the wheel is neither cached nor reachable.
set -euo pipefail
nvcc=${1:-}
say() { echo "wheel-cuda-aarch64: $*" >&2; }
[ -n "$nvcc" ] && [ -x "$nvcc" ] || { say "usage: wheel-cuda-aarch64.sh NVCC (got '$nvcc', not an executable)"; exit 2; }
# The nvcc to copy is the toolkit's own program, not NVCC itself when NVCC
# is a wrapper (a script such as `exec /usr/local/cuda-13.0/bin/nvcc "$@"`
# in /usr/local/bin, as some images install): a copied wrapper runs the
# real nvcc from the real toolkit, which has no targets/aarch64-linux, and
# every aarch64 compile fails on a missing cuda_runtime.h. nvcc names its own
# folder in its dry run (_HERE_), whatever called it.
here_dir=$("$nvcc" --dryrun -x cu -c /dev/null -o /dev/null 2>&1 | sed -n 's/^#\$ _HERE_=//p' | head -1)
[ -n "$here_dir" ] && [ -x "$here_dir/nvcc" ] || { say "$nvcc --dryrun names no toolkit folder (_HERE_): is it nvcc?"; exit 2; }
nvcc=$(realpath "$here_dir/nvcc")
here=$(cd "$(dirname "$0")/.." && pwd)
pins=$here/scripts/deps-pins.txt
PY=${OEAPATCH_SYSTEM_PYTHON:-/usr/bin/python3}
read -r ver sha < <(awk '$1 == "nvidia-cuda-runtime-aarch64" { print $2, $3 }' "$pins") || true
[ -n "${sha:-}" ] || { say "$pins pins no nvidia-cuda-runtime-aarch64"; exit 2; }
deps=${OEAPATCH_DEPS_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/oeapatch/deps}
whl=nvidia_cuda_runtime-$ver-py3-none-manylinux2014_aarch64.manylinux_2_17_aarch64.whl
mkdir -p "$deps"
if [ ! -f "$deps/$whl" ]; then
	say "downloading nvidia-cuda-runtime $ver for aarch64"
	tmp=$(mktemp -d "${TMPDIR:-/tmp}/oeapatch-cudart.XXXXXX")
	if ! timeout 300 "$PY" -m pip download --quiet --disable-pip-version-check --no-deps --only-binary :all: \
		--platform manylinux2014_aarch64 --python-version 3 "nvidia-cuda-runtime==$ver" -d "$tmp" \
		>"$tmp/log" 2>&1 || [ ! -f "$tmp/$whl" ]; then
		say "$whl is not cached in $deps and could not be downloaded:"
		tail -5 "$tmp/log" >&2
		rm -rf "$tmp"
		exit 3
	fi
	mv -f "$tmp/$whl" "$deps/$whl"
	rm -rf "$tmp"
fi
got=$(sha256sum "$deps/$whl" | cut -d' ' -f1)
if [ "$got" != "$sha" ]; then
	say "digest mismatch, refusing $deps/$whl: expected sha256 $sha, it has $got (remove it to fetch it again)"
	exit 2
fi

top=$(dirname "$(dirname "$nvcc")")
inc=$top/targets/x86_64-linux/include
[ -f "$inc/cuda_runtime.h" ] || inc=$top/include
[ -f "$inc/cuda_runtime.h" ] || { say "no cuda_runtime.h beside $nvcc (looked in $top/targets/x86_64-linux/include and $top/include)"; exit 2; }
nvcc_version=$("$nvcc" --version | sed -n 's/.*release \([0-9.]*\), V\([0-9.]*\).*/\2/p')
[ -n "$nvcc_version" ] || { say "$nvcc --version names no release"; exit 2; }
key=$(printf '%s\n' "$ver" "$sha" "$nvcc" "$nvcc_version" | sha256sum | cut -c1-12)
root=${XDG_CACHE_HOME:-$HOME/.cache}/oeapatch/cuda-aarch64-$key
# shellcheck source=SCRIPTDIR/lib/cache-dir.sh
. "$(dirname "$0")/lib/cache-dir.sh"
if cache_dir_lock "$root"; then
	echo "$root/bin/nvcc"
	exit 0
fi
rm -rf "$root.partial"
mkdir -p "$root.partial/bin" "$root.partial/targets/aarch64-linux/lib" "$root.partial/wheel"
"$PY" -m zipfile -e "$deps/$whl" "$root.partial/wheel"
rt=$root.partial/wheel/nvidia/cu13
[ -f "$rt/lib/libcudart_static.a" ] || rt=$(dirname "$(dirname "$(find "$root.partial/wheel" -name libcudart_static.a | head -1)")")
[ -f "$rt/lib/libcudart_static.a" ] || { say "$whl holds no libcudart_static.a"; rm -rf "$root.partial"; exit 2; }
# The headers nvcc compiles the host side with are its own: they must be the
# interface of the runtime linked here, file for file.
differ=$(cd "$rt/include" && find . -type f | sort | while read -r f; do cmp -s "$f" "$inc/$f" || echo "${f#./}"; done)
if [ -n "$differ" ]; then
	say "the headers of $nvcc ($inc) differ from those of nvidia-cuda-runtime $ver for aarch64: $(echo "$differ" | head -5 | tr '\n' ' ')"
	say "pin the nvidia-cuda-runtime-aarch64 of this toolkit's CUDA release in $pins, or use the toolkit of the pinned one"
	rm -rf "$root.partial"
	exit 2
fi
cp -a "$rt/lib/." "$root.partial/targets/aarch64-linux/lib/"
for l in "$root.partial"/targets/aarch64-linux/lib/libcudart.so.*; do
	[ -e "$l" ] && ln -sfn "$(basename "$l")" "$root.partial/targets/aarch64-linux/lib/libcudart.so"
done
ln -s "$inc" "$root.partial/targets/aarch64-linux/include"
for f in "$top"/bin/*; do
	case "$(basename "$f")" in
	nvcc | nvcc.profile) cp "$f" "$root.partial/bin/" ;;
	*) ln -s "$f" "$root.partial/bin/" ;;
	esac
done
# nvvm: cicc and libdevice; lib: what nvcc adds to its programs' LD_LIBRARY_PATH.
for d in nvvm lib; do
	[ -e "$top/$d" ] && ln -s "$top/$d" "$root.partial/$d"
done
rm -rf "$root.partial/wheel"
# The copy must take its toolkit from where it lies (where the aarch64
# runtime is), or this folder is no cross toolkit at all.
got_here=$("$root.partial/bin/nvcc" --dryrun -x cu -c /dev/null -o /dev/null 2>&1 | sed -n 's/^#\$ _HERE_=//p' | head -1)
if [ "$got_here" != "$root.partial/bin" ]; then
	say "the copy of $nvcc takes its toolkit from '$got_here', not from $root.partial/bin"
	rm -rf "$root.partial"
	exit 2
fi
cache_dir_done "$root"
echo "$root/bin/nvcc"
