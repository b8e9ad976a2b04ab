# Shared by the end-to-end shell tests (sourced, not run): pass/fail/skip
# counting with one line per check, the closing "N passed, M failed" line that
# CI reads, and a git that behaves the same whatever the user's configuration.
#
# A check that cannot run here is skipped with `skip`, never passed: the
# script then exits with E2E_SKIP (77, ctest's SKIP_RETURN_CODE for every
# e2e test), so ctest reports it as skipped. Put such checks in a part of
# their own (tests/CMakeLists.txt, E2E_PARTS) so a skip hides nothing else.

e2e_passed=0
e2e_failed=0
e2e_skipped=0
E2E_SKIP=77

# ok NAME / bad NAME [DETAIL]: record one check.
ok() { e2e_passed=$((e2e_passed + 1)); printf 'ok    %s\n' "$1"; }
bad() {
	e2e_failed=$((e2e_failed + 1))
	printf 'FAIL  %s\n' "$1"
	[ -n "${2:-}" ] && printf '%s\n' "$2" | sed 's/^/      | /'
	return 0
}

# skip NAME WHY: a check that cannot run on this machine (counted apart).
skip() {
	e2e_skipped=$((e2e_skipped + 1))
	printf 'SKIP  %s: %s\n' "$1" "$2"
}

# check NAME COMMAND...: passes when the command succeeds.
check() {
	local name=$1
	shift
	if "$@"; then ok "$name"; else bad "$name"; fi
}

# expect DESC WANT_RC COMMAND...: passes when the exit status is WANT_RC;
# the command's output (stdout and stderr) is left in $out.
expect() {
	local desc=$1 want=$2
	shift 2
	out=$("$@" 2>&1)
	local rc=$?
	if [ "$rc" -eq "$want" ]; then ok "$desc (exit $rc)"; else bad "$desc: exit $rc, wanted $want" "$out"; fi
}

# has DESC TEXT: $out contains TEXT.
has() { if grep -qF -- "$2" <<<"$out"; then ok "$1"; else bad "$1: no '$2' in the output" "$out"; fi; }

# e2e_reachable DIR: an install-like copy of the build under DIR/reachable
# (bin/oeapatch, share/oeapatch/patches, lib/ with liboea) that another user
# can run: the build may live where only its owner can enter (a clone in
# root's 0700 home), and a case run as `nobody` must not fail for that.
# DIR itself must be enterable by others (the test's own temporary folder,
# chmod 755). Sets E2E_OEAPATCH and E2E_LIBRARY to the copies.
e2e_reachable() {
	local d=$1/reachable src
	src=${OEAPATCH_SOURCE_DIR:-$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)}
	mkdir -p "$d/bin" "$d/lib" "$d/share/oeapatch"
	cp "$OEAPATCH" "$d/bin/oeapatch"
	cp -L "$OEA_LIBRARY" "$d/lib/$(basename "$OEA_LIBRARY")"
	cp -r "$src/patches" "$d/share/oeapatch/patches"
	chmod -R a+rX "$d"
	E2E_OEAPATCH=$d/bin/oeapatch
	E2E_LIBRARY=$d/lib/$(basename "$OEA_LIBRARY")
}

# e2e_sglang_wheel WORK: the real sglang==$E2E_SGLANG_VERSION wheel (pure
# Python: the tests that patch a real release's files without its
# environment), from ${OEAPATCH_WHEEL_CACHE:-$XDG_CACHE_HOME/oeapatch/wheels},
# downloaded there the first time (WORK holds the download). Sets E2E_WHEEL;
# exits 77 (skipped) when neither the cache nor the package index has it.
E2E_SGLANG_VERSION=0.4.6.post5
e2e_sglang_wheel() {
	local work=$1 name cache python=${OEAPATCH_SYSTEM_PYTHON:-/usr/bin/python3}
	name=sglang-$E2E_SGLANG_VERSION-py3-none-any.whl
	cache=${OEAPATCH_WHEEL_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/oeapatch/wheels}
	E2E_WHEEL=$cache/$name
	[ -s "$E2E_WHEEL" ] && return 0
	mkdir -p "$cache"
	if ! timeout 300 "$python" -m pip download --quiet --no-deps --only-binary :all: \
		"sglang==$E2E_SGLANG_VERSION" -d "$work/dl" >"$work/download.log" 2>&1 || [ ! -s "$work/dl/$name" ]; then
		echo "SKIP  no cached $name and the package index is not reachable:"
		tail -5 "$work/download.log" | sed 's/^/      | /'
		exit 77
	fi
	mv "$work/dl/$name" "$E2E_WHEEL"
}

# e2e_git_env DIR: a deterministic git (identity, no system or user config, HOME in DIR).
e2e_git_env() {
	export HOME=$1/home GIT_CONFIG_NOSYSTEM=1 GIT_AUTHOR_NAME=Test GIT_AUTHOR_EMAIL=test@example.org \
		GIT_COMMITTER_NAME=Test GIT_COMMITTER_EMAIL=test@example.org NO_COLOR=1
	mkdir -p "$HOME"
	unset GIT_DIR GIT_WORK_TREE GIT_INDEX_FILE
}

# e2e_summary: the closing line; its status is the script's verdict: 1 when
# a check failed, E2E_SKIP when one was skipped (or none ran at all: a
# script that checked nothing has not passed), else 0.
e2e_summary() {
	if [ "$e2e_skipped" -gt 0 ]; then
		echo "$e2e_passed passed, $e2e_failed failed, $e2e_skipped skipped"
	else
		echo "$e2e_passed passed, $e2e_failed failed"
	fi
	[ "$e2e_failed" -eq 0 ] || return 1
	[ "$e2e_skipped" -eq 0 ] && [ "$e2e_passed" -gt 0 ] || return "$E2E_SKIP"
}
