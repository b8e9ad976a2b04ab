#!/usr/bin/env bash
# A no-op needs no write access (issue 15, item 7): `apply` of an applied
# target and `revert` of an unpatched one say so and exit 0 on a read-only
# target, as `apply --check` does, which is what ExecStartPre= and an
# image with readOnlyRootFilesystem run at every start:
#  1. a read-only file (mode 0444) and a read-only directory (0555): the
#     mode bits, which oeapatch honours even as root;
#  2. (part "ro-mount") a read-only bind mount, which refuses even root:
#     the no-ops and verify hold; what needs a write (apply of an unpatched
#     file, revert of a patched one, a shadowing pyc to remove) is refused
#     with a message naming the cause, and nothing is changed.
#
# Environment (set by ctest): OEAPATCH, OEA_LIBRARY, OEAPATCH_SOURCE_DIR.
set -uo pipefail

: "${OEAPATCH:?set OEAPATCH to the oeapatch binary}"
: "${OEA_LIBRARY:?set OEA_LIBRARY to liboea.so}"
: "${OEAPATCH_SOURCE_DIR:?set OEAPATCH_SOURCE_DIR to the repository root}"
fix=$OEAPATCH_SOURCE_DIR/tests/fixtures
py=${OEAPATCH_SYSTEM_PYTHON:-/usr/bin/python3}
target_rel=python/sglang/srt/layers/moe/topk.py
part=${1:-main}
case $part in
main | ro-mount) ;;
*) echo "usage: $0 [ro-mount]" >&2; exit 2 ;;
esac

work=$(mktemp -d "${TMPDIR:-/tmp}/oeapatch-readonly.XXXXXX")
mounted=
cleanup() {
	[ -n "$mounted" ] && umount "$mounted" 2>/dev/null
	chmod -R u+w "$work" 2>/dev/null
	rm -rf "$work"
}
trap cleanup EXIT
. "$(dirname "$0")/testlib.sh"

# new_checkout NAME FIXTURE [apply]: a checkout, patched with `apply`.
new_checkout() {
	local co=$work/$1
	mkdir -p "$co/$(dirname "$target_rel")"
	cp "$2" "$co/$target_rel"
	[ "${3:-}" = apply ] && "$OEAPATCH" -C "$co" apply --library "$OEA_LIBRARY" >/dev/null
	echo "$co"
}
# snapshot DIR: every file's path, mode and content hash (what must not change).
snapshot() { (cd "$1" && find . -printf '%p %m %s\n' | sort && find . -type f -exec sha256sum {} + | sort); }

era=$fix/eras/2025-08_topk_config.py

if [ "$part" = main ]; then
	echo "== 1. read-only mode bits (honoured even as root)"
	co=$(new_checkout ro-file "$era" apply)
	moe=$co/$(dirname "$target_rel")
	chmod 0444 "$co/$target_rel"
	before=$(snapshot "$co")
	expect "apply of an applied 0444 file" 0 "$OEAPATCH" -C "$co" apply
	has "it says already applied" "sglang-oea/2 already applied"
	expect "verify of it" 0 "$OEAPATCH" -C "$co" verify
	check "nothing changed" test "$(snapshot "$co")" = "$before"
	expect "revert of an applied 0444 file needs a write: refused" 2 "$OEAPATCH" -C "$co" revert
	has "the message says why" "read-only"
	check "nothing changed" test "$(snapshot "$co")" = "$before"

	co=$(new_checkout ro-dir "$era" apply)
	moe=$co/$(dirname "$target_rel")
	chmod 0555 "$moe"
	before=$(snapshot "$co")
	expect "apply of an applied file in a 0555 directory" 0 "$OEAPATCH" -C "$co" apply
	has "it says already applied" "sglang-oea/2 already applied"
	check "nothing changed" test "$(snapshot "$co")" = "$before"
	chmod 0755 "$moe"

	co=$(new_checkout clean-ro-file "$era")
	chmod 0444 "$co/$target_rel"
	before=$(snapshot "$co")
	expect "revert of an unpatched 0444 file" 0 "$OEAPATCH" -C "$co" revert
	has "it says nothing to revert" "not applied: nothing to revert"
	check "nothing changed" test "$(snapshot "$co")" = "$before"
	expect "apply of an unpatched 0444 file needs a write: refused" 2 "$OEAPATCH" -C "$co" apply \
		--library "$OEA_LIBRARY"
	check "nothing changed" test "$(snapshot "$co")" = "$before"

	co=$(new_checkout clean-ro-dir "$era")
	chmod 0555 "$co/$(dirname "$target_rel")"
	before=$(snapshot "$co")
	expect "revert of an unpatched file in a 0555 directory" 0 "$OEAPATCH" -C "$co" revert
	check "nothing changed" test "$(snapshot "$co")" = "$before"
	e2e_summary
	exit
fi

echo "== 2. a read-only bind mount (refuses root too)"
why=
if [ "$(id -u)" -ne 0 ]; then
	why="not running as root: mounting needs it"
elif ! command -v mount >/dev/null; then
	why="mount (util-linux) is not installed"
fi
ro=$work/ro
src=$work/src
if [ -z "$why" ]; then
	mkdir -p "$ro" "$src"
	if mount --bind "$src" "$ro" 2>"$work/mount.log"; then
		mounted=$ro
		# The two steps work on every util-linux (a one-step ro bind needs 2.27+).
		mount -o remount,ro,bind "$ro" 2>>"$work/mount.log" || why="remount read-only refused: $(cat "$work/mount.log")"
	else
		why="mount --bind is not permitted here: $(head -c 200 "$work/mount.log")"
	fi
	[ -z "$why" ] && touch "$ro/probe" 2>/dev/null && why="the read-only mount took a write"
fi
if [ -n "$why" ]; then
	skip "read-only mount" "$why"
	e2e_summary
	exit
fi
# $src holds the checkouts, $ro shows them read-only.
mkcheckout() { # mkcheckout NAME FIXTURE [apply]: in $src, made before it is seen read-only
	local co=$src/$1
	mkdir -p "$co/$(dirname "$target_rel")"
	cp "$2" "$co/$target_rel"
	[ "${3:-}" = apply ] && "$OEAPATCH" -C "$co" apply --library "$OEA_LIBRARY" >/dev/null
}
mkcheckout applied "$era" apply
mkcheckout clean "$era"
mkcheckout shadowed "$era" apply
cp "$era" "$work/original.py"
sh_moe=$src/shadowed/$(dirname "$target_rel")
"$py" -c '
import importlib.util, py_compile, sys
py_compile.compile(sys.argv[1], cfile=importlib.util.cache_from_source(sys.argv[2]), doraise=True,
                   invalidation_mode=py_compile.PycInvalidationMode.UNCHECKED_HASH)' \
	"$work/original.py" "$src/shadowed/$target_rel"
before=$(snapshot "$src")

expect "apply of an applied file on a read-only mount" 0 "$OEAPATCH" -C "$ro/applied" apply
has "it says already applied" "sglang-oea/2 already applied"
expect "verify of it" 0 "$OEAPATCH" -C "$ro/applied" verify
expect "revert of an unpatched file on a read-only mount" 0 "$OEAPATCH" -C "$ro/clean" revert
has "it says nothing to revert" "not applied: nothing to revert"
expect "apply of an unpatched file there: refused" 2 "$OEAPATCH" -C "$ro/clean" apply --library "$OEA_LIBRARY"
has "the message names the cause" "Read-only file system"
expect "revert of an applied file there: refused" 2 "$OEAPATCH" -C "$ro/applied" revert
has "the message names the cause" "Read-only file system"
expect "verify with a shadowing pyc there: fails" 1 "$OEAPATCH" -C "$ro/shadowed" verify
expect "apply that must remove the pyc: refused, naming it" 2 "$OEAPATCH" -C "$ro/shadowed" apply
has "the message names the pyc and the cause" "__pycache__/topk.$("$py" -c 'import sys; print(sys.implementation.cache_tag)').pyc: unchecked-hash"
has "and why it cannot be removed" "cannot remove it: Read-only file system"
check "nothing changed under the mount" test "$(snapshot "$src")" = "$before"

e2e_summary
