#!/usr/bin/env bash
# A hand patch already in the target (issue 35, item 2): operators moving to
# oeapatch from a hand-written OEA leave code that reads the definition's own
# settings; with ours beside it every decode batch is routed twice. apply
# refuses naming the lines (nothing written) and verify fails `foreign`, for
# every definition, by the settings its patch.ini declares (env_prefix,
# [setting:] names), in each spelling hand patches use; a comment that names
# a setting reads nothing and is no reason to refuse.
#
# Targets: SGLang's real topk.py from the cached sglang==0.4.6.post5 wheel
# (the one tests/e2e/test_installed_pip.sh uses; skipped when neither it nor
# the index is there) and vLLM's router-era fixture (tests/fixtures).
# Environment (set by ctest): OEAPATCH, OEA_LIBRARY.
set -uo pipefail

: "${OEAPATCH:?set OEAPATCH to the oeapatch binary}"
: "${OEA_LIBRARY:?set OEA_LIBRARY to liboea.so}"
here=$(cd "$(dirname "$0")" && pwd)
src=$(cd "$here/../.." && pwd)
python=${OEAPATCH_SYSTEM_PYTHON:-/usr/bin/python3}

work=$(mktemp -d "${TMPDIR:-/tmp}/oeapatch-handpatch.XXXXXX")
trap 'rm -rf "$work"' EXIT
. "$here/testlib.sh"

e2e_sglang_wheel "$work"
mkdir -p "$work/orig"
"$python" - "$E2E_WHEEL" "$work/orig/sglang-oea.py" <<'EOF'
import sys, zipfile
open(sys.argv[2], "wb").write(zipfile.ZipFile(sys.argv[1]).read("sglang/srt/layers/moe/topk.py"))
EOF
cp "$src/tests/fixtures/vllm-0.15-router.py" "$work/orig/vllm-oea.py"

# The definition's env_prefix, read from its patch.ini (the rule is its data).
prefix() { sed -n 's/^env_prefix *= *//p' "$src/patches/$1/patch.ini"; }
# The checkout path of its target (the first of `target`).
target_of() { sed -n 's/^target *= *//p' "$src/patches/$1/patch.ini" | cut -d' ' -f1; }

# fresh DEF: a checkout $co with the pristine target at $t.
fresh() {
	co=$work/$1/co
	rm -rf "$work/$1"
	t=$co/$(target_of "$1")
	mkdir -p "$(dirname "$t")"
	cp "$work/orig/$1.py" "$t"
}

for def in sglang-oea vllm-oea; do
	p=$(prefix "$def")
	echo "== $def (settings $p*)"
	[ -n "$p" ] || { bad "$def declares an env_prefix"; continue; }
	# The seeds' form: a module-level setting, a helper with its gate inside,
	# and one unconditional line calling it.
	fresh "$def"
	cat >>"$t" <<EOF


_OEA_K0 = int(os.environ.get('${p}K0', '0'))


def _oea_piggyback(topk_weights, topk_ids):
    if _OEA_K0 <= 0:
        return topk_weights, topk_ids
    return topk_weights, topk_ids


_oea_piggyback(None, None)
EOF
	line=$(grep -n "${p}K0" "$t" | cut -d: -f1)
	cp "$t" "$work/before.py"
	expect "apply refuses the hand patch" 2 "$OEAPATCH" -C "$co" --patch "$def" apply --library "$OEA_LIBRARY"
	has "it names the line" "line $line reads ${p}*"
	has "and says why" "every batch would be routed twice"
	check "nothing written" cmp -s "$work/before.py" "$t"
	check "no binding module written" test -z "$(find "$co" -name '_oeapatch_*')"

	for spelling in "os.getenv(\"${p}K0\")" "os.environ[\"${p}K0\"]" "\"${p}\" + \"K0\"" \
		"f\"${p}{'K0'}\"" "'''${p}MIN_BATCH'''"; do
		fresh "$def"
		printf '\n_HAND = %s\n' "$spelling" >>"$t"
		expect "apply refuses: $spelling" 2 "$OEAPATCH" -C "$co" --patch "$def" apply --library "$OEA_LIBRARY"
	done

	# A comment reads nothing; a name that only ends like a setting is another's.
	fresh "$def"
	printf '\n# %sK0 was set by hand here once\n_OTHER = "MY_%sK0"\n' "$p" "$p" >>"$t"
	expect "a comment and another's name are not a hand patch" 0 "$OEAPATCH" -C "$co" --patch "$def" apply \
		--library "$OEA_LIBRARY"
	expect "verify passes" 0 "$OEAPATCH" -C "$co" --patch "$def" verify
	has "the check is there" "ok   foreign"

	# Applied first, the hand patch comes back (a merge of an old branch).
	printf '\n_OEA_K0 = int(os.getenv("%sK0", "0"))\n' "$p" >>"$t"
	line=$(grep -n "getenv(\"${p}K0\"" "$t" | cut -d: -f1)
	expect "verify fails" 1 "$OEAPATCH" -C "$co" --patch "$def" verify
	has "naming the check and the line" "FAIL foreign                line $line outside oeapatch's regions"
	cp "$t" "$work/before.py"
	expect "apply refuses" 2 "$OEAPATCH" -C "$co" --patch "$def" apply --library "$OEA_LIBRARY"
	check "nothing written" cmp -s "$work/before.py" "$t"
	expect "revert still takes ours out" 0 "$OEAPATCH" -C "$co" --patch "$def" revert
done

e2e_summary
