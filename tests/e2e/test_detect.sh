#!/usr/bin/env bash
# test_detect.sh - a definition whose target moved between files (target
# alternatives), the `unmatched` hint of an anchor, and which framework a
# folder holds when --patch is not given (detection among the bundled
# definitions; with --python, two frameworks importable and neither holding
# its target are refused, naming both, where one alone is that definition's
# "not found").
#
# The second definition is tests/fixtures/defs/method-oea (framework "Demo",
# a call site in Router.select_experts; newer "releases" keep it in
# src/demo/router/base.py, older ones in src/demo/layer.py). Detection runs
# from a copy of the binary in a prefix whose share/oeapatch/patches holds
# sglang-oea, method-oea and binding-core/ (a shared folder without a
# patch.ini, which is no definition).
set -u

SRC=${OEAPATCH_SOURCE_DIR:-$(cd "$(dirname "$0")/../.." && pwd)}
OEAPATCH=${OEAPATCH:-$SRC/build/src/oeapatch}
PY=/usr/bin/python3
[ -x "$PY" ] || PY=python3
DEMO=$SRC/tests/fixtures/defs/method-oea
SGL=python/sglang/srt/layers/moe/topk.py
ERA=$SRC/tests/fixtures/eras/2025-08_topk_config.py

WORK=$(mktemp -d "${TMPDIR:-/tmp}/oeapatch-detect.XXXXXX")
trap 'rm -rf "$WORK"' EXIT
. "$(dirname "$0")/testlib.sh"
e2e_git_env "$WORK"
unset OEAPATCH_PATCH_DIR

# The two eras of the demo framework, and one before either (routing in a function).
static_era() {
	cat <<'EOF'
import torch


class Router:
    @staticmethod
    def select_experts(hidden_states, router_logits, top_k, renormalize):
        if renormalize:
            topk_weights, topk_ids = torch.topk(router_logits.softmax(-1), top_k)
        else:
            topk_weights, topk_ids = torch.topk(router_logits, top_k)
        return topk_weights, topk_ids
EOF
}
instance_era() {
	cat <<'EOF'
import torch


class Router:
    def __init__(self, top_k):
        self.top_k = top_k

    def _select_experts(self, hidden_states, router_logits):
        topk_weights, topk_ids = self._compute_routing(hidden_states, router_logits)
        topk_ids = self.to_physical(topk_ids)
        return topk_weights, topk_ids
EOF
}
before_eras() {
	cat <<'EOF'
import torch


def fused(router_logits, top_k):
    topk_weights, topk_ids = torch.topk(router_logits, top_k)
    return topk_weights, topk_ids
EOF
}
# json EXPR: evaluates EXPR on the JSON document in $out (as `d`).
json() { "$PY" -c "import json, sys; d = json.loads(sys.stdin.read()); print($1)" <<<"$out"; }

# ---- target alternatives (--patch DIR) ---------------------------------------

A=$WORK/alt
mkdir -p "$A/src/demo"
static_era >"$A/src/demo/layer.py"
expect "old layout: status finds the second alternative" 1 "$OEAPATCH" -C "$A/src" --patch "$DEMO" status
has "old layout: status names src/demo/layer.py" "file:     src/demo/layer.py"
has "status names the framework" "patch:    method-oea/1 (Demo)"
expect "old layout: apply" 0 "$OEAPATCH" -C "$A" --patch "$DEMO" apply
check "old layout: the parameter top_k is passed" grep -q "top_k=top_k," "$A/src/demo/layer.py"
mkdir -p "$A/src/demo/router"
instance_era >"$A/src/demo/router/base.py"
expect "both files: status --json" 1 "$OEAPATCH" -C "$A" --patch "$DEMO" status --json
check "both files: the first alternative is the target" [ "$(json 'd["file"]')" = src/demo/router/base.py ]
check "--json names the definition" \
	[ "$(json 'd["definition"]["name"], d["definition"]["framework"], d["definition"]["detected"]')" = "method-oea Demo False" ]
expect "both files: apply" 0 "$OEAPATCH" -C "$A" --patch "$DEMO" apply
check "both files: self.top_k is passed in the instance method" grep -q "top_k=self.top_k," "$A/src/demo/router/base.py"
expect "both files: verify" 0 "$OEAPATCH" -C "$A" --patch "$DEMO" verify

I=$WORK/site-packages
mkdir -p "$I/demo"
static_era >"$I/demo/layer.py"
expect "installed, old layout: status" 1 "$OEAPATCH" -C "$I" --patch "$DEMO" status --json
check "installed: the installed alternative" [ "$(json 'd["file"], d["layout"]')" = "demo/layer.py installed" ]

# ---- the unmatched hint -----------------------------------------------------------

H=$WORK/hint
mkdir -p "$H/src/demo"
before_eras >"$H/src/demo/layer.py"
expect "an era before the definition: apply refuses" 1 "$OEAPATCH" -C "$H" --patch "$DEMO" apply
has "the refusal ends with the definition's hint" \
	"is not in the module: demo 0.1 routes inside fused(); the first release this definition supports is 0.2"
expect "--json: the hint is in the error's message" 1 "$OEAPATCH" -C "$H" --patch "$DEMO" apply --json
out=$("$OEAPATCH" -C "$H" --patch "$DEMO" apply --json 2>/dev/null)
check "--json: message" [ "$(json '"first release this definition supports is 0.2" in d["error"]["message"]')" = True ]

# ---- check over a history in which the target moved ------------------------------

R=$WORK/repo
git -c init.defaultBranch=main init -q "$R" && cd "$R" || exit 2
mkdir -p src/demo
commit() { git add -A && git commit -q -m "$1" && git rev-parse --short HEAD; }
before_eras >src/demo/layer.py
c0=$(commit "0.1: routing in fused()")
static_era >src/demo/layer.py
c1=$(commit "0.2: Router.select_experts")
echo "# a comment" >>src/demo/layer.py
c2=$(commit "0.3: touch layer.py")
mkdir -p src/demo/router
instance_era >src/demo/router/base.py
c3=$(commit "0.4: the router moves to router/base.py")
echo "# layer.py changes on" >>src/demo/layer.py
c4=$(commit "0.5: layer.py only (not the target any more)")
echo "# a comment" >>src/demo/router/base.py
c5=$(commit "0.6: touch base.py")
cd "$WORK" || exit 2
expect "check over the history: exit 1 (0.1 does not land)" 1 "$OEAPATCH" -C "$R" --patch "$DEMO" check --json
got=$(json '" ".join(r["short"] + ":" + r["path"] + ":" + r["status"] for r in d["revisions"])')
want="$c5:src/demo/router/base.py:lands $c3:src/demo/router/base.py:lands $c2:src/demo/layer.py:lands $c1:src/demo/layer.py:lands $c0:src/demo/layer.py:fails"
if [ "$got" = "$want" ]; then ok "each revision is checked on the alternative it holds; $c4 touched no target"; else
	bad "revisions and paths" "got  $got
want $want"; fi
check "check: the failing era's detail carries the hint" \
	[ "$(json '"first release this definition supports is 0.2" in d["revisions"][-1]["detail"]')" = True ]
expect "check REV: a named revision of the old layout" 0 "$OEAPATCH" -C "$R" --patch "$DEMO" check "$c2" --json
check "check REV: its path" [ "$(json 'd["revisions"][0]["path"]')" = src/demo/layer.py ]
expect "check A..B across the move" 0 "$OEAPATCH" -C "$R" --patch "$DEMO" check "$c1..$c5" --json
check "check A..B: three revisions" [ "$(json 'len(d["revisions"])')" = 3 ]
# The work tree applied and committed: verify --ref reads the target HEAD holds.
expect "apply in the work tree" 0 "$OEAPATCH" -C "$R" --patch "$DEMO" apply
(cd "$R" && git add -A && git commit -q -m "apply")
expect "verify --ref HEAD" 0 "$OEAPATCH" -C "$R" --patch "$DEMO" verify --ref HEAD
expect "verify --ref of the old layout (not applied there)" 1 "$OEAPATCH" -C "$R" --patch "$DEMO" verify --ref "$c2"
has "verify --ref: the old revision's own target" "src/demo/layer.py"

# ---- detection among the bundled definitions --------------------------------------

P=$WORK/prefix
mkdir -p "$P/bin" "$P/share/oeapatch/patches"
cp "$OEAPATCH" "$P/bin/oeapatch"
cp -R "$SRC/patches/sglang-oea" "$P/share/oeapatch/patches/sglang-oea"
cp -R "$DEMO" "$P/share/oeapatch/patches/method-oea"
# the shared binding core, which sglang-oea's [binding] source names; no definition itself
cp -R "$SRC/patches/binding-core" "$P/share/oeapatch/patches/binding-core"
X=$P/bin/oeapatch

S=$WORK/sglang
mkdir -p "$S/$(dirname $SGL)"
cp "$ERA" "$S/$SGL"
expect "detect: an SGLang checkout" 1 "$X" -C "$S" status --json
check "detect: sglang-oea, detected" \
	[ "$(json 'd["definition"]["name"], d["definition"]["framework"], d["definition"]["detected"]')" = "sglang-oea SGLang True" ]
expect "detect: a demo checkout (applied above)" 0 "$X" -C "$A/src/demo" status
has "detect: method-oea" "patch:    method-oea/1 (Demo)"
expect "detect: an installed demo package, not applied" 1 "$X" -C "$I" status
has "detect: the apply hint names the definition" "oeapatch apply -C $I --patch method-oea"
expect "detect: check in a repository" 1 "$X" -C "$R" check --json
check "detect: check names the definition" [ "$(json 'd["definition"]["name"]')" = method-oea ]
git clone -q --bare "$R" "$WORK/bare.git"
expect "detect: check in a bare repository (HEAD's tree)" 0 "$X" -C "$WORK/bare.git" check HEAD --json
check "detect: bare: method-oea" [ "$(json 'd["definition"]["name"]')" = method-oea ]

# The pre-push hook, installed without --patch, verifies the commit pushed on the target it holds.
expect "detect: hook install (pre-push)" 0 "$X" -C "$R" hook install --only pre-push
check "detect: the hook names the detected definition" grep -q "^patch='method-oea'" "$R/.git/hooks/pre-push"
git init -q --bare "$WORK/remote.git"
out=$(cd "$R" && git push -q "$WORK/remote.git" HEAD:refs/heads/main 2>&1)
if [ $? -eq 0 ]; then ok "detect: the push of the applied commit passes"; else bad "detect: push" "$out"; fi
has "detect: the hook verified it" "method-oea verified in"
(cd "$R" && git checkout -q "$c2" -b old && echo "# old" >>src/demo/layer.py && git commit -qam "old layout, not applied")
out=$(cd "$R" && git push -q "$WORK/remote.git" old 2>&1)
if [ $? -ne 0 ]; then ok "detect: a commit of the old layout without the patch is blocked"; else bad "detect: push old" "$out"; fi
has "detect: blocked on the old layout's file" "src/demo/layer.py"

B=$WORK/both/site-packages
mkdir -p "$B/demo" "$B/sglang/srt/layers/moe"
static_era >"$B/demo/layer.py"
cp "$ERA" "$B/sglang/srt/layers/moe/topk.py"
expect "detect: a folder with both frameworks is refused" 2 "$X" -C "$B" apply
has "detect: ambiguity names SGLang" "SGLang (sglang-oea: $SGL, installed sglang/srt/layers/moe/topk.py)"
has "detect: ambiguity names Demo" "Demo (method-oea: src/demo/router/base.py or src/demo/layer.py"
has "detect: ambiguity says how to pick" "--patch method-oea or --patch sglang-oea picks one"
check "detect: nothing written" [ ! -e "$B/demo/_oeapatch_method_oea.py" ]
expect "detect: --patch picks one" 1 "$X" -C "$B" --patch method-oea status --json
check "detect: --patch: not detected" [ "$(json 'd["definition"]["name"], d["definition"]["detected"]')" = "method-oea False" ]
# A demo checkout vendored inside an SGLang checkout: the nearest root wins, as git's nearest .git.
N=$S/vendor/demo
mkdir -p "$N/src/demo"
static_era >"$N/src/demo/layer.py"
expect "detect: the nearest folder wins" 1 "$X" -C "$N/src" status --json
check "detect: nearest: the vendored demo checkout" \
	[ "$(json 'd["definition"]["name"], d["file"], d["root"] == "'"$N"'"')" = "method-oea src/demo/layer.py True" ]
expect "detect: from the SGLang checkout's own folder" 1 "$X" -C "$S/python" status --json
check "detect: the SGLang checkout" [ "$(json 'd["definition"]["name"]')" = sglang-oea ]

E=$WORK/empty
mkdir -p "$E"
expect "detect: nothing found" 2 "$X" -C "$E" status
has "detect: not found names SGLang" "SGLang (sglang-oea: $SGL, installed sglang/srt/layers/moe/topk.py)"
has "detect: not found names Demo" "Demo (method-oea: src/demo/router/base.py or src/demo/layer.py, installed demo/router/base.py or demo/layer.py)"

# $OEAPATCH_PATCH_DIR names one definition: no detection.
expect "OEAPATCH_PATCH_DIR: no detection" 0 env OEAPATCH_PATCH_DIR="$DEMO" "$X" -C "$A" status --json
check "OEAPATCH_PATCH_DIR: that definition, not detected" \
	[ "$(json 'd["definition"]["name"], d["definition"]["detected"]')" = "method-oea False" ]

# --python: one interpreter start, whatever the number of definitions.
V=$WORK/venv
if "$PY" -m venv --without-pip "$V" >/dev/null 2>&1; then
	SP=$("$V/bin/python" -I -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])')
	mkdir -p "$SP/demo"
	static_era >"$SP/demo/layer.py"
	: >"$SP/demo/__init__.py"
	LOG=$WORK/starts.log
	printf '#!/bin/sh\necho start >>"%s"\nexec "%s" "$@"\n' "$LOG" "$V/bin/python" >"$WORK/python"
	chmod +x "$WORK/python"
	expect "--python: detects the demo package" 1 "$X" --python "$WORK/python" status --json
	check "--python: method-oea, installed" \
		[ "$(json 'd["definition"]["name"], d["file"], d["layout"]')" = "method-oea demo/layer.py installed" ]
	check "--python: the interpreter started once" [ "$(wc -l <"$LOG")" -eq 1 ]
	mkdir -p "$SP/sglang/srt/layers/moe"
	cp "$ERA" "$SP/sglang/srt/layers/moe/topk.py"
	: >"$SP/sglang/__init__.py"
	expect "--python: both packages are refused" 2 "$X" --python "$WORK/python" apply
	has "--python: says how to pick" "--patch method-oea or --patch sglang-oea picks one"
	# Installed only because the other requires it (SGLang 0.4.x requires vLLM):
	# not a candidate. pip marks what the user asked for with REQUESTED.
	mkdir -p "$SP/sglang-0.4.4.dist-info" "$SP/demo-1.0.dist-info"
	printf 'Metadata-Version: 2.1\nName: sglang\nVersion: 0.4.4\nRequires-Dist: demo==1.0; extra == "srt"\n' \
		>"$SP/sglang-0.4.4.dist-info/METADATA"
	: >"$SP/sglang-0.4.4.dist-info/REQUESTED"
	printf 'Metadata-Version: 2.1\nName: demo\nVersion: 1.0\n' >"$SP/demo-1.0.dist-info/METADATA"
	expect "--python: the one only required by the other is no candidate" 1 "$X" --python "$WORK/python" status --json
	check "--python: sglang-oea chosen" [ "$(json 'd["definition"]["name"]')" = "sglang-oea" ]
	: >"$SP/demo-1.0.dist-info/REQUESTED"
	expect "--python: both asked for in their own right: refused" 2 "$X" --python "$WORK/python" apply
	has "--python: says how to pick again" "--patch method-oea or --patch sglang-oea picks one"
	rm -rf "$SP/sglang-0.4.4.dist-info" "$SP/demo-1.0.dist-info"
	# Importable but holding no target (a release too old or too new): one such
	# package is the definition (its message names the file it lacks); two
	# are no choice to make, and neither is taken.
	mv "$SP/demo/layer.py" "$WORK/demo-layer.py"
	rm "$SP/sglang/srt/layers/moe/topk.py"
	expect "--python: both import, neither holds a target: refused" 2 "$X" --python "$WORK/python" status
	has "--python: names both definitions looked for" "imports no framework oeapatch has a definition for (looked for Demo (method-oea"
	has "--python: SGLang too" "SGLang (sglang-oea: "
	rm -rf "$SP/demo"
	expect "--python: only SGLang imports, without its target" 2 "$X" --python "$WORK/python" status
	has "--python: that definition, naming where it looked" "that $SP/sglang has no such file"
	mkdir -p "$SP/demo" && : >"$SP/demo/__init__.py" && mv "$WORK/demo-layer.py" "$SP/demo/layer.py"
	rm -rf "$SP/sglang" "$SP/demo"
	expect "--python: neither package" 2 "$X" --python "$WORK/python" status
	has "--python: names what it looked for" "imports no framework oeapatch has a definition for (looked for Demo (method-oea"
else
	skip "--python detection" "python3 -m venv is not available"
fi

e2e_summary
