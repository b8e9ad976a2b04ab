#!/usr/bin/env bash
# test_testlib.sh - the verdicts of testlib.sh itself: a script with a
# skipped check must not be reported as passed (ctest's SKIP_RETURN_CODE is
# 77 for every e2e script), nor one that checked nothing at all.
set -u
. "$(dirname "$0")/testlib.sh"

# verdict BODY: the exit status of e2e_summary after BODY ran in a fresh copy.
verdict() {
	(
		e2e_passed=0 e2e_failed=0 e2e_skipped=0
		eval "$1" >/dev/null
		e2e_summary >/dev/null
	)
	echo $?
}
[ "$(verdict 'ok a; ok b')" = 0 ] && ok "all checks passed: exit 0" || bad "all passed" "$(verdict 'ok a; ok b')"
[ "$(verdict 'ok a; bad b')" = 1 ] && ok "a failed check: exit 1" || bad "a failed check"
[ "$(verdict 'ok a; skip b "no nobody here"')" = 77 ] && ok "a skipped check: exit 77 (skipped, not passed)" ||
	bad "a skipped check" "exit $(verdict 'ok a; skip b "no nobody here"')"
[ "$(verdict 'skip b why; bad c')" = 1 ] && ok "a failure wins over a skip" || bad "failure and skip"
[ "$(verdict ':')" = 77 ] && ok "no check at all: exit 77, not a pass" || bad "no check at all"
out=$(e2e_passed=1 e2e_failed=0 e2e_skipped=2 e2e_summary)
has "the closing line counts the skips" "1 passed, 0 failed, 2 skipped"
grep -q 'SKIP_RETURN_CODE 77' "${OEAPATCH_SOURCE_DIR:-$(dirname "$0")/../..}/tests/CMakeLists.txt" &&
	ok "ctest is told that 77 means skipped" || bad "SKIP_RETURN_CODE not set in tests/CMakeLists.txt"
e2e_summary
