#!/usr/bin/env bash
# test_library_contract.sh - the library as the binding will use it (issue 15
# items 1 and 8, issue 19 item 3), checked by verify, status and apply and by
# the module apply writes, on real shared libraries compiled here:
# - one that exports only oea_abi_version, and one whose oea_problem_check
#   refuses the binding's argument block: verify and status fail naming the
#   missing entry points / the refusal, apply --library refuses them with
#   nothing written, and the written module refuses them at import (strict:
#   ImportError; not strict: one warning, OEA off);
# - one whose ABI is the binding's + 1 (all else accepted): the same refusals,
#   naming both ABI numbers (equality is the rule, not "at least");
# - a bare file name (liboea.so.2) that the loader's search path finds
#   (LD_LIBRARY_PATH): verify holds and names the file found, the module loads
#   it, apply --library records the file found;
# - a bare name found only through the loader cache (a private cache that
#   lists a folder of the test, seen at /etc/ld.so.cache in a private mount
#   namespace): verify names the cache, the module loads that file, apply
#   records it; skipped, saying why, where no mount namespace can be made;
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
int oea_abi_version(void) { return 3; }
EOF
cat >"$WORK/refuses.c" <<'EOF'
#include <stdint.h>
/* every entry point, ABI 3, but an argument block of another size is refused */
int oea_abi_version(void) { return 3; }
const char *oea_version(void) { return "3.0.0-test"; }
int oea_has_cuda(void) { return 0; }
const char *oea_status_message(int s) { return s == 2 ? "struct_size unknown to this test library" : "other"; }
int oea_problem_check(const void *p) { return *(const uint32_t *)p == 200 ? 0 : 2; }
int oea_route_host(const void *p) { (void)p; return 2; }
int oea_route_cuda(const void *p, void *s) { (void)p; (void)s; return 12; }
void *oea_rec_open(void) { return 0; }
int oea_rec_layer(void) { return -11; }
int oea_rec_call(void) { return -11; }
void oea_rec_figures_get(void) {}
int oea_rec_close(void) { return 0; }
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
has "the library check says the contract holds" "the binding's 11 entry points exported, its argument block accepted"

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
has "names the refusal" "refuses the binding's argument block (oea_problem of 144 bytes, ABI 3)"
has "with the library's own message" "oea_problem_check returns 2 (struct_size unknown to this test library)"
expect "status fails" 1 env SGLANG_OEA_LIBRARY="$REFUSES" "$OEAPATCH" status -C "$C"
has "status names it" "refuses the binding's argument block"
expect "the written module refuses it (strict)" 1 imp "$C" SGLANG_OEA_K0=3 SGLANG_OEA_LIBRARY="$REFUSES"
has "ImportError naming the refusal" "refuses this binding's argument block (oea_problem of 144 bytes, ABI 3)"

echo "== a library whose ABI is newer than the binding's (the binding's ABI + 1)"
# Every entry point, every argument block accepted: only the ABI number says
# the contract changed, and equality, not "at least", is the rule.
abi=$(sed -n 's/^abi *= *\([0-9][0-9]*\) *$/\1/p' "$SRC/patches/sglang-oea/patch.ini")
newer=$((abi + 1))
sed -e "s/oea_abi_version(void) { return $abi; }/oea_abi_version(void) { return $newer; }/" -e 's/return \*(const uint32_t \*)p == 200 ? 0 : 2;/(void)p; return 0;/' \
	"$WORK/refuses.c" >"$WORK/newer.c"
NEWER=$WORK/libs/libnewer.so
check "the test library reports ABI $newer" grep -qF "oea_abi_version(void) { return $newer; }" "$WORK/newer.c"
"$CC" -shared -fPIC -o "$NEWER" "$WORK/newer.c" || { echo "FAIL building libnewer"; exit 1; }
expect "verify fails" 1 env SGLANG_OEA_LIBRARY="$NEWER" "$OEAPATCH" verify -C "$C"
has "naming both ABIs" "$NEWER reports ABI $newer, the binding expects ABI $abi"
expect "status fails" 1 env SGLANG_OEA_LIBRARY="$NEWER" "$OEAPATCH" status -C "$C"
has "status names both ABIs" "reports ABI $newer, the binding expects ABI $abi"
expect "the written module refuses it (strict)" 1 imp "$C" SGLANG_OEA_K0=3 SGLANG_OEA_LIBRARY="$NEWER"
has "ImportError naming both ABIs" "ABI version $newer, but this binding was written for ABI $abi"
C9=$WORK/newer
fresh "$C9"
expect "apply --library refuses it" 2 "$OEAPATCH" apply -C "$C9" --library "$NEWER"
has "naming both ABIs" "reports ABI $newer, the binding expects ABI $abi"
check "nothing written" test ! -e "$C9/$B"

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
has "names the file it found, and where" "liboea.so.2 (found in LD_LIBRARY_PATH entry $WORK/ld (the environment): $WORK/ld/liboea.so.2) loads"
expect "status holds" 0 env LD_LIBRARY_PATH="$WORK/ld" SGLANG_OEA_LIBRARY=liboea.so.2 "$OEAPATCH" status -C "$C"
expect "the module loads it the same way" 0 imp "$C" LD_LIBRARY_PATH="$WORK/ld" SGLANG_OEA_K0=3 \
	SGLANG_OEA_LIBRARY=liboea.so.2
has "enabled and loaded" "[true, true]"
expect "not on the search path: verify fails" 1 env SGLANG_OEA_LIBRARY=liboea.so.2 "$OEAPATCH" verify -C "$C"
has "says how a bare name is searched" "a bare file name is searched as the server's loader will search it"
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

echo "== a bare name found only through the loader cache (a folder of /etc/ld.so.conf.d)"
# A private cache: ldconfig writes one that lists a folder of this test, and a
# private mount namespace (unshare -m) shows it at /etc/ld.so.cache to the
# commands of this section alone; nothing of the machine's loader set-up is
# changed, and nothing is left to undo.
# ldconfig lists a library under its SONAME, not its file name: the cache's
# entry is named as the library names itself (liboea.so.<ABI>).
SONAME=$(objdump -p "$LIB" | awk '$1 == "SONAME" { print $2 }')
check "liboea names itself liboea.so.<ABI>" test "$SONAME" = "liboea.so.$(sed -n 's/^abi *= *\([0-9][0-9]*\) *$/\1/p' "$SRC/patches/sglang-oea/patch.ini")"
mkdir -p "$WORK/cached" && cp "$LIB" "$WORK/cached/$SONAME"
printf '%s\n' "$WORK/cached" >"$WORK/ld.so.conf"
# cached CMD...: CMD with the private cache at /etc/ld.so.cache
cached() { unshare -m sh -c 'mount --bind "$0" /etc/ld.so.cache && exec "$@"' "$WORK/ld.so.cache" "$@"; }
if ! ldconfig -X -f "$WORK/ld.so.conf" -C "$WORK/ld.so.cache" 2>"$WORK/ldconfig.log"; then
	skip "a bare name found only through the loader cache" "ldconfig could not write a private cache: $(cat "$WORK/ldconfig.log")"
elif ! cached true 2>"$WORK/unshare.log"; then
	skip "a bare name found only through the loader cache" "no private mount namespace here (unshare -m): $(cat "$WORK/unshare.log")"
else
	listed=$(cached ldconfig -p)
	check "the private cache lists the test's folder" grep -qF "$WORK/cached/$SONAME" <<<"$listed"
	check "the machine's cache does not" test -z "$(ldconfig -p | grep -F "$WORK/cached/")"
	expect "verify finds it through the cache" 0 cached env SGLANG_OEA_LIBRARY=$SONAME "$OEAPATCH" verify -C "$C"
	has "naming the cache and the file" "$SONAME (found by the loader cache (/etc/ld.so.cache): $WORK/cached/$SONAME) loads"
	expect "the module finds it the same way" 0 cached "$(command -v env)" SGLANG_OEA_K0=3 SGLANG_OEA_LIBRARY=$SONAME \
		"$PY" -c '
import sys
sys.path.insert(0, sys.argv[1])
import _oeapatch_sglang_oea as m
print(m.ENABLED, m._lib is not None, m._lib._name)' "$C/$(dirname "$B")"
	has "enabled and loaded from the cache's file" "True True $WORK/cached/$SONAME"
	C6=$WORK/from-cache
	fresh "$C6"
	expect "apply --library with that bare name" 0 cached "$OEAPATCH" apply -C "$C6" --library $SONAME
	check "records the cache's file" grep -qF "RECORDED_LIBRARY = '$WORK/cached/$SONAME'" "$C6/$B"
	expect "without the cache nothing finds it: verify fails" 1 env SGLANG_OEA_LIBRARY=$SONAME "$OEAPATCH" verify -C "$C"
fi

echo "== a bare name is searched with the server's LD_LIBRARY_PATH (--env-file), not the shell's"
mkdir -p "$WORK/empty"
printf 'SGLANG_OEA_K0=2\nSGLANG_OEA_LIBRARY=liboea.so.2\nLD_LIBRARY_PATH=%s\n' "$WORK/empty" >"$WORK/unit.env"
expect "the unit's path lacks it, the shell's has it: verify fails" 1 env LD_LIBRARY_PATH="$WORK/ld" \
	"$OEAPATCH" verify -C "$C" --env-file "$WORK/unit.env"
has "says where it searched" "LD_LIBRARY_PATH=$WORK/empty ($WORK/unit.env:3)"
expect "and the module, started with the unit's environment, does not load it" 1 imp "$C" SGLANG_OEA_K0=2 \
	SGLANG_OEA_LIBRARY=liboea.so.2 LD_LIBRARY_PATH="$WORK/empty"
printf 'SGLANG_OEA_K0=2\nSGLANG_OEA_LIBRARY=liboea.so.2\nLD_LIBRARY_PATH=%s\n' "$WORK/ld" >"$WORK/unit2.env"
expect "the unit's path has it, the shell has none: verify holds" 0 env -u LD_LIBRARY_PATH \
	"$OEAPATCH" verify -C "$C" --env-file "$WORK/unit2.env"
has "naming the unit's entry and line" "found in LD_LIBRARY_PATH entry $WORK/ld ($WORK/unit2.env:3): $WORK/ld/liboea.so.2"
expect "and the module, started with the unit's environment, loads it" 0 imp "$C" SGLANG_OEA_K0=2 \
	SGLANG_OEA_LIBRARY=liboea.so.2 LD_LIBRARY_PATH="$WORK/ld"
printf 'SGLANG_OEA_LIBRARY=liboea.so.2\n' >"$WORK/unit3.env"
expect "no LD_LIBRARY_PATH in the unit: the shell's is not the server's" 1 env LD_LIBRARY_PATH="$WORK/ld" \
	"$OEAPATCH" verify -C "$C" --env-file "$WORK/unit3.env"
has "says the unit sets none" "no LD_LIBRARY_PATH"
# an empty entry is the server's working directory to the loader: searched
# before the file is found, it leaves the answer open; after, it is never read
expect "an empty entry before the folder that has it: verify fails" 1 env LD_LIBRARY_PATH=":$WORK/ld" \
	SGLANG_OEA_LIBRARY=liboea.so.2 "$OEAPATCH" verify -C "$C"
has "naming the empty entry" "has an empty entry (a leading, doubled or trailing separator)"
expect "and the module refuses it too" 1 imp "$C" SGLANG_OEA_K0=3 SGLANG_OEA_LIBRARY=liboea.so.2 \
	LD_LIBRARY_PATH=":$WORK/ld"
has "saying why" "LD_LIBRARY_PATH has the empty entry"
expect "a trailing separator after the folder that has it: verify holds" 0 env LD_LIBRARY_PATH="$WORK/ld:" \
	SGLANG_OEA_LIBRARY=liboea.so.2 "$OEAPATCH" verify -C "$C"
expect "and the module loads it" 0 imp "$C" SGLANG_OEA_K0=3 SGLANG_OEA_LIBRARY=liboea.so.2 \
	LD_LIBRARY_PATH="$WORK/ld:"

echo "== a library others can change is never opened (a constructor leaves a mark)"
if [ "$(id -u)" -eq 0 ] && id nobody >/dev/null 2>&1; then
	MARK=$WORK/constructor-ran
	cat >"$WORK/mark.c" <<EOF
#include <fcntl.h>
#include <unistd.h>
__attribute__((constructor)) static void mark(void)
{
	int fd = open("$MARK", O_WRONLY | O_CREAT, 0644);
	if (fd >= 0)
		close(fd);
}
int oea_abi_version(void) { return 3; }
EOF
	"$CC" -shared -fPIC -o "$WORK/libs/libmark.so" "$WORK/mark.c" || { echo "FAIL building libmark"; exit 1; }
	# apply binds a trusted copy; then its folder becomes nobody's and 0777,
	# and nobody swaps in a library with a constructor
	mkdir -p "$WORK/open" && cp "$LIB" "$WORK/open/liboea.so.2"
	C7=$WORK/swapped
	fresh "$C7"
	expect "apply with a trusted copy" 0 "$OEAPATCH" apply -C "$C7" --library "$WORK/open/liboea.so.2"
	chown nobody "$WORK/open" && chmod 0777 "$WORK/open"
	chmod 0711 "$WORK" && chmod 0755 "$WORK/libs" # nobody passes through, reads libmark
	su -s /bin/sh nobody -c "cp '$WORK/libs/libmark.so' '$WORK/open/new.so' && mv '$WORK/open/new.so' '$WORK/open/liboea.so.2'"
	expect "verify as root fails the trust rule" 1 "$OEAPATCH" verify -C "$C7"
	has "FAIL trust:library" "FAIL trust:library"
	has "FAIL library: not opened" "$WORK/open/liboea.so.2 was not opened"
	check "the constructor did not run (verify)" test ! -e "$MARK"
	expect "status fails too" 1 "$OEAPATCH" status -C "$C7"
	check "the constructor did not run (status)" test ! -e "$MARK"
	expect "nor with --json" 1 "$OEAPATCH" verify -C "$C7" --json
	check "the constructor did not run (--json)" test ! -e "$MARK"
	C8=$WORK/refuse-open
	fresh "$C8"
	expect "apply --library on it: refused" 2 "$OEAPATCH" apply -C "$C8" --library "$WORK/open/liboea.so.2"
	has "for the trust rule" "refusing to record it"
	check "the constructor did not run (apply)" test ! -e "$MARK"
	check "nothing written" test ! -e "$C8/$B"
	# as a bare name found on the server's LD_LIBRARY_PATH
	expect "a bare name found there: verify fails" 1 env LD_LIBRARY_PATH="$WORK/open" \
		SGLANG_OEA_LIBRARY=liboea.so.2 "$OEAPATCH" verify -C "$C"
	check "the constructor did not run (a bare name)" test ! -e "$MARK"
	expect "the module, started with that LD_LIBRARY_PATH, refuses it" 1 imp "$C" SGLANG_OEA_K0=3 \
		SGLANG_OEA_LIBRARY=liboea.so.2 LD_LIBRARY_PATH="$WORK/open"
	has "for the trust rule" "refused: $WORK/open"
	check "the constructor did not run (the binding, a bare name)" test ! -e "$MARK"
	expect "apply --library with that bare name: refused" 2 env LD_LIBRARY_PATH="$WORK/open" \
		"$OEAPATCH" apply -C "$C8" --library liboea.so.2
	check "the constructor did not run (apply, a bare name)" test ! -e "$MARK"
	# the escape lets a development tree load it: then, and only then, it runs
	expect "SGLANG_OEA_ALLOW_UNTRUSTED=true: verify opens it (a development tree)" 1 \
		env SGLANG_OEA_ALLOW_UNTRUSTED=true "$OEAPATCH" verify -C "$C7"
	check "and only then the constructor ran" test -e "$MARK"
	chown root "$WORK/open" && chmod 0755 "$WORK/open" && chmod 0700 "$WORK"
else
	skip "a library others can change is never opened" "needs root and the user nobody"
fi

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
