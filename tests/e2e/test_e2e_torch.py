#!/usr/bin/python3
"""End to end with real torch: every era of topk.py, patched by the CLI.

Usage: /usr/bin/python3 tests/e2e/test_e2e_torch.py --library PATH/liboea.so

For each era fixture: a temporary git repository holding the stub sglang
package with that era as layers/moe/topk.py is committed, then
`oeapatch apply` patches it. select_experts is called on seeded random
logits in fresh interpreters:
  - SGLANG_OEA_K0=0: outputs identical to the unpatched file's;
  - SGLANG_OEA_K0=3: routed ids and weights equal liboea's CPU reference
    (oea_route_host through the tests' own ctypes mirror of oea.h) applied
    to the unpatched outputs, and T (distinct experts) drops;
then `oeapatch revert` restores the file byte for byte against the git blob
and leaves a clean work tree. Needs $OEAPATCH (the CLI).
Prints one line per case and `N passed, M failed`; exit 1 on failure.
"""

import argparse
import os
import shutil
import subprocess
import sys
import tempfile

from oea_testlib import (HEADER, RESULTS, SGLANG_TOPK, VERBOSE, Oracle, case, check, distinct,
                         era_checkout, git, summary)

TARGET = SGLANG_TOPK
ERAS = ["2024-12_positional", "2025-03_recorder", "2025-05_dispatch_info",
        "2025-07_kwonly_topkoutput", "2025-08_topk_config", "2025-12_layer_id_capturer",
        "2026-02_post_process"]

# Runs select_experts in each mode the era supports and saves inputs and outputs.
CHILD = r'''
import sys, torch
sys.dont_write_bytecode = True
era, out_path = sys.argv[1], sys.argv[2]
from sglang.srt.layers.moe import topk as m
T, E, K, H = 16, 64, 8, 32
gen = torch.Generator().manual_seed(1234)
hs = torch.randn(T, H, generator=gen)
logits = torch.randn(T, E, generator=gen) * 2.0
bias = torch.rand(E, generator=gen) * 0.5
positional = era in ("2024-12", "2025-03", "2025-05")
config = era in ("2025-08", "2025-12", "2026-02")
has_pad = era != "2024-12"
has_shared = era not in ("2024-12", "2025-03")

def call(grouped=False, bias=None, pad=None, shared=0):
    if config:
        cfg = m.TopKConfig(top_k=K, use_grouped_topk=grouped,
                           topk_group=4 if grouped else None,
                           num_expert_group=8 if grouped else None, renormalize=True,
                           num_fused_shared_experts=shared, correction_bias=bias,
                           routed_scaling_factor=2.5 if shared else None)
        kw = dict(num_token_non_padded=pad)
        if era != "2025-08":
            kw["layer_id"] = 3
        out = m.select_experts(hs, logits, cfg, **kw)
    else:
        kw = dict(hidden_states=hs, router_logits=logits, top_k=K, use_grouped_topk=grouped,
                  renormalize=True, topk_group=4 if grouped else None,
                  num_expert_group=8 if grouped else None, correction_bias=bias)
        if era != "2024-12":
            kw["num_token_non_padded"] = pad
            kw["routed_scaling_factor"] = 2.5 if shared else None
        if has_shared:
            kw["num_fused_shared_experts"] = shared
        out = m.select_experts(**kw)
    w, i = (out[0], out[1]) if positional else (out.topk_weights, out.topk_ids)
    return w.clone(), i.clone()

modes = {"softmax": dict(), "grouped_sigmoid_bias": dict(grouped=True, bias=bias),
         "grouped_softmax": dict(grouped=True)}
if has_pad:
    modes["padded"] = dict(grouped=True, bias=bias, pad=torch.tensor(12))
if has_shared:
    modes["shared"] = dict(grouped=True, bias=bias, shared=1)
# The binding re-routes decode batches only, which it reads from the forward
# batch of the calling model's frame (tests/sglang/ uses SGLang's real one).
class DecodeMode:
    def is_decode(self): return True
    def is_idle(self): return False
    def is_target_verify(self): return False
class DecodeBatch:
    forward_mode = DecodeMode()
def model_forward(forward_batch, **kw):
    return call(**kw)
res = {"logits": logits, "bias": bias}
for name, kw in modes.items():
    res[name] = model_forward(DecodeBatch(), **kw)
torch.save(res, out_path)
'''

# How each mode maps to the oracle's problem: (scoring, groups, topk_group, bias, S, valid rows)
ORACLE = {
    "softmax": ("softmax", 0, 0, False, 0, None),
    "grouped_sigmoid_bias": ("sigmoid", 8, 4, True, 0, None),
    "grouped_softmax": ("softmax", 8, 4, False, 0, None),
    "padded": ("sigmoid", 8, 4, True, 0, 12),
    "shared": ("sigmoid", 8, 4, True, 1, None),
}


def run_select(repo, era, k0, out_path):
    env = {k: v for k, v in os.environ.items() if not k.startswith("SGLANG_OEA_")}
    env.update(PYTHONPATH=os.path.join(repo, "python"), PYTHONDONTWRITEBYTECODE="1",
               SGLANG_OEA_K0=str(k0))
    p = subprocess.run([sys.executable, "-B", "-c", CHILD, era, out_path], env=env,
                       capture_output=True, text=True, timeout=300)
    check(p.returncode == 0, "select_experts (K0=%d) failed: %s" % (k0, p.stderr.strip()[-800:]))


def oeapatch(repo, *args):
    p = subprocess.run([os.environ["OEAPATCH"], *args, "-C", repo], capture_output=True,
                       text=True, timeout=120)
    return p.returncode, p.stdout + p.stderr


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--library", required=True)
    ap.add_argument("-v", "--verbose", action="store_true")
    args = ap.parse_args()
    VERBOSE[0] = args.verbose
    if "OEAPATCH" not in os.environ or not os.path.isfile(args.library):
        print("FAIL setup: needs $OEAPATCH and an existing --library")
        print("0 passed, 1 failed")
        return 1
    import torch

    with open(HEADER, encoding="utf-8") as f:
        oracle = Oracle(os.path.abspath(args.library), f.read())
    tmp = tempfile.mkdtemp(prefix="oeapatch-e2e-")
    try:
        for name in ERAS:
            era = name[:7]
            repo = os.path.join(tmp, era)
            era_checkout(repo, name)
            base = os.path.join(tmp, era + ".base.pt")
            off = os.path.join(tmp, era + ".off.pt")
            on = os.path.join(tmp, era + ".on.pt")

            @case("%s: unpatched baseline, apply, verify" % era)
            def t_apply():
                run_select(repo, era, 0, base)
                rc, out = oeapatch(repo, "apply", "--library", args.library)
                check(rc == 0, "apply rc=%d: %s" % (rc, out))
                rc, out = oeapatch(repo, "verify")
                check(rc == 0, "verify rc=%d: %s" % (rc, out))

            @case("%s: SGLANG_OEA_K0=0 is byte-for-byte the original behaviour" % era)
            def t_off():
                run_select(repo, era, 0, off)
                b, o = torch.load(base), torch.load(off)
                for mode in b:
                    if mode in ("logits", "bias"):
                        continue
                    check(torch.equal(b[mode][0], o[mode][0]) and torch.equal(b[mode][1], o[mode][1]),
                          "mode %s differs with OEA off" % mode)
                return "%d modes identical" % (len(b) - 2)

            @case("%s: SGLANG_OEA_K0=3 equals the native CPU reference, T drops" % era)
            def t_on():
                run_select(repo, era, 3, on)
                b, o = torch.load(base), torch.load(on)
                logits, bias = b["logits"], b["bias"]
                t_before = t_after = 0
                for mode, (scoring, groups, tg, use_bias, shared, valid) in ORACLE.items():
                    if mode not in b:
                        continue
                    w0, i0 = b[mode]
                    w1, i1 = o[mode]
                    # The unpatched outputs, re-routed by the reference, must be what the
                    # patched file returned: routed columns exactly, shared ones (which
                    # some eras compute after the call site from the routed weights) to
                    # rounding.
                    ew, ei, _ = oracle.route(logits, i0.to(torch.int32), w0.float(), k0=3,
                                             num_shared=shared, scoring=scoring, renormalize=True,
                                             groups=groups, topk_group=tg,
                                             bias=bias if use_bias else None, num_valid=valid)
                    r = ei.shape[1] - shared
                    check(torch.equal(ei[:, :r].to(i1.dtype), i1[:, :r]), "mode %s: ids differ" % mode)
                    check(torch.equal(ew[:, :r], w1[:, :r].float()), "mode %s: weights differ" % mode)
                    if shared:
                        check(torch.equal(i0[:, r:], i1[:, r:]), "mode %s: shared ids changed" % mode)
                        check(torch.allclose(w0[:, r:], w1[:, r:], rtol=1e-5), "mode %s: shared weights" % mode)
                    rows = valid if valid is not None else i0.shape[0]
                    tb, ta = distinct(i0, rows, r), distinct(i1, rows, r)
                    check(ta <= tb, "mode %s: T grew %d -> %d" % (mode, tb, ta))
                    t_before, t_after = t_before + tb, t_after + ta
                check(t_after < t_before, "T did not drop: %d -> %d" % (t_before, t_after))
                return "T summed over modes %d -> %d" % (t_before, t_after)

            @case("%s: revert restores the committed blob and a clean tree" % era)
            def t_revert():
                rc, out = oeapatch(repo, "revert")
                check(rc == 0, "revert rc=%d: %s" % (rc, out))
                blob = git(repo, "show", "HEAD:" + TARGET)
                with open(os.path.join(repo, TARGET), "rb") as f:
                    check(f.read() == blob, "file differs from the git blob after revert")
                status = git(repo, "status", "--porcelain", "--untracked-files=all").decode()
                check(status == "", "work tree not clean after revert: %r" % status)

            for fn in (t_apply, t_off, t_on, t_revert):
                fn()
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    return summary()


if __name__ == "__main__":
    sys.exit(main())
