#!/usr/bin/python3
"""The recorder wired into the binding (issue 33): SGLANG_OEA_RECORD on a
patched fixture checkout (the 2025-12 era of topk.py: TopKConfig, layer_id),
real torch on the CPU, liboea's host path.

A decode loop through select_experts (two layers: softmax; grouped sigmoid
with a bias and padding rows given as a tensor), with prefill batches in
between that must not be recorded, in fresh interpreters:
  - K0=3, statistics on: `oeapatch replay --k0 3` of the file gives liboea's
    live sums (stats()) field for field; the stats line and recording() say
    how many calls were recorded; a prefill is not among them;
  - MODE=shadow: the same, the framework's routing kept;
  - K0=0 (recording only: liboea loaded for its recorder, nothing routed):
    the outputs are the unpatched file's, every call is recorded with k0 0,
    and its replay at k0 3 gives the same sums as the K0=3 run's live ones
    (the same traffic);
  - K0=0 with a bad value elsewhere: the binding runs on the defaults and
    says that RECORD is ignored with the rest (no file), as verify does.
Needs $OEAPATCH (the CLI).
"""

import argparse
import glob
import os
import shutil
import subprocess
import sys
import tempfile

from oea_testlib import (VERBOSE, case, check, era_checkout, recording_calls, replay_totals,
                         same_as_replay, summary)

ERA = "2025-12_layer_id_capturer"

CHILD = r'''
import json, logging, sys, torch
sys.dont_write_bytecode = True
logging.basicConfig(level=logging.INFO, stream=sys.stderr)
out_path = sys.argv[1]
from sglang.srt.layers.moe import topk as m
E, K, H = 64, 8, 16
gen = torch.Generator().manual_seed(99)
bias = torch.rand(E, generator=gen) * 0.5
cfg_a = m.TopKConfig(top_k=K, renormalize=True)
cfg_b = m.TopKConfig(top_k=K, use_grouped_topk=True, topk_group=4, num_expert_group=8,
                     renormalize=True, correction_bias=bias)

class Mode:
    def __init__(self, decode): self.decode = decode
    def is_decode(self): return self.decode
    def is_idle(self): return False
    def is_target_verify(self): return False
class Batch:
    def __init__(self, decode): self.forward_mode = Mode(decode)

def model_forward(forward_batch, n, pad):
    hs = torch.randn(n, H, generator=gen)
    out = []
    for layer, cfg in ((3, cfg_a), (5, cfg_b)):
        logits = torch.randn(n, E, generator=gen) * 2.0
        kw = dict(layer_id=layer)
        if cfg is cfg_b:
            kw["num_token_non_padded"] = torch.tensor(n - pad)
        o = m.select_experts(hs, logits, cfg, **kw)
        out.append((o.topk_weights.clone(), o.topk_ids.clone()))
    return out

outs = []
for step in range(40):
    n = 2 + (step * 7) % 37
    decode = step % 10 != 0  # every tenth batch a prefill: not recorded
    outs.append(model_forward(Batch(decode), n, step % 3))
mod = sys.modules.get(m.__name__.rsplit(".", 1)[0] + "._oeapatch_sglang_oea")
res = {"outs": outs}
if mod is not None and mod.ENABLED:
    mod._recorder().close()  # what is queued, written
    res["stats"] = mod.stats() if mod.STATS else None
    res["line"] = mod.stats_line() if mod.STATS else None
    res["recording"] = mod.recording()
torch.save(res, out_path)
'''

# A framework that forks workers after the first calls (vLLM's fork start
# method, a test harness): the parent records 10 decode steps, forks, and
# both record 10 more; the child must record to its own file (its pid), and
# neither may wait on the other's writer.
FORKED = CHILD.split("outs = []")[0] + r'''
import os
mod = sys.modules.get(m.__name__.rsplit(".", 1)[0] + "._oeapatch_sglang_oea")
for step in range(10):
    model_forward(Batch(True), 8, 0)
pid = os.fork()
for step in range(10):
    model_forward(Batch(True), 8, 0)
rec = mod._recorder()
if pid == 0:
    ok = rec is not None and rec.close() is None and rec.recorded == 20 and rec.stopped is None
    os._exit(0 if ok else 3)
_, status = os.waitpid(pid, 0)
rec.close()
torch.save({"child": pid, "child_status": status, "recording": mod.recording()}, out_path)
'''


def run(repo, out_path, script=CHILD, **env_extra):
    env = {k: v for k, v in os.environ.items() if not k.startswith("SGLANG_OEA_")}
    env.update(PYTHONPATH=os.path.join(repo, "python"), PYTHONDONTWRITEBYTECODE="1")
    env.update(env_extra)
    p = subprocess.run([sys.executable, "-B", "-c", script, out_path], env=env,
                       capture_output=True, text=True, timeout=300)
    check(p.returncode == 0, "the decode loop failed: %s" % p.stderr.strip()[-1500:])
    import torch
    return torch.load(out_path, weights_only=False), p.stderr


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--library", required=True)
    ap.add_argument("-v", "--verbose", action="store_true")
    args = ap.parse_args()
    VERBOSE[0] = args.verbose
    import torch

    tmp = tempfile.mkdtemp(prefix="oeapatch-rechook-")
    live = {}
    try:
        repo = os.path.join(tmp, "checkout")
        era_checkout(repo, ERA)
        base = run(repo, os.path.join(tmp, "base.pt"))[0]
        p = subprocess.run([os.environ["OEAPATCH"], "apply", "--library", args.library, "-C", repo],
                           capture_output=True, text=True, timeout=120)
        if p.returncode:
            print("FAIL apply: %s" % (p.stdout + p.stderr))
            return 1

        def recorded_run(name, **env):
            folder = os.path.join(tmp, name)
            os.mkdir(folder)
            res, log = run(repo, os.path.join(tmp, name + ".pt"), SGLANG_OEA_RECORD=os.path.join(
                folder, "routing"), **env)
            files = glob.glob(os.path.join(folder, "routing-rank0-*.safetensors"))
            check(len(files) == 1, "one file per process, named by rank and pid: %s" % files)
            return res, log, files[0]

        @case("K0=3, statistics on: the replay of the recording = liboea's live sums")
        def t_on():
            res, log, path = recorded_run("on", SGLANG_OEA_K0="3", SGLANG_OEA_STATS="1")
            row = res["stats"]["cpu"]
            same_as_replay(row, path, 3)
            doc = replay_totals(path, 3)[0]
            live["on"] = row
            rec = res["recording"]
            # 40 batches x 2 layers, every tenth batch a prefill
            check(rec["recorded"] == 72 and rec["dropped"] == 0 and doc["calls"] == 72,
                  "recorded %s, replayed %d" % (rec, doc["calls"]))
            check("recording %s: 72 calls recorded, 0 dropped" % path in res["line"], res["line"])
            check("recording the routing inputs of the decode calls to" in log, "no start-up line")
            return "72 calls, T %d -> %d, kept_fx %d" % (row["t_before"], row["t_after"], row["kept_fx"])

        @case("MODE=shadow: the replay = the live sums, the framework's routing kept")
        def t_shadow():
            res, _, path = recorded_run("shadow", SGLANG_OEA_K0="3", SGLANG_OEA_MODE="shadow")
            same_as_replay(res["stats"]["cpu"], path, 3)
            check(res["stats"]["cpu"] == live["on"], "shadow's sums are not on's")
            for got, want in zip(res["outs"], base["outs"]):
                for (w1, i1), (w0, i0) in zip(got, want):
                    check(torch.equal(i1, i0) and torch.equal(w1, w0), "shadow changed the routing")

        @case("K0=0, recording only: routing untouched, every decode call recorded with k0 0")
        def t_record_only():
            res, log, path = recorded_run("off", SGLANG_OEA_K0="0")
            for got, want in zip(res["outs"], base["outs"]):
                for (w1, i1), (w0, i0) in zip(got, want):
                    check(torch.equal(i1, i0) and torch.equal(w1, w0), "recording changed the routing")
            check(res["recording"]["recorded"] == 72, str(res["recording"]))
            check("recording only" in log, "the start-up line does not say recording only")
            same_as_replay(live["on"], path, 3)  # the same traffic: what K0=3 did live
            doc, got = replay_totals(path, 3)
            zero = [r for r in doc["results"] if r["batch"] == "recorded" and r["k0"] == 0]
            check(not zero or zero[0]["totals"]["t_after"] == zero[0]["totals"]["t_before"],
                  "k0 0 changes nothing")
            return "replayed at k0 3: T %d -> %d" % (got["t_before"], got["t_after"])

        @case("K0=0 and a bad value elsewhere: RECORD ignored with it, and said (no file)")
        def t_record_ignored():
            folder = os.path.join(tmp, "ignored")
            os.mkdir(folder)
            res, log = run(repo, os.path.join(tmp, "ignored.pt"), SGLANG_OEA_K0="0",
                           SGLANG_OEA_MIN_BATCH="abc", SGLANG_OEA_RECORD=os.path.join(folder, "routing"))
            check("SGLANG_OEA_MIN_BATCH='abc'" in log and
                  "SGLANG_OEA_RECORD is ignored with it: nothing is recorded" in log,
                  "the warning does not say the recording is off: %s" % log[-600:])
            check(os.listdir(folder) == [] and "recording" not in res, str(os.listdir(folder)))

        @case("K0 bands: each call routed with the k0 of its rows' band, off bands left alone")
        def t_bands():
            bands = "1-9:0,10-20:2,21-:3"
            res, log, path = recorded_run("bands", SGLANG_OEA_K0=bands, SGLANG_OEA_STATS="1")

            def pick(n):  # the batch's rows: a tensor of valid rows is not read on the host
                return 0 if n <= 9 else 2 if n <= 20 else 3
            steps = [2 + (step * 7) % 37 for step in range(40) if step % 10 != 0]
            want = [pick(n) for n in steps for _ in (3, 5)]
            got = [c["k0"] for c in recording_calls(path)]
            check(got == want, "recorded k0 %s, the bands give %s" % (got, want))
            live = res["stats"]["cpu"]
            check(live["calls"] == sum(1 for k in want if k), "liboea calls %d, bands on %d"
                  % (live["calls"], sum(1 for k in want if k)))
            check("k0_band=" in res["line"] and "k0=%s" % bands in log, res["line"])
            off = 0
            for n, got_out, base_out in zip([2 + (s * 7) % 37 for s in range(40)], res["outs"],
                                            base["outs"]):
                if pick(n) == 0:
                    off += 1
                    for (w1, i1), (w0, i0) in zip(got_out, base_out):
                        check(torch.equal(i1, i0) and torch.equal(w1, w0), "an off band re-routed")
            return "%d calls at k0 2 or 3, %d batches in the off band unchanged" % (
                live["calls"], off)

        @case("a fork after the first calls: the child records to its own file, the parent "
              "goes on with its own")
        def t_forked():
            folder = os.path.join(tmp, "forked")
            os.mkdir(folder)
            res, log = run(repo, os.path.join(tmp, "forked.pt"), FORKED, SGLANG_OEA_K0="3",
                           SGLANG_OEA_RECORD=os.path.join(folder, "routing"))
            check(res["child_status"] == 0, "the child's own recorder: wait status %d (3: it "
                  "did not record its 20 calls to a file of its own)" % res["child_status"])
            files = sorted(glob.glob(os.path.join(folder, "routing-rank0-*.safetensors")))
            mine = [f for f in files if f.endswith("-%d.safetensors" % res["child"])]
            check(len(files) == 2 and len(mine) == 1, "files %s (child pid %d)"
                  % (files, res["child"]))
            parent = [f for f in files if f not in mine][0]
            got = {f: replay_totals(f, 3)[0]["calls"] for f in files}
            # 2 layers a step: the parent's 20 steps, the child's 10 after the fork
            check(got[parent] == 40 and got[mine[0]] == 20 and
                  res["recording"]["recorded"] == 40, "replayed %s, parent's recording() %s"
                  % (got, res["recording"]))
            return "parent 40 calls, child 20, each in its own file"

        for fn in (t_on, t_shadow, t_record_only, t_record_ignored, t_bands, t_forked):
            fn()
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    return summary()


if __name__ == "__main__":
    sys.exit(main())
