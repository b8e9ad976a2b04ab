#!/usr/bin/env python3
"""From T to time: native/bench/moe_bench.py --calibrate and
`oeapatch replay --calibration`, on the CPU.

- The fit: samples made from known coefficients give them back exactly, and
  samples where T and B*k are proportional are refused (a and b undetermined).
- The smoke path: moe_bench.py --device cpu --smoke --calibrate writes a
  calibration replay reads (its figures mean nothing; the GPU run makes the
  real ones), marked "smoke".
- Replay: each row's estimated MoE time is the calibration's formula at the
  row's mean T and rows, before and after; a calibration for another layer
  shape, or a file that is not one, is refused naming why.
"""
import json
import os
import shutil
import subprocess
import sys
import tempfile

import oea_testlib as tl
from oea_testlib import case, check

CLI = os.environ.get("OEAPATCH") or os.path.join(tl.ROOT, "build", "src", "oeapatch")
BENCH = os.path.join(tl.ROOT, "native", "bench", "moe_bench.py")
LIB = [None]
WORK = tempfile.mkdtemp(prefix="oea-calibration-")


def bench_module():
    sys.path.insert(0, os.path.dirname(BENCH))
    import moe_bench
    return moe_bench


@case("the fit gives back known coefficients; proportional samples are refused")
def fit():
    mb = bench_module()
    samples = [(B, T, 3.0 * T + 0.5 * B * 8) for B in (1, 4, 16, 64) for T in (8, 20, 60, 100)]
    a, b, rms, worst = mb.fit_calibration(samples, 8)
    check(abs(a - 0.5) < 1e-9 and abs(b - 3.0) < 1e-9 and worst < 1e-9, (a, b, rms, worst))
    try:
        mb.fit_calibration([(1, 8, 10.0), (2, 16, 20.0)], 8)
    except ValueError:
        return "a=%.3f b=%.3f" % (a, b)
    raise AssertionError("T = B*k samples were fitted")


def recording(experts, top_k):
    ns = {"__name__": "oea_record"}
    path = os.path.join(tl.ROOT, "patches", "binding-core", "oea_record.py")
    exec(compile(open(path, encoding="utf-8").read(), path, "exec"), ns)
    import torch
    g = torch.Generator().manual_seed(5)
    rec = ns["Recorder"](os.path.join(WORK, "r%d.safetensors" % experts), 0, 0, "sglang", "SGLANG_OEA_",
                         LIB[0])  # liboea writes the recording (its recorder: oea_rec_*)
    s = dict(experts=experts, top_k=top_k, shared=0, scoring="softmax", renormalize=True, groups=0,
             topk_group=0, min_batch=1)
    for _ in range(60):
        logits = torch.randn(int(torch.randint(1, 40, (1,), generator=g)), experts, generator=g)
        rec.record(1, s, 0, logits, torch.topk(logits, top_k, dim=1).indices.to(torch.int32), None)
    rec.close()
    return rec.path


@case("moe_bench --smoke --calibrate writes a calibration; replay estimates by its formula")
def smoke_and_replay():
    out = os.path.join(WORK, "cal.json")
    p = subprocess.run([sys.executable, BENCH, "--device", "cpu", "--smoke", "--models", "qwen3",
                        "--lib", LIB[0], "--calibrate", out], capture_output=True, text=True)
    check(p.returncode == 0, p.stderr[-600:])
    cal = json.load(open(out))
    e = cal["entries"][0]
    check(cal["format"] == "oeapatch-calibration" and e["experts"] == 128 and e["top_k"] == 8 and e["smoke"],
          str(e)[:300])
    rec = recording(128, 8)
    p = subprocess.run([CLI, "replay", "--json", rec, "--k0", "3", "--batch", "16", "--calibration", out],
                       capture_output=True, text=True)
    check(p.returncode == 0, p.stderr)
    doc = json.loads(p.stdout)
    check(doc["calibration"]["smoke"] and doc["calibration"]["b_us"] == e["b_us"], str(doc["calibration"]))
    for row in doc["results"]:
        for side in ("before", "after"):
            want = e["b_us"] * row["t_%s_mean" % side] + e["a_us"] * row["rows_mean"] * 8
            check(abs(row["moe_us_%s" % side] - want) <= 1e-6 * max(1.0, abs(want)), (row, want))
    text = subprocess.run([CLI, "replay", rec, "--k0", "3", "--calibration", out], capture_output=True,
                          text=True).stdout
    check("SMOKE fit" in text and "MoE us before -> after" in text, text[:400])
    return "a=%.3g b=%.3g" % (e["a_us"], e["b_us"])


@case("a calibration of another shape, or another file, is refused")
def refused():
    out = os.path.join(WORK, "cal.json")
    rec = recording(64, 6)
    p = subprocess.run([CLI, "replay", rec, "--calibration", out], capture_output=True, text=True)
    check(p.returncode == 2 and "64 experts, routed top-6" in p.stderr and "128 experts top-8" in p.stderr,
          p.stderr)
    p = subprocess.run([CLI, "replay", rec, "--calibration", rec], capture_output=True, text=True)
    check(p.returncode == 2 and "not a JSON file" in p.stderr, p.stderr)
    other = os.path.join(WORK, "other.json")
    with open(other, "w") as f:
        json.dump({"format": "something"}, f)
    p = subprocess.run([CLI, "replay", rec, "--calibration", other], capture_output=True, text=True)
    check(p.returncode == 2 and "not a calibration" in p.stderr, p.stderr)


def main():
    args = tl.library_args(__doc__)
    LIB[0] = args.library
    if tl.no_torch():
        return 77
    try:
        for t in (fit, smoke_and_replay, refused):
            t()
    finally:
        shutil.rmtree(WORK, ignore_errors=True)
    return tl.summary()


if __name__ == "__main__":
    sys.exit(main())
