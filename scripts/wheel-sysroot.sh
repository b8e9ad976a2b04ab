#!/usr/bin/env bash
# wheel-sysroot.sh ARCH: prints the path of a Debian 11 (bullseye, glibc 2.31)
# sysroot for ARCH (amd64 or arm64) holding the headers and libraries the
# wheel's binaries link (glibc, jansson, inih, OpenSSL, zlib, http-parser,
# GCC 10's C++ headers and libstdc++ for the CUDA kernel's host side, and
# libgit2 built into its /usr/local by scripts/wheel-libgit2.sh),
# creating it on first use. scripts/build-wheel.sh compiles against it with
# Debian 12's clang (--sysroot), so that the binaries ask for no glibc
# symbol newer than bullseye's, and links these libraries, which auditwheel
# then copies into the wheel (docs/deployment.md, "Platforms and tags").
#
# It is made with `debootstrap --foreign` (the first stage only: nothing in it
# runs, so the arm64 one needs no emulator), and every package debootstrap
# fetched (checked against the release's signed index) is unpacked into it
# with dpkg-deb once its SHA-256 matched the pin of that package and version
# in scripts/wheel-sysroot-pins.txt: a package that is not pinned, or whose
# bytes differ, is refused. (OEAPATCH_WHEEL_SYSROOT_PRINT_PINS=1 prints the
# pin lines of what debootstrap fetched instead, to review and commit when
# the list changes; it builds nothing.)
#
# Cached under ${XDG_CACHE_HOME:-$HOME/.cache}/oeapatch/sysroot-bullseye-ARCH-KEY
# (KEY: below; about 220 MB each),
# built once per machine (a few minutes), under a lock so that concurrent
# builds wait for it. The mirror is OEAPATCH_DEBIAN_MIRROR, else the one
# this machine's apt sources list for a Debian release
# (scripts/lib/debian-mirror.sh). Needs debootstrap and the Debian archive
# keyring (scripts/setup-deps.sh test installs them); root is not needed
# for the first stage's unpacking, but debootstrap refuses to run without it.
set -euo pipefail
arch=${1:-}
case "$arch" in
amd64 | arm64) ;;
*)
	echo "wheel-sysroot: usage: wheel-sysroot.sh amd64|arm64 (got '${arch}')" >&2
	exit 2
	;;
esac
cache=${XDG_CACHE_HOME:-$HOME/.cache}/oeapatch
root=$cache/sysroot-bullseye-$arch
# What the build links, as bullseye names it (-dev: headers, the .so link
# and the .pc file; debootstrap adds their dependencies). libgit2 is not
# among them: bullseye's 1.1 lacks what oeapatch uses (GIT_EOWNER, the
# safe.directory check of 1.4), so bookworm's libgit2 source is built into
# the sysroot's /usr/local (scripts/wheel-libgit2.sh) against
# zlib and http-parser from here.
pkgs=libc6-dev,libjansson-dev,libinih-dev,libssl-dev,zlib1g-dev,libhttp-parser-dev
# libstdc++-10-dev: bullseye's GCC 10 C++ headers and runtime (with
# libgcc-10-dev): nvcc's host compile of the CUDA kernel (clang, -ccbin)
# needs a C++ standard library, and the one of this machine's GCC 12 asks for
# glibc 2.32 (__libc_single_threaded); GCC 10's was built against bullseye's.
pkgs+=,libstdc++-10-dev
pins=$(cd "$(dirname "$0")" && pwd)/wheel-sysroot-pins.txt

# The cache is keyed by what goes into it, as the release environments are
# by their pins: this package list, this architecture's pins and the libgit2
# build; a change of any gives a new sysroot beside the old one.
key=$({
	echo "$pkgs"
	awk -v a="$arch" '$1 == a' "$pins"
	cat "$(dirname "$pins")/wheel-libgit2.sh"
	awk '$1 ~ /^libgit2-debian/' "$(dirname "$pins")/deps-pins.txt"
} | sha256sum | cut -c1-12)
root=$root-$key

# shellcheck source=SCRIPTDIR/lib/cache-dir.sh
. "$(dirname "$0")/lib/cache-dir.sh"
if cache_dir_lock "$root"; then
	echo "$root"
	exit 0
fi
command -v debootstrap >/dev/null || { echo "wheel-sysroot: debootstrap is not installed (apt-get install debootstrap)" >&2; exit 2; }
command -v dpkg-deb >/dev/null || { echo "wheel-sysroot: dpkg-deb is not installed" >&2; exit 2; }
# shellcheck source=SCRIPTDIR/lib/debian-mirror.sh
. "$(dirname "$0")/lib/debian-mirror.sh"
if ! mirror=$(debian_mirror); then
	echo "wheel-sysroot: no Debian mirror in the apt sources; set OEAPATCH_DEBIAN_MIRROR" >&2
	exit 2
fi

rm -rf "$root.partial"
echo "wheel-sysroot: debootstrap --foreign --arch=$arch bullseye into $root (first use only)" >&2
start=$(date +%s)
if ! debootstrap --foreign --arch="$arch" --variant=minbase --include="$pkgs" \
	bullseye "$root.partial" "$mirror" >"$root.debootstrap.log" 2>&1; then
	echo "wheel-sysroot: debootstrap failed; the last lines of $root.debootstrap.log:" >&2
	tail -20 "$root.debootstrap.log" >&2
	exit 2
fi
# Every package must be one pinned in $pins (arch, name, version, SHA-256):
# the same bytes on every machine, whatever the mirror serves later.
n=0 bad=0
for deb in "$root.partial"/var/cache/apt/archives/*.deb; do
	name=$(dpkg-deb -f "$deb" Package) ver=$(dpkg-deb -f "$deb" Version)
	got=$(sha256sum "$deb" | cut -d' ' -f1)
	want=$(awk -v a="$arch" -v n="$name" -v v="$ver" '$1 == a && $2 == n && $3 == v { print $4 }' "$pins")
	if [ "${OEAPATCH_WHEEL_SYSROOT_PRINT_PINS:-}" = 1 ]; then
		printf '%s %s %s %s\n' "$arch" "$name" "$ver" "$got"
	elif [ -z "$want" ]; then
		echo "wheel-sysroot: $name $ver ($arch) is not pinned in $pins" >&2
		bad=1
	elif [ "$want" != "$got" ]; then
		echo "wheel-sysroot: digest mismatch, refusing $(basename "$deb"): expected sha256 $want, it has $got" >&2
		bad=1
	fi
	n=$((n + 1))
done
if [ "$bad" = 1 ] || [ "${OEAPATCH_WHEEL_SYSROOT_PRINT_PINS:-}" = 1 ]; then
	rm -rf "$root.partial"
	exit 2
fi
# The first stage unpacked only the essential packages: unpack them all
# (over a root whose /lib is not a link: bullseye is not merged-/usr).
for deb in "$root.partial"/var/cache/apt/archives/*.deb; do
	dpkg-deb -x "$deb" "$root.partial"
done
# A sysroot must not point outside itself: the links packages make with
# absolute targets (/lib64/ld-linux-x86-64.so.2, the -dev packages' .so
# links into /lib/...) would name this machine's files; make them relative.
find "$root.partial" -type l -lname '/*' | while read -r l; do
	t=$(readlink "$l")
	ln -sfn "$(realpath -m -s --relative-to="$(dirname "$l")" "$root.partial$t")" "$l"
done
rm -rf "$root.partial/var/cache/apt/archives/"*.deb "$root.partial/debootstrap" \
	"$root.partial"/usr/share/{doc,man,info,locale,i18n,zoneinfo}
OEAPATCH_DEBIAN_MIRROR=$mirror "$(dirname "$0")/wheel-libgit2.sh" "$arch" "$root.partial"
cache_dir_done "$root"
echo "wheel-sysroot: $n packages in $(($(date +%s) - start)) s" >&2
echo "$root"
