#!/usr/bin/env python3
"""OEA routing written in vectorised torch ops, and a comparison with liboea.

The same algorithm as liboea (docs/native-abi.md), as a framework would write
it without a custom kernel: sorts, gathers and scatters, no Python loop over
rows and no host synchronisation (num_valid_rows stays a device tensor).

    oea_torch.py --check [--lib PATH] [--cases N] [--device cpu|cuda]
        random cases, torch result against liboea's host path via ctypes:
        ids must match exactly, weights within 1e-5 relative (torch's softmax
        and sums are not liboea's bit-exact ones). Logits are multiples of
        1/8 so that ties are exact and no near-tie can flip an order.
    oea_torch.py --bench [--lib PATH] [--device cuda|cpu] [--launches L]
        time per call at n in {1..256}, E in {64,128,256}, K=8, k0=4: the
        torch version, torch's own top-k routing (softmax, topk, renormalise:
        a yardstick) and liboea (oea_route_cuda on a GPU through ctypes,
        oea_route_host on the CPU); on a GPU all inside CUDA graphs, timed
        with CUDA events over replays. Goal: liboea >= 20x the torch OEA.
    oea_torch.py --bench-cpu [--lib PATH] [--threads T] [--reps N]
        the CPU goal grid of issue 16: B in {1,16,128,256} x E in {128,256},
        K=8, k0=4, softmax, torch on T threads (default 1). Each repetition
        times torch OEA and oea_route_host back to back (A B A B, one run),
        printing min and median of each, the ratio of the medians (and of
        the minima) and PASS/MISS against the 20x goal. liboea's time is one
        ctypes call (the call overhead a Python caller pays is included).

Exit status: 0 done, 1 the check found a difference, 2 usage or trouble.
"""
import argparse
import ctypes
import glob
import os
import sys
import time

try:
    import torch
except ImportError:  # the GPU script skips the torch comparison then
    print("oea_torch.py: torch is not installed", file=sys.stderr)
    sys.exit(2)

# ---- the torch implementation --------------------------------------------


def _order(keys, extra_last=None):
    """Permutation putting columns in OEA order: valid before extra_last,
    numbers before NaN, higher key first, equal keys by column position
    (callers arrange columns by expert index first). Stable sorts, applied
    from the least to the most significant criterion."""
    k = torch.where(torch.isnan(keys), torch.full_like(keys, float("-inf")), keys)
    perm = torch.sort(k, dim=1, descending=True, stable=True).indices
    nan = torch.isnan(keys).gather(1, perm).to(torch.int8)
    perm = perm.gather(1, torch.sort(nan, dim=1, stable=True).indices)
    if extra_last is not None:
        last = extra_last.gather(1, perm).to(torch.int8)
        perm = perm.gather(1, torch.sort(last, dim=1, stable=True).indices)
    return perm


def oea_route_torch(logits, ids, weights, k0, num_shared=0, scoring="softmax", bias=None,
                    num_expert_group=0, renormalize=True, num_valid_rows=None):
    """Returns new (ids, weights); the inputs are not modified."""
    n, E = logits.shape
    K = ids.shape[1]
    R = K - num_shared
    if k0 >= R or n == 0:
        return ids.clone(), weights.clone()
    dev = logits.device
    lf = logits.float()
    scores = torch.softmax(lf, dim=1) if scoring == "softmax" else torch.sigmoid(lf)
    # Spec 2 (docs/oea-semantics.md): softmax without a bias ranks by the logit.
    if bias is not None:
        keys = scores + bias.float()[None, :]
    else:
        keys = lf if scoring == "softmax" else scores

    routed = ids[:, :R].long()
    srt = torch.sort(routed, dim=1).values
    valid = (routed >= 0).all(1) & (routed < E).all(1)
    if R > 1:
        valid &= ~(srt[:, 1:] == srt[:, :-1]).any(1)
    if num_valid_rows is not None:
        valid &= torch.arange(n, device=dev) < num_valid_rows.to(dev).reshape(())
    safe = torch.where(valid[:, None], routed, torch.zeros_like(routed))
    safe_srt = torch.where(valid[:, None], srt, torch.zeros_like(srt))

    # Phase 1: the k0 best of the routed ids (columns arranged by expert index).
    p1 = safe_srt.gather(1, _order(keys.gather(1, safe_srt))[:, :k0])  # [n, k0]
    inp = torch.zeros(n, E, dtype=torch.bool, device=dev).scatter_(1, p1, True)
    U = (inp & valid[:, None]).any(0)

    # Phase 2: candidates in U \ P_i, in the row's groups, best R - k0.
    cand = U[None, :] & ~inp
    if num_expert_group:
        gs = E // num_expert_group
        g = torch.zeros(n, num_expert_group, dtype=torch.bool, device=dev)
        g.scatter_(1, safe // gs, True)
        cand &= g.repeat_interleave(gs, dim=1)
    perm = _order(keys, ~cand)[:, : R - k0]
    chosen_ok = cand.gather(1, perm)

    sel = torch.cat([p1, perm], 1)
    ok = torch.cat([torch.ones_like(p1, dtype=torch.bool), chosen_ok], 1)
    # Output order among the selected: by index, then key order, fillers last.
    by_id = torch.where(ok, sel, torch.full_like(sel, E))
    o = torch.sort(by_id, dim=1, stable=True).indices
    sel, ok = sel.gather(1, o), ok.gather(1, o)
    o = _order(keys.gather(1, sel), ~ok)
    sel, ok = sel.gather(1, o), ok.gather(1, o)

    sc = torch.where(ok, scores.gather(1, sel), torch.zeros_like(sel, dtype=torch.float32))
    w_orig = weights[:, :R].float()
    if renormalize:
        num = w_orig.sum(1)
        den = sc.sum(1)
    else:
        best = p1[:, :1]
        col = (safe == best).float().argmax(1, keepdim=True)
        num = w_orig.gather(1, col)[:, 0]
        den = scores.gather(1, best)[:, 0]
    bad = (den == 0) | ~torch.isfinite(den)
    f = torch.where(bad, torch.ones_like(den), num / torch.where(bad, torch.ones_like(den), den))
    new_w = torch.where(ok, sc * f[:, None], torch.zeros_like(sc))
    # Fillers (spec 3, rule 5): distinct experts not in the row, first those
    # of U, then those outside U, each by index. The slots without a
    # candidate are the row's last R - cnt; filler t goes to slot cnt + t.
    # (Slots without a candidate scatter into a spare column E.)
    in_row = torch.zeros(n, E + 1, dtype=torch.bool, device=dev).scatter_(
        1, torch.where(ok, sel, torch.full_like(sel, E)), True)[:, :E]
    e_idx = torch.arange(E, device=dev)
    tier = torch.where(U, e_idx, e_idx + E)[None, :].expand(n, E)
    tier = torch.where(in_row, torch.full_like(tier, 2 * E), tier)
    fill = torch.sort(tier, dim=1).indices[:, :R]
    if fill.shape[1] < R:  # E < R: no row is processed, the fillers are unused
        fill = torch.cat([fill, fill.new_zeros(n, R - fill.shape[1])], 1)
    cnt = ok.sum(1, keepdim=True)
    t = (torch.arange(R, device=dev)[None, :] - cnt).clamp(min=0)
    new_ids = torch.where(ok, sel, fill.gather(1, t))

    out_ids, out_w = ids.clone(), weights.clone()
    out_ids[:, :R] = torch.where(valid[:, None], new_ids.to(ids.dtype), ids[:, :R])
    out_w[:, :R] = torch.where(valid[:, None], new_w.to(weights.dtype), weights[:, :R])
    return out_ids, out_w


# ---- liboea through ctypes -------------------------------------------------


class OeaStats(ctypes.Structure):
    _fields_ = [("t_before", ctypes.c_uint32), ("t_after", ctypes.c_uint32),
                ("valid_rows", ctypes.c_uint32), ("invalid_rows", ctypes.c_uint32),
                ("nonfinite_rows", ctypes.c_uint32), ("gated", ctypes.c_uint32),
                ("reserved", ctypes.c_uint32 * 2)]


class OeaProblem(ctypes.Structure):
    _fields_ = [("struct_size", ctypes.c_uint32), ("flags", ctypes.c_uint32),
                ("n", ctypes.c_int32), ("num_experts", ctypes.c_int32),
                ("top_k", ctypes.c_int32), ("num_shared", ctypes.c_int32),
                ("k0", ctypes.c_int32), ("scoring", ctypes.c_int32),
                ("renormalize", ctypes.c_int32), ("num_expert_group", ctypes.c_int32),
                ("topk_group", ctypes.c_int32), ("logits_dtype", ctypes.c_int32),
                ("logits_row_stride", ctypes.c_int64), ("logits", ctypes.c_void_p),
                ("correction_bias", ctypes.c_void_p), ("ids_dtype", ctypes.c_int32),
                ("weights_dtype", ctypes.c_int32), ("ids_row_stride", ctypes.c_int64),
                ("weights_row_stride", ctypes.c_int64), ("ids", ctypes.c_void_p),
                ("weights", ctypes.c_void_p), ("num_valid_rows", ctypes.c_void_p),
                ("stats", ctypes.c_void_p), ("min_valid_rows", ctypes.c_int32),
                ("reserved_abi2", ctypes.c_int32), ("totals", ctypes.c_void_p)]


class OeaTotals(ctypes.Structure):
    """oea_totals (ABI 3): running sums a call adds to (spec rule 10)."""
    _fields_ = [(name, ctypes.c_uint64) for name in (
        "calls", "gated", "t_before", "t_after", "valid_rows", "invalid_rows", "nonfinite_rows",
        "rerouted_rows", "changed_slots", "kept_fx", "kept_undefined")] + [
        ("kept_hist", ctypes.c_uint64 * 16)]


ABI_VERSION = 3


DTYPES = {torch.float32: 0, torch.bfloat16: 1, torch.float16: 2, torch.int32: 3, torch.int64: 4}


def load_lib(path=None, abi=ABI_VERSION):
    here = os.path.dirname(os.path.abspath(__file__))
    cands = [path] if path else ([os.environ["OEA_LIB"]] if os.environ.get("OEA_LIB") else [])
    cands += sorted(glob.glob(os.path.join(here, "..", "..", "build*", "**", "liboea.so"),
                              recursive=True))
    cands.append("liboea.so")
    for c in cands:
        try:
            lib = ctypes.CDLL(c)
        except OSError:
            continue
        lib.oea_abi_version.restype = ctypes.c_int
        if lib.oea_abi_version() != abi:
            continue
        lib.oea_route_host.argtypes = [ctypes.POINTER(OeaProblem)]
        lib.oea_route_cuda.argtypes = [ctypes.POINTER(OeaProblem), ctypes.c_void_p]
        lib.oea_status_message.restype = ctypes.c_char_p
        lib.oea_has_cuda.restype = ctypes.c_int
        return lib, c
    print("oea_torch.py: liboea.so not found (give --lib or OEA_LIB)", file=sys.stderr)
    sys.exit(2)


def make_problem(logits, ids, weights, k0, num_shared=0, scoring="softmax", bias=None,
                 num_expert_group=0, renormalize=True, num_valid_rows=None, stats=None,
                 totals=None):
    p = OeaProblem()
    p.struct_size = ctypes.sizeof(OeaProblem)
    p.n, p.num_experts = logits.shape
    p.top_k, p.num_shared, p.k0 = ids.shape[1], num_shared, k0
    p.scoring = 0 if scoring == "softmax" else 1
    p.renormalize = int(renormalize)
    p.num_expert_group = num_expert_group
    p.topk_group = 1 if num_expert_group else 0
    p.logits_dtype = DTYPES[logits.dtype]
    p.logits_row_stride = logits.stride(0)
    p.logits = logits.data_ptr()
    p.correction_bias = bias.data_ptr() if bias is not None else None
    p.ids_dtype = DTYPES[ids.dtype]
    p.weights_dtype = 0
    p.ids_row_stride, p.weights_row_stride = ids.stride(0), weights.stride(0)
    p.ids, p.weights = ids.data_ptr(), weights.data_ptr()
    p.num_valid_rows = num_valid_rows.data_ptr() if num_valid_rows is not None else None
    p.stats = ctypes.addressof(stats) if isinstance(stats, OeaStats) else stats
    p.totals = ctypes.addressof(totals) if isinstance(totals, OeaTotals) else totals
    return p


# ---- --check ----------------------------------------------------------------


def random_case(g, device):
    E = int(torch.randint(1, 513, (1,), generator=g))
    K = int(torch.randint(1, 17, (1,), generator=g))
    S = 0 if torch.rand(1, generator=g) < 0.6 else int(torch.randint(0, K, (1,), generator=g))
    K = min(K, S + E)
    R = K - S
    n = int(torch.randint(1, 65, (1,), generator=g))
    k0 = int(torch.randint(1, R + 1, (1,), generator=g))
    dtype = [torch.float32, torch.bfloat16, torch.float16][int(torch.randint(0, 3, (1,), generator=g))]
    logits = torch.randint(-32, 33, (n, E), generator=g).float() / 8
    if torch.rand(1, generator=g) < 0.2:
        logits[torch.rand(n, E, generator=g) < 0.02] = float("nan")
    ids = torch.stack([torch.randperm(E, generator=g)[:K] for _ in range(n)])
    pad = torch.rand(n, generator=g) < 0.1
    ids[pad, 0] = -1
    ids_dtype = torch.int32 if torch.rand(1, generator=g) < 0.5 else torch.int64
    weights = torch.rand(n, K, generator=g)
    bias = None
    if torch.rand(1, generator=g) < 0.4:
        bias = torch.randint(-2, 3, (E,), generator=g).float() / 4
    groups = 0
    if torch.rand(1, generator=g) < 0.3:
        divs = [d for d in range(1, E + 1) if E % d == 0]
        groups = divs[int(torch.randint(0, len(divs), (1,), generator=g))]
    nvr = None
    if torch.rand(1, generator=g) < 0.5:
        nvr = torch.randint(0, n + 1, (1,), generator=g).to(torch.int32)
    kw = dict(k0=k0, num_shared=S, scoring="softmax" if torch.rand(1, generator=g) < 0.5 else "sigmoid",
              bias=bias, num_expert_group=groups, renormalize=bool(torch.rand(1, generator=g) < 0.5))
    return (logits.to(dtype), ids.to(ids_dtype), weights, nvr, kw)


def check(lib, cases, device):
    g = torch.Generator().manual_seed(1234)
    bad = 0
    for c in range(cases):
        logits, ids, weights, nvr, kw = random_case(g, device)
        ref_ids, ref_w = ids.clone(), weights.clone()
        p = make_problem(logits, ref_ids, ref_w, num_valid_rows=nvr, **kw)
        rc = lib.oea_route_host(ctypes.byref(p))
        if rc:
            print("case %d: liboea: %s" % (c, lib.oea_status_message(rc).decode()))
            return 1
        dv = lambda t: None if t is None else t.to(device)
        t_ids, t_w = oea_route_torch(dv(logits), dv(ids), dv(weights), num_valid_rows=dv(nvr),
                                     **{k: dv(v) if isinstance(v, torch.Tensor) else v
                                        for k, v in kw.items()})
        t_ids, t_w = t_ids.cpu(), t_w.cpu()
        ok = torch.equal(t_ids, ref_ids) and torch.allclose(t_w, ref_w, rtol=1e-5, atol=1e-7,
                                                            equal_nan=True)
        if not ok:
            bad += 1
            rows = (t_ids != ref_ids).any(1) | ~torch.isclose(t_w, ref_w, rtol=1e-5, atol=1e-7,
                                                              equal_nan=True).all(1)
            r = int(rows.nonzero()[0])
            print("case %d MISMATCH n=%d E=%d K=%d %s dtype=%s; row %d: torch %s %s, liboea %s %s"
                  % (c, logits.shape[0], logits.shape[1], ids.shape[1], kw, logits.dtype, r,
                     t_ids[r].tolist(), t_w[r].tolist(), ref_ids[r].tolist(), ref_w[r].tolist()))
            if bad >= 5:
                break
    print("oea_torch.py --check: %d cases on %s: %s" % (c + 1, device,
          "all match liboea's host path" if not bad else "%d MISMATCHES" % bad))
    return 1 if bad else 0


# ---- --bench ----------------------------------------------------------------


def topk_route_torch(logits, K):
    """torch's own top-k routing (softmax, top-k, renormalise): the yardstick
    of what routing costs a framework without a custom kernel."""
    w, ids = torch.softmax(logits.float(), dim=1).topk(K, dim=1)
    return ids.to(torch.int32), w / w.sum(1, keepdim=True)


def bench(lib, device, launches, reps):
    K, k0 = 8, 4
    cuda = device == "cuda"
    if cuda and not lib.oea_has_cuda():
        print("oea_torch.py: liboea was built without CUDA", file=sys.stderr)
        return 2
    print("## torch (vectorised) OEA and torch top-k vs liboea on %s, K=%d, k0=%d, softmax, "
          "us per call%s\n" % (torch.cuda.get_device_name() if cuda else "CPU", K, k0,
                               " in CUDA graphs" if cuda else ""))
    print("| E | n | torch OEA us | torch top-k us | liboea us | torch OEA / liboea | goal >= 20x |")
    print("|---|---|---|---|---|---|---|")
    g = torch.Generator().manual_seed(7)
    worst = None
    for E in (64, 128, 256):
        for n in (1, 4, 8, 16, 32, 64, 128, 256):
            logits = torch.randn(n, E, generator=g)
            ids = logits.topk(K, dim=1).indices.to(torch.int32)
            weights = torch.full((n, K), 1.0 / K)
            logits, ids, weights = logits.to(device), ids.to(device), weights.to(device)
            if cuda:
                t_torch, t_lib, t_topk = bench_cuda(lib, logits, ids, weights, k0, launches, reps)
            else:
                t_torch, t_lib, t_topk = bench_cpu(lib, logits, ids, weights, k0, reps)
            ratio = t_torch / t_lib
            worst = ratio if worst is None else min(worst, ratio)
            print("| %d | %d | %.2f | %.2f | %.2f | %.1f | %s |" % (
                E, n, t_torch, t_topk, t_lib, ratio, "PASS" if ratio >= 20 else "FAIL"))
            sys.stdout.flush()
    print("\noea_torch.py --bench: liboea vs vectorised torch OEA: %s (smallest ratio %.1fx, goal 20x)"
          % ("PASS" if worst >= 20 else "FAIL", worst))
    return 0


def bench_cpu_goal(lib, reps, threads, before=None):
    """The issue-16 grid: torch OEA vs oea_route_host on the CPU, side by side.
    liboea runs with totals (the kept weight included: what the binding pays).
    With `before` (an ABI 2 liboea, which has no totals), it is timed in the
    same loop (A B C per repetition) and its median is printed beside."""
    K, k0, goal = 8, 4, 20.0
    torch.set_num_threads(threads)
    print("## liboea oea_route_host vs vectorised torch OEA, CPU, torch %s on %d thread(s), "
          "K=%d, k0=%d, fp32 softmax, %d reps (A B A B), us per call\n"
          % (torch.__version__, torch.get_num_threads(), K, k0, reps))
    extra = " before median | after / before |" if before else ""
    print("| E | B | torch min | torch median | liboea min | liboea median "
          "| ratio (medians) | ratio (minima) | goal >= %gx |%s" % (goal, extra))
    print("|---|---|---|---|---|---|---|---|---|%s" % ("---|---|" if before else ""))
    totals = OeaTotals()
    g = torch.Generator().manual_seed(7)
    misses = 0
    for E in (128, 256):
        for n in (1, 16, 128, 256):
            logits = torch.randn(n, E, generator=g)
            ids = logits.topk(K, dim=1).indices.to(torch.int32)
            weights = torch.full((n, K), 1.0 / K)
            # The same inputs give the same ids on both sides (a sanity check
            # that the timed calls do the work; --check is the real one).
            t_ids, _ = oea_route_torch(logits, ids, weights, k0)
            i2, w2 = ids.clone(), weights.clone()
            lib.oea_route_host(ctypes.byref(make_problem(logits, i2, w2, k0)))
            if not torch.equal(t_ids, i2):
                print("oea_torch.py: torch and liboea disagree at E=%d B=%d" % (E, n),
                      file=sys.stderr)
                return 1
            ts, tl, tb = [], [], []
            copies = [(ids.clone(), weights.clone()) for _ in range(reps)]
            probs = [make_problem(logits, a, b, k0, totals=totals) for a, b in copies]
            copies_b = [(ids.clone(), weights.clone()) for _ in range(reps)]
            probs_b = [make_problem(logits, a, b, k0) for a, b in copies_b]
            for r in range(reps + 2):
                t0 = time.perf_counter()
                oea_route_torch(logits, ids, weights, k0)
                t1 = time.perf_counter()
                # Before and after swap places every repetition: the first
                # call after torch finds colder caches.
                if before and r % 2:
                    before.oea_route_host(ctypes.byref(probs_b[r % reps]))
                t2 = time.perf_counter()
                lib.oea_route_host(ctypes.byref(probs[r % reps]))
                t3 = time.perf_counter()
                if before and not r % 2:
                    before.oea_route_host(ctypes.byref(probs_b[r % reps]))
                t4 = time.perf_counter()
                if r >= 2:  # the first two warm caches and allocators
                    ts.append(t1 - t0)
                    tl.append(t3 - t2)
                    tb.append(t4 - t3 if r % 2 == 0 else t2 - t1)
            rm = _median(ts) / _median(tl)
            rn = min(ts) / min(tl)
            ok = rm >= goal
            misses += not ok
            print("| %d | %d | %.1f | %.1f | %.2f | %.2f | %.1f | %.1f | %s |%s" % (
                E, n, min(ts) * 1e6, _median(ts) * 1e6, min(tl) * 1e6, _median(tl) * 1e6,
                rm, rn, "PASS" if ok else "MISS",
                " %.2f | %.3f |" % (_median(tb) * 1e6, _median(tl) / _median(tb))
                if before else ""))
            sys.stdout.flush()
    print("\noea_torch.py --bench-cpu: %s (goal: liboea >= %gx torch OEA, ratio of medians, "
          "in every cell)" % ("PASS" if not misses else "MISS in %d of 8 cells" % misses, goal))
    return 0


def _median(xs):
    xs = sorted(xs)
    return xs[len(xs) // 2]


def bench_cpu(lib, logits, ids, weights, k0, reps):
    ts, tl, tk = [], [], []
    for _ in range(reps):
        t0 = time.perf_counter()
        oea_route_torch(logits, ids, weights, k0)
        ts.append(time.perf_counter() - t0)
        t0 = time.perf_counter()
        topk_route_torch(logits, ids.shape[1])
        tk.append(time.perf_counter() - t0)
        i2, w2 = ids.clone(), weights.clone()
        p = make_problem(logits, i2, w2, k0)
        t0 = time.perf_counter()
        lib.oea_route_host(ctypes.byref(p))
        tl.append(time.perf_counter() - t0)
    return _median(ts) * 1e6, _median(tl) * 1e6, _median(tk) * 1e6


def bench_cuda(lib, logits, ids, weights, k0, launches, reps):
    stream = torch.cuda.Stream()
    # torch: a graph of `launches` functional calls.
    with torch.cuda.stream(stream):
        for _ in range(3):
            oea_route_torch(logits, ids, weights, k0)  # warm-up outside capture
    torch.cuda.synchronize()
    gt = torch.cuda.CUDAGraph()
    with torch.cuda.graph(gt, stream=stream):
        for _ in range(launches):
            oea_route_torch(logits, ids, weights, k0)
    with torch.cuda.stream(stream):
        topk_route_torch(logits, ids.shape[1])
    torch.cuda.synchronize()
    gk = torch.cuda.CUDAGraph()
    with torch.cuda.graph(gk, stream=stream):
        for _ in range(launches):
            topk_route_torch(logits, ids.shape[1])
    # liboea: one copy of ids/weights per launch, restored between replays.
    ids0 = ids.repeat(launches, 1, 1)
    w0 = weights.repeat(launches, 1, 1)
    ids_c, w_c = ids0.clone(), w0.clone()
    gl = torch.cuda.CUDAGraph()
    with torch.cuda.graph(gl, stream=stream):
        cs = torch.cuda.current_stream().cuda_stream  # read at call time
        for l in range(launches):
            p = make_problem(logits, ids_c[l], w_c[l], k0)
            rc = lib.oea_route_cuda(ctypes.byref(p), ctypes.c_void_p(cs))
            if rc:
                raise RuntimeError(lib.oea_status_message(rc).decode())

    def timed(graph, restore):
        out = []
        for r in range(reps + 2):
            if restore:
                ids_c.copy_(ids0)
                w_c.copy_(w0)
            a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            a.record()
            graph.replay()
            b.record()
            b.synchronize()
            if r >= 2:
                out.append(a.elapsed_time(b) * 1e3 / launches)
        return _median(out)

    return timed(gt, False), timed(gl, True), timed(gk, False)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--check", action="store_true")
    ap.add_argument("--bench", action="store_true")
    ap.add_argument("--bench-cpu", action="store_true")
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--lib")
    ap.add_argument("--lib-before", help="--bench-cpu: an ABI 2 liboea timed beside --lib")
    ap.add_argument("--cases", type=int, default=300)
    ap.add_argument("--device", default=None)
    ap.add_argument("--launches", type=int, default=20)
    ap.add_argument("--reps", type=int, default=11)
    a = ap.parse_args()
    if not (a.check or a.bench or a.bench_cpu):
        ap.print_usage(sys.stderr)
        return 2
    lib, path = load_lib(a.lib)
    print("liboea: %s" % path, file=sys.stderr)
    device = a.device or ("cuda" if torch.cuda.is_available() else "cpu")
    rc = 0
    if a.check:
        rc |= check(lib, a.cases, device)
    if a.bench:
        rc |= bench(lib, device, a.launches, a.reps)
    if a.bench_cpu:
        before = load_lib(a.lib_before, abi=2)[0] if a.lib_before else None
        rc |= bench_cpu_goal(lib, a.reps, a.threads, before)
    return rc


if __name__ == "__main__":
    sys.exit(main())
