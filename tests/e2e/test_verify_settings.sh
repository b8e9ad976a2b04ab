#!/usr/bin/env bash
# test_verify_settings.sh - `oeapatch verify` as the pre-start gate for the
# binding's settings (issue 9): on a patched fixture checkout, good and bad
# SGLANG_OEA_* environments and systemd EnvironmentFile= files (--env-file),
# the switch (a bad value fails with K0 on, warns with K0 off), typos, the
# precedence of files over verify's own environment, file syntax errors named
# by file and line, the effective-settings line (no value for a refused one),
# K0 beyond any top-k, status giving verify's verdict, --json, and --ref.
set -u

SRC=${OEAPATCH_SOURCE_DIR:-$(cd "$(dirname "$0")/../.." && pwd)}
OEAPATCH=${OEAPATCH:-$SRC/build/src/oeapatch}
LIB=${OEA_LIBRARY:?OEA_LIBRARY: the liboea to bind}
PY=/usr/bin/python3
[ -x "$PY" ] || PY=python3
T=python/sglang/srt/layers/moe/topk.py

WORK=$(mktemp -d "${TMPDIR:-/tmp}/oeapatch-settings.XXXXXX")
trap 'rm -rf "$WORK"' EXIT
. "$(dirname "$0")/testlib.sh"
e2e_git_env "$WORK"
# Whatever the caller's shell holds must not leak into the checks.
for v in $(env | sed -n 's/^\([Ss][Gg][Ll][Aa][Nn][Gg]_[Oo][Ee][Aa]_[A-Za-z0-9_]*\)=.*/\1/p'); do unset "$v"; done

C=$WORK/checkout
mkdir -p "$C/$(dirname "$T")" && cp "$SRC/tests/fixtures/eras/2025-08_topk_config.py" "$C/$T"
"$OEAPATCH" apply -C "$C" --library "$LIB" >/dev/null || { echo "FAIL apply"; exit 1; }
V() { "$OEAPATCH" verify -C "$C" "$@"; }
# EV NAME=VALUE... [ARGS]: verify with those variables added to the environment.
EV() {
	local -a vars=()
	while [[ $# -gt 0 && $1 == *=* ]]; do vars+=("$1"); shift; done
	env "${vars[@]}" "$OEAPATCH" verify -C "$C" "$@"
}
# hasnt DESC TEXT: passes when TEXT is not in $out.
hasnt() { if grep -qF -- "$2" <<<"$out"; then bad "$1: '$2' in the output" "$out"; else ok "$1"; fi; }

echo "== the environment"
expect "nothing set: verified" 0 V
has "a settings check" "ok   settings"
has "the effective settings, off" "settings: k0=0 (off) min_batch=2 max_tokens=1024 strict=true"
has "the recorded library in them" "library=$(realpath "$LIB")"
expect "K0=3 and valid gates: verified" 0 EV SGLANG_OEA_K0=3 SGLANG_OEA_MIN_BATCH=4 SGLANG_OEA_MAX_TOKENS=256
has "k0 and gates as given" "settings: k0=3 min_batch=4 max_tokens=256"
expect "K0 bands, as replay --recommend prints them: verified" 0 EV SGLANG_OEA_K0="1-7:0,8-31:4,32-:3"
has "the bands are the effective k0" "settings: k0=1-7:0,8-31:4,32-:3 min_batch=2"
has "and OEA is on" "SGLANG_OEA_K0=1-7:0,8-31:4,32-:3: OEA is on"
expect "bands whose k0 are all 0: off" 0 EV SGLANG_OEA_K0="1-31:0,32-:0"
has "off" "OEA is off"
expect "bands with a gap fail" 1 EV SGLANG_OEA_K0="1-7:0,9-:3"
has "named, with the rule" "SGLANG_OEA_K0='1-7:0,9-:3' (the environment): expected an integer in 0..15 (liboea routes at most 16 experts per token, and OEA changes only layers whose top-k is above k0: from 16 on, never), or k0 by batch size: bands LO-HI:K0"
expect "bands with a k0 of 16 fail" 1 EV SGLANG_OEA_K0="1-7:0,8-:16"
expect "bands up to k0 8: the warning of K0=8" 0 EV SGLANG_OEA_K0="1-7:0,8-:8"
has "warned" "8 or more: OEA changes only layers whose routed top-k is above k0"
expect "bands are K0's alone" 1 EV SGLANG_OEA_K0=3 SGLANG_OEA_MIN_BATCH="1-:3"
expect "the issue: K0=abc fails" 1 EV SGLANG_OEA_K0=abc
has "named with its value and the expected form" "FAIL settings               SGLANG_OEA_K0='abc' (the environment): expected an integer in 0..15"
has "the verdict" "does NOT verify"
expect "K0=3, STATS=maybe: fails (the import would stop)" 1 EV SGLANG_OEA_K0=3 SGLANG_OEA_STATS=maybe
has "STATS named" "SGLANG_OEA_STATS='maybe' (the environment): expected a boolean (true/1/yes/y or false/0/no/n)"
expect "K0 unset, STATS=maybe: a warning (the binding only warns)" 0 EV SGLANG_OEA_STATS=maybe
has "a WARN line" "WARN settings               SGLANG_OEA_STATS='maybe'"
has "says the start with K0 on fails" "the start with it on will fail"
has "counted in the verdict" "verified (23 checks, 1 warning)"
expect "K0=-0 is off too" 0 EV SGLANG_OEA_K0=-0 SGLANG_OEA_STATS=maybe
expect "MIN_BATCH above MAX_TOKENS's default, K0 on: fails" 1 EV SGLANG_OEA_K0=2 SGLANG_OEA_MIN_BATCH=2000
has "the cross rule" "SGLANG_OEA_MAX_TOKENS (unset): its default 1024 is below SGLANG_OEA_MIN_BATCH (2000)"
expect "a typo of K0 fails, K0 off or not" 1 EV SGLANG_OEA_KO=3
has "names the setting it meant" "a typo of SGLANG_OEA_K0?"
expect "another name of the namespace: a warning" 0 EV SGLANG_OEA_PROMETHEUS_PORT=9000
has "with the closest setting" "not a setting of sglang-oea/2, the binding ignores it (closest:"
echo "== MODE: on or shadow (issue 32)"
expect "MODE=shadow, K0=3: verified" 0 EV SGLANG_OEA_K0=3 SGLANG_OEA_MODE=shadow
has "the settings line says it" " mode=shadow"
has "with the statistics shadow mode forces (forced_by), as the binding runs" " stats=true "
expect "MODE=shadow, STATS=false: statistics still on" 0 EV SGLANG_OEA_K0=3 SGLANG_OEA_MODE=shadow SGLANG_OEA_STATS=false
has "stats=true whatever STATS says" " stats=true "
has "and the decision" "SGLANG_OEA_K0=3: OEA is on, SGLANG_OEA_MODE=shadow"
expect "MODE unset, K0=3: on" 0 EV SGLANG_OEA_K0=3
has "the default said" "SGLANG_OEA_K0=3: OEA is on, SGLANG_OEA_MODE=on"
expect "MODE=off, K0=3: fails (the import would stop)" 1 EV SGLANG_OEA_K0=3 SGLANG_OEA_MODE=off
has "MODE named with its values" "SGLANG_OEA_MODE='off' (the environment): expected one of on/shadow"
expect "MODE=shadow: status says the mode" 0 env SGLANG_OEA_K0=3 SGLANG_OEA_MODE=shadow "$OEAPATCH" status -C "$C"
has "in status" "SGLANG_OEA_MODE=shadow"
has "status's settings line: the statistics on" " stats=true "
expect "MODE=shadow: --json" 0 EV SGLANG_OEA_K0=3 SGLANG_OEA_MODE=shadow --json
check "effective mode and reason in the document" "$PY" -c '
import json, sys
s = json.loads(sys.argv[1])["settings"]
assert s["effective"]["mode"] == "shadow" and s["oea"] == "on", s
assert s["effective"]["stats"] is True, s
assert s["reason"].endswith("SGLANG_OEA_MODE=shadow"), s["reason"]
' "$out"
expect "-q: the status alone" 1 env SGLANG_OEA_K0=abc "$OEAPATCH" verify -C "$C" -q
check "-q prints nothing" test -z "$out"

echo "== the settings line: what the binding runs with (issue 15.16)"
# On, the binding stops at import on a refused value: it runs with no value
# of that setting, so none is shown (once: strict=false, min_batch=0).
expect "K0 on, STRICT=on: fails" 1 EV SGLANG_OEA_K0=1 SGLANG_OEA_STRICT=on
has "strict refused, not false" "settings: k0=1 min_batch=2 max_tokens=1024 strict=(refused) speculative=false"
has "and why" "(the binding stops at import on the value FAILed above: it runs with none of these)"
hasnt "never strict=false" "strict=false"
expect "K0 on, MIN_BATCH=abc: fails" 1 EV SGLANG_OEA_K0=1 SGLANG_OEA_MIN_BATCH=abc
has "min_batch refused, not 0" "settings: k0=1 min_batch=(refused) max_tokens=1024"
expect "K0 on, MAX_TOKENS=5000: fails" 1 EV SGLANG_OEA_K0=1 SGLANG_OEA_MAX_TOKENS=5000
has "max_tokens refused, not 0" "min_batch=2 max_tokens=(refused) strict=true"
expect "K0 off, STRICT=on: a warning" 0 EV SGLANG_OEA_STRICT=on SGLANG_OEA_STATS=yes
has "the defaults the binding falls back to (strict=true, stats too)" "strict=true speculative=false stats=false"
has "said so" "(defaults: the bad values above are ignored while off)"
expect "K0 on, STRICT=on, --json" 1 EV SGLANG_OEA_K0=1 SGLANG_OEA_STRICT=on --json
check "settings.effective: null for the refused value, the rest as read" "$PY" -c '
import json, sys
s = json.loads(sys.argv[1])["settings"]
e = s["effective"]
assert e["strict"] is None and e["k0"] == 1 and e["min_batch"] == 2 and e["stats"] is False, e
assert [p["refused"] for p in s["problems"]] == [True], s["problems"]
' "$out"

echo "== K0 at or above the top-k (issue 15.18)"
expect "K0=16: fails (liboea routes at most 16 experts per token: never a change)" 1 EV SGLANG_OEA_K0=16
has "says why" "SGLANG_OEA_K0='16' (the environment): expected an integer in 0..15 (liboea routes at most 16 experts per token"
expect "K0=8: verified with a warning (a no-op on top-8 models, verify does not know the model)" 0 EV SGLANG_OEA_K0=8
has "the warning" "WARN settings               SGLANG_OEA_K0='8' (the environment): 8 or more: OEA changes only layers whose routed top-k is above k0"
has "counted" "verified (23 checks, 1 warning)"
has "k0 stands" "settings: k0=8 min_batch=2"
expect "K0=15 --json: a warning, not refused" 0 EV SGLANG_OEA_K0=15 --json
check "severity warning, refused false, k0 15" "$PY" -c '
import json, sys
s = json.loads(sys.argv[1])["settings"]
p = s["problems"]
assert len(p) == 1 and p[0]["severity"] == "warning" and p[0]["refused"] is False, p
assert s["effective"]["k0"] == 15, s["effective"]
' "$out"
expect "K0=7: nothing to say" 0 EV SGLANG_OEA_K0=7
hasnt "no warning" "WARN"

echo "== status and verify: one verdict (issue 15.6)"
for e in "X=1" "SGLANG_OEA_K0=abc" "SGLANG_OEA_K0=-1" "SGLANG_OEA_K0=16" "SGLANG_OEA_K0=3 SGLANG_OEA_STATS=maybe" \
	"SGLANG_OEA_STATS=maybe" "SGLANG_OEA_K0=8" "SGLANG_OEA_KO=3" "SGLANG_OEA_LIBRARY=$WORK/nowhere.so"; do
	# shellcheck disable=SC2086 # one word per assignment
	env $e "$OEAPATCH" verify -C "$C" -q
	vrc=$?
	# shellcheck disable=SC2086
	expect "status exits as verify does ($vrc) with $e" $vrc env $e "$OEAPATCH" status -C "$C"
done
expect "K0=abc: status" 1 env SGLANG_OEA_K0=abc "$OEAPATCH" status -C "$C"
has "not 'verifies'" "state:    applied (version 2), does NOT verify: the binding refuses the settings of this environment"
has "and which" "settings: SGLANG_OEA_K0='abc' (the environment): expected an integer in 0..15"
expect "K0=-1: status --json" 1 env SGLANG_OEA_K0=-1 "$OEAPATCH" status -C "$C" --json
check "ok false, state bad-settings" "$PY" -c '
import json, sys
d = json.loads(sys.argv[1])
assert d["ok"] is False and d["state"] == "bad-settings", d
assert [c["check"] for c in d["drift"]] == ["settings"], d["drift"]
' "$out"
expect "STATS=maybe, K0 off: status verifies, with the warning" 0 env SGLANG_OEA_STATS=maybe "$OEAPATCH" status -C "$C"
has "the warning shown" "warning: settings: SGLANG_OEA_STATS='maybe'"
expect "a library override that does not load: status fails as verify does" 1 \
	env SGLANG_OEA_LIBRARY="$WORK/nowhere.so" "$OEAPATCH" status -C "$C" --json
check "and names the library it checked" "$PY" -c '
import json, sys
d = json.loads(sys.argv[1])
assert d["library"]["path"].endswith("/nowhere.so") and d["library"]["loads"] is False, d["library"]
' "$out"

echo "== --json"
expect "a bad value, --json" 1 EV SGLANG_OEA_K0=3 SGLANG_OEA_MAX_TOKENS=4096 --json
check "ok false, the problem and the effective settings in the document" "$PY" -c '
import json, sys
d = json.loads(sys.argv[1])
assert d["ok"] is False, d["ok"]
s = d["settings"]
assert s["source"] == ["environment"] and s["on"] is True and s["switch"] == "SGLANG_OEA_K0", s
p = s["problems"]
assert len(p) == 1 and p[0]["variable"] == "SGLANG_OEA_MAX_TOKENS" and p[0]["value"] == "4096", p
assert p[0]["severity"] == "error" and "1..1024" in p[0]["message"], p
assert p[0]["refused"] is True, p
# what the binding runs with: none for the refused value, the rest as read
e = s["effective"]
assert e["k0"] == 3 and e["strict"] is True and e["max_tokens"] is None, e
assert any(c["check"] == "settings" and not c["ok"] for c in d["checks"])
' "$out"
expect "a warning, --json" 0 EV SGLANG_OEA_STATS=maybe --json
check "ok true, the check holds with a warning" "$PY" -c '
import json, sys
d = json.loads(sys.argv[1])
c = [c for c in d["checks"] if c["check"] == "settings"]
assert d["ok"] is True and c and all(x["ok"] and x.get("warning") for x in c), c
assert d["settings"]["problems"][0]["severity"] == "warning"
assert d["settings"]["problems"][0]["value"] == "maybe"
' "$out"
expect "a value that is not UTF-8, --json" 0 EV SGLANG_OEA_STATS=$'\xff' --json
check "the document parses, the value in its escaped form" "$PY" -c '
import json, sys
d = json.loads(sys.argv[1])
assert d["settings"]["problems"][0]["value"] == "\x27\\xff\x27", d["settings"]["problems"]
' "$out"

echo "== the recorder's file (RECORD, RECORD_CAP: issue 33)"
mkdir -p "$WORK/rec"
expect "RECORD in a writable folder, K0 unset: verified" 0 EV SGLANG_OEA_RECORD="$WORK/rec/routing"
has "the file stem in the settings" "record=$WORK/rec/routing record_cap=256"
has "recording only, said as the start does it" "OEA is off, the routing is left as it is, SGLANG_OEA_RECORD=$WORK/rec/routing: the decode calls' routing inputs are recorded"
expect "RECORD with OEA on: verified" 0 EV SGLANG_OEA_K0=3 SGLANG_OEA_RECORD="$WORK/rec/routing" SGLANG_OEA_RECORD_CAP=1024
has "on, and recorded" "OEA is on, SGLANG_OEA_MODE=on, SGLANG_OEA_RECORD=$WORK/rec/routing: the decode calls' routing inputs are recorded"
expect "a folder that does not exist fails" 1 EV SGLANG_OEA_RECORD="$WORK/nowhere/routing"
has "named, with why" "SGLANG_OEA_RECORD='$WORK/nowhere/routing' (the environment): its folder $WORK/nowhere cannot be reached: No such file or directory"
expect "a relative path fails" 1 EV SGLANG_OEA_RECORD=rec/routing
has "said why" "a relative path: the server would resolve it against its own working directory"
expect "a folder, not a file, fails" 1 EV SGLANG_OEA_RECORD="$WORK/rec/"
has "said" "names a folder: give a file name in it"
touch "$WORK/plain"
expect "a folder that is a file fails" 1 EV SGLANG_OEA_RECORD="$WORK/plain/routing"
has "said" "$WORK/plain is not a folder"
expect "a cap that is not a number fails" 1 EV SGLANG_OEA_K0=3 SGLANG_OEA_RECORD="$WORK/rec/routing" SGLANG_OEA_RECORD_CAP=1GB
has "named with what it takes" "SGLANG_OEA_RECORD_CAP='1GB' (the environment): expected an integer in 1..1048576"
expect "a cap of 0 fails" 1 EV SGLANG_OEA_K0=3 SGLANG_OEA_RECORD="$WORK/rec/routing" SGLANG_OEA_RECORD_CAP=0
expect "K0 off: a bad cap is a warning, and the binding then records nothing (it runs on the defaults)" 0 \
	EV SGLANG_OEA_RECORD="$WORK/rec/routing" SGLANG_OEA_RECORD_CAP=1GB
has "said: record is the default, none" "record=(none recorded) record_cap=256 (defaults"
has "and that nothing is recorded, as the binding warns" "SGLANG_OEA_RECORD is ignored with them: nothing is recorded"
# A folder the service user cannot write: root passes access(), so as root the
# check runs as nobody (setpriv), in a root-owned 0755 folder nobody can enter.
mkdir -p "$WORK/ro" && chmod 0755 "$WORK/ro" "$WORK"
if [ "$(id -u)" -eq 0 ] && command -v setpriv >/dev/null; then
	out=$(env SGLANG_OEA_RECORD="$WORK/ro/routing" setpriv --reuid=65534 --regid=65534 --clear-groups -- \
		"$OEAPATCH" verify -C "$C" 2>&1)
	has "a folder the user cannot write fails (as nobody)" "the folder $WORK/ro is not writable by nobody (uid 65534), which runs this check"
elif [ "$(id -u)" -ne 0 ]; then
	chmod 0555 "$WORK/ro"
	expect "a folder the user cannot write fails" 1 EV SGLANG_OEA_RECORD="$WORK/ro/routing"
	has "said, naming the user" "the folder $WORK/ro is not writable by"
	chmod 0755 "$WORK/ro"
else
	skip "a folder the user cannot write" "root without setpriv: access() lets root write anywhere"
fi
expect "RECORD with K0 off and a bad value elsewhere: the binding runs on defaults, nothing recorded" 0 \
	EV SGLANG_OEA_RECORD="$WORK/nowhere/routing" SGLANG_OEA_STATS=maybe
hasnt "no recording said" "routing inputs are recorded"

echo "== --env-file"
F=$WORK/sglang.env
printf '# the server'"'"'s settings\n; systemd comment\n\nSGLANG_OEA_K0=4\nSGLANG_OEA_MIN_BATCH = " 8 "\nSGLANG_OEA_STATS=yes\nOTHER=1\n' >"$F"
expect "a good file" 0 V --env-file "$F"
has "says where the settings came from" "3 of 12 settings of sglang-oea/2 set in $F, all valid"
has "the file's values are effective, the quoted blanks ignored" "settings: k0=4 min_batch=8 max_tokens=1024"
expect "verify's own environment is ignored with --env-file" 0 EV SGLANG_OEA_K0=abc --env-file "$F"
has "and the ignored variables are named" "(ignored from verify's own environment, --env-file gives the server's: SGLANG_OEA_K0)"
printf 'SGLANG_OEA_K0=4\nSGLANG_OEA_STATS=maybe\n' >"$WORK/bad.env"
expect "a bad value in a file" 1 V --env-file "$WORK/bad.env"
has "named by file and line" "SGLANG_OEA_STATS='maybe' ($WORK/bad.env:2): expected a boolean"
printf 'SGLANG_OEA_K0=abc\n' >"$WORK/a.env"
printf 'SGLANG_OEA_K0=2\n' >"$WORK/b.env"
expect "repeated: the later file wins (a bad K0 overridden)" 0 V --env-file "$WORK/a.env" --env-file "$WORK/b.env"
has "k0 from the later file" "settings: k0=2"
expect "repeated: the later file wins (a bad K0 last)" 1 V --env-file "$WORK/b.env" --env-file "$WORK/a.env"
printf 'SGLANG_OEA_K0=1\nSGLANG_OEA_LIBRARY=%s/nowhere/liboea.so\n' "$WORK" >"$WORK/lib.env"
expect "the library the file names is the one checked" 1 V --env-file "$WORK/lib.env"
has "library check names the override" "(set by SGLANG_OEA_LIBRARY)"
has "and the effective line shows it" "library=$WORK/nowhere/liboea.so"

echo "== EnvironmentFile syntax: what systemd would ignore is an error naming file and line"
printf 'SGLANG_OEA_STATS=1\nexport SGLANG_OEA_K0=3\n' >"$WORK/export.env"
expect "export" 2 V --env-file "$WORK/export.env"
has "file:line and why" "$WORK/export.env:2: 'export SGLANG_OEA_K0' is not a variable name: EnvironmentFile= has no 'export'"
printf 'SGLANG_OEA_K0 3\n' >"$WORK/noeq.env"
expect "a line without '='" 2 V --env-file "$WORK/noeq.env"
has "named" "noeq.env:1: no '=' in 'SGLANG_OEA_K0 3': systemd ignores this line"
printf 'A=1\nSGLANG_OEA_K0="3\nB=2\n' >"$WORK/quote.env"
expect "a quote never closed" 2 V --env-file "$WORK/quote.env"
has "named at the quote's line" "quote.env:2: a quote that is never closed"
expect "a file that cannot be read" 2 V --env-file "$WORK/missing.env"
has "named" "$WORK/missing.env: cannot read it"
expect "--json: the error in the document" 2 V --env-file "$WORK/export.env" --json
check "error with file and line" "$PY" -c '
import json, sys
d = json.JSONDecoder().raw_decode(sys.argv[1][sys.argv[1].index("{"):])[0]  # stderr is beside it
e = d["error"]
assert d["ok"] is False and e["line"] == 2 and e["where"].endswith("export.env:2"), d
' "$out"
printf 'SGLANG_OEA_K0=1\\\n2\nSGLANG_OEA_LIBRARY="%s"  # not a comment\n' "$LIB" >"$WORK/cont.env"
expect "continuation and text after a closing quote (systemd joins it)" 1 V --env-file "$WORK/cont.env"
has "k0 continued over two lines" "settings: k0=12 "
has "the joined library value is what is checked" "# not a comment"

echo "== --ref"
git -C "$C" init -q && git -C "$C" add -A && git -C "$C" commit -qm patched
expect "--ref: the settings of this machine are not a commit's" 0 EV SGLANG_OEA_K0=abc --ref HEAD
has "said" "so were the settings (--env-file checks a file's)"
expect "--ref --env-file: the file's are checked" 1 V --ref HEAD --env-file "$WORK/bad.env"
has "named" "SGLANG_OEA_STATS='maybe'"

echo "== vLLM: the same checks under VLLM_OEA_* (issue 17)"
for v in $(env | sed -n 's/^\([Vv][Ll][Ll][Mm]_[Oo][Ee][Aa]_[A-Za-z0-9_]*\)=.*/\1/p'); do unset "$v"; done
VC=$WORK/vllm
R=vllm/model_executor/layers/fused_moe/router/base_router.py
mkdir -p "$VC/$(dirname "$R")" && cp "$SRC/tests/fixtures/vllm-0.15-router.py" "$VC/$R"
"$OEAPATCH" apply -C "$VC" --library "$LIB" >/dev/null || bad "apply on the vLLM fixture"
VV() { # VV NAME=VALUE... [ARGS]: verify the vLLM checkout with those variables
	local -a vars=()
	while [[ $# -gt 0 && $1 == *=* ]]; do vars+=("$1"); shift; done
	env "${vars[@]}" "$OEAPATCH" verify -C "$VC" "$@"
}
expect "nothing set: verified" 0 VV
has "vLLM's twelve settings" "0 of 12 settings of vllm-oea/1 set in the environment, all valid"
expect "VLLM_OEA_K0=abc fails" 1 VV VLLM_OEA_K0=abc
has "named with its value" "VLLM_OEA_K0='abc' (the environment): expected an integer in 0..15"
expect "a typo of VLLM_OEA_K0 fails" 1 VV VLLM_OEA_KO=3
has "names the setting it meant" "a typo of VLLM_OEA_K0?"
expect "another VLLM_OEA_ name: a warning" 0 VV VLLM_OEA_PROMETHEUS_PORT=9000
has "not a setting of vllm-oea" "not a setting of vllm-oea/1, the binding ignores it (closest:"
expect "vLLM's boolean spellings: STATS=1" 0 VV VLLM_OEA_K0=2 VLLM_OEA_STATS=1
has "stats on" "stats=true"
expect "SGLang's yes is not vLLM's" 1 VV VLLM_OEA_K0=2 VLLM_OEA_STATS=yes
has "named" "VLLM_OEA_STATS='yes'"
expect "SGLang's settings are not vLLM's: ignored, with a warning" 0 VV SGLANG_OEA_K0=abc
has "named as another definition's setting" "SGLANG_OEA_K0='abc' (the environment): a setting of sglang-oea/2 (SGLang), not of vllm-oea/1"

echo "== the CLI around it"
expect "help verify shows --env-file" 0 "$OEAPATCH" help verify
has "the option" "--env-file FILE"
check "no C source names a setting of a definition (they are data)" test -z "$(grep -rl 'SGLANG_OEA' "$SRC/src")"

e2e_summary
