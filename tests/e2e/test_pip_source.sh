#!/usr/bin/env bash
# test_pip_source.sh - `pip wheel .` / `pip install .` from a clean clone
# (issue 26): no deps/, no build folder, nothing setup-deps.sh put there.
#
#  1. scripts/fetch-deps.sh refuses a source distribution whose digest is not
#     the pinned one, naming the file, the digest expected and the one it has;
#     the pins are written once (scripts/deps-pins.txt).
#  2. A clone of this tree's committed HEAD into a temporary folder; `pip wheel
#     --no-deps .` there, in a fresh venv, with pip's build isolation (which
#     fetches scikit-build-core as pyproject.toml pins it). Without a network
#     the same build runs with the pinned, digest-checked tools of
#     scripts/wheel-tools.txt from their cache (--no-build-isolation
#     --no-index), as scripts/build-wheel.sh builds. liboea is built CPU-only
#     (cmake.define.OEA_CUDA=OFF): the CUDA build is the main build's. CMake's
#     configure fetches the pinned grammar and runtime itself
#     (cmake/OeapatchDeps.cmake: from the cache, or downloaded and checked).
#  3. The wheel holds the executable, liboea, the patch definitions and
#     build.txt; pip installs it into another fresh venv, whose console entry
#     answers `oeapatch --version`.
#
# Exit 77 (skipped) only when neither the network nor a cache has the pinned
# build tools or the pinned grammar and runtime.
set -uo pipefail

SRC=${OEAPATCH_SOURCE_DIR:-$(cd "$(dirname "$0")/../.." && pwd)}
PY=${OEAPATCH_SYSTEM_PYTHON:-/usr/bin/python3}
tools_cache=${XDG_CACHE_HOME:-$HOME/.cache}/oeapatch/wheel-tools
WORK=$(mktemp -d "${TMPDIR:-/tmp}/oeapatch-pipsrc.XXXXXX")
trap 'rm -rf "$WORK"' EXIT
. "$(dirname "$0")/testlib.sh"
start=$(date +%s)

echo "== scripts/fetch-deps.sh refuses a file whose digest is not the pinned one"
read -r ts_ver ts_sha < <(awk '$1 == "tree-sitter-python" { print $2, $3 }' "$SRC/scripts/deps-pins.txt")
mkdir -p "$WORK/badcache"
echo "not the grammar" >"$WORK/badcache/tree-sitter-python-$ts_ver.tar.gz"
bad_sha=$(sha256sum "$WORK/badcache/tree-sitter-python-$ts_ver.tar.gz" | cut -d' ' -f1)
expect "a cached file with another digest: refused" 2 env OEAPATCH_DEPS_CACHE="$WORK/badcache" \
	"$SRC/scripts/fetch-deps.sh" "$WORK/baddeps"
has "it names the file" "$WORK/badcache/tree-sitter-python-$ts_ver.tar.gz"
has "the digest expected" "expected sha256 $ts_sha"
has "and the one it has" "it has $bad_sha"
check "nothing was unpacked" test ! -e "$WORK/baddeps"
# One place for the pins: the scripts and the CMake modules name no version or digest.
check "setup-deps.sh and the CMake modules carry no pin of their own" \
	bash -c "! grep -nE '$ts_sha|tree-sitter-python[^ ]*$ts_ver|TREE_SITTER(_PYTHON)?_VERSION +[0-9]' \
		'$SRC/scripts/setup-deps.sh' '$SRC'/cmake/*.cmake"

echo "== a clean clone of HEAD ($(git -C "$SRC" rev-parse --short HEAD))"
C=$WORK/clone
# Fetching HEAD from the work tree (not cloning its repository) takes what
# this branch committed, nothing of the work tree's deps/ or builds.
git init -q "$C" && git -C "$C" fetch -q "$SRC" HEAD && git -C "$C" checkout -q FETCH_HEAD ||
	{ bad "git clone of $SRC"; e2e_summary; exit 1; }
check "the clone has no deps/" test ! -e "$C/deps"
check "and no build folder" bash -c "! ls -d '$C'/build* 2>/dev/null"

echo "== pip wheel --no-deps . in the clone"
V=$WORK/venv-build
"$PY" -m venv "$V" >"$WORK/venv.log" 2>&1 || { bad "python3 -m venv" "$(cat "$WORK/venv.log")"; e2e_summary; exit 1; }
pipw() { # pip wheel of the clone with ARGS, its log in $WORK/pip.log
	(cd "$C" && timeout 1500 "$V/bin/python" -m pip wheel --no-deps --disable-pip-version-check -w "$WORK/out" \
		--config-settings=cmake.define.OEA_CUDA=OFF "$@" . >"$WORK/pip.log" 2>&1)
}
t0=$(date +%s)
how="pip's build isolation"
pipw
rc=$?
if [ "$rc" -ne 0 ] && grep -qiE "no matching distribution found for scikit-build-core|could not find a version that satisfies the requirement scikit-build-core" "$WORK/pip.log"; then
	# No index: the pinned, digest-checked build tools from their cache, as build-wheel.sh does.
	how="the cached pinned tools (--no-build-isolation)"
	if ! "$V/bin/python" -m pip install --quiet --disable-pip-version-check --no-index --find-links "$tools_cache" \
		--require-hashes --no-deps -r "$SRC/scripts/wheel-tools.txt" >"$WORK/tools.log" 2>&1; then
		echo "SKIP  the package index is not reachable and the pinned build tools are not cached in $tools_cache:"
		tail -5 "$WORK/tools.log" | sed 's/^/      | /'
		exit 77
	fi
	PATH=$V/bin:$PATH pipw --no-build-isolation --no-index
	rc=$?
fi
if [ "$rc" -ne 0 ] && grep -q "could not be downloaded" "$WORK/pip.log"; then
	echo "SKIP  the pinned grammar and runtime are neither cached nor reachable:"
	grep -A5 "could not be downloaded" "$WORK/pip.log" | head -8 | sed 's/^/      | /'
	exit 77
fi
secs=$(($(date +%s) - t0))
if [ "$rc" -ne 0 ]; then
	bad "pip wheel --no-deps . (exit $rc, with $how)" "$(tail -40 "$WORK/pip.log")"
	e2e_summary
	exit 1
fi
ok "pip wheel --no-deps . built, with $how, in $secs s"
check "configure put the pinned runtime under the clone's deps/" test -f "$C/deps/tree-sitter-$(awk '$1 == "tree-sitter" { print $2 }' "$SRC/scripts/deps-pins.txt")/lib/src/lib.c"
check "and the pinned grammar" test -f "$C/deps/tree-sitter-python-$ts_ver/src/parser.c"

WHL=$(ls "$WORK"/out/oeapatch-*.whl 2>/dev/null | head -1)
echo "== the wheel: $(basename "${WHL:-none}")"
"$PY" - "$WHL" >"$WORK/names.txt" 2>&1 <<'EOF'
import sys, zipfile
for n in zipfile.ZipFile(sys.argv[1]).namelist():
    print(n)
EOF
for f in oeapatch/bin/oeapatch 'oeapatch/lib/liboea\.so\.[0-9.]*' oeapatch/share/oeapatch/patches/sglang-oea/patch.ini \
	oeapatch/share/oeapatch/patches/sglang-oea/adapter.py oeapatch/share/oeapatch/patches/vllm-oea/patch.ini \
	oeapatch/share/oeapatch/patches/binding-core/oea_core.py oeapatch/share/oeapatch/build.txt; do
	if grep -qx "$f" "$WORK/names.txt"; then ok "holds $f"; else bad "does not hold $f" "$(head -40 "$WORK/names.txt")"; fi
done
out=$("$PY" -c 'import sys, zipfile; print(zipfile.ZipFile(sys.argv[1]).read("oeapatch/share/oeapatch/build.txt").decode())' "$WHL" 2>&1)
has "build.txt: liboea CPU only (OEA_CUDA=OFF reached CMake)" "CPU only"

echo "== pip install the wheel into a fresh venv"
V2=$WORK/venv-run
"$PY" -m venv "$V2" >"$WORK/venv2.log" 2>&1
expect "pip install the wheel file (--no-index)" 0 "$V2/bin/python" -m pip install --quiet --disable-pip-version-check \
	--no-index --no-deps "$WHL"
expect "its console entry: oeapatch --version" 0 env -u OEAPATCH_LIBRARY -u OEAPATCH_PATCH_DIR "$V2/bin/oeapatch" --version
has "it names this version" "oeapatch $(sed -n 's/^version = "\(.*\)"/\1/p' "$SRC/pyproject.toml")"

echo "time: $(($(date +%s) - start)) s (the pip wheel: $secs s)"
e2e_summary
