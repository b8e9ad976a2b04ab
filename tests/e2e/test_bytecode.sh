#!/usr/bin/env bash
# Cached bytecode that Python would run instead of what apply or revert wrote
# (issue 15, item 4), made with the real py_compile and judged by the real
# import system (SourceFileLoader.get_code: the code an import would run,
# with the interpreter's own pyc rules, without writing a new pyc):
#  1. an unchecked-hash pyc (PEP 552; Nix, Bazel) of the original survives
#     apply, and Python runs the unpatched code: apply removes it and says so;
#  2. one that appears after apply (an image layer compiled before the
#     patch): verify FAILs naming it, apply (nothing else to write) removes it;
#  3. a timestamp pyc whose recorded mtime and size equal the patched
#     source's (a fixed-mtime build) but of the original bytes: the same;
#  4. bytecode of the patched source (unchecked-hash, timestamp, -O's
#     opt-1) and a checked-hash pyc of the original (Python checks it) are
#     not shadowing: verify holds, apply keeps them;
#  5. revert removes the bytecode of the patched target and of the binding
#     module, including a legacy sourceless pyc of it (which Python would
#     import once the module is gone);
#  6. --json lists what was removed; --check says what would be;
#  7. --check lists every entry of a file to be rewritten, as apply and
#     revert then remove them (valid ones of the old bytes too).
#
# Environment (set by ctest): OEAPATCH, OEA_LIBRARY, OEAPATCH_SOURCE_DIR.
set -uo pipefail

: "${OEAPATCH:?set OEAPATCH to the oeapatch binary}"
: "${OEA_LIBRARY:?set OEA_LIBRARY to liboea.so}"
: "${OEAPATCH_SOURCE_DIR:?set OEAPATCH_SOURCE_DIR to the repository root}"
fix=$OEAPATCH_SOURCE_DIR/tests/fixtures
py=${OEAPATCH_SYSTEM_PYTHON:-/usr/bin/python3}
target_rel=python/sglang/srt/layers/moe/topk.py

work=$(mktemp -d "${TMPDIR:-/tmp}/oeapatch-bytecode.XXXXXX")
trap 'rm -rf "$work"' EXIT
. "$(dirname "$0")/testlib.sh"

co=$work/co
moe=$co/$(dirname "$target_rel")
t=$co/$target_rel
mkdir -p "$moe"
cp "$fix/eras/2025-08_topk_config.py" "$t"
cp "$t" "$work/original.py"
tag=$("$py" -c 'import sys; print(sys.implementation.cache_tag)')
pyc=$moe/__pycache__/topk.$tag.pyc
bpyc=$moe/__pycache__/_oeapatch_sglang_oea.$tag.pyc

# runs FILE: which code an import of FILE would run now: "patched" when it
# imports the binding module, else "unpatched" (-B: the probe writes no pyc).
runs() {
	"$py" -B -c '
import importlib.machinery, sys
code = importlib.machinery.SourceFileLoader("topk", sys.argv[1]).get_code("topk")
print("patched" if "_oeapatch_sglang_oea" in code.co_names else "unpatched")' "$1"
}
# compile SRC MODE [OPT]: SRC's bytecode, as the target's cache entry for OPT.
compile() {
	"$py" -c '
import importlib.util, py_compile, sys
src, mode, opt, target = sys.argv[1], sys.argv[2], int(sys.argv[3]), sys.argv[4]
cfile = importlib.util.cache_from_source(target, optimization=opt or "")
py_compile.compile(src, cfile=cfile, dfile=target, doraise=True, optimize=opt,
                   invalidation_mode=py_compile.PycInvalidationMode[mode])' "$1" "$2" "${3:-0}" "$t"
}
# stamp_as SRC: the timestamp pyc of SRC carries the target's mtime and size,
# as a build that fixes every mtime makes it (the coincidence, made certain).
stamp_as_target() {
	"$py" -c '
import os, struct, sys
pyc, src = sys.argv[1], sys.argv[2]
st = os.stat(src)
with open(pyc, "r+b") as f:
    f.seek(8)
    f.write(struct.pack("<II", int(st.st_mtime) & 0xFFFFFFFF, st.st_size & 0xFFFFFFFF))' "$pyc" "$t"
}

echo "== 1. an unchecked-hash pyc of the original, then apply"
compile "$work/original.py" UNCHECKED_HASH
check "Python runs the pyc: unpatched" test "$(runs "$t")" = unpatched
expect "apply" 0 "$OEAPATCH" -C "$co" apply --library "$OEA_LIBRARY"
has "apply says it removed the pyc" "bytecode  removed $pyc"
check "the pyc is gone" test ! -e "$pyc"
check "Python runs the patched source" test "$(runs "$t")" = patched
expect "verify" 0 "$OEAPATCH" -C "$co" verify
has "verify's bytecode check holds" "ok   bytecode"

echo "== 2. one that appears after apply"
compile "$work/original.py" UNCHECKED_HASH
check "Python runs it: unpatched" test "$(runs "$t")" = unpatched
expect "verify fails" 1 "$OEAPATCH" -C "$co" verify
has "verify names the pyc" "FAIL bytecode               $pyc: unchecked-hash bytecode"
expect "status agrees" 1 "$OEAPATCH" -C "$co" status
has "status says it drifts" "DRIFT"
expect "apply --check" 0 "$OEAPATCH" -C "$co" apply --check --json
has "apply --check names what it would remove" '"bytecode_to_remove": ['
has "the pyc, by its path" "\"path\": \"$pyc\""
check "apply --check removed nothing" test -e "$pyc"
cp "$t" "$work/patched.py"
expect "apply (nothing else to write)" 0 "$OEAPATCH" -C "$co" apply --json
has "it is already applied" '"changed": false'
has "the JSON lists what was removed" '"bytecode_removed": ['
has "the pyc, by its path" "\"path\": \"$pyc\""
check "the target is untouched" cmp -s "$work/patched.py" "$t"
check "Python runs the patched source" test "$(runs "$t")" = patched
expect "verify" 0 "$OEAPATCH" -C "$co" verify

echo "== 3. a timestamp pyc of the original with the patched file's mtime and size"
compile "$work/original.py" TIMESTAMP
stamp_as_target
check "Python trusts the stamp: unpatched" test "$(runs "$t")" = unpatched
expect "verify fails" 1 "$OEAPATCH" -C "$co" verify
has "verify names the pyc" "$pyc: timestamp bytecode whose recorded mtime and size equal the source's"
expect "apply removes it" 0 "$OEAPATCH" -C "$co" apply
has "apply says so" "bytecode  removed $pyc"
check "Python runs the patched source" test "$(runs "$t")" = patched

echo "== 4. bytecode that does not shadow the patched source"
for mode in UNCHECKED_HASH TIMESTAMP CHECKED_HASH; do
	compile "$t" "$mode"
	compile "$t" "$mode" 1
	expect "verify with the patched source's $mode pyc (and opt-1)" 0 "$OEAPATCH" -C "$co" verify
	expect "apply with it" 0 "$OEAPATCH" -C "$co" apply
	check "apply kept the $mode pyc" test -e "$pyc"
	check "Python runs the patched code" test "$(runs "$t")" = patched
done
compile "$work/original.py" CHECKED_HASH
check "a checked-hash pyc of the original: Python compiles the source" test "$(runs "$t")" = patched
expect "verify holds with it" 0 "$OEAPATCH" -C "$co" verify
compile "$work/original.py" UNCHECKED_HASH 1
expect "an unchecked-hash opt-1 pyc of the original (python -O): verify fails" 1 "$OEAPATCH" -C "$co" verify
has "it names the opt-1 file" "topk.$tag.opt-1.pyc: unchecked-hash"
expect "apply removes it" 0 "$OEAPATCH" -C "$co" apply
check "the opt-1 pyc is gone" test ! -e "$moe/__pycache__/topk.$tag.opt-1.pyc"

echo "== 5. revert"
compile "$t" UNCHECKED_HASH
"$py" -c 'import py_compile, sys; py_compile.compile(sys.argv[1], doraise=True)' "$moe/_oeapatch_sglang_oea.py"
"$py" -c 'import py_compile, sys; py_compile.compile(sys.argv[1], cfile=sys.argv[2], doraise=True)' \
	"$moe/_oeapatch_sglang_oea.py" "$moe/_oeapatch_sglang_oea.pyc"
check "the binding module has its pyc" test -e "$bpyc"
expect "revert" 0 "$OEAPATCH" -C "$co" revert --json
has "revert lists the target's pyc" "\"path\": \"$pyc\""
has "and the binding module's" "\"path\": \"$bpyc\""
has "and the legacy pyc beside it" "\"path\": \"$moe/_oeapatch_sglang_oea.pyc\""
check "the target is the original" cmp -s "$work/original.py" "$t"
check "Python runs the original" test "$(runs "$t")" = unpatched
check "no bytecode of the binding module is left" test ! -e "$bpyc" -a ! -e "$moe/_oeapatch_sglang_oea.pyc"
# A timestamp pyc of the patched source with the original's mtime and size
# after revert: Python would run the patched code and import a module that
# is gone. revert (nothing else to do) removes it.
compile "$work/patched.py" TIMESTAMP
stamp_as_target
check "Python trusts the stamp: patched code" test "$(runs "$t")" = patched
expect "revert again" 0 "$OEAPATCH" -C "$co" revert
has "it removes that pyc" "bytecode  removed $pyc"
check "Python runs the original" test "$(runs "$t")" = unpatched

echo "== 7. --check lists what the command then removes"
# A file apply or revert rewrites loses every cache entry of it (each was
# compiled from bytes that are gone), valid ones too: --check must list
# those, and give that reason, not judge them against the old bytes.
compile "$work/original.py" TIMESTAMP
stamp_as_target # the original's bytes, the original's stamp: valid, Python runs it
check "Python runs the original's own timestamp pyc" test "$(runs "$t")" = unpatched
expect "apply --check" 0 "$OEAPATCH" -C "$co" apply --check --json --library "$OEA_LIBRARY"
has "it lists the pyc apply would remove" "\"path\": \"$pyc\""
has "as compiled from the bytes apply replaces" '"why": "compiled from the bytes this command replaced"'
if grep -qF "compiled from other bytes" <<<"$out"; then bad "it does not call the source's own pyc one of other bytes" "$out"; else ok "it does not call the source's own pyc one of other bytes"; fi
compile "$work/original.py" CHECKED_HASH
expect "apply --check with a checked-hash pyc of the original" 0 "$OEAPATCH" -C "$co" apply --check --json --library "$OEA_LIBRARY"
has "it lists that pyc too" "\"path\": \"$pyc\""
check "apply --check removed nothing" test -e "$pyc"
expect "apply" 0 "$OEAPATCH" -C "$co" apply --json --library "$OEA_LIBRARY"
has "apply removes what --check listed" "\"path\": \"$pyc\""
check "the pyc is gone" test ! -e "$pyc"
compile "$t" CHECKED_HASH
expect "revert --check with a checked-hash pyc of the patched source" 0 "$OEAPATCH" -C "$co" revert --check --json
has "it lists the pyc revert would remove" "\"path\": \"$pyc\""
expect "revert" 0 "$OEAPATCH" -C "$co" revert --json
has "revert removes what --check listed" "\"path\": \"$pyc\""
check "the pyc is gone" test ! -e "$pyc"

e2e_summary
