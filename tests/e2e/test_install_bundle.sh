#!/usr/bin/env bash
# test_install_bundle.sh - the self-contained install (-DOEAPATCH_BUNDLE=ON)
# runs on a machine that is not the build machine: a clean Debian 12 root
# (debootstrap --variant=minbase bookworm, cached by clean_root.sh) that has
# none of the build's libraries except the few every Debian has (zlib, pcre2,
# com_err), and no git, no compiler, no Python.
#
#  1. Configures and builds the project the way docs/deployment.md's Dockerfile
#     does (-DOEAPATCH_BUNDLE=ON -DOEA_CUDA=OFF, no tests) in
#     $OEAPATCH_BUILD_DIR/install-bundle/, then `cmake --install` into a
#     staging prefix, and copies that tree into the root at another path (as
#     a Dockerfile's COPY --from does: the bundle must be relocatable).
#  2. In the root (chroot in a private mount and PID namespace with its own
#     /proc, a clean environment): every library the binary and liboea load
#     resolves to glibc or into the bundle, none to the root's own copies;
#     `oeapatch version`; apply, verify (which dlopens liboea), status and
#     revert on a fixture checkout and on a site-packages layout, revert
#     giving back the bytes; `check` on a
#     git repository (libgit2 without a git binary); verify fails at its
#     library check when liboea is taken away, and holds again when it is back.
#
# Needs root (chroot, mounts) and debootstrap; without root it is skipped
# (exit 77). The first run builds the root (about 1-3 minutes, 130 MB under
# ${XDG_CACHE_HOME:-$HOME/.cache}/oeapatch); later runs reuse it.
set -uo pipefail

SRC=${OEAPATCH_SOURCE_DIR:-$(cd "$(dirname "$0")/../.." && pwd)}
BUILD_PARENT=${OEAPATCH_BUILD_DIR:-$SRC/build}
FIX=$SRC/tests/fixtures
T=python/sglang/srt/layers/moe/topk.py
. "$(dirname "$0")/testlib.sh"

if [ "$(id -u)" != 0 ]; then
	echo "SKIP: needs root (chroot and a private /proc mount)"
	exit 77
fi

start=$(date +%s)
echo "== the clean root"
if ! ROOT=$("$SRC/tests/e2e/clean_root.sh"); then
	bad "a clean Debian 12 root (tests/e2e/clean_root.sh)"
	e2e_summary
	exit 1
fi
ok "clean root at $ROOT ($(($(date +%s) - start)) s)"

STAGE=$(mktemp -d "${TMPDIR:-/tmp}/oeapatch-bundle.XXXXXX")
mkdir -p "$ROOT/tmp"
INROOT_DIR=$(mktemp -d "$ROOT/tmp/oeapatch-test.XXXXXX")
IN=${INROOT_DIR#"$ROOT"} # the same folder, as the chroot sees it
trap 'rm -rf "$STAGE" "$INROOT_DIR"' EXIT

echo "== build and install the bundle"
B=$BUILD_PARENT/install-bundle
t0=$(date +%s)
if cmake -S "$SRC" -B "$B" -DOEAPATCH_BUNDLE=ON -DOEAPATCH_TESTS=OFF -DOEA_CUDA=OFF \
	-DCMAKE_BUILD_TYPE=RelWithDebInfo >"$STAGE/configure.log" 2>&1 &&
	cmake --build "$B" -j"$(nproc)" >"$STAGE/build.log" 2>&1; then
	ok "configured and built with -DOEAPATCH_BUNDLE=ON ($(($(date +%s) - t0)) s)"
else
	bad "configure and build with -DOEAPATCH_BUNDLE=ON" "$(tail -20 "$STAGE"/*.log)"
	e2e_summary
	exit 1
fi
P=$STAGE/prefix
expect "cmake --install into a staging prefix" 0 cmake --install "$B" --prefix "$P"
manifest=$P/share/oeapatch/bundle.txt
check "bundle.txt lists what was bundled" test -s "$manifest"
mapfile -t bundled < <(grep -v '^#' "$manifest" | awk '{print $1}')
echo "bundled: ${bundled[*]}"
# The libraries oeapatch links today must all be there (a bundle that lost one
# would pass on the build machine and fail in an image). tree-sitter is not one:
# its runtime is compiled in (cmake/TreeSitterRuntime.cmake).
for lib in libgit2.so libjansson.so.4 libinih.so.1 libcrypto.so.3; do
	if printf '%s\n' "${bundled[@]}" | grep -q "^$lib"; then ok "bundled: $lib"; else bad "not bundled: $lib"; fi
done
for lib in libc.so.6 libm.so.6 ld-linux-x86-64.so.2; do
	if printf '%s\n' "${bundled[@]}" | grep -q "^$lib"; then bad "glibc's $lib was bundled"; else ok "not bundled: $lib (glibc)"; fi
done
rp=$(readelf -d "$P/bin/oeapatch" | sed -n 's/.*(RUNPATH).*\[\(.*\)\]/\1/p')
if [ "$rp" = '$ORIGIN/../lib/oeapatch' ]; then ok "bin/oeapatch RUNPATH is \$ORIGIN/../lib/oeapatch"; else bad "bin/oeapatch RUNPATH is '$rp'"; fi
for f in "$P"/lib/oeapatch/*.so*; do
	rp=$(readelf -d "$f" | sed -n 's/.*(RUNPATH).*\[\(.*\)\]/\1/p')
	[ "$rp" = '$ORIGIN' ] || bad "$(basename "$f") RUNPATH is '$rp', not \$ORIGIN"
done
ok "every bundled library has RUNPATH \$ORIGIN"
need=$(sed -n 's/.*glibc >= \([0-9.]*\).*/\1/p' "$manifest")
rootglibc=$(ls "$ROOT"/usr/lib/x86_64-linux-gnu/libc.so.6 >/dev/null && chroot "$ROOT" /usr/bin/ldd --version | sed -n '1s/.* \([0-9.]*\)$/\1/p')
echo "bundle needs glibc >= $need; the clean root has $rootglibc"

# As a Dockerfile's COPY: to another path than the install prefix.
O=$IN/opt/oeapatch
mkdir -p "$ROOT$O" && cp -a "$P/." "$ROOT$O/"

# inroot CMD...: runs CMD in the clean root, in a clean environment, with its own /proc.
inroot() {
	env -i PATH=/usr/local/bin:/usr/bin:/bin:/usr/sbin:/sbin HOME=/root NO_COLOR=1 LANG=C.UTF-8 \
		unshare --mount --pid --fork --mount-proc="$ROOT/proc" chroot "$ROOT" "$@"
}

echo "== in the clean root"
check "the root has no libgit2, libtree-sitter, jansson, inih or OpenSSL of its own" \
	bash -c "! ls '$ROOT'/usr/lib/x86_64-linux-gnu/ | grep -Eq '^lib(git2|tree-sitter|jansson|inih|crypto)\.so'"
check "the root has no git, no cc, no python3" \
	bash -c "! ls '$ROOT'/usr/bin/git '$ROOT'/usr/bin/cc '$ROOT'/usr/bin/python3 2>/dev/null | grep -q ."
expect "ldd $O/bin/oeapatch" 0 inroot /usr/bin/ldd "$O/bin/oeapatch"
ldd_out=$out
if grep -q "not found" <<<"$ldd_out"; then bad "ldd: a library is not found" "$ldd_out"; else ok "ldd: every library is found"; fi
# Every line "name => path": glibc from the root, everything else from the bundle.
stray=$(awk '$2 == "=>" { print $1, $3 }' <<<"$ldd_out" | sed 's|/bin/\.\./|/|' |
	grep -Ev "^(libc|libm|libresolv|libdl|libpthread|librt)\.so[^ ]* /(usr/)?lib/x86_64-linux-gnu/" |
	grep -v " $O/lib/oeapatch/" || true)
if [ -z "$stray" ]; then ok "ldd: glibc from the root, every other library from $O/lib/oeapatch"; else bad "ldd: libraries from outside the bundle" "$stray"; fi
# liboea's soname follows its ABI (liboea.so.<ABI>).
soname=$(cd "$ROOT$O/lib" && ls liboea.so.[0-9] | head -1)
expect "ldd liboea: glibc only" 0 inroot /usr/bin/ldd "$O/lib/$soname"
if awk '$2 == "=>" { print $1 }' <<<"$out" | grep -Ev '^(libc|libm|libdl|libpthread|librt)\.so' | grep -q .; then
	bad "liboea needs more than glibc" "$out"
else ok "liboea needs nothing but glibc"; fi

expect "oeapatch version" 0 inroot "$O/bin/oeapatch" version
has "version prints the version" "0."

# A fixture checkout: the stub package and one era's topk.py.
C=$IN/sglang
mkdir -p "$ROOT$C" && cp -a "$FIX/pkg/python" "$ROOT$C/"
mkdir -p "$ROOT$C/$(dirname "$T")" && cp "$FIX/eras/2025-12_layer_id_capturer.py" "$ROOT$C/$T"
cp "$ROOT$C/$T" "$STAGE/original.py"
expect "verify before apply: not applied" 1 inroot "$O/bin/oeapatch" verify -C "$C"
expect "apply" 0 inroot "$O/bin/oeapatch" apply -C "$C"
if cmp -s "$STAGE/original.py" "$ROOT$C/$T"; then bad "apply did not change topk.py"; else ok "apply changed topk.py"; fi
binding=$(ls "$ROOT$C/$(dirname "$T")"/_oeapatch_*.py 2>/dev/null | head -1)
if [ -n "$binding" ] && grep -qF "$O/lib/liboea.so" "$binding"; then
	ok "the binding records the bundle's liboea ($O/lib/liboea.so*)"
else bad "the binding does not record $O/lib/liboea.so*" "$(cat "$binding" 2>/dev/null | head -40)"; fi
expect "verify: holds (liboea loads)" 0 inroot "$O/bin/oeapatch" verify -C "$C"
expect "status" 0 inroot "$O/bin/oeapatch" status -C "$C"
expect "verify --json" 0 inroot "$O/bin/oeapatch" verify -C "$C" --json
has "verify --json names the library" "liboea.so"

# verify must really load it: without liboea it is trouble (2), and back again it holds.
oea_real=$(readlink -f "$ROOT$O/lib/$soname")
mv "$oea_real" "$oea_real.away"
out=$(inroot "$O/bin/oeapatch" verify -C "$C" 2>&1)
rc=$?
if [ "$rc" -ne 0 ] && grep -q "FAIL library" <<<"$out"; then
	ok "verify without liboea fails at the library check (exit $rc)"
else bad "verify without liboea: exit $rc, no failed library check" "$out"; fi
mv "$oea_real.away" "$oea_real"
expect "verify with liboea back: holds" 0 inroot "$O/bin/oeapatch" verify -C "$C"

expect "revert" 0 inroot "$O/bin/oeapatch" revert -C "$C"
check "revert gives topk.py back byte for byte" cmp "$STAGE/original.py" "$ROOT$C/$T"
expect "verify after revert: not applied" 1 inroot "$O/bin/oeapatch" verify -C "$C"

# An installed package, as pip leaves it in site-packages, addressed by that
# folder and from a folder inside it (the root has no Python: --python is
# exercised by tests/e2e/dockerfile_in_chroot.sh).
S=$IN/venv/lib/python3.11/site-packages
mkdir -p "$ROOT$S" && cp -a "$FIX/pkg/python/sglang" "$ROOT$S/"
cp "$FIX/eras/2026-02_post_process.py" "$ROOT$S/$(dirname "${T#python/}")/topk.py"
cp "$ROOT$S/${T#python/}" "$STAGE/original-installed.py"
expect "site-packages: apply -C $S" 0 inroot "$O/bin/oeapatch" apply -C "$S"
expect "site-packages: verify -C a folder inside it" 0 inroot "$O/bin/oeapatch" -C "$S/sglang/srt" verify
expect "site-packages: status" 0 inroot "$O/bin/oeapatch" status -C "$S"
expect "site-packages: revert" 0 inroot "$O/bin/oeapatch" revert -C "$S"
check "site-packages: revert gives topk.py back byte for byte" cmp "$STAGE/original-installed.py" "$ROOT$S/${T#python/}"

# libgit2 in the root: a repository made here, read there (the root has no git).
e2e_git_env "$STAGE"
R=$IN/repo
mkdir -p "$ROOT$R" && cp -a "$ROOT$C/." "$ROOT$R/"
if (cd "$ROOT$R" && git -c init.defaultBranch=main init -q && git add -A && git commit -qm fixture); then
	expect "check HEAD in a git repository (libgit2)" 0 inroot "$O/bin/oeapatch" check -C "$R" HEAD
	expect "verify --ref HEAD (libgit2 reads the blob)" 1 inroot "$O/bin/oeapatch" verify -C "$R" --ref HEAD
else
	bad "git repository for the check"
fi

echo "time: $(($(date +%s) - start)) s"
e2e_summary
