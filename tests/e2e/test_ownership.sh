#!/usr/bin/env bash
# test_ownership.sh - apply and revert leave no byte they do not own, and
# take no ownership they should not:
#  - as root, apply and revert keep the owner and group of topk.py (a server
#    running as its own user must still read it and revert it), and the
#    binding module root creates belongs to the directory's owner; the group
#    is kept also where only it differs (0:65534 as root, or the owner's file
#    in a supplementary group);
#  - a user who may write the file but cannot keep its owner is refused
#    before anything is written;
#  - as root, apply and revert keep topk.py's ACL (setfacl u:svc:r on a 0640
#    file) and its extended attributes, and add none from the folder's
#    default ACL;
#  - a topk.py with another hard link is refused (the atomic replace would
#    split the link silently), unless --break-links;
#  - a process killed while holding the lock leaves nothing in the work tree
#    (`git status` stays clean);
#  - `check` in another user's repository names git's ownership check and
#    safe.directory (libgit2 blamed a missing setting).
# The owner cases need root (to chown and to run as another user): without
# it they are skipped (exit 77), never passed.
set -u
SRC=${OEAPATCH_SOURCE_DIR:-$(cd "$(dirname "$0")/../.." && pwd)}
OEAPATCH=${OEAPATCH:-$SRC/build/src/oeapatch}
: "${OEA_LIBRARY:?set OEA_LIBRARY to liboea.so}"
T=python/sglang/srt/layers/moe/topk.py
FIX=$SRC/tests/fixtures/eras/2025-08_topk_config.py
WORK=$(mktemp -d "${TMPDIR:-/tmp}/oeapatch-ownership.XXXXXX")
chmod 755 "$WORK"
trap 'rm -rf "$WORK"' EXIT
. "$(dirname "$0")/testlib.sh"
e2e_git_env "$WORK"
# What another user runs: a copy it can reach, wherever the build lives
# (a clone in root's 0700 home).
e2e_reachable "$WORK"

checkout() { # checkout NAME: a fresh checkout holding the fixture; prints its root
	local r=$WORK/$1
	mkdir -p "$r/$(dirname "$T")" && cp "$FIX" "$r/$T" && chmod -R a+rX "$r" && echo "$r"
}
owner() { stat -c '%u:%g' "$1"; }

echo "== hard links"
R=$(checkout links)
ln "$R/$T" "$WORK/other-name.py"
before=$(sha256sum <"$R/$T")
expect "apply on a topk.py with another hard link is refused" 2 "$OEAPATCH" apply -C "$R" --library "$OEA_LIBRARY"
has "... saying why" "has 2 hard links"
has "... naming the option" "--break-links"
[ "$(sha256sum <"$R/$T")" = "$before" ] && [ ! -e "$(dirname "$R/$T")/_oeapatch_sglang_oea.py" ] &&
	ok "... and nothing was written" || bad "something was written"
expect "apply --break-links does it" 0 "$OEAPATCH" apply -C "$R" --library "$OEA_LIBRARY" --break-links
cmp -s "$WORK/other-name.py" "$FIX" && ok "... leaving the other link with the old bytes, as asked" ||
	bad "the other link changed"

echo "== a kill while holding the lock"
R=$(checkout lock)
(cd "$R" && git init -q && git add -A && git commit -qm base)
OEAPATCH_FAULT_STEP=lock:acquired "$OEAPATCH" apply -C "$R" --library "$OEA_LIBRARY" >/dev/null 2>&1
[ $? -eq 99 ] && ok "apply stopped while holding the lock" || bad "the fault step did not fire"
st=$(git -C "$R" status --porcelain --ignored)
[ -z "$st" ] && ok "git status is clean: no stale lock file" || bad "git status after the kill" "$st"
expect "the next apply gets the lock at once" 0 timeout 5 "$OEAPATCH" apply -C "$R" --library "$OEA_LIBRARY"

echo "== owner and group"
if [ "$(id -u)" -ne 0 ]; then
	skip "apply and revert as root keep owner and group" "not running as root"
	skip "a writer who cannot keep the owner is refused" "not running as root"
elif ! command -v setpriv >/dev/null; then
	skip "apply and revert as root keep owner and group" "setpriv is not installed"
	skip "a writer who cannot keep the owner is refused" "setpriv is not installed"
else
	R=$(checkout owner)
	chown -R 65534:65534 "$R"
	expect "apply as root on a file owned by 65534:65534" 0 "$OEAPATCH" apply -C "$R" --library "$OEA_LIBRARY"
	[ "$(owner "$R/$T")" = 65534:65534 ] && ok "... keeps its owner and group" ||
		bad "apply changed the owner" "$(owner "$R/$T")"
	[ "$(owner "$(dirname "$R/$T")/_oeapatch_sglang_oea.py")" = 65534:65534 ] &&
		ok "... the binding module belongs to the directory's owner" ||
		bad "binding owner" "$(owner "$(dirname "$R/$T")/_oeapatch_sglang_oea.py")"
	nobody=(setpriv --reuid=65534 --regid=65534 --clear-groups --)
	if "${nobody[@]}" "$E2E_OEAPATCH" apply --check -C "$R" --library "$E2E_LIBRARY" >/dev/null 2>&1; then
		expect "... and the owner can revert it" 0 "${nobody[@]}" "$E2E_OEAPATCH" revert -C "$R"
		expect "... and apply it again" 0 "${nobody[@]}" "$E2E_OEAPATCH" apply -C "$R" --library "$E2E_LIBRARY"
	else
		skip "the owner can revert it" "nobody cannot run $E2E_OEAPATCH here"
	fi
	expect "revert as root" 0 "$OEAPATCH" revert -C "$R"
	[ "$(owner "$R/$T")" = 65534:65534 ] && ok "... keeps owner and group" ||
		bad "revert changed the owner" "$(owner "$R/$T")"
	cmp -s "$R/$T" "$FIX" && ok "... and gives the input back" || bad "revert is not the input"

	# The owner is ours (root) and only the group differs: the group must be
	# kept as well (a replacement root writes would carry root's group).
	R=$(checkout group-only)
	chown -R 0:65534 "$R"
	expect "apply as root on a file owned by 0:65534 (only the group differs)" 0 \
		"$OEAPATCH" apply -C "$R" --library "$OEA_LIBRARY"
	[ "$(owner "$R/$T")" = 0:65534 ] && ok "... keeps the group" || bad "apply lost the group" "$(owner "$R/$T")"
	[ "$(owner "$(dirname "$R/$T")/_oeapatch_sglang_oea.py")" = 0:65534 ] &&
		ok "... the binding module gets the directory's group" ||
		bad "binding group" "$(owner "$(dirname "$R/$T")/_oeapatch_sglang_oea.py")"
	expect "revert as root" 0 "$OEAPATCH" revert -C "$R"
	[ "$(owner "$R/$T")" = 0:65534 ] && ok "... keeps the group" || bad "revert lost the group" "$(owner "$R/$T")"
	# The same for a user who is not root: its own file, of a supplementary group.
	R=$(checkout group-only-user)
	chown -R 65534:100 "$R"
	member=(setpriv --reuid=65534 --regid=65534 --groups=100 --)
	if "${member[@]}" "$E2E_OEAPATCH" apply --check -C "$R" --library "$E2E_LIBRARY" >/dev/null 2>&1; then
		expect "apply by the owner, the file in a group it is in but not its own" 0 "${member[@]}" "$E2E_OEAPATCH" apply \
			-C "$R" --library "$E2E_LIBRARY"
		[ "$(owner "$R/$T")" = 65534:100 ] && ok "... keeps the group" || bad "apply lost the group" "$(owner "$R/$T")"
		expect "... revert" 0 "${member[@]}" "$E2E_OEAPATCH" revert -C "$R"
		[ "$(owner "$R/$T")" = 65534:100 ] && ok "... keeps the group" || bad "revert lost the group" "$(owner "$R/$T")"
	else
		skip "the owner keeps a supplementary group" "nobody cannot run $E2E_OEAPATCH here"
	fi

	# A group-writable file of another user: nobody may write it, but a
	# replacement would be nobody's file. Refused before anything is written.
	R=$(checkout other-owner)
	chown -R 1:65534 "$R" && chmod -R g+w "$R"
	if "${nobody[@]}" "$E2E_OEAPATCH" apply --check -C "$R" --library "$E2E_LIBRARY" >/dev/null 2>&1; then
		before=$(ls -A "$(dirname "$R/$T")")
		expect "apply by a writer who is not the owner" 2 "${nobody[@]}" "$E2E_OEAPATCH" apply -C "$R" \
			--library "$E2E_LIBRARY"
		has "... is refused, saying whose file it is" "belongs to uid 1"
		[ "$(owner "$R/$T")" = 1:65534 ] && cmp -s "$R/$T" "$FIX" &&
			[ "$(ls -A "$(dirname "$R/$T")")" = "$before" ] && ok "... and nothing was written" ||
			bad "something was written" "$(ls -la "$(dirname "$R/$T")")"
	else
		skip "a writer who cannot keep the owner is refused" "nobody cannot run $E2E_OEAPATCH here"
	fi
fi

echo "== ACLs and extended attributes"
if [ "$(id -u)" -ne 0 ] || ! command -v setfacl >/dev/null || ! command -v setpriv >/dev/null; then
	skip "apply and revert keep the file's ACL and extended attributes" "needs root, setfacl (acl) and setpriv"
else
	# 0640 root:root, the service user (65534 here) granted read by an ACL: a
	# replacement without the ACL would stop the server at import
	R=$(checkout acl)
	chmod 0640 "$R/$T" && setfacl -m u:65534:r "$R/$T"
	/usr/bin/python3 -c 'import os, sys; os.setxattr(sys.argv[1], "user.oeapatch-test", b"kept")' "$R/$T" 2>/dev/null
	user_xattr=$?
	acl_before=$(getfacl -cp "$R/$T")
	reader=(setpriv --reuid=65534 --regid=65534 --clear-groups --)
	expect "the service user reads it before" 0 "${reader[@]}" cat "$R/$T"
	expect "apply as root" 0 "$OEAPATCH" apply -C "$R" --library "$OEA_LIBRARY"
	[ "$(getfacl -cp "$R/$T")" = "$acl_before" ] && ok "... keeps the ACL" ||
		bad "apply dropped or changed the ACL" "$(getfacl -cp "$R/$T")"
	expect "... the service user still reads it" 0 "${reader[@]}" cat "$R/$T"
	if [ "$user_xattr" -eq 0 ]; then
		[ "$(/usr/bin/python3 -c 'import os, sys; print(os.getxattr(sys.argv[1], "user.oeapatch-test").decode())' "$R/$T")" = kept ] &&
			ok "... keeps a user.* attribute" || bad "apply dropped user.oeapatch-test" ""
	else
		skip "apply keeps a user.* attribute" "this file system takes no user.* attributes"
	fi
	expect "verify" 0 "$OEAPATCH" verify -C "$R"
	expect "revert as root" 0 "$OEAPATCH" revert -C "$R"
	[ "$(getfacl -cp "$R/$T")" = "$acl_before" ] && ok "... keeps the ACL" ||
		bad "revert dropped or changed the ACL" "$(getfacl -cp "$R/$T")"
	cmp -s "$R/$T" "$FIX" && ok "... and gives the input back" || bad "revert is not the input"
	# a default ACL on the folder gives new files an ACL: the replacement of a
	# file that had none must not get one
	R=$(checkout acl-default)
	setfacl -d -m u:65534:rwx "$(dirname "$R/$T")"
	plain=$(getfacl -cp "$R/$T")
	expect "apply in a folder with a default ACL" 0 "$OEAPATCH" apply -C "$R" --library "$OEA_LIBRARY"
	[ "$(getfacl -cp "$R/$T")" = "$plain" ] && ok "... the file gets no ACL it did not have" ||
		bad "the replacement inherited the folder's default ACL" "$(getfacl -cp "$R/$T")"
fi

echo "== another user's repository"
if [ "$(id -u)" -ne 0 ] || ! command -v setpriv >/dev/null; then
	skip "check in another user's repository names git's ownership check" "not root, or no setpriv"
else
	R=$(checkout repo-of-root)
	(cd "$R" && git init -q && git add -A && git commit -qm base)
	chmod -R a+rX "$R"
	NB=$WORK/nobody-home
	mkdir -p "$NB" && chown 65534:65534 "$NB"
	nobody=(setpriv --reuid=65534 --regid=65534 --clear-groups -- env HOME="$NB" GIT_CONFIG_NOSYSTEM=1)
	expect "check as another user" 2 "${nobody[@]}" "$E2E_OEAPATCH" check -C "$R" HEAD
	has "... names git's ownership check, not a missing setting" "git's ownership check refuses another user's repository"
	has "... and the setting that overrides it" "safe.directory"
	# From a folder nobody can enter (the clone's, in root's 0700 home) git
	# cannot start: its own folder.
	check "nobody's git trusts the repository (safe.directory)" \
		bash -c 'cd "$1" && shift && "$@"' _ "$NB" "${nobody[@]}" git config --global --add safe.directory "$R"
	expect "... and with safe.directory set, it checks" 0 "${nobody[@]}" "$E2E_OEAPATCH" check -C "$R" HEAD
fi

e2e_summary
