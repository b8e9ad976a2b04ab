#!/usr/bin/env bash
# fetch-deps.sh [DEPS]: puts the pinned tree-sitter-python grammar and the
# tree-sitter runtime of scripts/deps-pins.txt under DEPS (default: deps/ of
# this tree), checked against their pinned SHA-256. Run by
# scripts/setup-deps.sh, and by CMake's configure (cmake/OeapatchDeps.cmake)
# when DEPS lacks them, so that `pip install .`, `pip wheel .` and `pip
# install git+URL` build from a clean clone (docs/deployment.md, "The wheel").
#
# Each source distribution comes from the cache
# (${OEAPATCH_DEPS_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/oeapatch/deps}/NAME-VERSION.tar.gz),
# or else through pip download (the ordinary client of the package index, so
# the user's own index settings apply) and is cached once it matched. A file
# whose digest is not the pinned one, cached or downloaded, is refused: the
# error names the file, the digest expected and the one it has.
#
# The grammar's sdist ships parser.c and scanner.c but not the three headers
# the tree-sitter generator puts beside them (tree_sitter/parser.h, array.h,
# alloc.h): those come from tree-sitter's sdist, which also carries the C
# runtime (lib/src/lib.c, lib/include/tree_sitter/api.h) that
# cmake/TreeSitterRuntime.cmake compiles.
#
# pip runs under the first of $OEAPATCH_PIP_PYTHON (CMake passes the
# interpreter that runs the build), /usr/bin/python3 and python3 that has it,
# isolated (-I): inside pip's own build isolation the building interpreter
# sees none of its site-packages unless told to ignore PYTHONPATH.
#
# Exit 0: DEPS holds both. 2: refused (a digest mismatch, a bad pins file).
# 3: not cached and could not be downloaded (no network, no pip).
set -euo pipefail
here=$(cd "$(dirname "$0")/.." && pwd)
deps=${1:-$here/deps}
pins=${OEAPATCH_DEPS_PINS:-$here/scripts/deps-pins.txt}
cache=${OEAPATCH_DEPS_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/oeapatch/deps}
say() { echo "fetch-deps: $*" >&2; }

pin() { # NAME -> "VERSION SHA256" from the pins file
	awk -v n="$1" '$1 == n { print $2, $3; found = 1 } END { exit !found }' "$pins" ||
		{ say "$pins pins no $1"; exit 2; }
}
read -r ts_ver ts_sha256 < <(pin tree-sitter-python)
read -r core_ver core_sha256 < <(pin tree-sitter)
# (pin's exit inside <(...) does not stop this shell: an empty digest does.)
[ -n "${ts_sha256:-}" ] && [ -n "${core_sha256:-}" ] || exit 2
dest=$deps/tree-sitter-python-$ts_ver
core_dest=$deps/tree-sitter-$core_ver

if [ -f "$dest/src/parser.c" ] && [ -f "$dest/src/tree_sitter/parser.h" ] &&
	[ -f "$core_dest/lib/src/lib.c" ] && [ -f "$core_dest/lib/include/tree_sitter/api.h" ]; then
	exit 0
fi

tmp=$(mktemp -d "${TMPDIR:-/tmp}/oeapatch-deps.XXXXXX")
trap 'rm -rf "$tmp"' EXIT

pip_python() {
	local p
	for p in ${OEAPATCH_PIP_PYTHON:+"$OEAPATCH_PIP_PYTHON"} /usr/bin/python3 python3; do
		if "$p" -I -m pip --version >/dev/null 2>&1; then
			echo "$p"
			return 0
		fi
	done
	return 1
}

# sha256 FILE: its digest.
sha256() { sha256sum "$1" | cut -d' ' -f1; }

# get NAME VERSION SHA256 OUT: the verified sdist at OUT.
get() {
	local name=$1 ver=$2 want=$3 out=$4 cached=$cache/$1-$2.tar.gz got f py
	if [ -f "$cached" ]; then
		got=$(sha256 "$cached")
		if [ "$got" != "$want" ]; then
			say "digest mismatch, refusing $cached: expected sha256 $want, it has $got (remove it to fetch it again)"
			exit 2
		fi
		cp "$cached" "$out"
		return 0
	fi
	if ! py=$(pip_python); then
		say "$name==$ver is not cached in $cache, and no python3 with pip to download it (Debian: apt-get install python3-pip)"
		exit 3
	fi
	say "downloading $name==$ver with $py -m pip"
	mkdir -p "$tmp/dl-$name"
	if ! "$py" -I -m pip download --quiet --no-deps --no-binary=:all: --disable-pip-version-check \
		-d "$tmp/dl-$name" "$name==$ver" >"$tmp/pip-$name.log" 2>&1; then
		say "$name==$ver is not cached in $cache and could not be downloaded:"
		tail -5 "$tmp/pip-$name.log" | sed 's/^/  | /' >&2
		exit 3
	fi
	f=$(ls "$tmp/dl-$name"/*.tar.gz)
	got=$(sha256 "$f")
	if [ "$got" != "$want" ]; then
		say "digest mismatch, refusing the downloaded $(basename "$f") ($name==$ver): expected sha256 $want, it has $got"
		exit 2
	fi
	cp "$f" "$out"
	# The cache is a convenience: a cache that cannot be written costs a download next time, no more.
	if mkdir -p "$cache" 2>/dev/null && cp "$f" "$cached.partial.$$" 2>/dev/null; then
		mv -f "$cached.partial.$$" "$cached"
	else
		rm -f "$cached.partial.$$" 2>/dev/null || true
	fi
}

# unpack TARBALL DIR: the sdist's one top folder, unpacked under DIR.
unpack() {
	mkdir -p "$2"
	tar -xzf "$1" -C "$2"
	local top=("$2"/*/)
	if [ "${#top[@]}" -ne 1 ]; then
		say "$1 does not unpack into one folder"
		exit 2
	fi
	echo "${top[0]%/}"
}

get tree-sitter-python "$ts_ver" "$ts_sha256" "$tmp/grammar.tar.gz"
get tree-sitter "$core_ver" "$core_sha256" "$tmp/core.tar.gz"
g=$(unpack "$tmp/grammar.tar.gz" "$tmp/g")
c=$(unpack "$tmp/core.tar.gz" "$tmp/c")
mkdir -p "$tmp/out/src/tree_sitter" "$tmp/core"
cp "$g/src/parser.c" "$g/src/scanner.c" "$tmp/out/src/"
cp "$g/LICENSE" "$tmp/out/LICENSE"
h=$c/tree_sitter/core/lib/src
cp "$h/parser.h" "$h/array.h" "$h/alloc.h" "$h/ts_assert.h" "$tmp/out/src/tree_sitter/"
# The runtime: its C library (lib/src, lib/include) and its licence, nothing else.
cp -R "$c/tree_sitter/core/lib" "$tmp/core/lib"
cp "$c/LICENSE" "$tmp/core/LICENSE"
mkdir -p "$deps"
# Whole folders, renamed into place: a build running beside this one sees a
# folder complete or not at all.
for pair in "$tmp/out:$dest" "$tmp/core:$core_dest"; do
	from=${pair%%:*} to=${pair#*:}
	rm -rf "$to.partial.$$" && mv "$from" "$to.partial.$$" && rm -rf "$to" && mv "$to.partial.$$" "$to"
done
say "tree-sitter-python $ts_ver and tree-sitter $core_ver (sha256 checked) are in $deps"
