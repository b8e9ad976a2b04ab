#!/usr/bin/env bash
# test_vllm_git.sh - git on a vLLM checkout (issue 17, item 6): `oeapatch
# check`, `check A..B`, the hooks and `verify --ref` on a real git history
# built here from our own vLLM era fixtures (tests/fixtures/vllm-*.py):
# routing inside fused_moe() (before the definition's first_revision), the
# @staticmethod era in layer.py, the EPLB era, the instance method, the move
# to router/base_router.py (layer.py stays, as upstream), an edit of layer.py
# alone after the move (no revision of the target), a drifted router whose
# routing no longer binds topk_weights, topk_ids (the anchor does not land),
# and the router back in shape. No --patch anywhere: detection must pick
# vllm-oea from the checkout (or the commit's tree) alone.
set -u

SRC=${OEAPATCH_SOURCE_DIR:-$(cd "$(dirname "$0")/../.." && pwd)}
OEAPATCH=${OEAPATCH:-$SRC/build/src/oeapatch}
PY=/usr/bin/python3
[ -x "$PY" ] || PY=python3
FIX=$SRC/tests/fixtures
LAYER=vllm/model_executor/layers/fused_moe/layer.py
ROUTER=vllm/model_executor/layers/fused_moe/router/base_router.py
BIND=vllm/model_executor/layers/fused_moe/router/_oeapatch_vllm_oea.py
LIB=()
[ -n "${OEA_LIBRARY:-}" ] && LIB=(--library "$OEA_LIBRARY")
unset OEAPATCH_PATCH_DIR

WORK=$(mktemp -d "${TMPDIR:-/tmp}/oeapatch-vllm-git.XXXXXX")
trap 'rm -rf "$WORK"' EXIT
. "$(dirname "$0")/testlib.sh"
e2e_git_env "$WORK"
git config --global init.defaultBranch main
git config --global pull.rebase false
git config --global advice.detachedHead false
json() { "$PY" -c "import json,sys; d=json.load(sys.stdin); print($1)" <<<"$out"; }
run() { out=$("${@:2}" 2>&1); echo "     ($1: exit $?)"; }
commit() { # commit DATE MESSAGE: everything, at DATE; prints the commit id
	git add -A
	GIT_AUTHOR_DATE="$1T12:00:00Z" GIT_COMMITTER_DATE="$1T12:00:00Z" git commit -q -m "$2"
	git rev-parse HEAD
}
# The 0.15 router with its routing no longer binding the pair (upstream
# returning a result object instead, say): the method is still there, the
# statement the call site follows is not.
drifted() {
	sed 's/topk_weights, topk_ids = self\._compute_routing(/routed = self._compute_routing(/' \
		"$FIX/vllm-0.15-router.py"
}
drifted | grep -q '^        routed = self._compute_routing($' || bad "the drifted fixture's edit applied"

echo "== a vLLM history"
U=$WORK/upstream
git init -q "$U" && cd "$U" || exit 2
mkdir -p "$(dirname "$ROUTER")"
touch vllm/__init__.py && echo readme >README.md
cp "$FIX/vllm-0.5-fused_moe.py" "$LAYER"
C0=$(commit 2024-06-01 "0.5: routing inside fused_moe()") # before first_revision (2024-08-23)
cp "$FIX/vllm-0.6-static.py" "$LAYER"
C1=$(commit 2024-09-15 "0.6: FusedMoE.select_experts, a staticmethod")
cp "$FIX/vllm-0.9-eplb.py" "$LAYER"
C2=$(commit 2025-05-01 "0.9: EPLB mapping after the chain")
cp "$FIX/vllm-0.12-instance.py" "$LAYER"
C3=$(commit 2025-11-01 "0.12: an instance method")
cp "$FIX/vllm-0.15-router.py" "$ROUTER"
C4=$(commit 2026-01-10 "0.15: the routing moves to router/base_router.py")
echo "# layer.py goes on changing" >>"$LAYER"
C5=$(commit 2026-02-01 "layer.py only (not the target any more)")
drifted >"$ROUTER"
C6=$(commit 2026-03-01 "the router returns a result object")
{ cat "$FIX/vllm-0.15-router.py"; echo "# back in shape"; } >"$ROUTER"
C7=$(commit 2026-04-01 "the router binds the pair again")
short() { git rev-parse --short "$1"; }

expect "check walks HEAD: the drifted revision fails" 1 "$OEAPATCH" check --json
[ "$(json "d['definition']['name'], d['definition']['detected']")" = "vllm-oea True" ] &&
	ok "... vllm-oea, detected from the repository" || bad "detected definition" "$out"
got=$(json "' '.join(r['commit'][:12] + ':' + r['path'] + ':' + r['status'] for r in d['revisions'])")
want="${C7:0:12}:$ROUTER:lands ${C6:0:12}:$ROUTER:fails ${C4:0:12}:$ROUTER:lands ${C3:0:12}:$LAYER:lands \
${C2:0:12}:$LAYER:lands ${C1:0:12}:$LAYER:lands"
[ "$got" = "$want" ] && ok "each revision's verdict, on the file it holds; $(short "$C5") (layer.py after the move) is none" ||
	bad "revisions, paths and verdicts" "got  $got"$'\n'"want $want"
[ "$(json "d['not_checked_before_first_revision']")" = 1 ] &&
	ok "first_revision (2024-08-23) leaves the fused_moe() era unchecked" || bad "first_revision cut" "$out"
got=$(json "[r['error']['where'] for r in d['revisions'] if not r['ok']]")
[ "$got" = "[\"anchor 'select_experts'\"]" ] && ok "the drift names the anchor that no longer lands" ||
	bad "the drift's anchor" "$got"
expect "check (text)" 1 "$OEAPATCH" check
has "... names the failing revision" "$(short "$C6") 2026-03-01  FAILS    the router returns a result object"
has "... and the cut" "1 older revision not checked"
expect "check --all walks down to the fused_moe() era" 1 "$OEAPATCH" check --all --json
got=$(json "[(r['path'], r['status']) for r in d['revisions'] if r['commit'] == '$C0']")
[ "$got" = "[('$LAYER', 'fails')]" ] && ok "... which fails on layer.py" || bad "the 0.5 era under --all" "$got"
[ "$(json "'the first release this definition supports is 0.5.5' in [r for r in d['revisions'] if r['commit'] == '$C0'][0]['detail']")" = True ] &&
	ok "... with the definition's hint naming 0.5.5" || bad "the 0.5 hint" "$out"
expect "check C1..C4 (across the move) lands" 0 "$OEAPATCH" check --json "$C1..$C4"
[ "$(json "' '.join(r['path'].rsplit('/', 1)[1] for r in d['revisions'])")" = "base_router.py layer.py layer.py" ] &&
	ok "... three revisions, the newest on the router" || bad "C1..C4" "$out"
expect "check C4..C7 holds the drift" 1 "$OEAPATCH" check "$C4..$C7"
has "... counted" "2 revisions of"
expect "check C6..C7: the repair lands" 0 "$OEAPATCH" check "$C6..$C7"
expect "check C4..C5: layer.py alone after the move is an empty range" 1 "$OEAPATCH" check "$C4..$C5"
has "... naming the router" "touched $ROUTER"
expect "check REV on the static era" 0 "$OEAPATCH" check --json "$C1"
[ "$(json "d['revisions'][0]['path']")" = "$LAYER" ] && ok "... checks layer.py" || bad "check C1's path" "$out"
[ -z "$(git status --porcelain)" ] && ok "check left the work tree untouched" || bad "work tree changed" "$(git status)"
# A HEAD whose tree lacks both files: the history says which framework.
git checkout -q -b gone && git rm -rq vllm
C8=$(commit 2026-04-15 "drop the package")
expect "check C7..HEAD where HEAD deleted the router" 1 "$OEAPATCH" check --json "$C7..$C8"
[ "$(json "d['definition']['name'], [r['status'] for r in d['revisions']]")" = "vllm-oea ['deleted']" ] &&
	ok "... vllm-oea, from the history; the deletion reported" || bad "detection from the history" "$out"
git checkout -q main

echo "== the CI recipe's check step (docs/ci/oeapatch-upstream.yml) on a vLLM mirror"
if "$PY" -c 'import yaml' 2>/dev/null; then
	CI=$WORK/ci && mkdir -p "$CI/build/src" && ln -s "$OEAPATCH" "$CI/build/src/oeapatch"
	git clone -q --mirror "$U" "$CI/upstream.git"
	"$PY" -c "
import yaml
wf = yaml.safe_load(open('$SRC/docs/ci/oeapatch-upstream.yml'))
job = wf['jobs']['check']
vllm = [m for m in job['strategy']['matrix']['include'] if m['framework'] == 'vllm'][0]
assert vllm['patch'] == 'vllm-oea' and vllm['upstream'].endswith('/vllm-project/vllm.git'), vllm
step = [s for s in job['steps'] if s.get('name') == 'oeapatch check'][0]
assert step['env']['PATCH'] == '\${{ matrix.patch }}', step['env']
assert '\${{' not in step['run'], 'an expression pasted into the script'
open('$CI/step.sh', 'w').write(step['run'])
" && ok "the matrix has vLLM's mirror and definition" || bad "the CI recipe's vLLM entry"
	ci_step() { (cd "$CI" && env NEWEST=50 FRAMEWORK=vllm PATCH=vllm-oea REVISIONS="$1" ONLY="$2" bash -e step.sh); }
	expect "... the scheduled run finds the drift" 1 ci_step "" ""
	has "... on vLLM's history, from first_revision" "1 older revision not checked"
	expect "... a range that lands" 0 ci_step "$C6..$C7" ""
	expect "... a run for the other framework skips this one" 0 ci_step "" sglang
	has "... and says so" "not sglang: skipped"
else
	bad "the CI recipe's check step" "python3-yaml is not installed (scripts/setup-deps.sh test installs it)"
fi

echo "== a deploy checkout, its hooks and verify --ref"
git checkout -q -b drift "$C6" && git checkout -q main
D=$WORK/deploy
git clone -q "$U" "$D" && cd "$D" || exit 2
git branch -q drift origin/drift
expect "apply on the checkout, detected" 0 "$OEAPATCH" apply -C "$D" "${LIB[@]}"
has "... the router, by vllm-oea" "$ROUTER: vllm-oea/1 applied"
git add "$ROUTER" "$BIND" && git commit -q -m "carry the patch and its binding"
P=$(git rev-parse HEAD)
expect "hook install, detected" 0 "$OEAPATCH" hook install -C "$D"
grep -q "^patch='vllm-oea'" .git/hooks/pre-push && ok "... the hooks name vllm-oea" ||
	bad "the hook's definition" "$(head -20 .git/hooks/pre-push)"
expect "verify --ref HEAD (the patched commit)" 0 "$OEAPATCH" verify --ref HEAD
has "... reads the router that commit holds" "$ROUTER"
expect "verify --ref of the drifted revision" 1 "$OEAPATCH" verify --ref drift
expect "verify --ref of the static era (unpatched)" 1 "$OEAPATCH" verify --ref "$C1" --json
[ "$(json "d['file']")" = "$LAYER" ] && ok "... --json's file is layer.py, the alternative that commit holds" ||
	bad "verify --ref C1's file" "$out"
expect "verify --ref of the static era (text)" 1 "$OEAPATCH" verify --ref "$C1"
has "... its verdict names layer.py, not the work tree's router" "$LAYER: vllm-oea/1 does NOT verify"
git clone -q --bare "$D" "$WORK/deploy.git"
expect "verify --ref on a bare vLLM repository (detected from HEAD's tree)" 0 "$OEAPATCH" verify -C "$WORK/deploy.git" --ref HEAD
has "... by vllm-oea" "$ROUTER: vllm-oea/1 verified"

run "git checkout drift" git checkout drift
has "post-checkout refuses the drifted checkout" "post-checkout: vllm-oea does NOT verify in $D"
expect "verify agrees: do not deploy it" 1 "$OEAPATCH" verify -C "$D"
run "git checkout main" git checkout main
has "post-checkout verifies the patched branch" "post-checkout: vllm-oea verified in $D"

(cd "$U" && drifted >"$ROUTER" && commit 2026-05-01 "upstream drifts again" >/dev/null)
run "git pull of the drift" git pull -q --no-edit
has "post-merge: the pulled checkout does not verify" "post-merge: vllm-oea does NOT verify in $D"
has "... loudly, before a restart" "do not restart it"
expect "hook install --reapply" 0 "$OEAPATCH" hook install -C "$D" --reapply "${LIB[@]}"
# upstream's tree as it is (no patch committed): the pull must re-apply
git reset -q --hard origin/main
(cd "$U" && { cat "$FIX/vllm-0.15-router.py"; echo "# upstream again"; } >"$ROUTER" &&
	commit 2026-06-01 "upstream repaired" >/dev/null)
run "git pull of the repair, --reapply" git pull -q --no-edit
has "post-merge re-applied the patch" "$ROUTER: vllm-oea/1 applied"
has "... and verified it" "post-merge: vllm-oea verified in $D"

B=$WORK/prod.git
git init -q --bare "$B" && git remote add prod "$B"
run "git push prod drift" git push prod drift
has "pre-push blocks the drifted revision" "push BLOCKED: vllm-oea does not verify in refs/heads/drift"
git --git-dir="$B" rev-parse -q --verify drift >/dev/null && bad "the drift was pushed" || ok "nothing was pushed"
git reset -q --hard "$P"
run "git push prod main (patched, with its binding)" git push prod main
has "pre-push verifies the patched commit" "pre-push: vllm-oea verified in refs/heads/main"
git --git-dir="$B" rev-parse -q --verify main >/dev/null && ok "... and it went through" || bad "the patched push"
expect "hook uninstall" 0 "$OEAPATCH" hook uninstall -C "$D"

e2e_summary
