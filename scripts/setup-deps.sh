#!/usr/bin/env bash
# Installs what oeapatch needs to build and test, and nothing else. Idempotent:
# a second run only checks. Debian packages come from apt; the tree-sitter-python
# grammar comes from the npm registry as a pinned, checksum-verified tarball whose
# C sources our CMake build compiles (the grammar is never committed).
set -euo pipefail
here=$(cd "$(dirname "$0")/.." && pwd)

# Debian 12 package names. python3-torch/numpy are for the end-to-end tests only,
# libfuzzer for the fuzz targets; they are small next to torch and always installed so
# that "the test command" is one command.
debs=(build-essential cmake pkg-config git clang llvm libfuzzer-14-dev valgrind
      libtree-sitter-dev libgit2-dev libcmocka-dev libjansson-dev libinih-dev
      libssl-dev python3 python3-torch python3-numpy)

missing=()
for p in "${debs[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
# npm may come with a nodejs package of another origin: ask for the command, not the package.
command -v npm >/dev/null 2>&1 || missing+=(nodejs npm)
if ((${#missing[@]})); then
  echo "setup-deps: installing Debian packages: ${missing[*]}" >&2
  sudo=""; [ "$(id -u)" = 0 ] || sudo=sudo
  $sudo env DEBIAN_FRONTEND=noninteractive apt-get update -qq
  $sudo env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
fi

# The grammar: pinned to 0.23.6 (ABI 14). Debian 12's tree-sitter 0.20.7 runtime loads
# ABI 13-14 only; 0.25 is ABI 15 and would fail at ts_parser_set_language.
ts_ver=0.23.6
ts_sha256=aab5b860d93dbf84b37fed532f7dacc0468ede5387d0c74911d68f964287662a
dest="$here/deps/tree-sitter-python-$ts_ver"
if [ ! -f "$dest/src/parser.c" ]; then
  echo "setup-deps: fetching tree-sitter-python@$ts_ver from the npm registry" >&2
  tmp=$(mktemp -d); trap 'rm -rf "$tmp"' EXIT
  (cd "$tmp" && npm pack --silent "tree-sitter-python@$ts_ver" >/dev/null)
  tgz="$tmp/tree-sitter-python-$ts_ver.tgz"
  echo "$ts_sha256  $tgz" | sha256sum -c --quiet - || {
    echo "setup-deps: checksum mismatch for tree-sitter-python@$ts_ver: refusing it" >&2; exit 2; }
  mkdir -p "$tmp/x" && tar -xzf "$tgz" -C "$tmp/x"
  mkdir -p "$here/deps" && rm -rf "$dest.partial" && mv "$tmp/x/package" "$dest.partial"
  mv "$dest.partial" "$dest"
fi
