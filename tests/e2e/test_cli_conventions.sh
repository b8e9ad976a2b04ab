#!/usr/bin/env bash
# A CLI that behaves like git (issue 10, item 4; issue 11, item 3):
#  1. global options before the command (`oeapatch -C DIR status`), a
#     relative -C composed with the one before it, and the same options
#     after the command;
#  2. `oeapatch help CMD` and `CMD --help` print the command's own help, for
#     every command; `help` lists `version` and `help`; an unknown command
#     or option is a usage error (exit 2);
#  3. --quiet prints nothing on stdout and keeps the exit status and the
#     messages on stderr; --json wins over it;
#  4. colour: --color=always colours diffs and verdicts (even with NO_COLOR,
#     an explicit request), --color=never and NO_COLOR on a terminal do not,
#     auto colours on a terminal only (script(1) gives one);
#  5. `--json`'s "ok" equals "exit status 0" for status, verify, apply and
#     revert, in every state: not applied, applied, drift (an edited region),
#     a library that no longer loads.
#
# Environment (set by ctest): OEAPATCH, OEA_LIBRARY, OEAPATCH_SOURCE_DIR.
set -uo pipefail

: "${OEAPATCH:?set OEAPATCH to the oeapatch binary}"
: "${OEA_LIBRARY:?set OEA_LIBRARY to liboea.so}"
: "${OEAPATCH_SOURCE_DIR:?set OEAPATCH_SOURCE_DIR to the repository root}"
fix=$OEAPATCH_SOURCE_DIR/tests/fixtures
target_rel=python/sglang/srt/layers/moe/topk.py

work=$(mktemp -d "${TMPDIR:-/tmp}/oeapatch-cli.XXXXXX")
trap 'rm -rf "$work"' EXIT
. "$(dirname "$0")/testlib.sh"

co=$work/co
mkdir -p "$co/$(dirname "$target_rel")"
cp "$fix/eras/2025-08_topk_config.py" "$co/$target_rel"
esc=$'\033['

echo "== 1. global options before the command"
expect "oeapatch -C DIR status (not applied)" 1 "$OEAPATCH" -C "$co" status
has "status names the target" "$target_rel"
expect "oeapatch -C DIR --library after the command" 0 "$OEAPATCH" -C "$co" apply --library "$OEA_LIBRARY"
expect "oeapatch -C DIR -C python/sglang status (composed, from a subdirectory)" 0 \
	"$OEAPATCH" -C "$co" -C python/sglang status
has "the composed -C finds the checkout above it" "state:    applied"
expect "oeapatch --json -C DIR verify" 0 "$OEAPATCH" --json -C "$co" verify
has "a global --json gives JSON" '"command": "verify"'
expect "oeapatch status -C DIR (after the command, as before)" 0 "$OEAPATCH" status -C "$co"
expect "an unknown global option is a usage error" 2 "$OEAPATCH" --frobnicate status
has "it names the option" "--frobnicate"
expect "an unknown command is a usage error" 2 "$OEAPATCH" -C "$co" frobnicate
has "it says so" "'frobnicate' is not a command"
expect "-C and --python together are a usage error" 2 "$OEAPATCH" -C "$co" status --python /usr/bin/python3
expect "options after an operand, behind a global option (GNU order)" 2 "$OEAPATCH" --color=never status extra -C "$co"
has "the operand is what is refused, not -C" "unexpected argument 'extra'"
expect "oeapatch --version" 0 "$OEAPATCH" --version
has "the version" "oeapatch "
expect "oeapatch version" 0 "$OEAPATCH" version

echo "== 2. help per command"
expect "oeapatch help" 0 "$OEAPATCH" help
for word in apply verify revert status replay check hook help version "-C, --directory" "--python" "--quiet" "--color"; do
	has "help lists $word" "$word"
done
for cmd in apply verify revert status replay check hook; do
	expect "oeapatch help $cmd" 0 "$OEAPATCH" help "$cmd"
	has "help $cmd is $cmd's own help" "usage: oeapatch $cmd "
	by_help=$out
	expect "oeapatch $cmd --help" 0 "$OEAPATCH" "$cmd" --help
	if [ "$out" = "$by_help" ]; then ok "help $cmd = $cmd --help"; else bad "help $cmd differs from $cmd --help"; fi
	has "$cmd --help lists --quiet" "--quiet"
done
expect "oeapatch help frobnicate" 2 "$OEAPATCH" help frobnicate
expect "oeapatch -C DIR help verify (globals before help)" 0 "$OEAPATCH" -C "$co" help verify
has "it is verify's help" "usage: oeapatch verify "

echo "== 3. --quiet"
stdout=$("$OEAPATCH" -q -C "$co" verify 2>/dev/null); rc=$?
if [ "$rc" -eq 0 ] && [ -z "$stdout" ]; then ok "verify -q: exit 0, nothing on stdout"; else bad "verify -q: exit $rc, stdout '$stdout'"; fi
stdout=$("$OEAPATCH" -C "$co" apply --diff --quiet 2>/dev/null); rc=$?
if [ "$rc" -eq 0 ] && [ -z "$stdout" ]; then ok "apply --diff --quiet: nothing on stdout"; else bad "apply --diff --quiet printed '$stdout'"; fi
stdout=$("$OEAPATCH" -C "$co" --quiet status --json 2>/dev/null)
if grep -q '"command": "status"' <<<"$stdout"; then ok "--json wins over --quiet"; else bad "--quiet swallowed --json" "$stdout"; fi
stderr=$("$OEAPATCH" -q -C "$work/nowhere" verify 2>&1 >/dev/null); rc=$?
if [ "$rc" -eq 2 ] && grep -q "oeapatch: " <<<"$stderr"; then ok "-q keeps the error on stderr and exit 2"; else bad "-q on an error: exit $rc" "$stderr"; fi
stdout=$("$OEAPATCH" -q -C "$co" revert --check 2>/dev/null); rc=$?
if [ "$rc" -eq 0 ] && [ -z "$stdout" ]; then ok "revert --check -q: silent"; else bad "revert --check -q: exit $rc '$stdout'"; fi

echo "== 4. colour"
"$OEAPATCH" -C "$co" revert >/dev/null
out=$("$OEAPATCH" -C "$co" --color=always apply --diff 2>&1)
if grep -qF "${esc}32m+" <<<"$out" && grep -qF "${esc}36m@@" <<<"$out"; then ok "--color=always colours the diff (+ green, @@ cyan)"; else bad "--color=always: no colour in the diff" "$out"; fi
out=$(NO_COLOR=1 "$OEAPATCH" -C "$co" apply --diff --color=always 2>&1)
if grep -qF "$esc" <<<"$out"; then ok "--color=always wins over NO_COLOR"; else bad "--color=always lost to NO_COLOR"; fi
out=$("$OEAPATCH" -C "$co" apply --diff --color=never 2>&1)
if ! grep -qF "$esc" <<<"$out"; then ok "--color=never: no escape"; else bad "--color=never printed escapes"; fi
out=$("$OEAPATCH" -C "$co" apply --diff 2>&1)
if ! grep -qF "$esc" <<<"$out"; then ok "auto, not a terminal: no escape"; else bad "auto coloured a pipe"; fi
out=$("$OEAPATCH" --color=always -C "$co" verify 2>&1)
if grep -qF "${esc}31mFAIL" <<<"$out"; then ok "verdicts: FAIL in red"; else bad "verify's FAIL not coloured" "$out"; fi
expect "--color=sometimes is a usage error" 2 "$OEAPATCH" -C "$co" --color=sometimes status
has "it names the values" "never, always or auto"
"$OEAPATCH" -C "$co" apply --library "$OEA_LIBRARY" >/dev/null
# script(1) runs the command on a pseudo-terminal: auto's other half.
if command -v script >/dev/null; then
	out=$(env -u NO_COLOR script -qec "'$OEAPATCH' -C '$co' verify" /dev/null 2>&1)
	if grep -qF "${esc}32mok" <<<"$out"; then ok "auto on a terminal: ok in green"; else bad "auto on a terminal: no colour" "$out"; fi
	out=$(NO_COLOR=1 script -qec "'$OEAPATCH' -C '$co' verify" /dev/null 2>&1)
	if ! grep -qF "$esc" <<<"$out"; then ok "NO_COLOR on a terminal: no escape"; else bad "NO_COLOR ignored on a terminal"; fi
else
	bad "script(1) is missing (util-linux): the terminal half of auto cannot be checked"
fi

echo "== 5. --json: ok is exactly exit status 0"
# (The command before its options here, so the check also runs on a binary
# without global options: it showed status's "ok": true at exit 1.)
# json_ok_matches NAME ARGS...: runs oeapatch ARGS --json, compares "ok" with the exit status.
json_ok_matches() {
	local name=$1 doc rc ok_field
	shift
	doc=$("$OEAPATCH" "$@" --json 2>/dev/null)
	rc=$?
	ok_field=$(jq -r '.ok' <<<"$doc" 2>/dev/null)
	if { [ "$rc" -eq 0 ] && [ "$ok_field" = true ]; } || { [ "$rc" -ne 0 ] && [ "$ok_field" = false ]; }; then
		ok "$name: exit $rc, ok $ok_field"
	else
		bad "$name: exit $rc but \"ok\": $ok_field" "$doc"
	fi
}
json_ok_matches "status, applied" status -C "$co"
json_ok_matches "verify, applied" verify -C "$co"
"$OEAPATCH" revert -C "$co" >/dev/null
json_ok_matches "status, not applied" status -C "$co"
json_ok_matches "verify, not applied" verify -C "$co"
json_ok_matches "revert, nothing to do" revert -C "$co"
json_ok_matches "apply --check" apply -C "$co" --check --library "$OEA_LIBRARY"
# A library that no longer loads: applied with a copy, the copy then removed.
cp "$OEA_LIBRARY" "$work/liboea-copy.so"
"$OEAPATCH" apply -C "$co" --library "$work/liboea-copy.so" >/dev/null
rm "$work/liboea-copy.so"
json_ok_matches "status, library missing" status -C "$co"
json_ok_matches "verify, library missing" verify -C "$co"
"$OEAPATCH" revert -C "$co" >/dev/null
"$OEAPATCH" apply -C "$co" --library "$OEA_LIBRARY" >/dev/null
# An edited region: drift.
sed -i 's/^\(    if _oeapatch_oea.ENABLED:\)$/\1  # edited/' "$co/$target_rel"
json_ok_matches "status, region edited" status -C "$co"
json_ok_matches "verify, region edited" verify -C "$co"
json_ok_matches "apply on an edited region" apply -C "$co"
json_ok_matches "a usage error" status -C "$co" --frobnicate
json_ok_matches "no checkout" status -C "$work"
# A failing command's document says why, not only that it failed.
doc=$("$OEAPATCH" status -C "$work" --json 2>/dev/null)
if grep -q '"error": {' <<<"$doc" && grep -q '"message"' <<<"$doc"; then
	ok "--json on an error carries the error"
else
	bad "--json on an error has no error member" "$doc"
fi

e2e_summary
