#!/usr/bin/env python3
"""The effect users care about: one MoE layer's latency with the framework's
routing and with OEA's, on a GPU.

    moe_bench.py [--lib PATH] [--models qwen3,dsv3] [--reps N] [--quick]
    moe_bench.py --device cpu --smoke [--lib PATH]
    moe_bench.py --calibrate OUT.json [--models qwen3] [...]

--device cpu --smoke runs the same code on the CPU with tiny layers (hidden 64,
expert width 32), the plain loop and liboea's host path: a pre-flight that
the script works before a GPU's time is spent on it (ctest runs it); its
times mean nothing. Every run checks what it times: OEA's ids are valid
(distinct, in range, every original top-k0 kept) and T after <= T before,
else exit 1.

For each model layer, batch n in {1, 4, 8, 16, 32, 64, 128, 256} and k0 in
{2..6}: random router logits, the framework's own top-k routing (softmax
top-8 for Qwen3-30B-A3B; sigmoid + correction bias, 8 groups of which 4,
top-8 and scaling 2.5 for DeepSeek-V3), then liboea's OEA (oea_route_cuda)
on a copy; the MoE layer (gate_up, SiLU-and-mul, down, weighted sum; bf16
weights) is timed with CUDA events on both routings. T (distinct experts)
before and after comes from liboea's stats.

The MoE kernel, in order of preference (the table says which ran):
  1. SGLang's Triton fused_moe (`fused_experts_impl`), when `sglang` is
     importable (put its wheel's python/ on PYTHONPATH: it is pure Python);
  2. torch._grouped_mm (a CUTLASS grouped GEMM in torch >= 2.8 on sm_90+),
     tokens sorted by expert so that only the used experts' weights are read;
  3. a torch loop over the used experts (two matmuls each): not a fused
     kernel; its time grows with T through launches, not through HBM reads.
--calibrate OUT.json also fits, per model layer, the paper's cost model of a
memory-bound decode step, t = b*T + a*B*k (T distinct experts, B rows, k
the routed top-k; b the time to read one expert's weights, a the per-row
per-slot compute), by least squares over every (B, T, t) it timed (each
k0's T at each batch: T varies at fixed B), and writes the coefficients
with the fit's relative error (RMS and worst) and the samples as
OUT.json, which `oeapatch replay --calibration OUT.json` turns into the
estimated MoE-layer time saved per batch size. Written atomically; the
entry says "smoke": true on a --smoke run (its figures mean nothing).
Exit status: 0 done, 1 a check on OEA's ids failed, 2 trouble (no GPU, no
torch, no liboea).
"""
import argparse
import ctypes
import os
import sys
import time

try:
    import torch
except ImportError:
    print("moe_bench.py: torch is not installed", file=sys.stderr)
    sys.exit(2)

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import oea_torch  # noqa: E402  (the ctypes mirror of liboea's ABI)

MODELS = {
    # name: experts, top-k, hidden, expert width, scoring, groups, topk groups, scale
    "qwen3": dict(label="Qwen3-30B-A3B", E=128, K=8, H=2048, I=768, sigmoid=False,
                  groups=0, topk_group=0, scale=1.0),
    "dsv3": dict(label="DeepSeek-V3", E=256, K=8, H=7168, I=2048, sigmoid=True,
                 groups=8, topk_group=4, scale=2.5),
}
BATCHES = (1, 4, 8, 16, 32, 64, 128, 256)
K0S = (2, 3, 4, 5, 6)
_device = torch.device("cpu")


def check_oea_ids(m, logits, bias, ids, i2, w2, k0, tb, ta):
    """What a timing of OEA's ids presumes: each row's ids in range and
    distinct, fillers included (spec version 3: a slot without a candidate
    takes an expert not in the row, weight +0; MoE runners that count an
    expert once per row fail on a repeat), the row's k0 best original experts by OEA's
    key (the logit for softmax, sigmoid + bias; docs/oea-semantics.md) among
    them, and T after <= T before (the distinct experts, counted here too).
    Returns the problems found, as text."""
    bad = []
    n, K = ids.shape
    if m["sigmoid"]:
        key = torch.sigmoid(logits.float()) + (bias.float() if bias is not None else 0.0)
    else:
        key = logits.float()
    for r in range(n):
        row, wr = i2[r].tolist(), w2[r].tolist()
        if len(set(row)) != len(row) or min(row) < 0 or max(row) >= m["E"]:
            bad.append("row %d: ids %s (weights %s) are not distinct experts in range"
                       % (r, row, wr))
        own = ids[r].long()
        best = own[key[r, own].argsort(descending=True, stable=True)[:k0]]
        lost = set(best.tolist()) - set(row)
        if lost:
            bad.append("row %d: its %d best experts %s lost %s" % (r, k0, sorted(best.tolist()),
                                                                   sorted(lost)))
    t_before = int(torch.unique(ids).numel())
    t_after = int(torch.unique(i2).numel())
    if (tb, ta) != (t_before, t_after):
        bad.append("liboea's stats say T %d -> %d, the ids say %d -> %d"
                   % (tb, ta, t_before, t_after))
    if t_after > t_before:
        bad.append("T grew from %d to %d" % (t_before, t_after))
    return bad


def framework_routing(m, logits, bias):
    """The framework's routing: (ids int32, weights fp32)."""
    if not m["sigmoid"]:
        w, ids = torch.softmax(logits, dim=1).topk(m["K"], dim=1)
        return ids.to(torch.int32), (w / w.sum(1, keepdim=True)).contiguous()
    n, E = logits.shape
    scores = torch.sigmoid(logits)
    sb = scores + bias[None, :]
    g = sb.view(n, m["groups"], -1)
    gscore = g.topk(2, dim=2).values.sum(2)
    keep = gscore.topk(m["topk_group"], dim=1).indices
    mask = torch.zeros(n, m["groups"], device=logits.device, dtype=torch.bool)
    mask.scatter_(1, keep, True)
    sb = sb.masked_fill(~mask.repeat_interleave(E // m["groups"], dim=1), float("-inf"))
    ids = sb.topk(m["K"], dim=1).indices
    w = scores.gather(1, ids)
    w = w / w.sum(1, keepdim=True) * m["scale"]
    return ids.to(torch.int32), w.contiguous()


def oea_ids(lib, m, logits, bias, ids, weights, k0, stats):
    i2, w2 = ids.clone(), weights.clone()
    p = oea_torch.make_problem(logits, i2, w2, k0, scoring="sigmoid" if m["sigmoid"] else "softmax",
                               bias=bias if m["sigmoid"] else None,
                               num_expert_group=m["groups"], stats=stats.data_ptr())
    p.topk_group = m["topk_group"]
    if logits.is_cuda:
        rc = lib.oea_route_cuda(ctypes.byref(p),
                                ctypes.c_void_p(torch.cuda.current_stream().cuda_stream))
    else:
        rc = lib.oea_route_host(ctypes.byref(p))
    if rc:
        raise RuntimeError(lib.oea_status_message(rc).decode())
    return i2, w2


class MoE:
    """One MoE layer's experts and the three ways to run them."""

    def __init__(self, m, dev, H=None, I=None):
        E, H, I = m["E"], H or m["H"], I or m["I"]
        self.w13 = torch.empty(E, 2 * I, H, device=dev, dtype=torch.bfloat16).normal_(0, 0.02)
        self.w2 = torch.empty(E, H, I, device=dev, dtype=torch.bfloat16).normal_(0, 0.02)
        self.kind, self.fn = self._pick()

    def _pick(self):
        """The first candidate that runs and agrees with the plain loop on a
        small batch (a kernel that runs but computes something else, e.g. an
        API whose argument order changed, must not be timed)."""
        cands = []
        if self.w13.device.type != "cuda":
            return "torch loop over used experts (not fused; CPU pre-flight)", self._loop
        try:
            from sglang.srt.layers.moe.fused_moe_triton.fused_moe import fused_experts_impl

            def sgl(x, ids, w):
                return fused_experts_impl(x, self.w13, self.w2, w, ids, False)
            cands.append(("SGLang Triton fused_moe (fused_experts_impl)", sgl))
        except Exception as e:  # not importable: say why in the log
            print("moe_bench.py: SGLang fused_moe not used: %s" % e, file=sys.stderr)
        if hasattr(torch, "_grouped_mm") and torch.cuda.get_device_capability() >= (9, 0):
            cands.append(("torch._grouped_mm (grouped GEMM, tokens sorted by expert)", self._grouped))
        E, H = self.w13.shape[0], self.w13.shape[2]
        x = torch.randn(5, H, device=self.w13.device).to(torch.bfloat16)
        ids = torch.stack([torch.randperm(E, device=x.device)[:8] for _ in range(5)]).to(torch.int32)
        w = torch.rand(5, 8, device=x.device)
        ref = self._loop(x, ids, w).float()
        for kind, fn in cands:
            try:
                got = fn(x, ids, w).float()
                if torch.allclose(got, ref, rtol=5e-2, atol=5e-3 * float(ref.abs().max()) + 1e-6):
                    return kind, fn
                print("moe_bench.py: %s disagrees with the reference loop, not used" % kind,
                      file=sys.stderr)
            except Exception as e:
                print("moe_bench.py: %s failed (%s), not used" % (kind, e), file=sys.stderr)
        return "torch loop over used experts (not fused)", self._loop

    def _grouped(self, x, ids, w):
        n, K = ids.shape
        E = self.w13.shape[0]
        flat = ids.flatten().long()
        order = flat.argsort(stable=True)
        tok = order // K
        counts = torch.bincount(flat, minlength=E)
        offs = counts.cumsum(0).to(torch.int32)
        xs = x[tok]
        h = torch._grouped_mm(xs, self.w13.transpose(1, 2), offs=offs)
        I = h.shape[1] // 2
        a = torch.nn.functional.silu(h[:, :I]) * h[:, I:]
        y = torch._grouped_mm(a, self.w2.transpose(1, 2), offs=offs)
        out = torch.zeros_like(x, dtype=torch.float32)
        out.index_add_(0, tok, y.float() * w.flatten()[order][:, None])
        return out.to(x.dtype)

    def _loop(self, x, ids, w):
        out = torch.zeros_like(x, dtype=torch.float32)
        I = self.w2.shape[2]
        for e in torch.unique(ids).tolist():
            rows, cols = (ids == e).nonzero(as_tuple=True)
            h = x[rows] @ self.w13[e].t()
            a = torch.nn.functional.silu(h[:, :I]) * h[:, I:]
            out.index_add_(0, rows, (a @ self.w2[e].t()).float() * w[rows, cols][:, None])
        return out.to(x.dtype)


def time_us(fn, reps):
    if not torch.cuda.is_available() or _device.type != "cuda":
        ts = []
        for _ in range(reps):
            t0 = time.perf_counter()
            fn()
            ts.append((time.perf_counter() - t0) * 1e6)
        ts.sort()
        return ts[len(ts) // 2]
    for _ in range(3):
        fn()
    torch.cuda.synchronize()
    ts = []
    for _ in range(reps):
        a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        a.record()
        fn()
        b.record()
        b.synchronize()
        ts.append(a.elapsed_time(b) * 1e3)
    ts.sort()
    return ts[len(ts) // 2]


def fit_calibration(samples, k):
    """Least squares of t = b*T + a*B*k (no constant: no experts, no rows,
    no work) over samples [(B, T, t_us)]: (a, b, rms_rel, max_rel), the
    relative errors of the fit on the samples themselves."""
    stt = sum(T * T for B, T, t in samples)
    stx = sum(T * B * k for B, T, t in samples)
    sxx = sum((B * k) ** 2 for B, T, t in samples)
    sty = sum(T * t for B, T, t in samples)
    sxy = sum(B * k * t for B, T, t in samples)
    det = stt * sxx - stx * stx
    if not samples or det == 0:
        raise ValueError("the samples do not determine a and b (T and B*k proportional)")
    b = (sty * sxx - sxy * stx) / det
    a = (sxy * stt - sty * stx) / det
    rel = [abs(b * T + a * B * k - t) / t for B, T, t in samples if t > 0]
    rms = (sum(r * r for r in rel) / len(rel)) ** 0.5 if rel else 0.0
    return a, b, rms, max(rel) if rel else 0.0


def write_calibration(path, entries, device):
    import json
    doc = {"format": "oeapatch-calibration", "version": 1, "device": device, "entries": entries}
    tmp = "%s.tmp%d" % (path, os.getpid())
    with open(tmp, "w", encoding="utf-8") as f:
        json.dump(doc, f, indent=1)
        f.flush()
        os.fsync(f.fileno())
    os.replace(tmp, path)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--lib")
    ap.add_argument("--models", default="qwen3,dsv3")
    ap.add_argument("--reps", type=int, default=15)
    ap.add_argument("--quick", action="store_true", help="n in {1,16,256}, k0 in {3}")
    ap.add_argument("--device", default="cuda", choices=("cuda", "cpu"))
    ap.add_argument("--smoke", action="store_true",
                    help="tiny layers, n in {1,16,64}, k0 in {3}: a pre-flight, not a measure")
    ap.add_argument("--calibrate", metavar="OUT.json",
                    help="fit t = b*T + a*B*k per model layer and write it (oeapatch replay --calibration)")
    a = ap.parse_args()
    global _device
    _device = dev = torch.device(a.device)
    if dev.type == "cuda" and not torch.cuda.is_available():
        print("moe_bench.py: no CUDA device", file=sys.stderr)
        return 2
    lib, path = oea_torch.load_lib(a.lib)
    if dev.type == "cuda" and not lib.oea_has_cuda():
        print("moe_bench.py: %s was built without CUDA" % path, file=sys.stderr)
        return 2
    g = torch.Generator(device=dev).manual_seed(11)
    stats = torch.zeros(8, dtype=torch.int32, device=dev)
    batches = (1, 16, 64) if a.smoke else (1, 16, 256) if a.quick else BATCHES
    k0s = (3,) if a.quick or a.smoke else K0S
    H, I = (64, 32) if a.smoke else (None, None)
    reps = 2 if a.smoke else a.reps
    failed = 0
    entries = []
    for name in a.models.split(","):
        m = MODELS[name]
        samples = []
        moe = MoE(m, dev, H, I)
        h = moe.w13.shape[2]
        print("## %s layer: %d experts, top-%d, hidden %d, expert width %d; kernel: %s%s\n"
              % (m["label"], m["E"], m["K"], h, moe.w2.shape[2], moe.kind,
                 " (SMOKE RUN: tiny layers, times mean nothing)" if a.smoke else ""))
        print("| n | k0 | T before | T after | MoE us (framework ids) | MoE us (OEA ids) | change |")
        print("|---|---|---|---|---|---|---|")
        bias = (torch.rand(m["E"], generator=g, device=dev) * 0.1).float()
        for n in batches:
            logits = torch.randn(n, m["E"], generator=g, device=dev).float()
            x = torch.randn(n, h, generator=g, device=dev).to(torch.bfloat16)
            ids, w = framework_routing(m, logits, bias)
            base = time_us(lambda: moe.fn(x, ids, w), reps)
            t_before = None
            for k0 in k0s:
                i2, w2 = oea_ids(lib, m, logits, bias, ids, w, k0, stats)
                if dev.type == "cuda":
                    torch.cuda.synchronize()
                tb, ta = int(stats[0]), int(stats[1])
                for problem in check_oea_ids(m, logits.cpu(), bias.cpu(), ids.cpu(), i2.cpu(), w2.cpu(),
                                             k0, tb, ta):
                    print("moe_bench.py: FAIL %s n=%d k0=%d: %s" % (name, n, k0, problem),
                          file=sys.stderr)
                    failed = 1
                t = time_us(lambda: moe.fn(x, i2, w2), reps)
                if t_before is None:
                    t_before = tb
                    samples.append((n, tb, base))
                samples.append((n, ta, t))
                print("| %d | %d | %d | %d | %.1f | %.1f | %+.0f%% |"
                      % (n, k0, tb, ta, base, t, 100.0 * (t - base) / base))
                sys.stdout.flush()
        print()
        if a.calibrate:
            k = m["K"]
            ca, cb, rms, worst = fit_calibration(samples, k)
            entries.append({"model": m["label"], "experts": m["E"], "top_k": k, "hidden": h,
                            "expert_width": moe.w2.shape[2], "kernel": moe.kind, "smoke": a.smoke,
                            "a_us": ca, "b_us": cb, "rms_rel_error": rms, "max_rel_error": worst,
                            "samples": [list(x) for x in samples]})
            print("calibration %s: t = %.4f us * T + %.5f us * B*k (RMS error %.1f%%, worst %.1f%%)\n"
                  % (m["label"], cb, ca, 100 * rms, 100 * worst))
        del moe
        if dev.type == "cuda":
            torch.cuda.empty_cache()
    if a.calibrate and not failed:
        device = torch.cuda.get_device_name() if dev.type == "cuda" else "cpu"
        write_calibration(a.calibrate, entries, device)
        print("calibration written to %s" % a.calibrate)
    return failed


if __name__ == "__main__":
    sys.exit(main())
