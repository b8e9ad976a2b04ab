#!/usr/bin/env bash
# test_git_check.sh - `oeapatch check` and `oeapatch verify --ref` on real git
# repositories built here with the git CLI: a history of fixture eras of the
# target file where some commits move the code, two break an anchor, one
# renames the file and others do not touch it; then a bare clone, a detached
# HEAD, an unborn branch, a deletion, a revision without the file, and a
# hundred revisions for the speed claim (printed, not asserted).
set -u

SRC=${OEAPATCH_SOURCE_DIR:-$(cd "$(dirname "$0")/../.." && pwd)}
OEAPATCH=${OEAPATCH:-$SRC/build/src/oeapatch}
PY=/usr/bin/python3
[ -x "$PY" ] || PY=python3
ERAS=$SRC/tests/fixtures/eras
REFUSE=$SRC/tests/fixtures/refuse
T=python/sglang/srt/layers/moe/topk.py
OLD=python/sglang/srt/layers/topk.py

WORK=$(mktemp -d "${TMPDIR:-/tmp}/oeapatch-git-check.XXXXXX")
trap 'rm -rf "$WORK"' EXIT
. "$(dirname "$0")/testlib.sh"
e2e_git_env "$WORK"
json() { "$PY" -c "import json,sys; d=json.load(sys.stdin); print($1)" <<<"$out"; }

g() { git -c init.defaultBranch=main "$@"; }
commit() { # commit DATE MESSAGE
	GIT_AUTHOR_DATE="$1T12:00:00Z" GIT_COMMITTER_DATE="$1T12:00:00Z" git commit -q -m "$2"
	git rev-parse HEAD
}

echo "== a history of $T"
R=$WORK/repo
g init -q "$R" && cd "$R" || exit 2
echo readme >README && git add README
C1=$(commit 2024-11-01 "readme only")
mkdir -p "$(dirname "$T")" && cp "$ERAS/2024-12_positional.py" "$OLD" && git add -A
C2=$(commit 2024-12-26 "topk at its old path") # after the definition's first_revision (2024-12-24)
cp "$ERAS/2025-03_recorder.py" "$OLD" && git add -A
C3=$(commit 2025-03-01 "recorder era")
git mv "$OLD" "$T"
C4=$(commit 2025-04-01 "move topk into moe/")
echo more >>README && git add -A
C5=$(commit 2025-04-15 "docs only")
cp "$ERAS/2025-05_dispatch_info.py" "$T" && git add -A
C6=$(commit 2025-05-01 "dispatch info era moves the chain")
cp "$REFUSE/two_select_experts.py" "$T" && git add -A
C7=$(commit 2025-06-01 "a second select_experts")
cp "$ERAS/2025-08_topk_config.py" "$T" && git add -A
C8=$(commit 2025-08-01 "topk config era")
cp "$REFUSE/no_routing_chain.py" "$T" && git add -A
C9=$(commit 2025-09-01 "routing chain rewritten away")
cp "$ERAS/2025-12_layer_id_capturer.py" "$T" && git add -A
C10=$(commit 2025-12-01 "layer id capturer era")
echo again >>README && git add -A
C11=$(commit 2026-01-01 "docs again")
short() { git rev-parse --short "$1"; }

expect "check walks HEAD and fails" 1 "$OEAPATCH" check
has "the anchor that failed at the second select_experts is named" \
	"$(short "$C7") 2025-06-01  FAILS    a second select_experts"
has "... with why" "anchor 'select_experts': line 12: ambiguous: 2 candidates"
has "the routing_chain failure is named" "anchor 'routing_chain': not found"
has "the rename is reported" "(renamed from $OLD)"
has "the summary counts" "8 revisions of $T checked in"

expect "check --json" 1 "$OEAPATCH" check --json
got=$(json "' '.join(r['commit'] for r in d['revisions'])")
want="$C10 $C9 $C8 $C7 $C6 $C4 $C3 $C2"
[ "$got" = "$want" ] && ok "exactly the commits that touched the file, newest first" ||
	bad "revisions walked" "got  $got"$'\n'"want $want"
got=$(json "' '.join(r['commit'] for r in d['revisions'] if not r['ok'])")
[ "$got" = "$C9 $C7" ] && ok "exactly the failing commits: routing chain and second select_experts" ||
	bad "failing commits" "got $got, want $C9 $C7"
got=$(json "[r['error']['where'] for r in d['revisions'] if not r['ok']]")
[ "$got" = "[\"anchor 'routing_chain'\", \"anchor 'select_experts'\"]" ] && ok "each failure names its anchor" ||
	bad "anchors named" "$got"
got=$(json "[(r['path'], r['renamed_from']) for r in d['revisions'] if r['commit'] in ('$C4','$C3')]")
[ "$got" = "[('$T', '$OLD'), ('$OLD', None)]" ] && ok "the rename is followed under the old name" ||
	bad "rename following" "$got"

expect "a range with a failure: C8..C10" 1 "$OEAPATCH" check "$C8..$C10"
[ "$(grep -c '^[0-9a-f]\{7,\} ' <<<"$out")" -eq 2 ] && ok "C8..C10 has two revisions" || bad "C8..C10 count" "$out"
expect "a range that lands: C9..HEAD" 0 "$OEAPATCH" check "$C9..HEAD"
has "... with the one commit that touched it" "$(short "$C10") 2025-12-01  lands"
# A check that selects nothing has checked nothing: it fails, unless asked
# for with --allow-empty (and then it is reported as skipped, not passed).
expect "a range where nothing touched the file fails" 1 "$OEAPATCH" check "$C10..$C11"
has "... says so" "no commit in $C10..$C11 touched $T"
has "... and names the option that allows it" "--allow-empty"
expect "... unless --allow-empty" 0 "$OEAPATCH" check --allow-empty "$C10..$C11"
has "... which still reports it" "1 empty range (allowed)"
expect "HEAD..HEAD fails" 1 "$OEAPATCH" check HEAD..HEAD
has "... as an empty range" "HEAD..HEAD is empty: both ends are the same commit"
expect "a reversed range fails" 1 "$OEAPATCH" check "$C10..$C8"
has "... and says it is reversed" "$C10..$C8 is reversed"
expect "an empty range beside one that lands still fails" 1 "$OEAPATCH" check "$C9..HEAD" HEAD..HEAD
expect "--junit of an empty range" 1 "$OEAPATCH" check --junit "$WORK/empty.xml" HEAD..HEAD
got=$("$PY" -c "
import xml.etree.ElementTree as E
s = E.parse('$WORK/empty.xml').getroot()
print(s.get('tests'), s.get('failures'), s.get('skipped'), [f.get('type') for f in s.iter('failure')])")
[ "$got" = "1 1 0 ['empty']" ] && ok "... has a failing test case, never tests=\"0\"" || bad "empty junit" "$got"
expect "--junit --allow-empty of an empty range" 0 "$OEAPATCH" check --allow-empty --junit "$WORK/empty.xml" HEAD..HEAD
got=$("$PY" -c "
import xml.etree.ElementTree as E
s = E.parse('$WORK/empty.xml').getroot()
print(s.get('tests'), s.get('failures'), s.get('skipped'), len(list(s.iter('skipped'))))")
[ "$got" = "1 0 1 1" ] && ok "... has a skipped test case, not a pass" || bad "allowed empty junit" "$got"
expect "check --json of an empty range" 1 "$OEAPATCH" check --json HEAD..HEAD
[ "$(json "d['ok'], d['summary']['failed'], d['empty_ranges'][0]['range']")" = "False 1 HEAD..HEAD" ] &&
	ok "... says not ok, with the range" || bad "empty json" "$out"
expect "--max-count caps a walk" 0 "$OEAPATCH" check -n 1
has "... to the newest" "1 revision of"
expect "a named revision that lands" 0 "$OEAPATCH" check "$C10"
expect "a named revision without the file" 1 "$OEAPATCH" check "$C1"
has "... is reported as missing" "MISSING  readme only"
has "... with a clear reason" "no $T at $(short "$C1")"
expect "an unknown revision is trouble" 2 "$OEAPATCH" check no-such-rev
has "... and says what" "no-such-rev: not a revision"
expect "A...B is refused clearly" 2 "$OEAPATCH" check "$C1...$C2"

expect "--junit" 1 "$OEAPATCH" check --junit "$WORK/junit.xml"
got=$("$PY" -c "
import xml.etree.ElementTree as E
s = E.parse('$WORK/junit.xml').getroot()
print(s.tag, s.get('name'), s.get('tests'), s.get('failures'), len(s.findall('testcase')), len(s.findall('testcase/failure')))")
[ "$got" = "testsuite oeapatch check 8 2 8 2" ] && ok "JUnit XML parses: 8 test cases, 2 failures" || bad "junit" "$got"

[ -z "$(git status --porcelain)" ] && ok "check left the work tree and index untouched" || bad "work tree changed" "$(git status)"

echo "== the definition's first supported revision"
DEF=$WORK/def-since
cp -r "$SRC/patches/sglang-oea" "$DEF"
[ -d "$WORK/binding-core" ] || cp -r "$SRC/patches/binding-core" "$WORK/"  # the core its [binding] source names
sed -i "s/^first_revision = .*/first_revision = $C4/" "$DEF/patch.ini"
expect "a walk stops at the definition's first_revision (a commit id)" 1 "$OEAPATCH" check --patch "$DEF" --json
got=$(json "' '.join(r['commit'] for r in d['revisions']), d['not_checked_before_first_revision']")
[ "$got" = "$C10 $C9 $C8 $C7 $C6 $C4 2" ] && ok "... C4 and the commits after it, 2 older ones not checked" ||
	bad "walk since C4" "$got"
expect "... and says so" 1 "$OEAPATCH" check --patch "$DEF"
has "... naming the cut and --all" "2 older revisions not checked: the definition supports $T from $C4 on (first_revision); --all checks them"
expect "--all walks the whole history" 1 "$OEAPATCH" check --patch "$DEF" --all
has "... all 8" "8 revisions of $T"
sed -i "s/^first_revision = .*/first_revision = 2025-05-01/" "$DEF/patch.ini"
expect "a date as first_revision" 1 "$OEAPATCH" check --patch "$DEF" --json
[ "$(json "len(d['revisions']), d['not_checked_before_first_revision']")" = "5 3" ] &&
	ok "... keeps the commits from that day on" || bad "walk since a date" "$out"
sed -i "s/^first_revision = .*/first_revision = 2026-06-01/" "$DEF/patch.ini"
expect "no commit since first_revision touched the file: nothing checked, a failure" 1 "$OEAPATCH" check --patch "$DEF"
has "... that says why" "no commit since the definition's first supported revision 2026-06-01 touched $T"
sed -i "s/^first_revision = .*/first_revision = 0123456789abcdef0123/" "$DEF/patch.ini"
expect "a first_revision this repository lacks is trouble" 2 "$OEAPATCH" check --patch "$DEF"
has "... naming the way out" "pass --all"
expect "... named revisions need no first_revision" 0 "$OEAPATCH" check --patch "$DEF" "$C10"

echo "== bare clone, detached HEAD, unborn branch"
git clone -q --bare "$R" "$WORK/bare.git"
expect "check on a bare repository" 1 "$OEAPATCH" check -C "$WORK/bare.git" --json
[ "$(json "' '.join(r['commit'] for r in d['revisions'] if not r['ok'])")" = "$C9 $C7" ] &&
	ok "the bare repository gives the same failing commits" || bad "bare" "$out"
git checkout -q --detach "$C8"
expect "check on a detached HEAD (at C8)" 1 "$OEAPATCH" check
has "... walks from the detached HEAD" "6 revisions of"
git checkout -q main
g init -q "$WORK/empty"
expect "an empty repository (unborn HEAD)" 2 "$OEAPATCH" check -C "$WORK/empty"
has "... says HEAD is unborn" "HEAD is unborn"
git checkout -q --orphan fresh
expect "an orphan branch with no commit yet" 2 "$OEAPATCH" check
has "... says HEAD is unborn" "HEAD is unborn"
expect "... but a named revision still works there" 0 "$OEAPATCH" check main
git checkout -q -f main

echo "== deletion, and a file at another path"
git rm -q "$T"
C12=$(commit 2026-02-01 "drop topk")
expect "a commit that deletes the file" 1 "$OEAPATCH" check "$C11..$C12"
has "... is reported as deleted" "DELETED  drop topk"
g init -q "$WORK/other" && (cd "$WORK/other" && echo x >x && git add x && git commit -q -m x)
expect "no commit reachable has the file: trouble, clearly" 2 "$OEAPATCH" check -C "$WORK/other"
has "... asks whether it is the right repository" "no commit reachable from HEAD has this file"
git reset -q --hard "$C11"
# A range at whose end the file was moved away selects nothing under the
# definition's path: a failure that says the end lacks the file.
git mv "$T" python/sglang/srt/layers/moe/topk_moved.py
C13m=$(commit 2026-02-02 "move topk away")
echo later >>README && git add -A
C14m=$(commit 2026-02-03 "later docs")
expect "a range whose end moved the file away fails" 1 "$OEAPATCH" check "$C13m..$C14m"
has "... saying the end lacks the file" "the range's end has no $T"
git reset -q --hard "$C11"

echo "== verify --ref"
"$OEAPATCH" apply -C "$R" ${OEA_LIBRARY:+--library "$OEA_LIBRARY"} >/dev/null || bad "apply in the repository"
B=$(dirname "$T")/_oeapatch_sglang_oea.py
# `git commit -am` after apply: the target is committed, the new binding
# module it imports is left untracked, and a clone of that commit fails at
# import. That commit is not green.
git add "$T" && C13=$(commit 2026-03-01 "carry the patch, not the binding")
git stash -q -u 2>/dev/null; git clean -qfdx
expect "verify --ref of a commit whose tree lacks the binding module fails" 1 "$OEAPATCH" verify --ref HEAD
has "... naming the binding check" "FAIL binding"
has "... and how to fix it" "git add $B"
has "... and the option for deploys that run apply" "--skip-binding"
expect "... --skip-binding accepts it" 0 "$OEAPATCH" verify --ref HEAD --skip-binding
has "... and says the binding was not checked" "the binding check was skipped: --skip-binding"
expect "check fails the commit that lacks the binding module" 1 "$OEAPATCH" check HEAD
has "... naming the binding" "binding: $B is not in commit"
expect "... check --skip-binding accepts it" 0 "$OEAPATCH" check --skip-binding HEAD
"$OEAPATCH" apply -C "$R" ${OEA_LIBRARY:+--library "$OEA_LIBRARY"} >/dev/null || bad "apply again"
git add "$B" && C14=$(commit 2026-03-02 "carry the binding too")
git checkout -q -- . && git clean -qfdx
expect "verify --ref HEAD (target and binding committed)" 0 "$OEAPATCH" verify --ref HEAD
has "... checks the binding in the commit" "ok   binding"
has "... says the machine checks were skipped" "library, bytecode and trust checks are about a machine and were skipped"
printf '# edited\n' >>"$B" && git commit -qam "edit the committed binding"
expect "verify --ref of a commit with an edited binding module fails" 1 "$OEAPATCH" verify --ref HEAD
has "... naming it" "FAIL binding"
git reset -q --hard "$C14"
expect "verify --ref C11 (not patched)" 1 "$OEAPATCH" verify --ref "$C11"
has "... names the failed check" "FAIL applied"
expect "verify --ref C1 (no file there)" 1 "$OEAPATCH" verify --ref "$C1"
has "... says the file is not there" "no $T at $C1"
expect "verify --ref of an unknown revision" 2 "$OEAPATCH" verify --ref nope
expect "verify --ref --json" 0 "$OEAPATCH" verify --json --ref HEAD
[ "$(json "d['commit'], d['skipped']")" = "$C14 ['library', 'bytecode', 'trust', 'settings']" ] && ok "... reports the commit" ||
	bad "verify --ref json" "$out"
git clone -q --bare "$R" "$WORK/bare2.git"
expect "verify --ref on a bare repository" 0 "$OEAPATCH" verify -C "$WORK/bare2.git" --ref main
expect "check sees the committed patch as applied" 0 "$OEAPATCH" check HEAD
has "... and says so" "1 already carries it"

echo "== the CI recipe's check step (docs/ci/oeapatch-upstream.yml), run as written"
if "$PY" -c 'import yaml' 2>/dev/null; then
	CI=$WORK/ci && mkdir -p "$CI/build/src" && ln -s "$OEAPATCH" "$CI/build/src/oeapatch"
	git clone -q --mirror "$R" "$CI/upstream.git"
	"$PY" -c "
import yaml
wf = yaml.safe_load(open('$SRC/docs/ci/oeapatch-upstream.yml'))
step = [s for s in wf['jobs']['check']['steps'] if s.get('name') == 'oeapatch check'][0]
assert step['env']['REVISIONS'] == '\${{ github.event.inputs.revisions }}', step['env']
assert '\${{' not in step['run'], 'an expression pasted into the script'
open('$CI/step.sh', 'w').write(step['run'])
" && ok "the check step takes its input from the environment only" || bad "the check step's input"
	ci_step() { (cd "$CI" && env NEWEST=50 REVISIONS="$1" bash -e step.sh); }
	expect "... a range given as input" 0 ci_step "$C9..$C10"
	expect "... an input that is not a revision is refused" 2 ci_step '$(touch pwned)'
	[ ! -e "$CI/pwned" ] && ok "... and nothing of it ran" || bad "the input was executed"
	expect "... no input: the scheduled run" 1 ci_step ""
	has "... from the definition's first supported revision" "revisions of $T checked"
else
	bad "the CI recipe's check step" "python3-yaml is not installed (scripts/setup-deps.sh test installs it)"
fi

echo "== a hundred revisions"
S=$WORK/speed
g init -q "$S" && cd "$S" || exit 2
mkdir -p "$(dirname "$T")"
eras=("$ERAS"/2025-05_dispatch_info.py "$ERAS"/2025-08_topk_config.py "$ERAS"/2025-12_layer_id_capturer.py \
	"$ERAS"/2026-02_post_process.py)
for i in $(seq 1 100); do
	{ cat "${eras[$((i % 4))]}"; echo "# revision $i"; } >"$T"
	git add -A && git commit -q -m "revision $i"
done
t0=$(date +%s.%N)
expect "check over 100 revisions" 0 "$OEAPATCH" check
t1=$(date +%s.%N)
has "... all 100 land" "100 revisions of $T"
echo "     time for 100 revisions: $(echo "$t1 - $t0" | bc 2>/dev/null || echo "?") s ($(tail -1 <<<"$out"))"

e2e_summary
