#!/usr/bin/env bash
# The vLLM definition (patches/vllm-oea, issue 17) on the era fixtures
# tests/fixtures/vllm-*.py (written for oeapatch, modelled on vLLM's eras):
#
#  1. Each era that has a routing method lands: apply succeeds, verify
#     holds, a second apply changes nothing, revert gives the file back byte
#     for byte and removes the binding module.
#  2. The call site sits where the definition promises (checked with
#     Python's ast, independently of the engine): in the routing method of
#     FusedMoE / BaseRouter, right after the last statement of its body that
#     binds `topk_weights, topk_ids` and right before what consumes the
#     logical ids (EPLB mapping, the capture, the return), and it passes
#     exactly the era's arguments (`owner=self` and `top_k=self.top_k`
#     where the method is an instance method; the settings themselves where
#     they are parameters).
#  3. The 0.5 era (routing inside fused_moe(), no routing method) is refused:
#     exit 1, the anchor named, nothing written.
#
# The checkouts hold only the fixture's file, so the first target alternative
# that exists is the era's own (layer.py, or from 0.15 router/base_router.py).
#
# Environment (set by ctest): OEAPATCH, OEA_LIBRARY, OEAPATCH_SOURCE_DIR.
# Ends with "N passed, M failed".
set -uo pipefail
: "${OEAPATCH:?set OEAPATCH to the oeapatch binary}"
: "${OEA_LIBRARY:?set OEA_LIBRARY to liboea.so}"
: "${OEAPATCH_SOURCE_DIR:?set OEAPATCH_SOURCE_DIR to the repository root}"
src=$OEAPATCH_SOURCE_DIR
fix=$src/tests/fixtures
python=${OEAPATCH_SYSTEM_PYTHON:-/usr/bin/python3}
unset OEAPATCH_PATCH_DIR

work=$(mktemp -d "${TMPDIR:-/tmp}/oeapatch-vllm-def.XXXXXX")
trap 'rm -rf "$work"' EXIT

. "$(dirname "$0")/testlib.sh"

layer=vllm/model_executor/layers/fused_moe/layer.py
router=vllm/model_executor/layers/fused_moe/router/base_router.py

# definition: the bundled definition itself (both target alternatives, its
# framework and unmatched hint, the shared binding core and vLLM's adapter).
definition() {
  echo "$src/patches/vllm-oea"
}

# checkout FIXTURE TARGET: a checkout holding the fixture as TARGET; prints its root.
checkout() {
  local root
  root=$(mktemp -d "$work/co.XXXXXX")
  mkdir -p "$root/$(dirname "$2")"
  touch "$root/$(dirname "$2")/__init__.py"
  cp "$1" "$root/$2"
  echo "$root"
}

# where.py FILE: the routing method's call site, as "PREV|NEXT|ARGS" (ast).
cat >"$work/where.py" <<'PY'
import ast, sys
tree = ast.parse(open(sys.argv[1], encoding="utf-8").read())
def binds_pair(stmt):
    for node in ast.walk(stmt):
        if isinstance(node, ast.Assign):
            for t in node.targets:
                if isinstance(t, ast.Tuple) and [getattr(e, "id", None) for e in t.elts] == ["topk_weights", "topk_ids"]:
                    return True
    return False
found = []
for cls in tree.body:
    if isinstance(cls, ast.ClassDef) and cls.name in ("FusedMoE", "BaseRouter"):
        for fn in cls.body:
            if isinstance(fn, ast.FunctionDef) and fn.name in ("select_experts", "_select_experts"):
                body = fn.body
                for i, st in enumerate(body):
                    if (isinstance(st, ast.If) and isinstance(st.test, ast.Attribute)
                            and ast.unparse(st.test) == "_oeapatch_oea.ENABLED"):
                        prev = body[i - 1]
                        later = [s for s in body[i + 1:] if binds_pair(s)]
                        call = st.body[0].value
                        args = " ".join(f"{k.arg}={ast.unparse(k.value)}" for k in call.keywords)
                        found.append("%s|%s|%s|%s" % (
                            "binds" if binds_pair(prev) and not later else "NOT-AFTER-THE-LAST-BINDING",
                            ast.unparse(prev).splitlines()[0], ast.unparse(body[i + 1]).splitlines()[0], args))
print("\n".join(found) if found else "none")
PY

# era NAME TARGET WANT_NEXT WANT_ARGS
era() {
  local name=$1 target=$2 want_next=$3 want_args=$4
  local f=$fix/$name.py d root out before
  d=$(definition "$target")
  root=$(checkout "$f" "$target")
  before=$(sha256sum <"$root/$target")
  if out=$("$OEAPATCH" apply --patch "$d" -C "$root" 2>&1); then ok "$name: apply"; else bad "$name: apply" "$out"; return; fi
  if out=$("$OEAPATCH" verify --patch "$d" -C "$root" 2>&1); then ok "$name: verify"; else bad "$name: verify" "$out"; fi
  local patched
  patched=$(sha256sum <"$root/$target")
  out=$("$OEAPATCH" apply --patch "$d" -C "$root" 2>&1)
  if [ "$(sha256sum <"$root/$target")" = "$patched" ]; then ok "$name: a second apply changes nothing"; else bad "$name: a second apply changed the file" "$out"; fi
  local where
  where=$("$python" "$work/where.py" "$root/$target")
  IFS='|' read -r after prev next args <<<"$where"
  if [ "$(grep -c . <<<"$where")" = 1 ] && [ "$after" = binds ]; then
    ok "$name: the call site follows the last statement binding topk_weights, topk_ids"
  else
    bad "$name: the call site is not right after the routing" "$where"
  fi
  if [ "$next" = "$want_next" ]; then ok "$name: then '$want_next'"; else bad "$name: the statement after the call site" "got '$next', want '$want_next'"; fi
  if [ "$args" = "$want_args" ]; then ok "$name: arguments"; else bad "$name: arguments" "got  $args"$'\n'"want $want_args"; fi
  if out=$("$OEAPATCH" revert --patch "$d" -C "$root" 2>&1) && [ "$(sha256sum <"$root/$target")" = "$before" ] &&
    [ ! -e "$root/$(dirname "$target")/_oeapatch_vllm_oea.py" ]; then
    ok "$name: revert gives the file back byte for byte, binding removed"
  else
    bad "$name: revert" "$out"
  fi
}

common="router_logits=router_logits topk_weights=topk_weights topk_ids=topk_ids hidden_states=hidden_states"
era vllm-0.6-static "$layer" "return (topk_weights, topk_ids)" \
  "$common top_k=top_k renormalize=renormalize use_grouped_topk=use_grouped_topk num_expert_group=num_expert_group topk_group=topk_group scoring_func=scoring_func e_score_correction_bias=e_score_correction_bias custom_routing_function=custom_routing_function"
era vllm-0.9-eplb "$layer" "if enable_eplb:" \
  "$common top_k=top_k renormalize=renormalize use_grouped_topk=use_grouped_topk num_expert_group=num_expert_group topk_group=topk_group scoring_func=scoring_func e_score_correction_bias=e_score_correction_bias custom_routing_function=custom_routing_function routed_scaling_factor=routed_scaling_factor indices_type=indices_type"
era vllm-0.12-instance "$layer" "if self.enable_eplb:" \
  "$common owner=self top_k=self.top_k indices_type=indices_type"
era vllm-0.15-router "$router" "if self.capture_fn is not None:" \
  "$common owner=self top_k=self.top_k indices_type=topk_indices_dtype"

# 3. 0.5: refused, nothing written.
d=$(definition "$layer")
root=$(checkout "$fix/vllm-0.5-fused_moe.py" "$layer")
before=$(sha256sum <"$root/$layer")
"$OEAPATCH" apply --patch "$d" -C "$root" >"$work/out" 2>&1
rc=$?
out=$(cat "$work/out")
if [ $rc = 1 ] && grep -q "anchor 'select_experts': not found" <<<"$out" &&
  grep -q "the first release this definition supports is 0.5.5" <<<"$out"; then
  ok "vllm-0.5-fused_moe: refused (exit 1), the routing method and the first supported release named"
else
  bad "vllm-0.5-fused_moe: not refused as it should be (exit $rc)" "$out"
fi
if [ "$(sha256sum <"$root/$layer")" = "$before" ] && [ ! -e "$root/$(dirname "$layer")/_oeapatch_vllm_oea.py" ]; then
  ok "vllm-0.5-fused_moe: nothing written"
else
  bad "vllm-0.5-fused_moe: something was written"
fi

echo "$e2e_passed passed, $e2e_failed failed"
[ "$e2e_failed" = 0 ]
