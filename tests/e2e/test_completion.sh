#!/usr/bin/env bash
# bash completion (issue 10, item 4): `cmake --install` puts it in
# share/bash-completion/completions/oeapatch; sourced, it registers
# `complete -F _oeapatch oeapatch`; driven through COMP_WORDS/COMP_CWORD as
# bash drives it, it completes commands, global options before the command,
# each command's options (read from the binary's help), option values
# (--color=WHEN, --only, directories for -C) and hook's actions.
#
# Environment (set by ctest): OEAPATCH, OEAPATCH_SOURCE_DIR, OEAPATCH_BUILD_DIR.
set -uo pipefail

: "${OEAPATCH:?set OEAPATCH to the oeapatch binary}"
: "${OEAPATCH_SOURCE_DIR:?set OEAPATCH_SOURCE_DIR to the repository root}"
: "${OEAPATCH_BUILD_DIR:?set OEAPATCH_BUILD_DIR to the build directory}"

work=$(mktemp -d "${TMPDIR:-/tmp}/oeapatch-completion.XXXXXX")
trap 'rm -rf "$work"' EXIT
. "$(dirname "$0")/testlib.sh"

echo "== cmake --install puts it where bash-completion looks"
prefix=$work/prefix
if cmake --install "$OEAPATCH_BUILD_DIR" --prefix "$prefix" >"$work/install.log" 2>&1; then
	ok "cmake --install --prefix"
else
	bad "cmake --install failed" "$(tail -20 "$work/install.log")"
fi
file=$prefix/share/bash-completion/completions/oeapatch
check "share/bash-completion/completions/oeapatch is installed" test -f "$file"
check "it is contrib/completion/oeapatch.bash" cmp -s "$file" "$OEAPATCH_SOURCE_DIR/contrib/completion/oeapatch.bash"
[ -f "$file" ] || file=$OEAPATCH_SOURCE_DIR/contrib/completion/oeapatch.bash

out=$(bash -c 'source "$1" && complete -p oeapatch' _ "$file" 2>&1)
if [ "$out" = "complete -F _oeapatch oeapatch" ]; then ok "sourced, it registers _oeapatch"; else bad "complete -p oeapatch" "$out"; fi

# comp WORD...: the completions bash would offer with the cursor at the end
# of the last WORD (the first is the binary), one per line, sorted.
comp() {
	bash -c 'source "$1"; shift; COMP_WORDS=("$@"); COMP_CWORD=$((${#COMP_WORDS[@]} - 1))
		COMP_LINE="$*"; COMP_POINT=${#COMP_LINE}; _oeapatch; printf "%s\n" "${COMPREPLY[@]}"' \
		_ "$file" "${COMP_BIN:-$OEAPATCH}" "$@" | sort
}
# offers DESC WANT WORD...: the completions are exactly WANT (space-separated, any order).
offers() {
	local desc=$1 want got
	want=$(tr ' ' '\n' <<<"$2" | sort)
	shift 2
	got=$(comp "$@")
	if [ "$got" = "$want" ]; then ok "$desc"; else bad "$desc" "wanted: $(echo $want)
got:    $(echo $got)"; fi
}
# includes DESC WORDS WORD...: the completions include each of WORDS.
includes() {
	local desc=$1 w got missing=
	got=$(comp "${@:3}")
	for w in $2; do grep -qxF -- "$w" <<<"$got" || missing="$missing $w"; done
	if [ -z "$missing" ]; then ok "$desc"; else bad "$desc: missing$missing" "$got"; fi
}

echo "== completing"
offers "the commands" "apply verify revert status definition replay check hook help version" ""
offers "a prefix" "verify version" ve
offers "a command after global options" "status" -C /tmp --color=never st
offers "help's argument is a command" "apply verify revert status definition replay check hook help version" help ""
offers "hook's action" "install uninstall status" hook ""
offers "hook's action after an option" "install uninstall status" hook -C /tmp ""
offers "no second action" "" hook install ""
includes "apply's options" "--check --diff --refresh --library --python --quiet --color --json --patch -C" apply -
includes "check's options" "--junit --max-count -n" check -
offers "verify --r" "--ref" verify --r
includes "global options" "-C --python --quiet --color --json --patch --version" -
offers "--color=WHEN (bash splits at =)" "never always auto" --color =
offers "--color=a..." "always auto" --color = a
offers "--only's hooks" "post-merge post-checkout post-rewrite pre-push" hook install --only ""
mkdir -p "$work/dirs/alpha" "$work/dirs/beta"
touch "$work/dirs/afile"
offers "-C completes directories only" "$work/dirs/alpha" -C "$work/dirs/a"
offers "status -C too" "$work/dirs/beta" status -C "$work/dirs/b"
includes "verify's options" "--env-file --ref --skip-binding" verify -
touch "$work/dirs/sglang.env"
offers "--env-file completes files" "$work/dirs/sglang.env" verify --env-file "$work/dirs/sg"
offers "verify --env" "--env-file" verify --env
# --patch: the definitions installed beside the binary (folders with a patch.ini), then directories.
mkdir -p "$prefix/share/oeapatch/patches/binding-core"
COMP_BIN=$prefix/bin/oeapatch offers "--patch lists the bundled definitions" "sglang-oea" --patch sglang-o
COMP_BIN=$prefix/bin/oeapatch offers "--patch: a folder without patch.ini is none" "" --patch binding-c
COMP_BIN=$prefix/bin/oeapatch offers "--patch: and directories" "$work/dirs/alpha" --patch "$work/dirs/a"

repo=$work/repo
git init -q "$repo" && git -C "$repo" -c user.name=T -c user.email=t@example.org commit -q --allow-empty -m one &&
	git -C "$repo" branch feature-x
offers "check's revisions are the -C repository's refs" "feature-x" check -C "$repo" fea
offers "verify --ref too" "feature-x" -C "$repo" verify --ref fea

e2e_summary
