#!/usr/bin/env bash
# Installs what oeapatch needs, and nothing else. Idempotent: a second run only checks.
#   scripts/setup-deps.sh build   what building the CLI and liboea needs (the default)
#   scripts/setup-deps.sh demo    that, plus Debian's torch for scripts/demo's routing run
#   scripts/setup-deps.sh test    that, plus what the test suite needs
#
# Debian packages come from apt. The tree-sitter-python grammar comes from PyPI as a
# pinned, checksum-verified source distribution whose C sources our CMake build
# compiles (the grammar is never committed). That sdist ships parser.c and
# scanner.c but not the three headers the tree-sitter generator puts beside them
# (tree_sitter/parser.h, array.h, alloc.h): those are tree-sitter's own, and come
# from the source distribution of tree-sitter's Python binding of the generator
# release that produced the grammar (0.24.0), also pinned and verified. That sdist
# also carries tree-sitter's C runtime (lib/src/lib.c, lib/include/tree_sitter/api.h),
# which our build compiles as a static library (cmake/TreeSitterRuntime.cmake) in
# place of Debian 12's libtree-sitter 0.20.7: its query cursors can stop at a depth
# (docs/performance.md, "The CLI: apply and verify against git apply").
set -euo pipefail
here=$(cd "$(dirname "$0")/.." && pwd)
what=${1:-build}
case "$what" in build|demo|test) ;; *) echo "usage: setup-deps.sh [build|demo|test]" >&2; exit 2 ;; esac

# Debian 12 package names.
#  build: compiler, CMake, the libraries the CLI links, python3-pip to fetch the grammar,
#         patchelf (cmake --install of a -DOEAPATCH_BUNDLE=ON build sets RUNPATHs with it).
#  demo:  Debian's torch and numpy (select_experts runs on the CPU).
#  test:  cmocka (unit tests), clang/llvm/libfuzzer (sanitizer build and fuzzers), valgrind,
#         python3-venv (the environments of real sglang releases), debootstrap (the clean
#         Debian root that tests/e2e/test_install_bundle.sh runs the installed bundle in),
#         python3-yaml (the CI recipe's steps are run as written), acl (setfacl: apply keeps a
#         file's ACL, tests/e2e/test_ownership.sh).
debs=(build-essential cmake pkg-config git ca-certificates python3 python3-pip
      libgit2-dev libjansson-dev libinih-dev libssl-dev patchelf)
case "$what" in
  demo) debs+=(python3-torch python3-numpy) ;;
  test) debs+=(python3-torch python3-numpy libcmocka-dev clang llvm libfuzzer-14-dev valgrind
               python3-venv debootstrap python3-yaml acl) ;;
esac

missing=()
for p in "${debs[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if ((${#missing[@]})); then
  echo "setup-deps: installing Debian packages: ${missing[*]}" >&2
  sudo=""; [ "$(id -u)" = 0 ] || sudo=sudo
  $sudo env DEBIAN_FRONTEND=noninteractive apt-get update -qq
  $sudo env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
fi

# The grammar: pinned to 0.23.6 (ABI 14), which the 0.24.0 runtime below loads (ABI 13-14;
# grammar 0.25 is ABI 15 and would fail at ts_parser_set_language).
ts_ver=0.23.6
ts_sha256=354bfa0a2f9217431764a631516f85173e9711af2c13dbd796a8815acfe505d9
# The generator's headers and the runtime: tree-sitter 0.24.0, the release line that
# generated 0.23.6.
core_ver=0.24.0
core_sha256=abd95af65ca2f4f7eca356343391ed669e764f37748b5352946f00f7fc78e734
dest="$here/deps/tree-sitter-python-$ts_ver"
core_dest="$here/deps/tree-sitter-$core_ver"

# Fetches one pinned sdist into $2 with pip (the ordinary client for PyPI), verifies it.
fetch_sdist() { # NAME==VERSION DIR SHA256
  local spec=$1 dir=$2 sum=$3 f
  # Debian's /usr/bin/python3 has python3-pip; a python3 earlier on PATH may not.
  /usr/bin/python3 -m pip download --quiet --no-deps --no-binary=:all: \
    --disable-pip-version-check -d "$dir" "$spec" >&2 || {
      echo "setup-deps: could not download $spec from PyPI" >&2; exit 2; }
  f=$(ls "$dir"/*.tar.gz)
  echo "$sum  $f" | sha256sum -c --quiet - || {
    echo "setup-deps: checksum mismatch for $spec: refusing it" >&2; exit 2; }
  tar -xzf "$f" -C "$dir"
}

if [ ! -f "$dest/src/parser.c" ] || [ ! -f "$dest/src/tree_sitter/parser.h" ] ||
   [ ! -f "$core_dest/lib/src/lib.c" ] || [ ! -f "$core_dest/lib/include/tree_sitter/api.h" ]; then
  echo "setup-deps: fetching tree-sitter-python==$ts_ver and tree-sitter==$core_ver (runtime and headers) from PyPI" >&2
  tmp=$(mktemp -d); trap 'rm -rf "$tmp"' EXIT
  mkdir -p "$tmp/g" "$tmp/c" "$tmp/out/src/tree_sitter" "$tmp/core"
  fetch_sdist "tree-sitter-python==$ts_ver" "$tmp/g" "$ts_sha256"
  fetch_sdist "tree-sitter==$core_ver" "$tmp/c" "$core_sha256"
  g="$tmp/g/tree_sitter_python-$ts_ver" c="$tmp/c/tree-sitter-$core_ver/tree_sitter/core/lib/src"
  cp "$g/src/parser.c" "$g/src/scanner.c" "$tmp/out/src/"
  cp "$g/LICENSE" "$tmp/out/LICENSE"
  cp "$c/parser.h" "$c/array.h" "$c/alloc.h" "$c/ts_assert.h" "$tmp/out/src/tree_sitter/"
  # The runtime: its C library (lib/src, lib/include) and its licence, nothing else.
  cp -R "$tmp/c/tree-sitter-$core_ver/tree_sitter/core/lib" "$tmp/core/lib"
  cp "$tmp/c/tree-sitter-$core_ver/LICENSE" "$tmp/core/LICENSE"
  mkdir -p "$here/deps"
  for pair in "$tmp/out:$dest" "$tmp/core:$core_dest"; do
    from=${pair%%:*} to=${pair#*:}
    rm -rf "$to.partial" "$to" && mv "$from" "$to.partial" && mv "$to.partial" "$to"
  done
fi
