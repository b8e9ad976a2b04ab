#!/usr/bin/env bash
# test_library_contract.sh - the library as the binding will use it (issue 15
# items 1 and 8, issue 19 item 3), checked by verify, status and apply and by
# the module apply writes, on real shared libraries compiled here:
# - one that exports only oea_abi_version, and one whose oea_problem_check
#   refuses the binding's argument block: verify and status fail naming the
#   missing entry points / the refusal, apply --library refuses them with
#   nothing written, and the written module refuses them at import (strict:
#   ImportError; not strict: one warning, OEA off);
# - a bare file name (liboea.so.2) that the loader's search path finds
#   (LD_LIBRARY_PATH): verify holds and names the file found, the module loads
#   it, apply --library records the file found;
# - a relative path with a slash (ld/liboea.so.2), even from the directory
#   where it resolves: verify fails (settings and library), the module
#   refuses it at import; apply --library records it as an absolute path.
set -u

SRC=${OEAPATCH_SOURCE_DIR:-$(cd "$(dirname "$0")/../.." && pwd)}
OEAPATCH=${OEAPATCH:-$SRC/build/src/oeapatch}
LIB=${OEA_LIBRARY:?OEA_LIBRARY: the liboea to bind}
PY=/usr/bin/python3
[ -x "$PY" ] || PY=python3
CC=${CC:-cc}
ERA=$SRC/tests/fixtures/eras/2025-08_topk_config.py
T=python/sglang/srt/layers/moe/topk.py
B=python/sglang/srt/layers/moe/_oeapatch_sglang_oea.py

WORK=$(mktemp -d "${TMPDIR:-/tmp}/oeapatch-libcontract.XXXXXX")
trap 'rm -rf "$WORK"' EXIT
. "$(dirname "$0")/testlib.sh"
e2e_git_env "$WORK"
for v in $(env | sed -n 's/^\([Ss][Gg][Ll][Aa][Nn][Gg]_[Oo][Ee][Aa]_[A-Za-z0-9_]*\)=.*/\1/p'); do unset "$v"; done
unset LD_LIBRARY_PATH

if ! command -v "$CC" >/dev/null; then
	skip "the library contract" "no C compiler ($CC) to build the test libraries"
	e2e_summary
	exit $?
fi

fresh() { rm -rf "$1" && mkdir -p "$1/$(dirname "$T")" && cp "$ERA" "$1/$T"; }
sum() { sha256sum "$@" 2>/dev/null | cut -c1-64 | tr '\n' ' '; }
# imp DIR ENV...: import the module apply wrote in DIR with ENV; prints [ENABLED, loaded].
imp() {
	local dir=$1
	shift
	env "$@" "$PY" -c '
import json, logging, sys
logging.basicConfig(level=logging.WARNING, format="LOG %(levelname)s %(message)s")
sys.path.insert(0, sys.argv[1])
import _oeapatch_sglang_oea as m
print(json.dumps([m.ENABLED, m._lib is not None]))
' "$dir/$(dirname "$B")"
}

# The test libraries: real shared objects, nothing else in them.
cat >"$WORK/only_abi.c" <<'EOF'
int oea_abi_version(void) { return 2; }
EOF
cat >"$WORK/refuses.c" <<'EOF'
#include <stdint.h>
/* every entry point, ABI 2, but an argument block of another size is refused */
int oea_abi_version(void) { return 2; }
const char *oea_version(void) { return "2.1.0-test"; }
int oea_has_cuda(void) { return 0; }
const char *oea_status_message(int s) { return s == 2 ? "struct_size unknown to this test library" : "other"; }
int oea_problem_check(const void *p) { return *(const uint32_t *)p == 200 ? 0 : 2; }
int oea_route_host(const void *p) { (void)p; return 2; }
int oea_route_cuda(const void *p, void *s) { (void)p; (void)s; return 12; }
EOF
ONLY=$WORK/libs/libonly_abi.so
REFUSES=$WORK/libs/librefuses.so
mkdir -p "$WORK/libs"
"$CC" -shared -fPIC -o "$ONLY" "$WORK/only_abi.c" && "$CC" -shared -fPIC -o "$REFUSES" "$WORK/refuses.c" ||
	{ echo "FAIL building the test libraries"; exit 1; }

C=$WORK/checkout
fresh "$C"
expect "apply with the real liboea" 0 "$OEAPATCH" apply -C "$C" --library "$LIB"
expect "verify holds" 0 "$OEAPATCH" verify -C "$C"
has "the library check says the contract holds" "the binding's 6 entry points exported, its argument block accepted"

echo "== a library that exports only oea_abi_version"
expect "verify fails" 1 env SGLANG_OEA_LIBRARY="$ONLY" "$OEAPATCH" verify -C "$C"
has "FAIL library, naming an entry point it lacks" "FAIL library"
has "oea_status_message named" "oea_status_message"
has "oea_route_host named" "oea_route_host"
has "says the binding calls them" "which the binding calls"
expect "status fails" 1 env SGLANG_OEA_LIBRARY="$ONLY" "$OEAPATCH" status -C "$C"
has "status names the missing entry points" "does not export oea_status_message"
expect "the written module refuses it (strict)" 1 imp "$C" SGLANG_OEA_K0=3 SGLANG_OEA_LIBRARY="$ONLY"
has "ImportError naming an entry point" "ImportError"
has "the same entry points" "does not export oea_status_message"
expect "not strict: the import goes on, OEA off" 0 imp "$C" SGLANG_OEA_K0=3 SGLANG_OEA_STRICT=false \
	SGLANG_OEA_LIBRARY="$ONLY"
has "enabled, nothing loaded" "[true, false]"
has "one warning naming it" "LOG WARNING oeapatch: SGLANG_OEA_K0=3, but liboea at '$ONLY' is unusable: does not export"

echo "== a library whose oea_problem_check refuses the binding's argument block"
expect "verify fails" 1 env SGLANG_OEA_LIBRARY="$REFUSES" "$OEAPATCH" verify -C "$C"
has "names the refusal" "refuses the binding's argument block (oea_problem of 136 bytes, ABI 2)"
has "with the library's own message" "oea_problem_check returns 2 (struct_size unknown to this test library)"
expect "status fails" 1 env SGLANG_OEA_LIBRARY="$REFUSES" "$OEAPATCH" status -C "$C"
has "status names it" "refuses the binding's argument block"
expect "the written module refuses it (strict)" 1 imp "$C" SGLANG_OEA_K0=3 SGLANG_OEA_LIBRARY="$REFUSES"
has "ImportError naming the refusal" "refuses this binding's argument block (oea_problem of 136 bytes, ABI 2)"

echo "== the recorded library replaced after a green apply"
C2=$WORK/swap
fresh "$C2"
mkdir -p "$WORK/rec" && cp "$LIB" "$WORK/rec/liboea.so.2"
expect "apply with a copy of liboea" 0 "$OEAPATCH" apply -C "$C2" --library "$WORK/rec/liboea.so.2"
cp "$ONLY" "$WORK/rec/liboea.so.2"
expect "verify fails on what the file is now" 1 "$OEAPATCH" verify -C "$C2"
has "naming the missing entry points" "does not export oea_status_message"
expect "status fails too" 1 "$OEAPATCH" status -C "$C2"
cp "$REFUSES" "$WORK/rec/liboea.so.2"
expect "a refusing one: verify fails" 1 "$OEAPATCH" verify -C "$C2"
has "naming the refusal" "refuses the binding's argument block"

echo "== apply --library refuses both, nothing written"
C3=$WORK/fresh
fresh "$C3"
before=$(sum "$C3/$T")
expect "only oea_abi_version: refused" 2 "$OEAPATCH" apply -C "$C3" --library "$ONLY"
has "naming the missing entry points" "does not export oea_status_message"
check "nothing written" test "$before" = "$(sum "$C3/$T")" -a ! -e "$C3/$B"
expect "the block refused: refused" 2 "$OEAPATCH" apply -C "$C3" --library "$REFUSES"
has "naming the refusal" "refuses the binding's argument block"
check "nothing written" test "$before" = "$(sum "$C3/$T")" -a ! -e "$C3/$B"
before=$(sum "$C/$T" "$C/$B")
expect "on an applied checkout: refused" 2 "$OEAPATCH" apply -C "$C" --library "$ONLY"
check "its files unchanged" test "$before" = "$(sum "$C/$T" "$C/$B")"

echo "== a bare file name, found by the loader's search path"
mkdir -p "$WORK/ld" && cp "$LIB" "$WORK/ld/liboea.so.2"
expect "LD_LIBRARY_PATH finds it: verify holds" 0 env LD_LIBRARY_PATH="$WORK/ld" SGLANG_OEA_LIBRARY=liboea.so.2 \
	"$OEAPATCH" verify -C "$C"
has "names the file it found" "liboea.so.2 (found by the loader's search path: $WORK/ld/liboea.so.2) loads"
expect "status holds" 0 env LD_LIBRARY_PATH="$WORK/ld" SGLANG_OEA_LIBRARY=liboea.so.2 "$OEAPATCH" status -C "$C"
expect "the module loads it the same way" 0 imp "$C" LD_LIBRARY_PATH="$WORK/ld" SGLANG_OEA_K0=3 \
	SGLANG_OEA_LIBRARY=liboea.so.2
has "enabled and loaded" "[true, true]"
expect "not on the search path: verify fails" 1 env SGLANG_OEA_LIBRARY=liboea.so.2 "$OEAPATCH" verify -C "$C"
has "says how a bare name is searched" "a bare file name is searched as the loader searches"
expect "nor does the module load it" 1 imp "$C" SGLANG_OEA_K0=3 SGLANG_OEA_LIBRARY=liboea.so.2
C4=$WORK/bare
fresh "$C4"
expect "apply --library with a bare name on the search path" 0 env LD_LIBRARY_PATH="$WORK/ld" \
	"$OEAPATCH" apply -C "$C4" --library liboea.so.2
has "records the file found" "-> $WORK/ld/liboea.so.2"
check "the module records that absolute path" grep -qF "RECORDED_LIBRARY = '$WORK/ld/liboea.so.2'" "$C4/$B"
C5=$WORK/bare-missing
fresh "$C5"
expect "a bare name nobody finds: refused" 2 "$OEAPATCH" apply -C "$C5" --library liboea.so.2
has "says where it looked" "the loader's search path (LD_LIBRARY_PATH, the loader cache, the system directories) does not find it"
check "nothing written" test ! -e "$C5/$B"

echo "== a relative path with a slash, from the directory where it resolves"
cd "$WORK" || exit 1
expect "K0 on: verify fails" 1 env SGLANG_OEA_K0=3 SGLANG_OEA_LIBRARY=ld/liboea.so.2 "$OEAPATCH" verify -C "$C"
has "the settings check names it" "FAIL settings               SGLANG_OEA_LIBRARY='ld/liboea.so.2' (the environment): a relative path"
has "the library check refuses it" "ld/liboea.so.2 is a relative path: the server would open it from its own working directory"
if grep -qF "trust:library" <<<"$out"; then
	bad "no trust verdict on the file it names here (the server's would be another)" "$out"
else
	ok "no trust verdict on the file it names here (the server's would be another)"
fi
expect "K0 off: the library check still fails" 1 env SGLANG_OEA_LIBRARY=ld/liboea.so.2 "$OEAPATCH" verify -C "$C"
has "naming it" "FAIL library                ld/liboea.so.2 is a relative path"
expect "./ is relative too" 1 env SGLANG_OEA_LIBRARY=./ld/liboea.so.2 "$OEAPATCH" verify -C "$C"
expect "status fails" 1 env SGLANG_OEA_LIBRARY=ld/liboea.so.2 "$OEAPATCH" status -C "$C"
printf 'SGLANG_OEA_K0=2\nSGLANG_OEA_LIBRARY=ld/liboea.so.2\n' >"$WORK/rel.env"
expect "from an EnvironmentFile" 1 "$OEAPATCH" verify -C "$C" --env-file "$WORK/rel.env"
has "named by file and line" "SGLANG_OEA_LIBRARY='ld/liboea.so.2' ($WORK/rel.env:2): a relative path"
expect "the module refuses it (strict), though it exists here" 1 imp "$C" SGLANG_OEA_K0=3 \
	SGLANG_OEA_LIBRARY=ld/liboea.so.2
has "ImportError: a relative path" "'ld/liboea.so.2' is a relative path"
expect "not strict: one warning, OEA off" 0 imp "$C" SGLANG_OEA_K0=3 SGLANG_OEA_STRICT=false \
	SGLANG_OEA_LIBRARY=ld/liboea.so.2
has "enabled, nothing loaded" "[true, false]"
has "the warning says why" "is a relative path"
C6=$WORK/rel
fresh "$C6"
expect "apply --library ld/liboea.so.2 (a command-line path, resolved here)" 0 "$OEAPATCH" apply -C "$C6" \
	--library ld/liboea.so.2
check "records the absolute path" grep -qF "RECORDED_LIBRARY = '$WORK/ld/liboea.so.2'" "$C6/$B"
expect "which verifies from anywhere" 0 env -C / "$OEAPATCH" verify -C "$C6"
cd / || exit 1

e2e_summary
