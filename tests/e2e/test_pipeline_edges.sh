#!/usr/bin/env bash
# test_pipeline_edges.sh - the CLI on what adversarial use of the pipeline
# found (issue 11): a binding module edited by hand (verify fails on it,
# apply does not overwrite it, revert does not delete it without --force), a
# library path that is not UTF-8 (refused before anything is written, naming
# --library), a UTF-8 one (the module imports), a Python 2 file and a file
# CPython refuses for its indentation (refused, unchanged), a form feed
# leading the routing chain's line (lands, verifies, reverts), a revert on a
# file that is not patched (removes the stray binding module), a second
# definition on a file another one patched (refused, naming the other), and a
# core.autocrlf=true repository (the committed patch verifies at HEAD).
set -u

SRC=${OEAPATCH_SOURCE_DIR:-$(cd "$(dirname "$0")/../.." && pwd)}
OEAPATCH=${OEAPATCH:-$SRC/build/src/oeapatch}
LIB=${OEA_LIBRARY:?OEA_LIBRARY: the liboea to bind}
PY=/usr/bin/python3
[ -x "$PY" ] || PY=python3
ERAS=$SRC/tests/fixtures/eras
T=python/sglang/srt/layers/moe/topk.py
B=python/sglang/srt/layers/moe/_oeapatch_sglang_oea.py

WORK=$(mktemp -d "${TMPDIR:-/tmp}/oeapatch-edges.XXXXXX")
trap 'rm -rf "$WORK"' EXIT
. "$(dirname "$0")/testlib.sh"
e2e_git_env "$WORK"

fresh() { # fresh DIR ERA: a checkout with that era as its target
	rm -rf "$1" && mkdir -p "$1/$(dirname "$T")" && cp "$ERAS/$2" "$1/$T"
}
sum() { sha256sum "$@" 2>/dev/null | cut -c1-64 | tr '\n' ' '; }

echo "== the binding module edited by hand"
C=$WORK/bind
fresh "$C" 2025-08_topk_config.py
expect "apply" 0 "$OEAPATCH" apply -C "$C" --library "$LIB"
sed -i 's/^ABI_VERSION = .*/ABI_VERSION = 99/' "$C/$B"
expect "verify fails on the edited module" 1 "$OEAPATCH" verify -C "$C"
has "the binding check names it" "FAIL binding"
before=$(sum "$C/$T" "$C/$B")
expect "apply refuses to overwrite it" 1 "$OEAPATCH" apply -C "$C" --library "$LIB"
has "apply names the way out" "revert --force"
expect "revert refuses to delete it" 1 "$OEAPATCH" revert -C "$C"
has "revert names --force" "--force"
check "both files unchanged" test "$before" = "$(sum "$C/$T" "$C/$B")"
expect "revert --force removes it with the edits" 0 "$OEAPATCH" revert -C "$C" --force
check "the module is gone" test ! -e "$C/$B"
check "the target is the era again" cmp -s "$C/$T" "$ERAS/2025-08_topk_config.py"

echo "== library paths"
C=$WORK/lib
fresh "$C" 2025-12_layer_id_capturer.py
bad_dir=$WORK/$(printf 'lib\xff')
mkdir -p "$bad_dir" && cp "$LIB" "$bad_dir/liboea.so"
before=$(sum "$C/$T")
expect "a library path that is not UTF-8 is refused" 2 "$OEAPATCH" apply -C "$C" --library "$bad_dir/liboea.so"
has "the message names --library" "--library"
check "nothing written" test "$before" = "$(sum "$C/$T")" -a ! -e "$C/$B"
good_dir=$WORK/$(printf 'lib\xc3\xa9 \x27q\x27')
mkdir -p "$good_dir" && cp "$LIB" "$good_dir/liboea.so"
expect "a UTF-8 path with a quote lands" 0 "$OEAPATCH" apply -C "$C" --library "$good_dir/liboea.so"
expect "verify holds" 0 "$OEAPATCH" verify -C "$C"
expect "the module compiles and records the path" 0 "$PY" -c '
import sys
ns = {}
src = open(sys.argv[1], "rb").read()
compile(src, "m", "exec")
line = [l for l in src.decode().splitlines() if l.startswith("RECORDED_LIBRARY = ")][0]
import ast, os
assert os.fsencode(ast.literal_eval(line.split(" = ", 1)[1])) == os.fsencode(sys.argv[2]), line
' "$C/$B" "$good_dir/liboea.so"

echo "== what Python 3 refuses is refused, unchanged"
C=$WORK/py2
fresh "$C" 2025-03_recorder.py
printf 'print "routing"\n' >>"$C/$T"
before=$(sum "$C/$T")
expect "a Python 2 print statement" 2 "$OEAPATCH" apply -C "$C" --library "$LIB"
has "named" "print statement"
check "unchanged" test "$before" = "$(sum "$C/$T")"
fresh "$C" 2025-03_recorder.py
printf 'def _f():\n        x = 1\n    return x\n' >>"$C/$T"
before=$(sum "$C/$T")
expect "an IndentationError" 2 "$OEAPATCH" apply -C "$C" --library "$LIB"
has "named" "IndentationError"
check "unchanged" test "$before" = "$(sum "$C/$T")"

echo "== a form feed leading the routing chain's line (valid Python: the column restarts after it)"
C=$WORK/formfeed
fresh "$C" 2025-08_topk_config.py
"$PY" - "$C/$T" <<'EOF'
import sys
path = sys.argv[1]
lines = open(path).read().split("\n")
start = next(k for k, l in enumerate(lines) if l.startswith("def select_experts"))
chain = next(k for k in range(start, len(lines)) if lines[k].startswith("    if "))
lines[chain] = "\f" + lines[chain]
open(path, "w").write("\n".join(lines))
EOF
before=$(sum "$C/$T")
expect "apply lands" 0 "$OEAPATCH" apply -C "$C" --library "$LIB"
expect "the patched file compiles" 0 "$PY" -c 'import sys; compile(open(sys.argv[1]).read(), sys.argv[1], "exec")' "$C/$T"
expect "verify holds" 0 "$OEAPATCH" verify -C "$C"
expect "revert" 0 "$OEAPATCH" revert -C "$C"
check "byte-identical after revert" test "$before" = "$(sum "$C/$T")"

echo "== revert on a file that is not patched removes a stray binding module"
C=$WORK/stray
fresh "$C" 2025-08_topk_config.py
expect "apply" 0 "$OEAPATCH" apply -C "$C" --library "$LIB"
cp "$ERAS/2025-08_topk_config.py" "$C/$T" # the file replaced under it (pip install -U, a checkout)
expect "revert: nothing to revert in the file" 0 "$OEAPATCH" revert -C "$C"
has "says it removed the module" "removed a stray binding module"
check "the module is gone" test ! -e "$C/$B"
check "the file is as it was" cmp -s "$ERAS/2025-08_topk_config.py" "$C/$T"
expect "a second revert: nothing at all" 0 "$OEAPATCH" revert -C "$C"
check "still nothing beside it" test "$(ls -A "$(dirname "$C/$T")")" = topk.py

echo "== a second definition on a file another one patched"
C=$WORK/twodefs
fresh "$C" 2025-08_topk_config.py
mkdir -p "$WORK/defs" && cp -r "$SRC/patches/binding-core" "$SRC/patches/sglang-oea" "$WORK/defs/"
mv "$WORK/defs/sglang-oea" "$WORK/defs/other-oea"
sed -i -e 's/^name = sglang-oea$/name = other-oea/' -e 's/^module = _oeapatch_sglang_oea$/module = _oeapatch_other_oea/' \
	"$WORK/defs/other-oea/patch.ini"
expect "sglang-oea applies" 0 "$OEAPATCH" apply -C "$C" --library "$LIB"
before=$(sum "$C/$T")
expect "other-oea on it: refused" 1 "$OEAPATCH" --patch "$WORK/defs/other-oea" apply -C "$C" --library "$LIB"
has "naming the other definition's region" "the file carries a region of another patch definition, sglang-oea/2"
has "and how to take it out" "oeapatch --patch sglang-oea revert"
check "nothing written" test "$before" = "$(sum "$C/$T")" -a ! -e "$(dirname "$C/$T")/_oeapatch_other_oea.py"

echo "== core.autocrlf=true"
R=$WORK/crlf
fresh "$R" 2025-08_topk_config.py
cd "$R" && git -c init.defaultBranch=main init -q . && git config core.autocrlf true &&
	git add -A && git commit -qm era && cd - >/dev/null
# the work tree as git checks it out with autocrlf: CRLF
rm "$R/$T" && git -C "$R" checkout -- "$T"
grep -q $'\r$' "$R/$T" && ok "the checkout has CRLF line ends" || bad "the checkout has CRLF line ends"
expect "apply on the CRLF checkout" 0 "$OEAPATCH" apply -C "$R" --library "$LIB"
git -C "$R" add -A && git -C "$R" commit -qm patched
expect "verify --ref HEAD (git stores LF)" 0 "$OEAPATCH" verify -C "$R" --ref HEAD
expect "verify in the work tree (CRLF)" 0 "$OEAPATCH" verify -C "$R"

e2e_summary
