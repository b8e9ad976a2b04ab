#!/usr/bin/env bash
# test_trust.sh - who can change what the server runs (docs/security.md):
#  - apply refuses, writing nothing, to record a library that is writable by
#    others (0666) or that sits in a world-writable, non-sticky directory;
#  - after a green apply, verify and status fail when the library's
#    directory becomes world-writable, the library group-writable, or the
#    patched topk.py or the binding module world-writable, naming the path,
#    its owner and mode, and the fix;
#  - SGLANG_OEA_ALLOW_UNTRUSTED=true (the escape for development trees)
#    makes those warnings, in text and in --json, never a silent pass;
#  - and no over-refusal: owner-only modes everywhere, a root-owned directory
#    under a sticky world-writable one (/tmp), the build tree's library, and
#    a tree that belongs to the target's owner (uid 65534 here).
# The owner cases need root (to chown): without it the script is skipped.
set -u
SRC=${OEAPATCH_SOURCE_DIR:-$(cd "$(dirname "$0")/../.." && pwd)}
OEAPATCH=${OEAPATCH:-$SRC/build/src/oeapatch}
: "${OEA_LIBRARY:?set OEA_LIBRARY to liboea.so}"
T=python/sglang/srt/layers/moe/topk.py
B=python/sglang/srt/layers/moe/_oeapatch_sglang_oea.py
FIX=$SRC/tests/fixtures/eras/2025-08_topk_config.py
. "$(dirname "$0")/testlib.sh"
if [ "$(id -u)" != 0 ]; then
	skip "trust cases" "need root (chown to another user)"
	e2e_summary
	exit $?
fi
# Under /tmp (1777, root's): the sticky case is the suite's own layout.
WORK=$(mktemp -d "${TMPDIR:-/tmp}/oeapatch-trust.XXXXXX")
chmod 755 "$WORK"
trap 'rm -rf "$WORK"' EXIT
e2e_git_env "$WORK"
unset SGLANG_OEA_ALLOW_UNTRUSTED SGLANG_OEA_LIBRARY

checkout() { # checkout NAME: a fresh checkout holding the fixture (umask 022 modes); prints its root
	local r=$WORK/$1
	mkdir -p "$r/$(dirname "$T")" && cp "$FIX" "$r/$T" && chmod -R u=rwX,go=rX "$r" && echo "$r"
}
library_in() { # library_in DIR MODE: a copy of liboea in DIR; prints its path
	mkdir -p "$1" && cp "$OEA_LIBRARY" "$1/liboea.so" && chmod "$2" "$1/liboea.so" && echo "$1/liboea.so"
}
digest() { sha256sum "$1/$T" "$1/$B" 2>/dev/null; ls -la "$(dirname "$1/$T")"; }

echo "== apply refuses an untrusted library, writing nothing"
R=$(checkout refuse)
L=$(library_in "$WORK/lib0666" 0666)
before=$(digest "$R")
expect "apply --library on a 0666 library exits 2" 2 "$OEAPATCH" apply -C "$R" --library "$L"
has "... naming the path, owner and mode" "$L (owner uid 0 (root), mode 0666) is writable by others"
has "... and the fix" "\`chmod go-w $L\`"
check "... nothing written" test "$before" = "$(digest "$R")"
mkdir -p "$WORK/open" && chmod 0777 "$WORK/open"
L=$(library_in "$WORK/open/lib" 0755)
expect "apply --library in a 0777 (non-sticky) directory's subtree exits 2" 2 "$OEAPATCH" apply -C "$R" --library "$L"
has "... naming the directory" "$WORK/open (owner uid 0 (root), mode 0777) is writable by others"
check "... nothing written" test "$before" = "$(digest "$R")"
expect "--json says the same" 2 "$OEAPATCH" apply -C "$R" --library "$L" --json
has "... as an error" '"ok": false'
has "... naming the directory" "$WORK/open (owner uid 0 (root), mode 0777)"
ln -s "$WORK/open/lib/liboea.so" "$WORK/link-to-open.so"
expect "a link to it (in a good directory) is refused the same" 2 "$OEAPATCH" apply -C "$R" --library "$WORK/link-to-open.so"
has "... naming the link target's directory" "$WORK/open (owner uid 0 (root), mode 0777)"
expect "with SGLANG_OEA_ALLOW_UNTRUSTED=true it is recorded, with a warning" 0 \
	env SGLANG_OEA_ALLOW_UNTRUSTED=true "$OEAPATCH" apply -C "$R" --library "$L"
has "... the warning" "warning: library: $WORK/open (owner uid 0 (root), mode 0777) is writable by others"
expect "verify then fails without the escape" 1 "$OEAPATCH" verify -C "$R"
has "... on trust:library" "FAIL"
has "... naming the directory" "$WORK/open (owner uid 0 (root), mode 0777)"
expect "verify with the escape passes with a warning line" 0 env SGLANG_OEA_ALLOW_UNTRUSTED=true "$OEAPATCH" verify -C "$R"
has "... WARN trust:library" "WARN"
has "... naming the escape" "allowed by SGLANG_OEA_ALLOW_UNTRUSTED=true"
has "... in the summary" "1 warning"
expect "verify --json with the escape" 0 env SGLANG_OEA_ALLOW_UNTRUSTED=true "$OEAPATCH" verify -C "$R" --json
check "... shows trust:library as a warning" python3 -c '
import json, sys
d = json.loads(sys.argv[1])
c = [c for c in d["checks"] if c["check"] == "trust:library"]
assert c and c[0]["ok"] and c[0].get("warning"), d["checks"]
assert d["settings"]["effective"]["allow_untrusted"] is True' "$out"
F=$WORK/server.env
printf 'SGLANG_OEA_ALLOW_UNTRUSTED=yes\n' >"$F"
expect "the escape in the unit's --env-file counts (the server's environment)" 0 "$OEAPATCH" verify -C "$R" --env-file "$F"
has "... as a warning" "allowed by SGLANG_OEA_ALLOW_UNTRUSTED=true"

echo "== after a green apply, someone loosens a mode"
for case in libdir libgroup target binding; do
	R=$(checkout "after-$case")
	L=$(library_in "$WORK/after-$case-lib/lib" 0755)
	expect "$case: apply is green" 0 "$OEAPATCH" apply -C "$R" --library "$L"
	expect "$case: verify is green" 0 "$OEAPATCH" verify -C "$R"
	has "$case: ... with trust checks" "trust:library"
	case $case in
	libdir) what=$(dirname "$L") mode=0777 ;;
	libgroup) what=$L mode=0775 ;;
	target) what=$R/$T mode=0666 ;;
	binding) what=$R/$B mode=0666 ;;
	esac
	chmod "$mode" "$what"
	expect "$case: verify fails once $what is $mode" 1 "$OEAPATCH" verify -C "$R"
	has "$case: ... naming it, its owner and mode" "$what (owner uid 0 (root), mode $mode) is writable by"
	has "$case: ... and the fix" "\`chmod go-w $what\`"
	expect "$case: status fails too" 1 "$OEAPATCH" status -C "$R"
	has "$case: ... naming it" "$what (owner uid 0 (root), mode $mode)"
	expect "$case: status --json" 1 "$OEAPATCH" status -C "$R" --json
	has "$case: ... lists it in drift" "trust:"
	expect "$case: the escape turns it into a warning" 0 env SGLANG_OEA_ALLOW_UNTRUSTED=1 "$OEAPATCH" verify -C "$R"
	has "$case: ... said" "allowed by SGLANG_OEA_ALLOW_UNTRUSTED=true"
	chmod go-w "$what"
	expect "$case: the fix the message gives makes verify green again" 0 "$OEAPATCH" verify -C "$R"
done

echo "== the library the server would load instead (SGLANG_OEA_LIBRARY)"
R=$(checkout override)
expect "apply with the build tree's library" 0 "$OEAPATCH" apply -C "$R" --library "$OEA_LIBRARY"
L=$(library_in "$WORK/override-lib" 0666)
expect "verify fails on an untrusted SGLANG_OEA_LIBRARY" 1 env SGLANG_OEA_LIBRARY="$L" "$OEAPATCH" verify -C "$R"
has "... naming it" "$L (owner uid 0 (root), mode 0666)"
expect "status too" 1 env SGLANG_OEA_LIBRARY="$L" "$OEAPATCH" status -C "$R"

echo "== no over-refusal"
R=$(checkout owner-only)
chmod -R go-rwx "$R"
chmod 0711 "$R"
L=$(library_in "$WORK/owner-only-lib" 0700)
chmod 0700 "$WORK/owner-only-lib"
expect "owner-only modes everywhere: apply" 0 "$OEAPATCH" apply -C "$R" --library "$L"
expect "... verify" 0 "$OEAPATCH" verify -C "$R"
has "... checks trust:target" "trust:target"
has "... and trust:binding" "trust:binding"
expect "... status" 0 "$OEAPATCH" status -C "$R"
mkdir -p "$WORK/sticky" && chmod 1777 "$WORK/sticky"
L=$(library_in "$WORK/sticky/rootdir" 0755)
R=$(checkout sticky-case)
expect "a root-owned directory below a sticky world-writable one: apply" 0 "$OEAPATCH" apply -C "$R" --library "$L"
expect "... verify" 0 "$OEAPATCH" verify -C "$R"
chown 65534:65534 "$WORK/sticky/rootdir"
expect "... but not once another user owns that directory" 1 "$OEAPATCH" verify -C "$R"
has "... naming it and the fix" "$WORK/sticky/rootdir (owner uid 65534"
expect "the build tree's library (a fresh clone's, as scripts/demo and the suite use)" 0 \
	"$OEAPATCH" apply -C "$(checkout build-tree)" --library "$OEA_LIBRARY"
expect "... verifies" 0 "$OEAPATCH" verify -C "$WORK/build-tree"
# A developer's tree: theirs from the checkout down, their library beside it.
R=$(checkout devtree)
L=$(library_in "$WORK/devtree-lib" 0755)
chown -R 65534:65534 "$R" "$WORK/devtree-lib"
expect "a tree and library owned by the target's owner: apply" 0 "$OEAPATCH" apply -C "$R" --library "$L"
expect "... verify" 0 "$OEAPATCH" verify -C "$R"
chown 0:0 "$R/$T"
expect "... but not once the target is root's and the library another user's" 1 "$OEAPATCH" verify -C "$R"
has "... naming the first path another user owns" "(owner uid 65534"
expect "the escape is reported even when nothing needs it" 0 env SGLANG_OEA_ALLOW_UNTRUSTED=true \
	"$OEAPATCH" verify -C "$WORK/build-tree"
has "... as a warning to unset it" "SGLANG_OEA_ALLOW_UNTRUSTED=true is set, and nothing here needs it"

echo "== git hooks: what git runs as whoever runs it"
R=$(checkout hooks)
git -C "$R" init -q && git -C "$R" add -A && git -C "$R" commit -qm fixture
expect "hook install in a good repository" 0 "$OEAPATCH" hook install -C "$R"
expect "hook status is green" 0 "$OEAPATCH" hook status -C "$R"
chmod 0666 "$R/.git/hooks/post-merge"
expect "hook status fails once a hook of ours is 0666" 1 "$OEAPATCH" hook status -C "$R"
has "... naming it and the fix" "$R/.git/hooks/post-merge (owner uid 0 (root), mode 0666) is writable by others: \`chmod go-w $R/.git/hooks/post-merge\`"
expect "--json says it" 1 "$OEAPATCH" hook status -C "$R" --json
has "... as untrusted" '"untrusted": "'
chmod 0755 "$R/.git/hooks/post-merge"
printf '#!/bin/sh\nexit 0\n' >"$R/.git/hooks/post-merge.oeapatch-chained"
chmod 0777 "$R/.git/hooks/post-merge.oeapatch-chained"
expect "hook status fails when the hook it chains is 0777" 1 "$OEAPATCH" hook status -C "$R"
has "... naming the chained hook" "post-merge.oeapatch-chained (owner uid 0 (root), mode 0777)"
rm -f "$R/.git/hooks/post-merge.oeapatch-chained"
expect "hook uninstall" 0 "$OEAPATCH" hook uninstall -C "$R"
chmod 0777 "$R/.git/hooks"
before=$(ls -la "$R/.git/hooks")
expect "hook install into a 0777 hooks directory is refused" 2 "$OEAPATCH" hook install -C "$R" --uncommitted
has "... naming it" "the hooks directory: $R/.git/hooks (owner uid 0 (root), mode 0777) is writable by others"
check "... nothing written" test "$before" = "$(ls -la "$R/.git/hooks")"
chmod 0755 "$R/.git/hooks"
before=$(ls -la "$R/.git/hooks")
L=$(library_in "$WORK/hooks-lib" 0666)
expect "hook install --reapply recording a 0666 library is refused" 2 "$OEAPATCH" hook install -C "$R" --reapply --library "$L"
has "... naming it" "the library --reapply records: $L (owner uid 0 (root), mode 0666)"
check "... nothing written" test "$before" = "$(ls -la "$R/.git/hooks")"

e2e_summary
