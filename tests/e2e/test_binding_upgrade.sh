#!/usr/bin/env bash
# test_binding_upgrade.sh - an upgraded oeapatch re-applies over the binding
# module an older one wrote, and only a real hand edit is refused.
#
# The module records a digest of its own content (line 2,
# docs/patch-definitions.md). An older oeapatch's module (another binding.py, another
# definition version) whose digest holds is replaced by `apply` (exit 0, the
# module then equals this oeapatch's render, topk.py verifies), removed by
# `revert`, and named by `verify`/`status` as another oeapatch's; a module
# whose digest fails is an edit (apply/revert refuse); a module from before
# digests that is no known render gets the true message, and `apply --diff`
# shows it. The older renders are made two ways: by a copy of the definition
# whose binding.py has one comment changed (the reported case), and by a
# Python snippet that computes the digest the documented way on its own.
set -u

SRC=${OEAPATCH_SOURCE_DIR:-$(cd "$(dirname "$0")/../.." && pwd)}
OEAPATCH=${OEAPATCH:-$SRC/build/src/oeapatch}
LIB=${OEA_LIBRARY:?OEA_LIBRARY: the liboea to bind}
PY=/usr/bin/python3
[ -x "$PY" ] || PY=python3
ERA=$SRC/tests/fixtures/eras/2025-12_layer_id_capturer.py
T=python/sglang/srt/layers/moe/topk.py
B=python/sglang/srt/layers/moe/_oeapatch_sglang_oea.py
V=$(sed -n -E 's/^version *= *([0-9]+).*/\1/p' "$SRC/patches/sglang-oea/patch.ini")
P=sglang-oea/$V

WORK=$(mktemp -d "${TMPDIR:-/tmp}/oeapatch-bindup.XXXXXX")
trap 'rm -rf "$WORK"' EXIT
. "$(dirname "$0")/testlib.sh"

fresh() { # fresh DIR: a checkout of one era, unpatched
	rm -rf "$1" && mkdir -p "$1/$(dirname "$T")" && cp "$ERA" "$1/$T"
}
sum() { sha256sum "$@" 2>/dev/null | cut -c1-64 | tr '\n' ' '; }

# older_render FILE SED-EXPR [--no-digest]: rewrites the module as another
# oeapatch would have written it: SED-EXPR applied to its body, and a digest
# that holds for the result (the documented rule: SHA-256 of every byte but
# line 2, CRLF read as LF), or none with --no-digest (before digests).
older_render() {
	"$PY" - "$@" <<'EOF'
import hashlib, re, subprocess, sys
path, expr = sys.argv[1], sys.argv[2]
lines = open(path, "rb").read().split(b"\n")
assert lines[1].startswith(b"# oeapatch-content: sha256="), lines[1]
del lines[1]
body = subprocess.run(["sed", "-E", expr], input=b"\n".join(lines), capture_output=True, check=True).stdout
if "--no-digest" in sys.argv[3:]:
    out = body
else:
    digest = hashlib.sha256(body.replace(b"\r\n", b"\n")).hexdigest().encode()
    head, rest = body.split(b"\n", 1)
    out = head + b"\n# oeapatch-content: sha256=" + digest + b"\n" + rest
open(path, "wb").write(out)
EOF
}

echo "== apply writes a module that records its digest"
C=$WORK/c
fresh "$C"
expect "apply" 0 "$OEAPATCH" apply -C "$C" --library "$LIB"
cp "$C/$B" "$WORK/current.py"
check "line 2 is the digest line" grep -qE '^# oeapatch-content: sha256=[0-9a-f]{64}$' <(sed -n 2p "$C/$B")
older_render "$C/$B" 's/^$/&/'
check "... and it holds by the documented rule (recomputed in Python)" cmp -s "$C/$B" "$WORK/current.py"

echo "== an older oeapatch's module (a comment more), digest holding"
older_render "$C/$B" '$a # a line only an older oeapatch wrote'
check "the module now differs from this oeapatch's render" test "$(sum "$C/$B")" != "$(sum "$WORK/current.py")"
expect "verify fails before the upgrade" 1 "$OEAPATCH" verify -C "$C"
has "... on the binding check" "FAIL binding"
has "... saying another oeapatch wrote it" "written by another oeapatch (definition $P): run \`oeapatch apply\`"
expect "status says the same" 1 "$OEAPATCH" status -C "$C"
has "... in its words" "written by another oeapatch, definition $P"
expect "apply --check says it would update it" 0 "$OEAPATCH" apply -C "$C" --check
has "... naming the module's writer" "binding module: would be updated from $P"
expect "apply upgrades it" 0 "$OEAPATCH" apply -C "$C"
has "... and says so" "binding module: updated from $P"
check "the module is now this oeapatch's render" cmp -s "$C/$B" "$WORK/current.py"
expect "verify holds (topk.py and the module)" 0 "$OEAPATCH" verify -C "$C"
has "... the binding intact" "_oeapatch_sglang_oea.py intact"

echo "== the reported case: the definition's binding (adapter.py) changed, rebuilt oeapatch re-applies"
OLD=$WORK/sglang-oea-older
cp -r "$SRC/patches/sglang-oea" "$OLD"
# the shared core its [binding] source names, beside it
[ -d "$WORK/binding-core" ] || cp -r "$SRC/patches/binding-core" "$WORK/"
sed -i '1a # a comment only the older adapter.py had' "$OLD/adapter.py"
check "the older definition's adapter.py differs" \
	test "$(sum "$OLD/adapter.py")" != "$(sum "$SRC/patches/sglang-oea/adapter.py")"
C=$WORK/reported
fresh "$C"
expect "apply with the older definition" 0 "$OEAPATCH" apply -C "$C" --patch "$OLD" --library "$LIB"
expect "verify with today's definition fails on the binding only" 1 "$OEAPATCH" verify -C "$C"
has "... written by another oeapatch" "written by another oeapatch (definition $P)"
expect "apply with today's definition re-applies (no 'edited by hand')" 0 "$OEAPATCH" apply -C "$C"
has "... updating the module" "binding module: updated from $P"
check "the module is today's render" cmp -s "$C/$B" "$WORK/current.py"
expect "verify holds" 0 "$OEAPATCH" verify -C "$C"
expect "apply --patch OLD over it again" 0 "$OEAPATCH" apply -C "$C" --patch "$OLD"
before=$(sum "$C/$B")
expect "revert removes the other oeapatch's module" 0 "$OEAPATCH" revert -C "$C"
check "... the module is gone, topk.py is the era again" test ! -e "$C/$B" -a "$(sum "$C/$T")" = "$(sum "$ERA")"

echo "== a checkout patched by the oeapatch before digests, definition version 1"
if [ "$V" -gt 1 ]; then
	V1=$WORK/sglang-oea-v1
	cp -r "$SRC/patches/sglang-oea" "$V1"
	sed -i -E 's/^version *= *[0-9]+$/version = 1/' "$V1/patch.ini"
	C=$WORK/v1
	fresh "$C"
	expect "apply with version 1" 0 "$OEAPATCH" apply -C "$C" --patch "$V1" --library "$LIB"
	sed -i 2d "$C/$B" # that oeapatch wrote no digest line
	check "regions and module say version 1" \
		test "$(grep -c 'oeapatch sglang-oea/1 ' "$C/$T")" = 4 -a "$(head -c 80 "$C/$B" | grep -c 'sglang-oea/1)')" = 1
	expect "apply upgrades both" 0 "$OEAPATCH" apply -C "$C"
	has "... the regions" "(the regions found were of version 1"
	has "... the module" "binding module: updated from sglang-oea/1 (written by an oeapatch before content digests)"
	check "... no version-1 marker left" test "$(grep -c 'oeapatch sglang-oea/1 ' "$C/$T")" = 0
	check "... the module is today's render" cmp -s "$C/$B" "$WORK/current.py"
	expect "verify holds" 0 "$OEAPATCH" verify -C "$C"
	expect "revert" 0 "$OEAPATCH" revert -C "$C"
	check "... gives the era back" test "$(sum "$C/$T")" = "$(sum "$ERA")" -a ! -e "$C/$B"
else
	skip "version-1 upgrade" "the definition is still at version 1"
fi

echo "== a hand edit is refused"
C=$WORK/edit
fresh "$C"
expect "apply" 0 "$OEAPATCH" apply -C "$C" --library "$LIB"
sed -i 's/^ABI_VERSION = .*/ABI_VERSION = 99/' "$C/$B"
before=$(sum "$C/$T" "$C/$B")
expect "verify fails" 1 "$OEAPATCH" verify -C "$C"
has "... naming the edit" "edited by hand"
expect "apply refuses to overwrite it" 1 "$OEAPATCH" apply -C "$C"
has "... edited by hand" "edited by hand since oeapatch wrote it"
has "... naming the way out" "revert --force"
expect "revert refuses to delete it" 1 "$OEAPATCH" revert -C "$C"
has "... edited by hand" "edited by hand"
check "nothing written" test "$before" = "$(sum "$C/$T" "$C/$B")"
expect "revert --force removes it" 0 "$OEAPATCH" revert -C "$C" --force
check "... gone" test ! -e "$C/$B"

echo "== a module from before digests that is no known render: the true message"
C=$WORK/nodigest
fresh "$C"
expect "apply" 0 "$OEAPATCH" apply -C "$C" --library "$LIB"
older_render "$C/$B" '$a # changed by someone' --no-digest
before=$(sum "$C/$T" "$C/$B")
truth="differs from what this oeapatch writes: edited by hand, or written by an oeapatch before this one"
expect "verify fails" 1 "$OEAPATCH" verify -C "$C"
has "... saying what it cannot tell" "$truth"
expect "apply refuses" 1 "$OEAPATCH" apply -C "$C"
has "... with the true message" "$truth"
has "... and how to compare" "compare it with \`oeapatch apply --diff\`, then \`oeapatch revert --force\` and \`oeapatch apply\`"
expect "revert refuses" 1 "$OEAPATCH" revert -C "$C"
has "... with the true message" "$truth"
expect "apply --diff shows the module's difference" 0 "$OEAPATCH" apply -C "$C" --diff
has "... the module's diff header" "+++ b/$B"
has "... the changed line" "-# changed by someone"
has "... and the digest line it would add" "+# oeapatch-content: sha256="
has "... and says apply refuses it" "refuses to overwrite it"
check "nothing written" test "$before" = "$(sum "$C/$T" "$C/$B")"
expect "revert --force, then apply" 0 bash -c "'$OEAPATCH' revert -C '$C' --force && '$OEAPATCH' apply -C '$C'"
check "... gives today's module" cmp -s "$C/$B" "$WORK/current.py"

echo "== line ends: a CRLF checkout of the module (git autocrlf) is the same module"
C=$WORK/crlf
fresh "$C"
expect "apply" 0 "$OEAPATCH" apply -C "$C" --library "$LIB"
sed -i 's/$/\r/' "$C/$B"
expect "verify holds on the CRLF module" 0 "$OEAPATCH" verify -C "$C"
expect "revert removes it" 0 "$OEAPATCH" revert -C "$C"
check "... gone" test ! -e "$C/$B"

echo "== a newer oeapatch's module is not downgraded silently"
C=$WORK/newer
fresh "$C"
expect "apply" 0 "$OEAPATCH" apply -C "$C" --library "$LIB"
older_render "$C/$B" "1s|\\(sglang-oea/$V\\)|(sglang-oea/$((V + 5)))|"
expect "revert of the regions only (pip replaced topk.py)" 0 cp "$ERA" "$C/$T"
expect "apply refuses to replace it" 1 "$OEAPATCH" apply -C "$C"
has "... naming the downgrade" "NEWER than this definition's $P"
expect "apply --downgrade replaces it" 0 "$OEAPATCH" apply -C "$C" --downgrade
check "... with today's module" cmp -s "$C/$B" "$WORK/current.py"

e2e_summary
