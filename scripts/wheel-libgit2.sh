#!/usr/bin/env bash
# wheel-libgit2.sh ARCH SYSROOT: builds libgit2 for the wheel into SYSROOT's
# /usr/local (run by scripts/wheel-sysroot.sh while it makes the sysroot).
#
# Why not bullseye's libgit2: its 1.1 lacks what oeapatch needs (the
# repository-owner check of 1.4, GIT_EOWNER, and the 1.4 names of its API).
# Why not bookworm's binary package: it is linked against glibc 2.36 (stat,
# fstat ... of 2.33), so no manylinux_2_28 wheel could carry it. So Debian's
# own source of bookworm's libgit2 (the version scripts/setup-deps.sh
# installs for the main build) is compiled against the bullseye sysroot:
# the upstream tarball Debian ships plus Debian's patches (its series, which
# holds the CVE-2024-24575 and CVE-2024-24577 fixes), both pinned by SHA-256
# in scripts/deps-pins.txt and cached beside the other sources
# (${OEAPATCH_DEPS_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/oeapatch/deps}).
#
# oeapatch reads local repositories only: no HTTPS, SSH or NTLM transport is
# built (so no OpenSSL, libssh2 or Kerberos in it); regular expressions are
# glibc's regcomp; zlib and http-parser (which libgit2 1.5 always links)
# come from the sysroot. A shared library: auditwheel copies it into the
# wheel like the others.
set -euo pipefail
arch=${1:-} sysroot=${2:-}
case "$arch" in
amd64) triplet=x86_64-linux-gnu ;;
arm64) triplet=aarch64-linux-gnu ;;
*)
	echo "wheel-libgit2: usage: wheel-libgit2.sh amd64|arm64 SYSROOT (got '${arch}')" >&2
	exit 2
	;;
esac
[ -d "$sysroot/usr/include" ] || { echo "wheel-libgit2: '$sysroot' is not a sysroot" >&2; exit 2; }
here=$(cd "$(dirname "$0")/.." && pwd)
pins=$here/scripts/deps-pins.txt
cache=${OEAPATCH_DEPS_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/oeapatch/deps}
say() { echo "wheel-libgit2: $*" >&2; }
pin() { awk -v n="$1" '$1 == n { print $2, $3; found = 1 } END { exit !found }' "$pins" || { say "$pins pins no $1"; exit 2; }; }
read -r orig_ver orig_sha < <(pin libgit2-debian-orig)
read -r deb_ver deb_sha < <(pin libgit2-debian)
[ -n "${orig_sha:-}" ] && [ -n "${deb_sha:-}" ] || exit 2

# The mirror: wheel-sysroot.sh passes the one it used.
mirror=${OEAPATCH_DEBIAN_MIRROR:-$(cat /etc/apt/sources.list.d/*.sources 2>/dev/null | awk '/^URIs:/ && $2 !~ /security/ { print $2; exit }')}
# get FILE SHA256: the file from the cache, else from the mirror's pool (as
# `apt-get source` fetches it), refused unless its digest is the pinned one.
get() {
	local f=$1 want=$2 got
	mkdir -p "$cache"
	if [ ! -f "$cache/$f" ]; then
		[ -n "$mirror" ] || { say "$f is not cached and no Debian mirror is known; set OEAPATCH_DEBIAN_MIRROR"; exit 3; }
		say "downloading $f"
		if ! wget -q --tries=2 -O "$cache/$f.partial.$$" "$mirror/pool/main/libg/libgit2/${f//+/%2B}"; then
			rm -f "$cache/$f.partial.$$"
			say "$f is not cached and could not be downloaded"
			exit 3
		fi
		mv -f "$cache/$f.partial.$$" "$cache/$f"
	fi
	got=$(sha256sum "$cache/$f" | cut -d' ' -f1)
	if [ "$got" != "$want" ]; then
		say "digest mismatch, refusing $cache/$f: expected sha256 $want, it has $got (remove it to fetch it again)"
		exit 2
	fi
}
orig=libgit2_$orig_ver.orig.tar.xz
debian=libgit2_$deb_ver.debian.tar.xz
get "$orig" "$orig_sha"
get "$debian" "$deb_sha"

tmp=$(mktemp -d "${TMPDIR:-/tmp}/oeapatch-libgit2.XXXXXX")
trap 'rm -rf "$tmp"' EXIT
tar -xJf "$cache/$orig" -C "$tmp"
src=$(echo "$tmp"/libgit2-*/)
tar -xJf "$cache/$debian" -C "$src"
while read -r p; do
	case "$p" in '' | '#'*) continue ;; esac
	patch -s -p1 -d "$src" <"$src/debian/patches/$p"
done <"$src/debian/patches/series"

start=$(date +%s)
say "building libgit2 $deb_ver for $triplet into $sysroot/usr/local (first use only)"
export OEAPATCH_WHEEL_TRIPLET=$triplet OEAPATCH_WHEEL_SYSROOT=$sysroot
cmake -S "$src" -B "$tmp/build" -DCMAKE_TOOLCHAIN_FILE="$here/cmake/toolchains/wheel-sysroot.cmake" \
	-DCMAKE_BUILD_TYPE=Release -DCMAKE_INSTALL_PREFIX=/usr/local -DCMAKE_INSTALL_LIBDIR=lib \
	-DBUILD_SHARED_LIBS=ON -DBUILD_TESTS=OFF -DBUILD_CLI=OFF -DBUILD_FUZZERS=OFF -DBUILD_EXAMPLES=OFF \
	-DUSE_HTTPS=OFF -DUSE_SSH=OFF -DUSE_NTLMCLIENT=OFF -DUSE_GSSAPI=OFF -DUSE_HTTP_PARSER=system \
	-DREGEX_BACKEND=regcomp -DUSE_SHA1=CollisionDetection -DUSE_SHA256=Builtin -DUSE_BUNDLED_ZLIB=OFF \
	>"$tmp/configure.log" 2>&1 || { tail -30 "$tmp/configure.log" >&2; exit 2; }
cmake --build "$tmp/build" -j"$(nproc)" >"$tmp/build.log" 2>&1 || { say "the build failed; its last lines:"; tail -30 "$tmp/build.log" >&2; exit 2; }
DESTDIR=$sysroot cmake --install "$tmp/build" >/dev/null
say "libgit2 built in $(($(date +%s) - start)) s"
