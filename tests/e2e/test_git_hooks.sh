#!/usr/bin/env bash
# test_git_hooks.sh - `oeapatch hook` on real repositories, triggered by real
# git commands: install beside existing hooks (chained, byte for byte), with
# core.hooksPath (relative), in a worktree; `git pull` that drops the patch
# (reported; with --reapply restored and verified), `git checkout`, `git
# rebase`, a `git push` that is blocked; uninstall leaves the hooks directory
# byte-identical to what it was.
set -u

SRC=${OEAPATCH_SOURCE_DIR:-$(cd "$(dirname "$0")/../.." && pwd)}
OEAPATCH=${OEAPATCH:-$SRC/build/src/oeapatch}
ERAS=$SRC/tests/fixtures/eras
REFUSE=$SRC/tests/fixtures/refuse
T=python/sglang/srt/layers/moe/topk.py
LIB=()
[ -n "${OEA_LIBRARY:-}" ] && LIB=(--library "$OEA_LIBRARY")

WORK=$(mktemp -d "${TMPDIR:-/tmp}/oeapatch-git-hooks.XXXXXX")
trap 'rm -rf "$WORK"' EXIT
. "$(dirname "$0")/testlib.sh"
e2e_git_env "$WORK"
git config --global init.defaultBranch main
git config --global pull.rebase false
git config --global advice.detachedHead false

# run DESC CMD...: any exit status; output in $out.
run() {
	out=$("${@:2}" 2>&1)
	echo "     ($1: exit $?)"
}
hasnt() { if grep -qF -- "$2" <<<"$out"; then bad "$1: '$2' in the output" "$out"; else ok "$1"; fi; }
# Names, types, modes and contents of everything in a directory.
snapshot() {
	(cd "$1" && find . -mindepth 1 | LC_ALL=C sort | while read -r f; do
		printf '%s %s ' "$f" "$(stat -c '%F %a' "$f")"
		if [ -L "$f" ]; then readlink "$f"; elif [ -f "$f" ]; then sha256sum <"$f" | cut -c1-64; else echo; fi
	done)
}

echo "== repositories"
O=$WORK/origin
git init -q "$O" && cd "$O" || exit 2
mkdir -p "$(dirname "$T")" && cp "$ERAS/2025-08_topk_config.py" "$T"
"$OEAPATCH" apply -C "$O" "${LIB[@]}" >/dev/null || bad "apply in origin"
rm -f "$(dirname "$T")"/_oeapatch_*.py # the binding is written per checkout, not committed
echo readme >README && git add README "$T" && git commit -q -m "patched topk"
git checkout -q -b plain && cp "$ERAS/2025-12_layer_id_capturer.py" "$T" && git commit -q -am "upstream topk, unpatched"
git checkout -q main

E=$WORK/deploy2
git clone -q "$O" "$E"
D=$WORK/deploy
git clone -q "$O" "$D" && cd "$D" || exit 2
git branch -q plain origin/plain
"$OEAPATCH" apply -C "$D" "${LIB[@]}" >/dev/null && "$OEAPATCH" verify -C "$D" >/dev/null &&
	ok "the deploy checkout is patched and verifies" || bad "deploy checkout set-up"
H=$D/.git/hooks
printf '#!/bin/sh\necho "user post-merge ran: $*" >>"%s/user.log"\n' "$WORK" >"$H/post-merge"
chmod 0750 "$H/post-merge"
printf '#!/bin/sh\nwhile read -r l; do echo "user pre-push saw: $l" >>"%s/user.log"; done\n' "$WORK" >"$H/pre-push"
chmod 0700 "$H/pre-push"
before=$(snapshot "$H")

echo "== install"
expect "hook install" 0 "$OEAPATCH" hook install -C "$D"
has "... into .git/hooks" "hooks directory: $H"
has "... chaining the existing post-merge" "post-merge     ours+chained  installed, chaining the existing hook"
[ "$(stat -c %a "$H/post-merge.oeapatch-chained")" = 750 ] && ok "the chained hook keeps its mode" || bad "chained mode"
[ -x "$H/post-checkout" ] && head -2 "$H/post-checkout" | grep -qx '# oeapatch hook v1' &&
	ok "hooks are executable and carry the header" || bad "hook header or mode"
grep -qF "oeapatch='$(readlink -f "$OEAPATCH")'" "$H/post-merge" && ok "the binary is recorded by absolute path" ||
	bad "binary path" "$(head -12 "$H/post-merge")"
after1=$(snapshot "$H")
expect "install again is idempotent" 0 "$OEAPATCH" hook install -C "$D"
has "... and says so" "pre-push       ours+chained  unchanged"
[ "$after1" = "$(snapshot "$H")" ] && ok "... and changes no byte" || bad "second install changed files"
expect "hook status" 0 "$OEAPATCH" hook status -C "$D"
has "... lists ours+chained" "post-merge     ours+chained  verifies with"

echo "== git checkout"
run "git checkout plain" git checkout plain
has "post-checkout shouts when the branch lacks the patch" "sglang-oea does NOT verify in $D"
run "git checkout main" git checkout main
has "post-checkout verifies the patched branch" "post-checkout: sglang-oea verified in $D"
run "git checkout plain -- target" git checkout plain -- "$T"
has "a file checkout that put an unpatched target in place shouts" "post-checkout: sglang-oea does NOT verify"
run "git checkout main -- target" git checkout main -- "$T"
has "a file checkout that changed the target back is verified" "post-checkout: sglang-oea verified"
run "git checkout -- README" git checkout -- README
hasnt "a file checkout that left the target alone does nothing" "oeapatch:"

echo "== git worktree add of a branch without the patch"
# git passes the null commit as the previous HEAD of a new worktree: there is
# nothing to check out back, so the advice must be one that works.
run "git worktree add of the unpatched branch" git worktree add "$WORK/wt-plain" plain
has "post-checkout shouts in the new worktree" "post-checkout: sglang-oea does NOT verify in $WORK/wt-plain"
hasnt "... never advises checking out the null commit" "git checkout 0000000000000000000000000000000000000000"
bin=$(readlink -f "$OEAPATCH")
has "... it advises applying there" "fix: '$bin' apply -C '$WORK/wt-plain' && '$bin' verify -C '$WORK/wt-plain'"
expect "the advice it printed works" 0 "$OEAPATCH" apply -C "$WORK/wt-plain" "${LIB[@]}"
expect "... the new worktree verifies" 0 "$OEAPATCH" verify -C "$WORK/wt-plain"
git worktree remove --force "$WORK/wt-plain"

echo "== post-checkout speaks only when the patch's state changed"
run "a routine switch between two branches that both carry the patch" git checkout -b patched-too
hasnt "... says nothing" "oeapatch:"
run "and back" git checkout main
hasnt "... says nothing either" "oeapatch:"
git checkout -q plain >/dev/null 2>&1
"$OEAPATCH" apply -C "$D" "${LIB[@]}" >/dev/null || bad "apply on plain"
run "git checkout -- target right after apply (it drops the patch)" git checkout -- "$T"
has "... is reported: the patch's state changed" "post-checkout: sglang-oea does NOT verify"
has "... with how to roll back" "to roll back to where the patch held: git checkout"
git checkout -q -f main >/dev/null 2>&1

echo "== git rebase"
git checkout -q -b work main >/dev/null 2>&1 && echo local >>README && git commit -q -am "local change"
run "git rebase plain" git rebase plain
out=$(tr '\r' '\n' <<<"$out")
has "post-rewrite reports the rebase dropped the patch" "post-rewrite: sglang-oea does NOT verify"
hasnt "post-checkout stays quiet during the rebase" "post-checkout: sglang-oea does NOT"
git checkout -q -f main >/dev/null 2>&1

echo "== git pull"
(cd "$O" && cp "$ERAS/2026-02_post_process.py" "$T" && git commit -q -am "upstream update replaces topk")
run "git pull" git pull
out=$(cat "$WORK/user.log" 2>/dev/null; echo "$out")
has "the user's post-merge hook ran, with git's argument" "user post-merge ran: 0"
has "post-merge reports the pull dropped the patch" "post-merge: sglang-oea does NOT verify in $D"
has "... loudly" "do not restart it"
expect "verify agrees" 1 "$OEAPATCH" verify -C "$D"

echo "== --reapply"
expect "hook install --reapply" 0 "$OEAPATCH" hook install -C "$D" --reapply "${LIB[@]}"
has "... updates ours" "post-merge     ours+chained  updated"
expect "hook status after --reapply" 0 "$OEAPATCH" hook status -C "$D"
has "... post-merge re-applies" "post-merge     ours+chained  re-applies and verifies with"
has "... pre-push blocks, it does not re-apply" "pre-push       ours+chained  blocks pushes of commits that do not verify"
(cd "$O" && cp "$ERAS/2025-12_layer_id_capturer.py" "$T" && git commit -q -am "another upstream update")
run "git pull" git pull
has "post-merge re-applied the patch" "oeapatch: $T: sglang-oea/2 applied"
has "... and verified it" "post-merge: sglang-oea verified in $D"
expect "verify agrees" 0 "$OEAPATCH" verify -C "$D"
# deployment.md's gate: a library that went missing is exit 1 (the patch
# does not hold), as that page says, not 2.
if [ -n "${OEA_LIBRARY:-}" ]; then
	cp "$OEA_LIBRARY" "$WORK/liboea-moved.so"
	"$OEAPATCH" apply -C "$D" --library "$WORK/liboea-moved.so" --refresh >/dev/null 2>&1
	rm "$WORK/liboea-moved.so"
	expect "verify with the recorded library gone" 1 "$OEAPATCH" verify -C "$D"
	has "... fails the library check" "FAIL library"
	grep -q 'a library that is missing or does not load (the check "library"); 2: trouble' "$SRC/docs/deployment.md" &&
		ok "deployment.md gives exit 1 for a missing library" || bad "deployment.md's exit codes for a missing library"
	"$OEAPATCH" apply -C "$D" "${LIB[@]}" >/dev/null 2>&1
fi

echo "== git push"
P=$WORK/prod.git
git init -q --bare "$P" && git remote add prod "$P"
run "git push prod main" git push prod main
has "pre-push blocks a commit without the patch" "push BLOCKED: sglang-oea does not verify in refs/heads/main"
grep -q "user pre-push saw: refs/heads/main" "$WORK/user.log" && ok "the user's pre-push got the same stdin" ||
	bad "chained pre-push stdin" "$(cat "$WORK/user.log")"
git --git-dir="$P" rev-parse -q --verify main >/dev/null && bad "the push went through" || ok "nothing was pushed"
git commit -q -am "carry the patch"
run "git push of a commit -am left without the binding module" git push prod main
has "pre-push blocks a commit whose tree lacks the binding module the target imports" "FAIL binding"
has "... and says how to fix it" "git add python/sglang/srt/layers/moe/_oeapatch_sglang_oea.py"
git --git-dir="$P" rev-parse -q --verify main >/dev/null && bad "that push went through" || ok "nothing was pushed"
has "... and how deploys that run apply can do without it" "oeapatch hook install --skip-binding"
expect "hook install --only pre-push --skip-binding" 0 "$OEAPATCH" hook install -C "$D" --only pre-push --skip-binding
run "git push of that commit, with pre-push installed --skip-binding" git push prod main
has "... pre-push accepts it" "pre-push: sglang-oea verified in refs/heads/main"
git push -q prod :main 2>/dev/null || git --git-dir="$P" update-ref -d refs/heads/main
"$OEAPATCH" hook install -C "$D" --only pre-push >/dev/null || bad "pre-push back without --skip-binding"
git add "$(dirname "$T")/_oeapatch_sglang_oea.py" && git commit -q -m "carry the binding module too"
expect "a commit that carries the patch and its binding module is pushed" 0 git push -q prod main
has "... after pre-push verified it" "pre-push: sglang-oea verified in refs/heads/main"

echo "== worktree"
run "git worktree add" git worktree add "$WORK/wt" plain
has "post-checkout runs in a new worktree, on the worktree" "verified in $WORK/wt"
expect "hook status from a worktree" 0 "$OEAPATCH" hook status -C "$WORK/wt"
has "... sees the common hooks directory" "hooks directory: $H"
git worktree remove --force "$WORK/wt"

echo "== uninstall"
expect "hook uninstall" 0 "$OEAPATCH" hook uninstall -C "$D"
has "... restores the user's hook" "post-merge     foreign       removed, previous hook restored"
[ "$before" = "$(snapshot "$H")" ] && ok "the hooks directory is byte-identical to before install" ||
	bad "hooks directory differs" "$(diff <(echo "$before") <(snapshot "$H"))"
expect "hook status after uninstall" 1 "$OEAPATCH" hook status -C "$D"

echo "== core.hooksPath (relative)"
cd "$E" || exit 2
"$OEAPATCH" apply -C "$E" "${LIB[@]}" >/dev/null
git config core.hooksPath .githooks
mkdir .githooks
printf '#!/bin/sh\necho "user post-checkout ran: $3"\n' >.githooks/post-checkout
chmod 0755 .githooks/post-checkout
before=$(snapshot "$E/.githooks")
expect "hook install with core.hooksPath" 0 "$OEAPATCH" hook install -C "$E"
has "... uses it, against the work tree" "hooks directory: $E/.githooks (core.hooksPath)"
[ ! -e "$E/.git/hooks/post-merge" ] && ok "... and not .git/hooks" || bad ".git/hooks was written"
git branch -q plain origin/plain
run "git checkout plain" git checkout plain
has "the user's post-checkout still runs" "user post-checkout ran: 1"
has "ours runs after it" "post-checkout: sglang-oea does NOT verify in $E"
git checkout -q -f main >/dev/null 2>&1
expect "hook uninstall" 0 "$OEAPATCH" hook uninstall -C "$E"
[ "$before" = "$(snapshot "$E/.githooks")" ] && ok "core.hooksPath directory is byte-identical to before" ||
	bad "hooksPath differs" "$(diff <(echo "$before") <(snapshot "$E/.githooks"))"

echo "== chained hooks that dispatch on their own name (husky-style), and their exit status"
# A dispatcher in husky's style: every hook in core.hooksPath sources one
# script that picks the user's script by "$(basename "$0")" and finds it
# beside "$(dirname "$0")". Run under another name, it finds nothing and
# quietly does nothing. A Python hook reads its name from argv[0].
git config core.hooksPath .husky/_
mkdir -p .husky/_
{
	echo 'n=$(basename "$0")'
	echo 's=$(dirname "$(dirname "$0")")/$n'
	echo "log='$WORK/husky.log'"
	echo 'if [ ! -f "$s" ]; then echo "dispatcher $0: no script $s" >>"$log"; exit 0; fi'
	echo 'echo "dispatcher $0: runs $s" >>"$log"'
	echo 'sh -e "$s" "$@"'
} >.husky/_/h
for h in post-checkout post-merge pre-push; do
	printf '#!/usr/bin/env sh\n. "$(dirname "$0")/h"\n' >.husky/_/$h && chmod 0755 .husky/_/$h
done
# "#!/bin/sh -": the option list ended on the #! line.
printf '#!/bin/sh -\n. "$(dirname "$0")/h"\n' >.husky/_/post-merge
printf 'echo "husky post-checkout ran: $3" >>"%s/husky.log"\nexit 3\n' "$WORK" >.husky/post-checkout
printf 'echo "husky post-merge ran: $1" >>"%s/husky.log"\nexit 4\n' "$WORK" >.husky/post-merge
printf 'echo "husky pre-push refused" >>"%s/husky.log"\nexit 5\n' "$WORK" >.husky/pre-push
{
	echo '#!/usr/bin/env python3'
	echo 'import os, sys'
	echo "with open('$WORK/husky.log', 'a') as log:"
	echo '    log.write("python hook ran as %s: %s\n" % (os.path.basename(sys.argv[0]), " ".join(sys.argv[1:])))'
} >.husky/_/post-rewrite
chmod 0755 .husky/_/post-rewrite
git init -q --bare "$WORK/husky-prod.git" && git remote add husky-prod "$WORK/husky-prod.git"
git push -q --no-verify husky-prod main:refs/heads/gone
before=$(snapshot "$E/.husky")
# What git gives them without oeapatch, to compare with.
rm -f "$WORK/husky.log"
git checkout -q plain 2>/dev/null
plain_rc=$?
git checkout -q main 2>/dev/null
git commit -q --amend --no-edit
git hook run post-merge -- 0 2>/dev/null
merge_rc=$?
git push -q husky-prod :refs/heads/gone 2>/dev/null
push_rc=$?
without=$(cat "$WORK/husky.log")
# (git checkout exits 1 for a post-checkout that failed, whatever its status.)
[ "$plain_rc" != 0 ] && [ "$merge_rc" = 4 ] && [ "$push_rc" != 0 ] &&
	grep -qF "dispatcher .husky/_/post-checkout: runs .husky/post-checkout" <<<"$without" &&
	grep -qF "python hook ran as post-rewrite: amend" <<<"$without" &&
	ok "without oeapatch the dispatchers run, and fail as written" ||
	bad "the dispatchers without oeapatch (post-checkout $plain_rc, post-merge $merge_rc, pre-push $push_rc)" "$without"

expect "hook install beside them" 0 "$OEAPATCH" hook install -C "$E"
has "... chains post-checkout" "post-checkout  ours+chained  installed, chaining the existing hook"
rm -f "$WORK/husky.log"
run "git checkout plain" git checkout plain
has "ours still runs" "post-checkout: sglang-oea does NOT verify in $E"
out=$(cat "$WORK/husky.log")
has "the chained dispatcher runs under the name git gave it (\$0 as without oeapatch)" \
	"dispatcher .husky/_/post-checkout: runs .husky/post-checkout"
has "... so the user's script runs" "husky post-checkout ran: 1"
expect "where ours fails too (a branch without the patch), the chained hook's status is kept" 4 \
	git hook run post-merge -- 0
has "... and ours shouted" "post-merge: sglang-oea does NOT verify in $E"
expect "git checkout fails as it does without oeapatch (its post-checkout failed)" "$plain_rc" git checkout -q main
rm -f "$WORK/husky.log"
git commit -q --amend --no-edit
out=$(cat "$WORK/husky.log")
has "a chained Python hook sees the hook's name in argv[0]" "python hook ran as post-rewrite: amend"
expect "a chained post-merge's failure is the hook's exit status (git hook run)" 4 git hook run post-merge -- 0
grep -qF "husky post-merge ran: 0" "$WORK/husky.log" && ok "... after the user's script ran (a #!/bin/sh - dispatcher)" ||
	bad "the user's post-merge did not run" "$(cat "$WORK/husky.log")"
has "... after ours ran" "post-merge: sglang-oea"
expect "a chained pre-push's failure blocks the push (a deletion: nothing of ours to verify)" "$push_rc" \
	git push -q husky-prod :refs/heads/gone
git --git-dir="$WORK/husky-prod.git" rev-parse -q --verify gone >/dev/null && ok "... the branch is still there" ||
	bad "the deletion went through"
grep -qF "husky pre-push refused" "$WORK/husky.log" && ok "... and the user's pre-push said why" ||
	bad "the user's pre-push did not run" "$(cat "$WORK/husky.log")"
expect "hook uninstall" 0 "$OEAPATCH" hook uninstall -C "$E"
[ "$before" = "$(snapshot "$E/.husky")" ] && ok "the husky directory is byte-identical to before" ||
	bad "husky directory differs" "$(diff <(echo "$before") <(snapshot "$E/.husky"))"
git config core.hooksPath .githooks
git checkout -q -f main >/dev/null 2>&1

echo "== the uncommitted-patch workflow"
U=$WORK/uncommitted
git clone -q -b plain "$O" "$U" && cd "$U" || exit 2
"$OEAPATCH" apply -C "$U" "${LIB[@]}" >/dev/null || bad "apply in the uncommitted checkout"
expect "hook install (committed-patch hooks) where the patch is not committed" 0 "$OEAPATCH" hook install -C "$U"
has "... offers what works instead" "install with --uncommitted instead"
expect "hook install --uncommitted" 0 "$OEAPATCH" hook install -C "$U" --uncommitted "${LIB[@]}"
has "... removes our pre-push, which would block every push" "pre-push       removed"
[ ! -e "$U/.git/hooks/pre-push" ] && ok "... no pre-push is left" || bad "a pre-push is installed"
has "... says how to pull" "revert -C '$U' && git pull"
has "... re-applies after pull" "hooks re-apply sglang-oea/2"
expect "--uncommitted with --only pre-push is refused" 2 "$OEAPATCH" hook install -C "$U" --uncommitted --only pre-push
(cd "$O" && git checkout -q plain && cp "$ERAS/2026-02_post_process.py" "$T" && git commit -q -am "upstream moves on" &&
	git checkout -q main)
run "git pull with the patch in the work tree" git pull
has "... stops on the local change before any hook runs (why the recipe reverts first)" "would be overwritten"
run "revert, then pull" sh -c "'$OEAPATCH' revert -C '$U' >/dev/null && git pull"
has "post-merge re-applied the patch" "oeapatch: $T: sglang-oea/2 applied"
has "... and verified it" "post-merge: sglang-oea verified in $U"
expect "verify agrees" 0 "$OEAPATCH" verify -C "$U"
git init -q --bare "$WORK/uprod.git" && git remote add prod "$WORK/uprod.git"
expect "git push is not blocked" 0 git push -q prod plain
(cd "$O" && git checkout -q plain && cp "$REFUSE/no_routing_chain.py" "$T" && git commit -q -am "upstream rewrites the chain" &&
	git checkout -q main)
run "revert, then pull a commit the patch cannot land on" sh -c "'$OEAPATCH' revert -C '$U' >/dev/null && git pull"
has "post-merge says the re-apply failed" "re-applying sglang-oea FAILED in $U"
has "... and how to roll back" "to roll back to where the patch held: git reset --keep ORIG_HEAD && '$(readlink -f "$OEAPATCH")' apply -C '$U'"
run "the roll back it printed" sh -c "git reset --keep ORIG_HEAD && '$OEAPATCH' apply -C '$U' >/dev/null"
expect "... brings back a verified patch" 0 "$OEAPATCH" verify -C "$U"
cd "$E" || exit 2

echo "== a hook that is not ours"
"$OEAPATCH" hook install -C "$E" >/dev/null
printf '#!/bin/sh\necho mine\n' >.githooks/post-rewrite
expect "uninstall with a foreign hook in place of ours" 0 "$OEAPATCH" hook uninstall -C "$E"
has "... leaves it alone" "post-rewrite   foreign       not ours: left alone"
[ "$(cat .githooks/post-rewrite)" = $'#!/bin/sh\necho mine' ] && ok "... byte for byte" || bad "foreign hook changed"
expect "hook status of a bare repository" 1 "$OEAPATCH" hook status -C "$P"
has "... only pre-push applies" "only pre-push applies"

e2e_summary
