#!/usr/bin/env bash
# clean_root.sh - prints the path of a clean Debian 12 root (debootstrap
# --variant=minbase bookworm), creating it on first use. It is cached under
# ${XDG_CACHE_HOME:-$HOME/.cache}/oeapatch/ so that a reused machine builds it
# once (a few minutes, about 200 MB); later runs only check it. The root is
# never modified by the tests that use it, except under its /tmp.
#
# The Debian mirror is OEAPATCH_DEBIAN_MIRROR, else the one this machine's
# apt sources list for a Debian release (scripts/lib/debian-mirror.sh).
# Needs root and debootstrap (scripts/setup-deps.sh test installs it).
#
# `clean_root.sh python`: a second root, the same plus Debian's python3 and
# python3-venv (debootstrap --include), for tests that pip-install into it
# (tests/e2e/test_wheel.sh); cached beside the first, built once.
# `clean_root.sh python bullseye`: that root of Debian 11 (glibc 2.31, Python
# 3.9), where the manylinux_2_28 wheel must install and run; same mirror.
set -euo pipefail
cache=${XDG_CACHE_HOME:-$HOME/.cache}/oeapatch
suite=${2:-bookworm}
case "$suite" in
bookworm | bullseye) ;;
*)
	echo "clean_root: unknown suite '$suite' (bookworm or bullseye)" >&2
	exit 2
	;;
esac
root=$cache/rootfs-$suite-minbase
include=()
case "${1:-}" in
'') ;;
python)
	root=$root-python
	include=(--include=python3,python3-venv)
	;;
*)
	echo "clean_root: unknown variant '$1' (none, or python)" >&2
	exit 2
	;;
esac
# shellcheck source=SCRIPTDIR/../../scripts/lib/cache-dir.sh
. "$(dirname "$0")/../../scripts/lib/cache-dir.sh"
if cache_dir_lock "$root"; then
	echo "$root"
	exit 0
fi

# shellcheck source=SCRIPTDIR/../../scripts/lib/debian-mirror.sh
. "$(dirname "$0")/../../scripts/lib/debian-mirror.sh"
if ! mirror=$(debian_mirror); then
	echo "clean_root: no Debian mirror in the apt sources; set OEAPATCH_DEBIAN_MIRROR" >&2
	exit 2
fi
command -v debootstrap >/dev/null || { echo "clean_root: debootstrap is not installed" >&2; exit 2; }

rm -rf "$root.partial"
echo "clean_root: debootstrap --variant=minbase ${include[*]} $suite into $root (first use only)" >&2
start=$(date +%s)
if ! debootstrap --variant=minbase "${include[@]}" "$suite" "$root.partial" "$mirror" >"$root.debootstrap.log" 2>&1; then
	echo "clean_root: debootstrap failed; the last lines of $root.debootstrap.log:" >&2
	tail -20 "$root.debootstrap.log" >&2
	exit 2
fi
# Nothing from apt's caches is needed: keep the cache small.
rm -rf "$root.partial/var/cache/apt/archives/"*.deb "$root.partial/var/lib/apt/lists/"*_Packages 2>/dev/null || true
cache_dir_done "$root"
echo "clean_root: done in $(($(date +%s) - start)) s" >&2
echo "$root"
