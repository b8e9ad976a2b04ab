"""One phase of the real-SGLang test, run by the interpreter of one release's
cached environment (tests/sglang/make_env.sh); driven by run_releases.py.

    python release_check.py PHASE OUT_DIR [--oracle-library PATH]

PHASE:
  unpatched  topk.py as the wheel installed it: record select_experts' outputs
  off        patched, SGLANG_OEA_K0=0: the outputs must be the unpatched ones
  on         patched, SGLANG_OEA_K0=3: decode batches equal liboea's reference
             (oea_route_host through this test's own struct, from oea.h) applied
             to the unpatched outputs; extend, mixed, idle-free and target-verify
             batches, and calls outside any forward, are left exactly as they were

Everything runs SGLang's real code on the CPU: sglang.srt.layers.moe.topk
imported by its real module path, its select_experts (the one routing
function of every release), and its ForwardBatch and ForwardMode, set the way
the model runner sets them. No SGLang module is replaced by a stub.
"""

import dataclasses
import inspect
import json
import os
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(os.path.dirname(HERE), "e2e"))

from oea_testlib import HEADER, RESULTS, Oracle, case, check, distinct, summary  # noqa: E402

import torch  # noqa: E402

# Configurations of real models (their config.json's MoE fields).
MODELS = {
    # DeepSeek-V3: 256 routed experts, top-8, 8 groups of which 4, sigmoid with
    # e_score_correction_bias, routed_scaling_factor 2.5, one shared expert
    # (fused into the top-k where the release can).
    "deepseek-v3": dict(E=256, top_k=8, grouped=True, groups=8, topk_group=4,
                        scoring="sigmoid", bias=True, renormalize=True, scale=2.5,
                        fused_shared=1),
    # Qwen3-30B-A3B: 128 experts, top-8, softmax, norm_topk_prob.
    "qwen3-30b-a3b": dict(E=128, top_k=8, grouped=False, groups=0, topk_group=0,
                          scoring="softmax", bias=False, renormalize=True, scale=None,
                          fused_shared=0),
    # GLM-4.5 style: sigmoid with a correction bias, one group.
    "glm-style": dict(E=256, top_k=8, grouped=True, groups=1, topk_group=1,
                      scoring="sigmoid", bias=True, renormalize=True, scale=2.5,
                      fused_shared=0),
}
ROWS = 16  # a decode batch of 16 requests, the paper's operating point
K0 = 3


def run_case(name):
    """Decorator: define a case and run it at once."""
    def deco(fn):
        case(name)(fn)()
        return fn
    return deco


def topk_module():
    import sglang.srt.layers.moe.topk as topk

    return topk


def forward_batch(mode_name, **fields):
    """A real ForwardBatch with the real ForwardMode, as the model runner makes
    one; the fields the routing never reads stay None. `fields` sets others
    (DP attention's), each only if this release's ForwardBatch has it."""
    from sglang.srt.model_executor.forward_batch_info import ForwardBatch, ForwardMode

    kw = {}
    names = set()
    for f in dataclasses.fields(ForwardBatch):
        names.add(f.name)
        if f.default is dataclasses.MISSING and f.default_factory is dataclasses.MISSING:
            kw[f.name] = None
    kw["forward_mode"] = getattr(ForwardMode, mode_name)
    kw["batch_size"] = ROWS
    kw.update({k: v for k, v in fields.items() if k in names})
    return ForwardBatch(**kw)


def dp_fields():
    """The names under which this release records DP attention's per-rank
    token counts and its rank-consistent "some rank extends" flag."""
    from sglang.srt.model_executor.forward_batch_info import ForwardBatch

    names = {f.name for f in dataclasses.fields(ForwardBatch)}
    counts = next((n for n in ("global_num_tokens_cpu", "global_num_tokens") if n in names),
                  None)
    return counts, "is_extend_in_batch" in names


def modes():
    from sglang.srt.model_executor.forward_batch_info import ForwardMode

    return [m for m in ("DECODE", "EXTEND", "MIXED", "TARGET_VERIFY", "DRAFT_EXTEND")
            if hasattr(ForwardMode, m)]


def inputs(name):
    spec = MODELS[name]
    gen = torch.Generator().manual_seed(sum(map(ord, name)))
    logits = torch.randn(ROWS, spec["E"], generator=gen) * 2.0
    bias = (torch.rand(spec["E"], generator=gen) * 0.5) if spec["bias"] else None
    hidden = torch.zeros(ROWS, 64)
    return hidden, logits, bias


def supports_fused_shared(topk):
    sig = inspect.signature(topk.select_experts).parameters
    if "topk_config" in sig:
        return "num_fused_shared_experts" in {f.name for f in
                                              dataclasses.fields(topk.TopKConfig)}
    return "num_fused_shared_experts" in sig


def select_kwargs(topk, name, bias):
    """select_experts' settings for this model, in the signature of the release;
    returns (keyword arguments besides hidden_states and router_logits, fused
    shared-expert columns)."""
    spec = MODELS[name]
    # torch_native: the path SGLang's CPU backend takes (TopK.forward_native); the
    # default fused path calls CUDA kernels.
    settings = dict(top_k=spec["top_k"], use_grouped_topk=spec["grouped"],
                    renormalize=spec["renormalize"], correction_bias=bias,
                    torch_native=True)
    if spec["grouped"]:
        settings.update(topk_group=spec["topk_group"], num_expert_group=spec["groups"])
    fused = spec["fused_shared"] if supports_fused_shared(topk) else 0
    sig = inspect.signature(topk.select_experts).parameters
    if "topk_config" in sig:
        fields = {f.name for f in dataclasses.fields(topk.TopKConfig)}
    else:
        fields = set(sig)
    if "routed_scaling_factor" in fields:
        settings["routed_scaling_factor"] = spec["scale"]
    if fused:
        settings["num_fused_shared_experts"] = fused
        settings["top_k"] = spec["top_k"] + fused
    if "scoring_func" in fields:
        settings["scoring_func"] = spec["scoring"]
    settings = {k: v for k, v in settings.items() if k in fields}
    if "topk_config" in sig:
        return {"topk_config": topk.TopKConfig(**settings)}, fused
    return settings, fused


def call_select_experts(topk, name, hidden, logits, bias):
    kwargs, fused = select_kwargs(topk, name, bias)
    out = topk.select_experts(hidden_states=hidden, router_logits=logits, **kwargs)
    return out[0], out[1], fused


def model_forward(topk, name, forward_batch):
    """Stands where a model's MoE block runs: the frame that holds the batch."""
    hidden, logits, bias = inputs(name)
    return call_select_experts(topk, name, hidden, logits, bias)


def run_all(topk, mode="DECODE", **fields):
    out = {}
    for name in MODELS:
        fb = forward_batch(mode, **fields)
        w, i, fused = model_forward(topk, name, fb)
        out[name] = (w.clone(), i.clone(), fused)
    return out


def same(a, b):
    return a.dtype == b.dtype and a.shape == b.shape and torch.equal(a, b)


def phase_unpatched(out_dir):
    topk = topk_module()
    check("_oeapatch_oea" not in open(topk.__file__).read(), "topk.py is patched already")
    record = {}
    for mode in modes():
        res = run_all(topk, mode)
        record[mode] = {k: (w, i, f) for k, (w, i, f) in res.items()}
    torch.save(record, os.path.join(out_dir, "unpatched.pt"))
    print("PASS unpatched: %s recorded for %s (modes %s)"
          % (", ".join(MODELS), topk.__file__, ", ".join(modes())))
    RESULTS.append(True)


def load_reference(out_dir):
    return torch.load(os.path.join(out_dir, "unpatched.pt"))


def patched_module():
    topk = topk_module()
    check("_oeapatch_oea" in open(topk.__file__).read(), "topk.py is not patched")
    import importlib

    binding = importlib.import_module(topk.__package__ + "._oeapatch_sglang_oea")
    return topk, binding


def phase_off(out_dir):
    ref = load_reference(out_dir)
    topk, binding = patched_module()

    @run_case("K0=0: the binding is off and loaded no library")
    def _():
        check(binding.ENABLED is False and binding._lib is None, "ENABLED %r, lib %r"
              % (binding.ENABLED, binding._lib))

    @run_case("K0=0: outputs of every model and mode equal the unpatched ones")
    def _():
        n = 0
        for mode in modes():
            got = run_all(topk, mode)
            for name, (w, i, _) in got.items():
                rw, ri, _ = ref[mode][name]
                check(same(w, rw) and same(i, ri), "%s/%s differs" % (mode, name))
                n += 1
        return "%d outputs bitwise equal" % n


def oracle_expectation(oracle, name, ref, bias):
    spec = MODELS[name]
    w, i, fused = ref
    _, logits, _ = inputs(name)
    return oracle.route(logits, i, w, k0=K0, num_shared=fused, scoring=spec["scoring"],
                        renormalize=spec["renormalize"],
                        groups=spec["groups"] if spec["groups"] > 1 else 0,
                        topk_group=spec["topk_group"] if spec["groups"] > 1 else 0,
                        bias=bias)


def phase_on(out_dir, oracle_library):
    ref = load_reference(out_dir)
    topk, binding = patched_module()
    with open(HEADER, "r", encoding="utf-8") as f:
        oracle = Oracle(oracle_library, f.read())

    @run_case("K0=3: the binding is on, strict, with decode detection from the forward batch")
    def _():
        check(binding.ENABLED and binding._lib is not None, "not enabled")
        check(binding.STRICT is True, "strict is not the default")
        return binding.DECODE_DETECTION

    @run_case("K0=3, DECODE: every model equals liboea's reference on the unpatched outputs")
    def _():
        got = run_all(topk, "DECODE")
        details = []
        for name, (w, i, fused) in got.items():
            rw, ri, _ = ref["DECODE"][name]
            _, _, bias = inputs(name)
            ew, ei, st = oracle_expectation(oracle, name, ref["DECODE"][name], bias)
            check(same(i.to(ei.dtype), ei), "%s: ids differ from the reference" % name)
            check(torch.equal(w.float(), ew), "%s: weights differ from the reference "
                  "(max |d| %g)" % (name, (w.float() - ew).abs().max()))
            check(not torch.equal(i, ri), "%s: nothing was re-routed" % name)
            routed = i.shape[1] - fused
            details.append("%s T %d->%d" % (name, distinct(ri, ROWS, routed),
                                            distinct(i, ROWS, routed)))
        return ", ".join(details)

    for mode in [m for m in modes() if m != "DECODE"]:
        @run_case("K0=3, %s: never re-routed (bitwise the unpatched outputs)" % mode)
        def _(mode=mode):
            got = run_all(topk, mode)
            for name, (w, i, _) in got.items():
                rw, ri, _ = ref[mode][name]
                check(same(w, rw) and same(i, ri), "%s re-routed in %s" % (name, mode))

    def expect_rerouted(got, what):
        for name, (w, i, fused) in got.items():
            _, _, bias = inputs(name)
            ew, ei, _ = oracle_expectation(oracle, name, ref["DECODE"][name], bias)
            check(same(i.to(ei.dtype), ei) and torch.equal(w.float(), ew),
                  "%s: %s differs from liboea's reference" % (name, what))

    def expect_unchanged(got, what):
        for name, (w, i, _) in got.items():
            rw, ri, _ = ref["DECODE"][name]
            check(same(w, rw) and same(i, ri), "%s re-routed %s" % (name, what))

    counts_field, has_flag = dp_fields()
    # DP attention: the MoE layer routes the tokens gathered from every DP rank,
    # so all ranks must decide alike (docs/runtime.md). Two ranks, 16 tokens in all.
    if counts_field is not None and has_flag:
        @run_case("K0=3, DP attention, every rank decodes: re-routed like a decode batch")
        def _():
            expect_rerouted(run_all(topk, "DECODE", **{counts_field: [8, 8],
                                                      "is_extend_in_batch": False}),
                            "a decode rank's batch")

        if "IDLE" in dir(__import__("sglang.srt.model_executor.forward_batch_info",
                                    fromlist=["ForwardMode"]).ForwardMode):
            @run_case("K0=3, DP attention, an idle rank beside decoding ones routes their "
                      "tokens as they do")
            def _():
                expect_rerouted(run_all(topk, "IDLE", **{counts_field: [0, 16],
                                                        "is_extend_in_batch": False}),
                                "an idle rank's gathered batch")

        @run_case("K0=3, DP attention, a decoding rank while a peer extends: left alone")
        def _():
            expect_unchanged(run_all(topk, "DECODE", **{counts_field: [8, 40],
                                                       "is_extend_in_batch": True}),
                             "while a DP peer extends")
    elif counts_field is not None:
        @run_case("K0=3, DP attention in a release without is_extend_in_batch: left alone")
        def _():
            expect_unchanged(run_all(topk, "DECODE", **{counts_field: [8, 8]}),
                             "under DP attention without a rank-consistent mode")
            return "%s recorded, no is_extend_in_batch" % counts_field

    @run_case("K0=3, a call outside any forward batch is left alone")
    def _():
        for name in MODELS:
            hidden, logits, bias = inputs(name)
            w, i, _ = call_select_experts(topk, name, hidden, logits, bias)
            rw, ri, _ = ref["DECODE"][name]
            check(same(w, rw) and same(i, ri), "%s re-routed without a forward batch" % name)

    @run_case("K0=3, stats: device sums and skip counts")
    def _():
        if not binding.STATS:
            return "SGLANG_OEA_STATS off in this run"
        binding.reset_stats()
        run_all(topk, "DECODE")
        run_all(topk, "EXTEND")
        st = binding.stats("cpu")
        counts = binding.host_counts()
        check(st["calls"] == len(MODELS), "calls %s" % st)
        check(counts["skipped"]["extend"] == ROWS * len(MODELS), "skips %s" % counts)
        check(st["t_after"] < st["t_before"], "T did not drop: %s" % st)
        line = binding.stats_line()
        check("mean T" in line and "extend=%d" % (ROWS * len(MODELS)) in line, line)
        return line

    @run_case("K0=3, torch.compile(fullgraph=True) through the custom op and its fake")
    def _():
        if not hasattr(torch.library, "custom_op"):
            return "torch %s has no torch.library.custom_op" % torch.__version__
        name = "qwen3-30b-a3b"
        hidden, logits, bias = inputs(name)

        kwargs, _ = select_kwargs(topk, name, bias)  # one layer: one config object

        def step(hidden, logits):
            out = topk.select_experts(hidden_states=hidden, router_logits=logits, **kwargs)
            return out[0], out[1]

        # The layer's plan is prepared by an eager call first, as SGLang's warm-up
        # runs do before its compiled decode graphs (docs/runtime.md).
        (lambda forward_batch: step(hidden, logits.clone()))(forward_batch("EXTEND"))

        compiled = torch.compile(step, fullgraph=True, backend="aot_eager")

        def model_forward_compiled(forward_batch):
            return compiled(hidden, logits.clone())

        ew, ei, _ = oracle_expectation(oracle, name, ref["DECODE"][name], bias)
        rw, ri, _ = ref["EXTEND"][name]
        # One compiled graph for every mode, in both orders: the decision is
        # the op's, taken each time the graph runs, never traced into it.
        for mode in ("DECODE", "EXTEND", "DECODE", "EXTEND"):
            w, i = model_forward_compiled(forward_batch(mode))
            if mode == "DECODE":
                check(same(i.to(ei.dtype), ei) and torch.equal(w.float(), ew),
                      "compiled decode differs from the reference")
            else:
                check(same(w, rw) and same(i, ri), "compiled extend re-routed (after a "
                      "compiled decode)")
        torch._dynamo.reset()
        compiled = torch.compile(step, fullgraph=True, backend="aot_eager")
        w, i = model_forward_compiled(forward_batch("EXTEND"))
        check(same(w, rw) and same(i, ri), "compiled extend re-routed")
        w, i = model_forward_compiled(forward_batch("DECODE"))
        check(same(i.to(ei.dtype), ei) and torch.equal(w.float(), ew),
              "compiled decode, first traced under extend, differs from the reference")
        return "torch %s" % torch.__version__


def phase_bench(out_dir, oracle_library, iterations=2000):
    """Host overhead of the binding per call in eager mode, beside the routing time.

    routing   select_experts as the release runs it (an EXTEND batch: routed, and
              the binding's gate says no)
    route()   the binding's route() on that routing output in a DECODE batch
    native    liboea alone: the prepared call with the same pointers
    overhead  route() - native: what the binding adds on the host
    """
    import timeit

    topk, binding = patched_module()
    name = "qwen3-30b-a3b"
    hidden, logits, bias = inputs(name)
    w0, i0, _ = call_select_experts(topk, name, hidden, logits, bias)
    cfg_kwargs = dict(top_k=MODELS[name]["top_k"], renormalize=True)

    def routing(forward_batch):
        for _ in range(iterations):
            call_select_experts(topk, name, hidden, logits, bias)

    def routed(forward_batch):
        for _ in range(iterations):
            binding.route(router_logits=logits, topk_weights=w, topk_ids=i, **cfg_kwargs)

    w, i = w0.clone(), i0.clone()
    routed(forward_batch("DECODE"))  # prepares the plan
    plan = next(p for p in binding._plans.values() if p.problem is not None)
    fn, address = plan.launch

    def native():
        for _ in range(iterations):
            fn(address)

    best = {}
    for label, thunk in (("routing", lambda: routing(forward_batch("EXTEND"))),
                         ("route()", lambda: routed(forward_batch("DECODE"))),
                         ("native", native)):
        best[label] = min(timeit.repeat(thunk, number=1, repeat=5)) / iterations * 1e6
    overhead = best["route()"] - best["native"]
    print("BENCH sglang %s, %s, %d rows, torch %s: routing %.1f us/call, route() %.1f "
          "us/call, liboea %.1f us/call, host overhead %.1f us/call"
          % (__import__("sglang").__version__, name, ROWS, torch.__version__,
             best["routing"], best["route()"], best["native"], overhead))
    RESULTS.append(True)


def main():
    phase, out_dir = sys.argv[1], sys.argv[2]
    if phase == "unpatched":
        phase_unpatched(out_dir)
    elif phase == "off":
        phase_off(out_dir)
    elif phase == "on":
        phase_on(out_dir, sys.argv[3])
    elif phase == "bench":
        phase_bench(out_dir, sys.argv[3])
    else:
        raise SystemExit("unknown phase %s" % phase)
    return summary()


if __name__ == "__main__":
    sys.exit(main())
