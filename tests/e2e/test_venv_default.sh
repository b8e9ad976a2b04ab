#!/usr/bin/env bash
# test_venv_default.sh - two behaviours of the wheel's console entry, on the
# build's binary (no wheel, no network):
#
#  1. The venv default: the entry (contrib/wheel/oeapatch) runs the
#     executable with OEAPATCH_ENTRY_PYTHON naming the interpreter it runs
#     under. With neither -C nor --python, apply/verify/status/revert then act
#     on the sglang that interpreter imports, never on the current folder,
#     and say so; -C or --python still choose; check and hook keep the
#     current folder; the variable is not passed on to the programs
#     oeapatch runs. Without the variable (a checkout's build, an install
#     under a prefix), the current folder as before.
#  2. apply over a binding whose recorded liboea is gone (`pip install -U
#     oeapatch` or `pip uninstall` removed it): verify fails naming it, and
#     apply binds the liboea installed beside oeapatch now instead of
#     refusing the recorded path.
set -uo pipefail

SRC=${OEAPATCH_SOURCE_DIR:-$(cd "$(dirname "$0")/../.." && pwd)}
OEAPATCH=${OEAPATCH:-$SRC/build/src/oeapatch}
: "${OEA_LIBRARY:?OEA_LIBRARY: the liboea to bind}"
PY=${OEAPATCH_SYSTEM_PYTHON:-/usr/bin/python3}
FIX=$SRC/tests/fixtures
T=python/sglang/srt/layers/moe/topk.py
I=sglang/srt/layers/moe/topk.py
WORK=$(mktemp -d "${TMPDIR:-/tmp}/oeapatch-venvdef.XXXXXX")
trap 'rm -rf "$WORK"' EXIT
. "$(dirname "$0")/testlib.sh"

echo "== a venv with an installed sglang, and a checkout as the current folder"
if ! "$PY" -m venv --without-pip "$WORK/venv" >"$WORK/venv.log" 2>&1; then
	bad "python3 -m venv (Debian: python3-venv)" "$(cat "$WORK/venv.log")"
	e2e_summary
	exit 1
fi
VPY=$WORK/venv/bin/python
SITE=$("$VPY" -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])')
cp -a "$FIX/pkg/python/sglang" "$SITE/"
cp "$FIX/eras/2026-02_post_process.py" "$SITE/$I"
cp "$SITE/$I" "$WORK/installed.orig"
C=$WORK/checkout
mkdir -p "$C" && cp -a "$FIX/pkg/python" "$C/" && cp "$FIX/eras/2025-12_layer_id_capturer.py" "$C/$T"
cp "$C/$T" "$WORK/checkout.orig"
# The interpreter the entry names: a wrapper that notes whether the variable
# reached it (it must not), then runs the venv's Python.
cat >"$WORK/venv/bin/python-entry" <<EOS
#!/bin/sh
echo "\${OEAPATCH_ENTRY_PYTHON-unset}" >>"$WORK/child-saw"
exec "$VPY" "\$@"
EOS
chmod +x "$WORK/venv/bin/python-entry"
entry() { (cd "$C" && OEAPATCH_ENTRY_PYTHON=$WORK/venv/bin/python-entry "$OEAPATCH" "$@"); }

echo "== the venv default"
expect "status, no -C or --python: not applied" 1 entry status
has "it names the venv's file" "target $SITE/$I"
has "and says it is the default" "the environment oeapatch is installed in (no -C, no --python"
expect "apply" 0 entry apply --library "$OEA_LIBRARY"
if cmp -s "$WORK/installed.orig" "$SITE/$I"; then bad "apply did not change the venv's topk.py"; else ok "apply changed the venv's topk.py"; fi
check "the current folder's checkout is untouched" cmp -s "$WORK/checkout.orig" "$C/$T"
expect "verify" 0 entry verify
has "verify names the venv's file" "target $SITE/$I"
expect "status" 0 entry status
expect "status --json" 0 entry status --json
has "--json names the venv's root" "\"root\": \"$SITE\""
has "--json says the interpreter is the default" "\"default\": true"
expect "-C . chooses the checkout: not applied there" 1 entry -C . status
has "status -C . names the checkout" "oeapatch apply -C $C\`"
expect "--python chooses too" 0 entry --python "$WORK/venv/bin/python-entry" status
if grep -q "the environment oeapatch is installed in" <<<"$out"; then bad "--python given, yet it says the default"; else ok "--python given: no default line"; fi
expect "--python --json" 0 entry --python "$WORK/venv/bin/python-entry" status --json
has "--json: a given interpreter is not the default" "\"default\": false"
# A relative --python is the caller's path, though the interpreter is started in /.
expect "--python venv/bin/python (relative to the current folder)" 0 \
	bash -c "cd '$WORK' && '$OEAPATCH' --python venv/bin/python-entry status --json"
has "... finds the venv's package" "\"root\": \"$SITE\""
if [ -s "$WORK/child-saw" ] && ! grep -qv '^unset$' "$WORK/child-saw"; then
	ok "the interpreter oeapatch ran never saw OEAPATCH_ENTRY_PYTHON"
else bad "OEAPATCH_ENTRY_PYTHON reached the interpreter" "$(cat "$WORK/child-saw" 2>/dev/null)"; fi
expect "revert" 0 entry revert
check "revert gives the venv's topk.py back" cmp -s "$WORK/installed.orig" "$SITE/$I"
expect "without the variable: the current folder (the checkout), as before" 1 \
	bash -c "cd '$C' && '$OEAPATCH' status"
has "the checkout" "oeapatch apply -C $C\`"
# A venv without sglang: the default is an error that says where it looked.
rm -rf "$SITE/sglang"
expect "a venv without sglang: trouble" 2 entry status
has "it says the default chose that interpreter" "the environment oeapatch is installed in: the default without -C or --python"
e2e_git_env "$WORK"
(cd "$C" && git init -q && git add -A && git commit -qm fixture)
expect "check keeps the current folder (a git repository)" 0 entry check HEAD

echo "== the recorded liboea is gone"
C2=$WORK/gone
mkdir -p "$C2/$(dirname "$T")" && cp "$FIX/eras/2025-12_layer_id_capturer.py" "$C2/$T"
mkdir -p "$WORK/old-lib"
cp "$OEA_LIBRARY" "$WORK/old-lib/liboea.so.2.0.9"
expect "apply --library (an older install's liboea)" 0 "$OEAPATCH" -C "$C2" apply --library "$WORK/old-lib/liboea.so.2.0.9"
B=$(ls "$C2/$(dirname "$T")"/_oeapatch_*.py)
check "the binding records it" grep -qF "$WORK/old-lib/liboea.so.2.0.9" "$B"
rm "$WORK/old-lib/liboea.so.2.0.9"
expect "verify: the library is gone" 1 "$OEAPATCH" -C "$C2" verify
has "a failed library check" "FAIL library"
has "naming the missing file" "$WORK/old-lib/liboea.so.2.0.9"
# pip uninstall oeapatch, and a server started with OEA off: it starts and
# runs the framework's routing, so a warning, not a failed gate
expect "with SGLANG_OEA_K0=0 set: verify holds" 0 env SGLANG_OEA_K0=0 "$OEAPATCH" -C "$C2" verify
has "a library warning" "WARN library"
has "saying OEA is off and what happens with it on" "SGLANG_OEA_K0 is off, so the server starts without OEA and loads no library; with it on, the start fails"
# ... but recording (RECORD set): the recorder is liboea's, so the library is loaded after all
mkdir -p "$WORK/rec"
expect "with SGLANG_OEA_K0=0 and RECORD set: verify fails" 1 env SGLANG_OEA_K0=0 SGLANG_OEA_RECORD="$WORK/rec/routing" \
	"$OEAPATCH" -C "$C2" verify
has "the failed library check says nothing is recorded" "SGLANG_OEA_K0 is off, but SGLANG_OEA_RECORD is set and the recorder is liboea's: the server starts without OEA and records nothing"
printf 'SGLANG_OEA_K0=0\n' >"$WORK/off.env"
expect "the same from an EnvironmentFile" 0 "$OEAPATCH" -C "$C2" verify --env-file "$WORK/off.env"
expect "with SGLANG_OEA_K0=2: it fails" 1 env SGLANG_OEA_K0=2 "$OEAPATCH" -C "$C2" verify
has "the library check" "FAIL library"
expect "apply binds the liboea beside oeapatch now" 0 "$OEAPATCH" -C "$C2" apply
has "and says which" "which the binding recorded, is gone; binding $(readlink -f "$OEA_LIBRARY")"
check "the binding records the new one" grep -qF "$(readlink -f "$OEA_LIBRARY")" "$B"
expect "verify holds" 0 "$OEAPATCH" -C "$C2" verify
# A recorded library that is there is kept (a re-apply after a pull never rebinds).
cp "$OEA_LIBRARY" "$WORK/old-lib/liboea.so.2.0.9"
expect "apply --library the older one again" 0 "$OEAPATCH" -C "$C2" apply --library "$WORK/old-lib/liboea.so.2.0.9"
expect "re-apply with it present" 0 "$OEAPATCH" -C "$C2" apply
check "the binding still records it" grep -qF "$WORK/old-lib/liboea.so.2.0.9" "$B"

e2e_summary
