#!/usr/bin/env bash
# test_wheel.sh - `pip install oeapatch` as a user does it (issues 18, 34).
#
#  1. scripts/build-wheel.sh: the sdist and both wheels built from it
#     (x86_64 and aarch64, each by clang against its Debian 11 sysroot),
#     repaired by the pinned auditwheel to manylinux_2_28, with the CUDA
#     kernel in both (as released; the aarch64 one against the pinned
#     aarch64 CUDA runtime). Without nvcc the wheels are built CPU-only
#     (OEAPATCH_WHEEL_CUDA=OFF) and the kernel's checks are skipped, named.
#     The CMake builds are kept under $OEAPATCH_BUILD_DIR/wheel-cmake, the
#     sysroots and the aarch64 CUDA toolkit under ~/.cache/oeapatch.
#  2. Each wheel: tagged manylinux_2_28 (or older) for its architecture,
#     `auditwheel show` names no library outside the wheel but glibc's, it
#     holds the executable, liboea, the patch definitions, build.txt, the man
#     page and the completion; its liboea's fat binary (.nv_fatbin) holds
#     sm_80, sm_90, sm_100, sm_120 and PTX, the same bytes in both wheels
#     (device code does not depend on the host).
#  3. A fresh venv: pip installs the x86_64 wheel from the file and the real
#     SGLang 0.4.6.post5 (the cached wheel of test_installed_pip.sh,
#     --no-deps); from another folder (a checkout, which must stay as it
#     is) the console entry with no -C runs status, apply, verify, revert on
#     that venv's sglang. `pip install --force-reinstall` of oeapatch after
#     apply replaces liboea: verify loads the new file and holds, and a
#     verify with that file taken away fails naming it; verify's GPU check
#     on a simulated GPU machine (OEAPATCH_TEST_NVIDIA_ROOT/_CC, OEA on):
#     an H100 (sm_90) passes on the wheel's liboea, a Turing (sm_75, no
#     code for it) fails; `pip uninstall
#     oeapatch` leaves a binding whose library is gone: the build's oeapatch
#     verify fails naming it, and importing the binding with OEA on stops
#     with a message that names it (OEA off: it imports); pip installs it
#     again and apply/verify hold.
#  4. The sdist: pip installs it (a build from source) into another venv,
#     and its entry works.
#  5. A clean Debian 11 root with Python 3.9 (clean_root.sh python
#     bullseye, glibc 2.31): the x86_64 wheel and SGLang pip-installed in a
#     venv there, the entry's status, apply, verify (liboea loads) and
#     revert; every library oeapatch loads is glibc's, zlib's or the wheel's,
#     and liboea needs glibc's only; the GPU check (a B200, sm_100) passes.
#  6. The aarch64 wheel under qemu-user (qemu-aarch64-static, the arm64
#     sysroot as its root): its oeapatch's --version, and apply, verify and
#     revert on a venv's real SGLang, verify's GPU check on a simulated
#     GH200 (sm_90) passing on the aarch64 liboea (the venv's x86_64 python answers
#     oeapatch's questions: qemu hands exec to the kernel); its liboea
#     routes the same random problems (tests/e2e/oea_route_dump.c, every
#     option of the ABI) as the x86_64 wheel's, to the same bytes.
#
# Exit 77 (skipped) only when neither the network nor a cache has the
# pinned build tools or the SGLang wheel. Parts 1, 5 and 6 need root
# (debootstrap, chroot).
set -uo pipefail

SRC=${OEAPATCH_SOURCE_DIR:-$(cd "$(dirname "$0")/../.." && pwd)}
BUILD_PARENT=${OEAPATCH_BUILD_DIR:-$SRC/build}
OEAPATCH=${OEAPATCH:-$BUILD_PARENT/src/oeapatch}
PY=${OEAPATCH_SYSTEM_PYTHON:-/usr/bin/python3}
version=0.4.6.post5
sg_name=sglang-$version-py3-none-any.whl
cache=${OEAPATCH_WHEEL_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/oeapatch/wheels}
I=sglang/srt/layers/moe/topk.py
B=sglang/srt/layers/moe/_oeapatch_sglang_oea.py
FIX=$SRC/tests/fixtures
WORK=$(mktemp -d "${TMPDIR:-/tmp}/oeapatch-wheel.XXXXXX")
INROOT_DIR=
trap 'rm -rf "$WORK" ${INROOT_DIR:+"$INROOT_DIR"}' EXIT
. "$(dirname "$0")/testlib.sh"
start=$(date +%s)

echo "== the SGLang wheel ($cache/$sg_name)"
if [ ! -s "$cache/$sg_name" ]; then
	mkdir -p "$cache"
	if ! timeout 300 "$PY" -m pip download --quiet --no-deps --only-binary :all: "sglang==$version" \
		-d "$WORK/dl" >"$WORK/download.log" 2>&1 || [ ! -s "$WORK/dl/$sg_name" ]; then
		echo "SKIP  no cached $sg_name and the package index is not reachable:"
		tail -5 "$WORK/download.log" | sed 's/^/      | /'
		exit 77
	fi
	mv "$WORK/dl/$sg_name" "$cache/$sg_name"
fi
SG=$cache/$sg_name

echo "== build the sdist and the wheel (scripts/build-wheel.sh)"
D=$BUILD_PARENT/wheel-dist
t0=$(date +%s)
# The CUDA kernel as released when this machine has nvcc (build-wheel.sh
# looks where this does); else CPU-only wheels, and the kernel's checks skipped.
cuda=OFF
for c in "${CUDACXX:-}" "$(command -v nvcc || true)" "${CUDA_HOME:+$CUDA_HOME/bin/nvcc}" /usr/local/cuda/bin/nvcc; do
	if [ -n "$c" ] && [ -x "$c" ]; then cuda=ON && break; fi
done
OEAPATCH_WHEEL_BUILD_DIR=$BUILD_PARENT/wheel-cmake OEAPATCH_WHEEL_CUDA=$cuda \
	"$SRC/scripts/build-wheel.sh" "$D" >"$WORK/build.log" 2>&1
rc=$?
if [ "$rc" -eq 77 ]; then
	echo "SKIP  the pinned build tools are neither cached nor reachable:"
	tail -5 "$WORK/build.log" | sed 's/^/      | /'
	exit 77
fi
if [ "$rc" -ne 0 ]; then
	bad "scripts/build-wheel.sh (exit $rc)" "$(tail -30 "$WORK/build.log")"
	e2e_summary
	exit 1
fi
ok "built the sdist and both wheels, CUDA $cuda ($(($(date +%s) - t0)) s)"
WHL=$(grep -E '/oeapatch-[^/]*_x86_64\.whl$' "$WORK/build.log" | tail -1)
WHL_ARM=$(grep -E '/oeapatch-[^/]*_aarch64\.whl$' "$WORK/build.log" | tail -1)
SDIST=$(ls "$D"/oeapatch-*.tar.gz)
TOOLS=$D/.tools/bin
if [ -z "$WHL" ] || [ -z "$WHL_ARM" ]; then
	bad "build-wheel.sh printed the x86_64 and the aarch64 wheel" "$(tail -5 "$WORK/build.log")"
	e2e_summary
	exit 1
fi

for arch in x86_64 aarch64; do
W=$WHL
[ "$arch" = aarch64 ] && W=$WHL_ARM
echo "== the $arch wheel: $(basename "$W"), $(du -k "$W" | cut -f1) KiB"
# manylinux_2_28 or older: glibc 2.28 (RHEL 8, Ubuntu 20.04, Debian 11) and later.
if [[ $(basename "$W") =~ ^oeapatch-[0-9.]+-py3-none-manylinux_2_(1[0-9]|2[0-8])_${arch}\.whl$ ]]; then
	ok "tagged py3-none-manylinux_2_28_$arch or older"
else bad "the wheel's tag is not manylinux_2_28_$arch or older: $(basename "$W")"; fi
"$TOOLS/auditwheel" show "$W" >"$WORK/show.txt" 2>&1
out=$(tr '\n' ' ' <"$WORK/show.txt")
has "auditwheel show: consistent with its manylinux tag" "is consistent with the following platform tag: \"manylinux_"
if grep -q "external shared libraries are required" <<<"$out"; then
	bad "auditwheel show: libraries from outside the wheel are required" "$(cat "$WORK/show.txt")"
else ok "auditwheel show: no external library beyond the tag's (glibc)"; fi
# Every library it names as system-provided is glibc's or one grafted into the wheel (name-hash.so).
sys_libs=$(sed -n 's/.*system-provided shared libraries: //p' <<<"$out" | grep -o 'lib[A-Za-z0-9_+.-]*\.so[.0-9]* with versions' | cut -d' ' -f1 | sort -u)
stray=$(grep -Ev '^(libc|libm|libresolv|libdl|libpthread|librt)\.so|^lib[A-Za-z0-9_+.]*-[0-9a-f]{8}\.so' <<<"$sys_libs" || true)
if [ -z "$stray" ]; then ok "its system-provided libraries are glibc's"; else bad "system libraries beyond glibc" "$stray"; fi
"$PY" - "$W" >"$WORK/names.txt" <<'EOF2'
import sys, zipfile
for n in zipfile.ZipFile(sys.argv[1]).namelist():
    print(n)
EOF2
for f in oeapatch/bin/oeapatch 'oeapatch/lib/liboea\.so\.[0-9.]*' oeapatch/share/oeapatch/patches/sglang-oea/patch.ini \
	oeapatch/share/oeapatch/patches/sglang-oea/adapter.py oeapatch/share/oeapatch/patches/binding-core/oea_core.py \
	oeapatch/share/oeapatch/patches/vllm-oea/adapter.py oeapatch/share/oeapatch/build.txt \
	'oeapatch-[0-9.]*\.data/data/share/man/man1/oeapatch\.1' \
	'oeapatch-[0-9.]*\.data/data/share/bash-completion/completions/oeapatch' 'oeapatch\.libs/libgit2-.*'; do
	if grep -qx "$f" "$WORK/names.txt"; then ok "holds $f"; else bad "does not hold $f"; fi
done
# The plugin package is the source tree's, file for file and byte for byte: a
# kept build that shipped a stale or a missing module fails here.
if "$PY" - "$W" "$SRC/contrib/wheel/oeapatch" >"$WORK/pkg-$arch.txt" 2>&1 <<'EOF2'
import os, sys, zipfile
z = zipfile.ZipFile(sys.argv[1])
wheel = {n[len("oeapatch/"):]: z.read(n) for n in z.namelist()
         if n.startswith("oeapatch/") and n.count("/") == 1 and n.endswith(".py")}
src = {}
for n in sorted(os.listdir(sys.argv[2])):
    if n.endswith(".py"):
        with open(os.path.join(sys.argv[2], n), "rb") as f:
            src[n] = f.read()
diff = sorted(n for n in set(wheel) | set(src) if wheel.get(n) != src.get(n))
print("differs: %s" % diff if diff else "%d modules" % len(src))
sys.exit(1 if diff or not src else 0)
EOF2
then ok "its plugin package is contrib/wheel/oeapatch byte for byte ($(cat "$WORK/pkg-$arch.txt"))"
else bad "its plugin package is not contrib/wheel/oeapatch" "$(cat "$WORK/pkg-$arch.txt")"; fi
"$PY" -c 'import sys, zipfile; sys.stdout.write(zipfile.ZipFile(sys.argv[1]).read("oeapatch/share/oeapatch/build.txt").decode())' "$W" >"$WORK/build.txt"
out=$(cat "$WORK/build.txt")
if [ "$cuda" = ON ]; then
	has "build.txt says which liboea: the kernel's architectures" "with CUDA: 80-real;90-real;100-real;120"
	# The fat binary as verify's GPU check reads it (.nv_fatbin), with
	# pyelftools from the build's tools (auditwheel's).
	"$TOOLS/python" - "$W" >"$WORK/fatbin-$arch.txt" 2>&1 <<'EOF2'
import hashlib, io, re, struct, sys, zipfile
from elftools.elf.elffile import ELFFile
z = zipfile.ZipFile(sys.argv[1])
name = next(n for n in z.namelist() if re.fullmatch(r"oeapatch/lib/liboea\.so\.[0-9.]+", n))
s = ELFFile(io.BytesIO(z.read(name))).get_section_by_name(".nv_fatbin")
# One fat binary per CUDA source (magic 0xBA55ED50, u16 version, u16 header
# size, u64 size): their bytes, in order, without the padding the linker puts
# between them (aarch64's ld aligns them wider than x86_64's).
data, h, i, n = s.data() if s else b"", hashlib.sha256(), 0, 0
while True:
    i = data.find(struct.pack("<I", 0xBA55ED50), i)
    if i < 0:
        break
    _, head, size = struct.unpack_from("<HHQ", data, i + 4)
    h.update(data[i:i + head + size])
    i, n = i + head + size, n + 1
print(h.hexdigest() if n else "none")
EOF2
	if grep -qx '[0-9a-f]\{64\}' "$WORK/fatbin-$arch.txt"; then ok "its liboea has a CUDA fat binary (.nv_fatbin)"
	else bad "its liboea has no CUDA fat binary" "$(cat "$WORK/fatbin-$arch.txt")"; fi
else
	has "build.txt says which liboea (CPU only, no nvcc here)" "CPU only"
	skip "the CUDA kernel in the $arch wheel" "no nvcc on this machine: built with OEAPATCH_WHEEL_CUDA=OFF"
fi
done
if [ "$cuda" = ON ]; then
	if grep -qx '[0-9a-f]\{64\}' "$WORK/fatbin-x86_64.txt" && cmp -s "$WORK/fatbin-x86_64.txt" "$WORK/fatbin-aarch64.txt"; then
		ok "the two wheels' fat binaries are the same bytes, source by source (device code does not depend on the host)"
	else bad "the x86_64 and aarch64 fat binaries differ" "$(cat "$WORK/fatbin-x86_64.txt" "$WORK/fatbin-aarch64.txt")"; fi
fi

# gpu_check DESC RC CC CMD...: verify (CMD...) on a machine simulated to
# have one NVIDIA GPU of compute capability CC (gpu.h: OEAPATCH_TEST_NVIDIA_ROOT
# and _CC; the tree must be a path CMD sees, GPUTREE inside a chroot) with
# OEA on (SGLANG_OEA_K0=2): exits RC, and its gpu line says why.
GPUTREE=$WORK/gpu
mkdir -p "$GPUTREE/proc/driver/nvidia/gpus/0000:1b:00.0"
# (CMD may be a function of this script: the variables are exported for it.)
gpu_env() { (export SGLANG_OEA_K0=2 OEAPATCH_TEST_NVIDIA_ROOT="${GPUROOT:-$GPUTREE}" OEAPATCH_TEST_NVIDIA_CC="$1" && shift && "$@"); }
gpu_check() {
	local desc=$1 want=$2 cc=$3
	shift 3
	if [ "$cuda" != ON ]; then
		skip "$desc" "CPU-only wheels (no nvcc here)"
		return
	fi
	expect "$desc" "$want" gpu_env "$cc" "$@"
	local sm="sm_${cc/./}"
	if [ "$want" = 0 ]; then
		has "its gpu check passed, covering $sm" "(0000:1b:00.0 ($sm)), each covered by liboea's sm_80, sm_90, sm_100, sm_120, PTX compute_120"
	else
		has "its gpu check failed, naming $sm" "no code for $sm (0000:1b:00.0)"
	fi
}

echo "== a fresh venv: pip install the wheel and SGLang $version"
V=$WORK/venv
"$PY" -m venv "$V" >"$WORK/venv.log" 2>&1 || { bad "python3 -m venv" "$(cat "$WORK/venv.log")"; e2e_summary; exit 1; }
pipi() { "$V/bin/python" -m pip install --quiet --disable-pip-version-check --no-index --no-deps "$@" >"$WORK/pip.log" 2>&1 || { cat "$WORK/pip.log"; return 1; }; }
expect "pip install the wheel file" 0 pipi "$WHL"
check "bin/oeapatch is on the venv's PATH" test -x "$V/bin/oeapatch"
expect "pip install sglang==$version (--no-deps)" 0 pipi "$SG"
SITE=$("$V/bin/python" -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])')
cp "$SITE/$I" "$WORK/pristine.py"
LIB=$(ls "$SITE"/oeapatch/lib/liboea.so.* | head -1)
check "liboea is in the package folder" test -f "$LIB"
check "the man page is under the venv's share/man" test -f "$V/share/man/man1/oeapatch.1"
check "the completion is under the venv's share/bash-completion" test -f "$V/share/bash-completion/completions/oeapatch"
expect "oeapatch version" 0 "$V/bin/oeapatch" version
# From another folder: a checkout, which the venv default must leave alone.
C=$WORK/checkout
mkdir -p "$C" && cp -a "$FIX/pkg/python" "$C/" && cp "$FIX/eras/2025-12_layer_id_capturer.py" "$C/python/$I"
cp "$C/python/$I" "$WORK/checkout.py"
ent() { (cd "$C" && env -u OEAPATCH_LIBRARY -u OEAPATCH_PATCH_DIR "$V/bin/oeapatch" "$@"); }
expect "status (no -C): not applied" 1 ent status
has "it acts on the venv's sglang" "target $SITE/$I"
has "and says it is the environment's" "the environment oeapatch is installed in"
expect "apply (no -C)" 0 ent apply
has "the binding records the wheel's liboea" "-> $LIB"
check "the binding sits beside the venv's topk.py" grep -qF "$LIB" "$SITE/$B"
check "the current folder's checkout is untouched" cmp -s "$WORK/checkout.py" "$C/python/$I"
expect "verify (no -C)" 0 ent verify
has "its library check passed" "ok   library"
gpu_check "verify on a simulated H100 (sm_90), OEA on" 0 9.0 ent verify
gpu_check "verify on a simulated Turing GPU (sm_75: no code for it), OEA on" 1 7.5 ent verify
expect "status (no -C)" 0 ent status

echo "== pip install --force-reinstall oeapatch (what -U does to liboea)"
expect "pip install --force-reinstall the wheel" 0 pipi --force-reinstall "$WHL"
expect "verify after the reinstall: it loads the file pip put there" 0 ent verify
has "its library check passed" "ok   library"
mv "$LIB" "$LIB.away"
expect "verify with that file taken away" 1 ent verify
has "FAIL library, naming it" "FAIL library                $LIB"
mv "$LIB.away" "$LIB"
expect "apply after the reinstall: already applied" 0 ent apply
expect "revert (no -C)" 0 ent revert
check "revert gives the wheel's topk.py back byte for byte" cmp -s "$WORK/pristine.py" "$SITE/$I"
check "the binding module is gone" test ! -e "$SITE/$B"

echo "== pip uninstall oeapatch while applied"
expect "apply again" 0 ent apply
expect "pip uninstall -y oeapatch" 0 "$V/bin/python" -m pip uninstall --quiet --disable-pip-version-check -y oeapatch
check "liboea went with it" test ! -e "$LIB"
check "bin/oeapatch went with it" test ! -e "$V/bin/oeapatch"
expect "verify (the build's oeapatch, --python)" 1 "$OEAPATCH" --python "$V/bin/python" verify
has "FAIL library, naming the file that is gone" "FAIL library                $LIB: No such file or directory"
# The module as topk.py imports it, loaded by its path (sglang's own
# __init__ needs numpy and more, which --no-deps left out).
load_binding='import importlib.util, sys; s = importlib.util.spec_from_file_location("oeab", sys.argv[1]); s.loader.exec_module(importlib.util.module_from_spec(s))'
expect "OEA off: the binding imports" 0 env SGLANG_OEA_K0=0 "$V/bin/python" -c "$load_binding" "$SITE/$B"
expect "OEA on: importing the binding stops with a message" 1 env SGLANG_OEA_K0=2 "$V/bin/python" -c "$load_binding" "$SITE/$B"
has "it names the missing library" "liboea at '$LIB' is unusable"
has "and what to do instead" "SGLANG_OEA_STRICT=false"
expect "pip install the wheel again" 0 pipi "$WHL"
expect "apply" 0 ent apply
expect "verify" 0 ent verify
expect "revert" 0 ent revert

echo "== pip install the sdist (a build from source)"
V2=$WORK/venv-sdist
t0=$(date +%s)
"$PY" -m venv "$V2" >"$WORK/venv2.log" 2>&1
# The build backend from the same pinned, digest-checked cache, no index.
expect "the pinned build tools into it" 0 "$V2/bin/python" -m pip install --quiet --disable-pip-version-check \
	--no-index --find-links "${XDG_CACHE_HOME:-$HOME/.cache}/oeapatch/wheel-tools" --require-hashes --no-deps \
	-r "$SRC/scripts/wheel-tools.txt"
expect "pip install the sdist" 0 env PATH="$V2/bin:$PATH" "$V2/bin/python" -m pip install --quiet \
	--disable-pip-version-check --no-index --no-deps --no-build-isolation \
	--config-settings=cmake.define.OEA_CUDA=OFF "$SDIST"
ok "(the sdist built and installed in $(($(date +%s) - t0)) s)"
expect "pip install sglang into it" 0 "$V2/bin/python" -m pip install --quiet --disable-pip-version-check --no-index --no-deps "$SG"
expect "its entry: status (no -C)" 1 bash -c "cd '$C' && '$V2/bin/oeapatch' status"
has "on that venv's sglang" "target $("$V2/bin/python" -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])')/$I"
expect "its entry: apply, verify, revert" 0 bash -c "cd '$C' && '$V2/bin/oeapatch' apply && '$V2/bin/oeapatch' verify && '$V2/bin/oeapatch' revert"

echo "== a clean Debian 11 root (glibc 2.31) with Python"
if [ "$(id -u)" != 0 ]; then
	skip "the clean root" "needs root (chroot and a private /proc mount)"
elif ! ROOT=$("$SRC/tests/e2e/clean_root.sh" python bullseye); then
	bad "a clean Debian 11 root with python3 (tests/e2e/clean_root.sh python bullseye)"
else
	check "the root's glibc is 2.31" test -e "$ROOT/lib/x86_64-linux-gnu/libc-2.31.so"
	mkdir -p "$ROOT/tmp"
	INROOT_DIR=$(mktemp -d "$ROOT/tmp/oeapatch-wheel.XXXXXX")
	IN=${INROOT_DIR#"$ROOT"}
	cp "$WHL" "$SG" "$INROOT_DIR/"
	# (gpu_check's variables pass through; nothing else of this environment.)
	inroot() {
		env -i PATH=/usr/local/bin:/usr/bin:/bin:/usr/sbin:/sbin HOME=/root NO_COLOR=1 LANG=C.UTF-8 \
			${SGLANG_OEA_K0:+SGLANG_OEA_K0=$SGLANG_OEA_K0} \
			${OEAPATCH_TEST_NVIDIA_ROOT:+OEAPATCH_TEST_NVIDIA_ROOT=$OEAPATCH_TEST_NVIDIA_ROOT} \
			${OEAPATCH_TEST_NVIDIA_CC:+OEAPATCH_TEST_NVIDIA_CC=$OEAPATCH_TEST_NVIDIA_CC} \
			unshare --mount --pid --fork --mount-proc="$ROOT/proc" chroot "$ROOT" "$@"
	}
	# (Its python3 brings OpenSSL: ldd below shows oeapatch loads the wheel's.)
	check "the root has no libgit2, libtree-sitter, jansson or inih of its own" \
		bash -c "! ls '$ROOT'/usr/lib/x86_64-linux-gnu/ | grep -Eq '^lib(git2|tree-sitter|jansson|inih)\.so'"
	RV=$IN/venv
	expect "python3 -m venv in the root" 0 inroot /usr/bin/python3 -m venv "$RV"
	expect "pip install the wheel and sglang there (no index)" 0 inroot "$RV/bin/python" -m pip install --quiet \
		--disable-pip-version-check --no-index --no-deps "$IN/$(basename "$WHL")" "$IN/$sg_name"
	RSITE=$(inroot "$RV/bin/python" -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])')
	expect "ldd of the wheel's oeapatch" 0 inroot /usr/bin/ldd "$RSITE/oeapatch/bin/oeapatch"
	ldd_out=$out
	if grep -q "not found" <<<"$ldd_out"; then bad "ldd: a library is not found" "$ldd_out"; else ok "ldd: every library is found"; fi
	# glibc and zlib (which the manylinux policy counts as the system's) from
	# the root, everything else from the wheel's oeapatch.libs.
	stray=$(awk '$2 == "=>" { print $1, $3 }' <<<"$ldd_out" | sed 's|/oeapatch/bin/\.\./\.\./|/|' |
		grep -Ev "^(libc|libm|libresolv|libdl|libpthread|librt|libz)\.so[^ ]* /(usr/)?lib/x86_64-linux-gnu/" |
		grep -v " $RSITE/oeapatch\.libs/" || true)
	if [ -z "$stray" ]; then ok "ldd: glibc and zlib from the root, every other library from the wheel's oeapatch.libs"; else bad "ldd: libraries from outside the wheel" "$stray"; fi
	cp "$ROOT$RSITE/$I" "$WORK/root-pristine.py"
	expect "status in the root (no -C)" 1 inroot "$RV/bin/oeapatch" status
	has "on the root venv's sglang" "target $RSITE/$I"
	expect "apply in the root" 0 inroot "$RV/bin/oeapatch" apply
	expect "verify in the root (liboea loads)" 0 inroot "$RV/bin/oeapatch" verify
	has "its library check passed" "ok   library"
	expect "ldd of the wheel's liboea in the root" 0 inroot /usr/bin/ldd "$(ls "$ROOT$RSITE"/oeapatch/lib/liboea.so.*.* | sed "s|^$ROOT||")"
	stray=$(awk '$2 == "=>" { print $1 }' <<<"$out" | grep -Ev '^(libc|libm|libdl|libpthread|librt)\.so' || true)
	if [ -z "$stray" ] && ! grep -q "not found" <<<"$out"; then ok "liboea (with its CUDA runtime) needs glibc's libraries only"
	else bad "liboea needs more than glibc" "$out"; fi
	mkdir -p "$INROOT_DIR/gpu/proc/driver/nvidia/gpus/0000:1b:00.0"
	GPUROOT=$IN/gpu gpu_check "verify in the root on a simulated B200 (sm_100), OEA on" 0 10.0 inroot "$RV/bin/oeapatch" verify
	expect "status in the root" 0 inroot "$RV/bin/oeapatch" status
	expect "revert in the root" 0 inroot "$RV/bin/oeapatch" revert
	check "revert gives topk.py back byte for byte" cmp -s "$WORK/root-pristine.py" "$ROOT$RSITE/$I"
fi

echo "== the aarch64 wheel under qemu-user"
QEMU=$(command -v qemu-aarch64-static || true)
if [ "$(id -u)" != 0 ]; then
	skip "the aarch64 wheel under qemu-user" "needs root (the arm64 sysroot is made with debootstrap)"
elif [ -z "$QEMU" ]; then
	bad "qemu-aarch64-static is not installed (scripts/setup-deps.sh test installs qemu-user-static)"
elif ! ARMROOT=$("$SRC/scripts/wheel-sysroot.sh" arm64 2>"$WORK/sysroot.log"); then
	bad "the arm64 sysroot (scripts/wheel-sysroot.sh arm64)" "$(cat "$WORK/sysroot.log")"
else
	# Both wheels unpacked as pip would (the files' modes kept).
	unzipw() {
		"$PY" - "$1" "$2" <<'EOF3'
import os, sys, zipfile
z = zipfile.ZipFile(sys.argv[1])
for i in z.infolist():
    p = z.extract(i, sys.argv[2])
    if i.external_attr >> 16:
        os.chmod(p, (i.external_attr >> 16) & 0o7777)
EOF3
	}
	A=$WORK/arm X=$WORK/x86
	unzipw "$WHL_ARM" "$A" && unzipw "$WHL" "$X"
	AO=$A/oeapatch/bin/oeapatch
	# The sysroot is qemu's root for the loader and glibc; everything else
	# comes from the wheel's oeapatch.libs through the binary's RUNPATH.
	arm() { env -u OEAPATCH_LIBRARY -u OEAPATCH_PATCH_DIR QEMU_LD_PREFIX="$ARMROOT" "$QEMU" "$AO" "$@"; }
	expect "readelf: the wheel's oeapatch" 0 readelf -h "$AO"
	has "is an aarch64 executable" "AArch64"
	expect "oeapatch --version (the aarch64 wheel's, under qemu-user)" 0 arm --version
	has "it names its version" "oeapatch 0.1.0"
	VA=$WORK/venv-arm
	"$PY" -m venv "$VA" >"$WORK/venv-arm.log" 2>&1 || bad "python3 -m venv" "$(cat "$WORK/venv-arm.log")"
	expect "pip install sglang==$version (--no-deps) into a venv" 0 "$VA/bin/python" -m pip install --quiet \
		--disable-pip-version-check --no-index --no-deps "$SG"
	ASITE=$("$VA/bin/python" -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])')
	cp "$ASITE/$I" "$WORK/arm-pristine.py"
	expect "apply (aarch64, --python the venv's)" 0 arm --python "$VA/bin/python" apply
	has "the binding records the aarch64 wheel's liboea" "-> $A/oeapatch/lib/liboea.so."
	check "topk.py is patched" bash -c "! cmp -s '$WORK/arm-pristine.py' '$ASITE/$I'"
	expect "verify (aarch64)" 0 arm --python "$VA/bin/python" verify
	has "its library check passed: the aarch64 liboea loads" "ok   library"
	gpu_check "verify (aarch64) on a simulated GH200 (sm_90), OEA on" 0 9.0 arm --python "$VA/bin/python" verify
	expect "status (aarch64)" 0 arm --python "$VA/bin/python" status
	expect "revert (aarch64)" 0 arm --python "$VA/bin/python" revert
	check "revert gives topk.py back byte for byte" cmp -s "$WORK/arm-pristine.py" "$ASITE/$I"

	# The routing: the same problems through both wheels' liboea.
	dump_src=("$SRC/tests/e2e/oea_route_dump.c" -std=c11 -D_GNU_SOURCE -O1 -I"$SRC/native/include" -I"$SRC/native/tests")
	expect "oea_route_dump for x86_64" 0 cc "${dump_src[@]}" -o "$WORK/dump-x86" -ldl -lm
	expect "oea_route_dump for aarch64 (clang, the arm64 sysroot)" 0 clang --target=aarch64-linux-gnu \
		--sysroot="$ARMROOT" "${dump_src[@]}" -o "$WORK/dump-arm" -ldl -lm
	expect "200 random problems (every option of the ABI)" 0 "$WORK/dump-x86" gen 20261203 200 "$WORK/problems.bin"
	XLIB=$(ls "$X"/oeapatch/lib/liboea.so.*.*) ALIB=$(ls "$A"/oeapatch/lib/liboea.so.*.*)
	expect "the x86_64 wheel's liboea routes them" 0 bash -c "'$WORK/dump-x86' route '$XLIB' '$WORK/problems.bin' >'$WORK/route-x86.txt'"
	expect "the aarch64 wheel's liboea routes them (qemu-user)" 0 bash -c "QEMU_LD_PREFIX='$ARMROOT' '$QEMU' '$WORK/dump-arm' route '$ALIB' '$WORK/problems.bin' >'$WORK/route-arm.txt'"
	routed=$(grep -c ' status 0$' "$WORK/route-x86.txt")
	if [ "$routed" -ge 100 ]; then ok "$routed of the 200 were routed (status 0; the rest are refused inputs)"
	else bad "only $routed of the 200 problems were routed" "$(head -3 "$WORK/route-x86.txt")"; fi
	if cmp -s "$WORK/route-x86.txt" "$WORK/route-arm.txt"; then
		ok "aarch64 and x86_64 give the same status, stats, ids and weights, byte for byte ($(wc -c <"$WORK/route-x86.txt") bytes of hex)"
	else
		bad "the aarch64 liboea routes differently from the x86_64 one" \
			"$(diff "$WORK/route-x86.txt" "$WORK/route-arm.txt" | head -4 | cut -c1-200)"
	fi
fi

echo "time: $(($(date +%s) - start)) s"
e2e_summary
