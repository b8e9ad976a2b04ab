"""One phase of the real-SGLang test, run by the interpreter of one release's
cached environment (tests/sglang/make_env.sh); driven by run_releases.py.

    python release_check.py PHASE OUT_DIR [--oracle-library PATH]

PHASE:
  unpatched  topk.py as the wheel installed it: record select_experts' outputs
  off        patched, SGLANG_OEA_K0=0: the outputs must be the unpatched ones
  shadow     patched, K0=3, SGLANG_OEA_MODE=shadow: the outputs must be the
             unpatched ones, liboea's sums over a decode pass phase on's
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

from oea_testlib import (HEADER, RESULTS, Oracle, case, check, distinct,  # noqa: E402
                         keep_sums, same_sums, summary)

import torch  # noqa: E402

import paths_check  # noqa: E402  (tests/sglang: the paths of 0.5.23 on, issue 24)

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


def _bind_paths():
    paths_check.bind(MODELS, forward_batch)


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


# Shared-expert replicas a server of the n_share_experts_fusion era runs with
# (its TP size by default): 1 unless a case says otherwise.
REPLICAS = [1]


def server_fusion_args(topk):
    """The server-wide settings dict where releases of about Apr - Jun 2025 keep the
    fused shared-expert count (n_share_experts_fusion, read inside select_experts
    from global_server_args_dict, which the model runner fills from ServerArgs);
    None in the other releases."""
    args = getattr(topk, "global_server_args_dict", None)
    if isinstance(args, dict) and "n_share_experts_fusion" in args:
        return args
    return None


def supports_fused_shared(topk):
    if server_fusion_args(topk) is not None:
        return True
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
    server = server_fusion_args(topk)
    if server is None:
        out = topk.select_experts(hidden_states=hidden, router_logits=logits, **kwargs)
        return out[0], out[1], fused
    # Set as the model runner does from --n-share-experts-fusion: the number of
    # shared-expert replicas (DeepSeek-V3 picks the TP size: 1 here). The model
    # then asks for top_k + min(n, 1) columns, the last one the shared expert's.
    saved = server["n_share_experts_fusion"]
    server["n_share_experts_fusion"] = fused * REPLICAS[0]
    try:
        out = topk.select_experts(hidden_states=hidden, router_logits=logits, **kwargs)
    finally:
        server["n_share_experts_fusion"] = saved
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
    fused_models = []
    for name, (w, i, fused) in record["DECODE"].items():
        if fused:
            # The release's own fusion ran: the shared expert's id (E and up) is
            # in the last column of every row.
            check(bool((i[:, -fused:] >= MODELS[name]["E"]).all()) and
                  bool((i[:, :-fused] < MODELS[name]["E"]).all()),
                  "%s: no fused shared-expert column in %s" % (name, i[0].tolist()))
            fused_models.append(name)
    torch.save(record, os.path.join(out_dir, "unpatched.pt"))
    print("PASS unpatched: %s recorded for %s (modes %s; fused shared expert: %s)"
          % (", ".join(MODELS), topk.__file__, ", ".join(modes()),
             ", ".join(fused_models) or "none in this release"))
    RESULTS.append(True)
    if paths_check.supported(topk):
        @run_case("unpatched: the newest paths recorded (issue 24), stand-ins checked")
        def _():
            rec, lines = paths_check.record(topk)
            torch.save(rec, os.path.join(out_dir, "paths.pt"))
            return "; ".join(lines)


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
        return outputs_as_unpatched(topk, ref)


def outputs_as_unpatched(topk, ref):
    """Every model's outputs in every mode bitwise the unpatched ones (phases
    off and shadow)."""
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

    if server_fusion_args(topk) is not None:
        @run_case("K0=3, DeepSeek-V3 on a TP-4 server of the n_share_experts_fusion era "
                  "(4 replicas, one shared column): equals liboea's reference")
        def _():
            name = "deepseek-v3"
            hidden, logits, bias = inputs(name)
            REPLICAS[0] = 4
            try:
                # The unpatched outputs of this call: the call site is skipped while
                # the binding is off; the same seed gives the same random replica.
                binding.ENABLED = False
                torch.manual_seed(7)
                (rw, ri, fused), = [call_select_experts(topk, name, hidden, logits, bias)]
                binding.ENABLED = True
                torch.manual_seed(7)
                w, i, _ = (lambda forward_batch: call_select_experts(
                    topk, name, hidden, logits, bias))(forward_batch("DECODE"))
            finally:
                binding.ENABLED = True
                REPLICAS[0] = 1
            check(fused == 1 and bool((ri[:, -1] >= MODELS[name]["E"]).all()) and
                  bool((ri[:, -1] < MODELS[name]["E"] + 4).all()),
                  "the release did not put one of 4 replicas in the last column: %s"
                  % ri[:2].tolist())
            ew, ei, _ = oracle_expectation(oracle, name, (rw, ri, 1), bias)
            check(same(i.to(ei.dtype), ei) and torch.equal(w.float(), ew),
                  "re-routed ids differ from the reference with one shared column")
            check(not torch.equal(i, ri), "nothing was re-routed")

    if "dynamic_expert_bias" in inspect.signature(topk.select_experts).parameters:
        # SGLang 0.5.22 on: a bias per token (Bailing-MoE's multi-gate). liboea
        # has one bias per expert, so such a call must be left alone, and a
        # layer prepared with its config's bias must not re-route it by that one.
        @run_case("K0=3, a per-token bias (dynamic_expert_bias) in DECODE: bitwise the "
                  "unpatched outputs, counted as token_bias")
        def _():
            name = "glm-style"  # sigmoid with a correction bias
            hidden, logits, bias = inputs(name)
            gen = torch.Generator().manual_seed(22)
            per_token = torch.rand(ROWS, MODELS[name]["E"], generator=gen) * 0.5
            kwargs, _ = select_kwargs(topk, name, bias)

            def call(forward_batch, **extra):
                out = topk.select_experts(hidden_states=hidden, router_logits=logits,
                                          **dict(kwargs, **extra))
                return out[0].clone(), out[1].clone()

            # the layer first met without it (its plan holds the config's bias)
            call(forward_batch("DECODE"))
            binding.ENABLED = False
            try:
                rw, ri = call(forward_batch("DECODE"), dynamic_expert_bias=per_token)
            finally:
                binding.ENABLED = True
            before = binding.host_counts()["skipped"]["token_bias"]
            w, i = call(forward_batch("DECODE"), dynamic_expert_bias=per_token)
            check(same(w, rw) and same(i, ri), "a call with a per-token bias was re-routed "
                  "(%d of %d rows changed)" % (int((i != ri).any(1).sum()), ROWS))
            if binding.STATS:
                check(binding.host_counts()["skipped"]["token_bias"] == before + ROWS,
                      "not counted as token_bias: %s" % binding.host_counts())
            return "%s, %d rows" % (name, ROWS)

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

    @run_case("K0=3, stats on, SGLang's metrics off: prometheus_client never imported")
    def _():
        check("PROMETHEUS_MULTIPROC_DIR" not in os.environ, "the phase runs with metrics on")
        check(binding.export_metrics() is False, "export_metrics did not say metrics are off")
        check("prometheus_client" not in sys.modules, "prometheus_client was imported")

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

    if paths_check.supported(topk):
        rec = torch.load(os.path.join(out_dir, "paths.pt"))
        paths_check.check_on(topk, binding, oracle, rec, run_case)
        paths_check.check_unreached(topk, binding, run_case)

    @run_case("K0=3: liboea's sums over one decode pass of every model, kept for phase shadow")
    def _():
        return keep_sums(decode_pass_sums(topk, binding), out_dir)


def decode_pass_sums(topk, binding):
    """liboea's running sums (binding.stats()) over one DECODE pass of every
    model, from zero: what phases on and shadow compare."""
    binding.reset_stats()
    run_all(topk, "DECODE")
    sums = binding.stats("cpu")
    check(sums is not None, "no liboea call counted")
    return sums


def phase_shadow(out_dir):
    """SGLANG_OEA_MODE=shadow: every output of every model and mode equal to the
    unpatched ones, bitwise, and liboea's sums over the decode pass equal to
    phase on's (the same calls, on the same inputs, into the binding's own
    buffers)."""
    ref = load_reference(out_dir)
    topk, binding = patched_module()

    @run_case("shadow: K0=3 loaded liboea, statistics on (the mode's point)")
    def _():
        check(binding.ENABLED and binding._lib is not None and binding.SHADOW and
              binding.STATS, "enabled %r, shadow %r, stats %r"
              % (binding.ENABLED, binding.SHADOW, binding.STATS))

    @run_case("shadow: outputs of every model and mode equal the unpatched ones")
    def _():
        return outputs_as_unpatched(topk, ref)

    @run_case("shadow: liboea's sums over the decode pass equal phase on's")
    def _():
        return same_sums(decode_pass_sums(topk, binding), out_dir)


def parse_stats_line(line):
    """The numbers of a stats line: python calls/rows (to liboea, skipped), per
    device (routed calls, mean T before, after, rows, gated), skipped rows per
    reason. The line must add up: rows = to liboea + skipped = to liboea + the
    reasons' sum."""
    import re

    out = {"devices": {}, "skipped": {}}
    head = re.search(r"python calls=(\d+) rows=(\d+) \(to liboea (\d+), skipped (\d+)\);",
                     line)
    check(head, "stats line not understood: %r" % line)
    out["calls"], out["rows"], out["launched"], skipped_rows = map(int, head.groups())
    out["kept"] = {}
    for m in re.finditer(r"(\S+): (\d+) routed calls, mean T ([\d.]+) -> ([\d.]+), "
                         r"(\d+) rows, (\d+) gated(?:, kept mean ([\d.]+), p5 [\d.]+, "
                         r"([\d.]+) slots changed per row)?", line):
        out["devices"][m.group(1)] = (int(m.group(2)), float(m.group(3)),
                                      float(m.group(4)), int(m.group(5)), int(m.group(6)))
        if m.group(7):
            out["kept"][m.group(1)] = (m.group(7), m.group(8))
    skipped = line.split("rows skipped: ", 1)[1]
    if skipped != "none":
        for part in skipped.split(", "):
            k, v = part.split("=")
            out["skipped"][k] = int(v)
    check(out["rows"] == out["launched"] + skipped_rows and
          skipped_rows == sum(out["skipped"].values()), "the line does not add up: %r" % line)
    return out


def scrape(directory):
    """/metrics as SGLang serves it (add_prometheus_middleware: a fresh
    CollectorRegistry with prometheus_client's MultiProcessCollector over
    PROMETHEUS_MULTIPROC_DIR, exposed by generate_latest), in another process
    like SGLang's HTTP server; returns {(name, labels): value}."""
    import subprocess

    code = ("import sys\n"
            "from prometheus_client import CollectorRegistry, generate_latest, multiprocess\n"
            "registry = CollectorRegistry()\n"
            "multiprocess.MultiProcessCollector(registry)\n"
            "sys.stdout.write(generate_latest(registry).decode())\n")
    env = dict(os.environ, PROMETHEUS_MULTIPROC_DIR=directory)
    text = subprocess.run([sys.executable, "-c", code], env=env, check=True,
                          capture_output=True, text=True).stdout
    from prometheus_client.parser import text_string_to_metric_families

    out = {}
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            out[(sample.name, tuple(sorted(sample.labels.items())))] = sample.value
    return out, text


def phase_metrics(out_dir):
    """SGLANG_OEA_STATS on, SGLang's metrics on (PROMETHEUS_MULTIPROC_DIR set as
    its --enable-metrics sets it): the counters on /metrics equal the stats
    line's numbers, at two successive intervals."""
    import logging
    import time

    topk, binding = patched_module()
    directory = os.environ.get("PROMETHEUS_MULTIPROC_DIR")
    check(directory and os.path.isdir(directory), "PROMETHEUS_MULTIPROC_DIR is not a folder")
    check(binding.STATS and binding.STATS_INTERVAL == 1, "run with SGLANG_OEA_STATS=true and "
          "SGLANG_OEA_STATS_INTERVAL=1")
    lines = []

    class Keep(logging.Handler):
        def emit(self, record):
            text = record.getMessage()
            if "OEA stats" in text:
                lines.append(text)

    logging.getLogger(binding.__name__).addHandler(Keep())
    logging.getLogger(binding.__name__).setLevel(logging.INFO)
    prefix = binding.METRICS_PREFIX

    def interval(batches):
        """Calls, then one more after the interval: the line and the export."""
        for mode in batches:
            run_all(topk, mode)
        time.sleep(1.05)
        before = len(lines)
        hidden, logits, bias = inputs("qwen3-30b-a3b")
        call_select_experts(topk, "qwen3-30b-a3b", hidden, logits, bias)  # no batch
        check(len(lines) == before + 1, "no stats line after the interval")
        return parse_stats_line(lines[-1])

    def compare(want):
        got, text = scrape(directory)

        def value(name, **labels):
            key = (prefix + name + "_total", tuple(sorted(dict(rank="", **labels).items())))
            check(key in got, "%s%s missing from /metrics:\n%s" % (name, labels, text))
            return got[key]

        check(value("python_calls") == want["calls"], "python_calls %s, line %s"
              % (value("python_calls"), want["calls"]))
        check(value("python_rows") == want["rows"], "python_rows")
        check(value("python_rows_launched") == want["launched"], "python_rows_launched")
        for reason, rows in want["skipped"].items():
            check(value("rows_skipped", reason=reason) == rows,
                  "rows_skipped{reason=%s} %s, line %s"
                  % (reason, value("rows_skipped", reason=reason), rows))
        for reason in binding.SKIP_REASONS:
            if reason not in want["skipped"]:
                check(value("rows_skipped", reason=reason) == 0, "%s is not 0" % reason)
        check(want["devices"], "no routed call in the line")
        for device, (calls, t_before, t_after, rows, gated) in want["devices"].items():
            got_calls = value("routed_calls", device=device)
            check(got_calls == calls, "routed_calls %s, line %s" % (got_calls, calls))
            check(value("gated_calls", device=device) == gated, "gated_calls")
            check(value("routed_rows", device=device) == rows, "routed_rows")
            # What the PromQL of docs/runtime.md computes: a ratio of two counters.
            mean_before = value("experts_before", device=device) / got_calls
            mean_after = value("experts_after", device=device) / got_calls
            check("%.1f" % mean_before == "%.1f" % t_before and
                  "%.1f" % mean_after == "%.1f" % t_after,
                  "mean T %.3f -> %.3f on /metrics, %s -> %s in the line"
                  % (mean_before, mean_after, t_before, t_after))
            # kept weight and changed slots: ratios of counters, as docs/runtime.md's PromQL
            kept = value("kept_weight", device=device) / value("kept_rows", device=device)
            changed = value("changed_slots", device=device) / value("rerouted_rows",
                                                                    device=device)
            check(("%.3f" % kept, "%.2f" % changed) == want["kept"].get(device),
                  "kept mean %.4f, %.3f changed per row on /metrics, %s in the line"
                  % (kept, changed, want["kept"].get(device)))
        return text

    @run_case("metrics on: the first interval's counters on /metrics equal the stats line")
    def _():
        want = interval(["DECODE", "EXTEND"])
        compare(want)
        return lines[-1]

    @run_case("metrics on: the next interval adds up (counters equal the new line)")
    def _():
        want = interval(["DECODE", "DECODE", "MIXED"])
        text = compare(want)
        return "%d %s series on /metrics" % (
            sum(1 for l in text.splitlines() if l.startswith(prefix)), prefix + "*")

    @run_case("metrics on: the counters are prometheus_client's multiprocess files")
    def _():
        files = sorted(f for f in os.listdir(directory) if f.endswith(".db"))
        check(files == ["counter_%d.db" % os.getpid()], "files %s" % files)
        return ", ".join(files)

    if paths_check.supported(topk):
        @run_case("issue 24.6, metrics on: the routers never reaching OEA on /metrics "
                  "(layers_never_routed, a gauge per rank)")
        def _():
            model = paths_check.run_unreached(topk)  # kept: the report holds weak references
            check(binding.export_metrics() is True, "export_metrics did not export")
            del model
            got, text = scrape(directory)
            key = (prefix + "layers_never_routed", (("rank", ""),))
            check(got.get(key) == 2, "%s = %s on /metrics:\n%s" % (key, got.get(key), text))
            return "%s{rank=\"\"} %g" % (key[0], got[key])


def rank_worker(rank, port, cases):
    """One rank of phase ranks: for each case, a fresh TCP store and process
    group, the binding imported afresh under the case's settings and put where
    topk.py's call site finds it, and select_experts called in DECODE batches
    until the rank check is over (or 20 s)."""
    import importlib.util
    import logging
    import time

    import torch.distributed as dist

    topk, binding = patched_module()
    name = binding.__name__
    warnings = []

    class Keep(logging.Handler):
        def emit(self, record):
            if record.levelno >= logging.WARNING:
                warnings.append(record.getMessage())

    logging.getLogger(name).addHandler(Keep())
    results = []
    for i, case in enumerate(cases):
        settings = case[rank]
        for k in [k for k in os.environ if k.startswith("SGLANG_OEA_")]:
            del os.environ[k]
        os.environ.update(settings)
        spec = importlib.util.spec_from_file_location(name, binding.__file__)
        module = importlib.util.module_from_spec(spec)
        sys.modules[name] = module
        spec.loader.exec_module(module)
        module._RANKS_WAIT_S = 3.0  # the 120 s wait, shortened for the test
        topk._oeapatch_oea = module
        dist.init_process_group("gloo", init_method="tcp://127.0.0.1:%d" % (port + i),
                                rank=rank, world_size=2)
        del warnings[:]
        error, changed, started = None, False, time.monotonic()
        ref = load_reference(os.environ["OEA_TEST_OUT"])["DECODE"]["qwen3-30b-a3b"]
        while time.monotonic() - started < 20:
            try:
                w, ids, _ = model_forward(topk, "qwen3-30b-a3b", forward_batch("DECODE"))
            except RuntimeError as exc:
                error = str(exc)
                break
            changed = changed or not torch.equal(ids, ref[1])
            if not module.ENABLED or module._ranks_done:
                break
            time.sleep(0.05)
        results.append(dict(enabled=module.ENABLED, done=module._ranks_done if module.ENABLED
                            else None, error=error, rerouted=changed,
                            warnings=list(warnings), seconds=time.monotonic() - started))
        dist.barrier()  # rank 0 holds the store: both stay until both are through
        dist.destroy_process_group()
    print("RANKRESULT " + json.dumps(results))


RANK_CASES = [
    ("same settings", {"SGLANG_OEA_K0": "3"}, {"SGLANG_OEA_K0": "3"}),
    ("K0 differs", {"SGLANG_OEA_K0": "3"}, {"SGLANG_OEA_K0": "2"}),
    ("MIN_BATCH differs", {"SGLANG_OEA_K0": "3"},
     {"SGLANG_OEA_K0": "3", "SGLANG_OEA_MIN_BATCH": "4"}),
    ("rank 1 with K0=0", {"SGLANG_OEA_K0": "3"}, {"SGLANG_OEA_K0": "0"}),
]


def phase_ranks(out_dir):
    """Two real processes (torch.distributed, gloo on the CPU, a TCP store on
    127.0.0.1) run the patched select_experts: check_ranks lets equal settings
    through, stops both ranks when the settings differ (each naming the other's),
    and warns about a rank that never publishes (K0=0)."""
    import socket
    import subprocess
    import time

    with socket.socket() as sock:  # a free block of ports, one per case
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]  # and the next ones, one per case
    cases = json.dumps([[a, b] for _, a, b in RANK_CASES])
    env = dict(os.environ, OEA_TEST_OUT=out_dir, OEA_TEST_CASES=cases)
    started = time.monotonic()
    procs = [subprocess.Popen([sys.executable, os.path.abspath(__file__), "rank-worker", out_dir,
                               str(rank), str(port)], env=env, stdout=subprocess.PIPE,
                              stderr=subprocess.PIPE, text=True) for rank in (0, 1)]
    outs = [p.communicate(timeout=240) for p in procs]
    seconds = time.monotonic() - started
    results = []
    for rank, (p, (out, err)) in enumerate(zip(procs, outs)):
        line = [l for l in out.splitlines() if l.startswith("RANKRESULT ")]
        check(p.returncode == 0 and line, "rank %d exited %d: %s" % (rank, p.returncode,
                                                                     err[-3000:]))
        results.append(json.loads(line[0][len("RANKRESULT "):]))
    by_case = {name: (results[0][i], results[1][i]) for i, (name, _, _) in
               enumerate(RANK_CASES)}

    @run_case("2 ranks, same settings: both pass the check and re-route")
    def _():
        for rank, r in enumerate(by_case["same settings"]):
            check(r["enabled"] and r["done"] and r["error"] is None and not r["warnings"],
                  "rank %d: %s" % (rank, r))
            check(r["rerouted"], "rank %d did not re-route" % rank)
        return "%.1f s" % max(r["seconds"] for r in by_case["same settings"])

    for name, key, theirs in (("K0 differs", "k0", ("k0=2", "k0=3")),
                              ("MIN_BATCH differs", "min_batch",
                               ("min_batch=4", "min_batch=2"))):
        @run_case("2 ranks, %s: each rank raises RuntimeError naming the other's" % name)
        def _(name=name, theirs=theirs):
            for rank, r in enumerate(by_case[name]):
                other = 1 - rank
                text = r["error"] or ""
                check("settings differ between ranks" in text and
                      ("rank %d has k0=" % other) in text and theirs[rank] in
                      text.split("rank %d has" % other, 1)[-1],
                      "rank %d: %s" % (rank, r))
                # Refused on seeing the peer's settings, not after waiting out
                # a silent peer (no load-dependent bound on the time).
                check(not any("reported no OEA settings" in w for w in r["warnings"]),
                      "rank %d waited for a silent peer: %s" % (rank, r["warnings"]))
            return by_case[name][0]["error"]

    @run_case("2 ranks, rank 1 with K0=0: rank 0 warns naming rank 1 after the wait")
    def _():
        r0, r1 = by_case["rank 1 with K0=0"]
        check(not r1["enabled"], "rank 1 enabled: %s" % r1)
        check(r0["enabled"] and r0["done"] and r0["error"] is None, "rank 0: %s" % r0)
        hits = [w for w in r0["warnings"] if "ranks [1] reported no OEA settings" in w]
        check(len(hits) == 1, "rank 0 warnings: %s" % r0["warnings"])
        # Not before the wait is over; how long after depends on the load.
        check(r0["seconds"] >= 3.0, "warned after %.1f s (wait 3 s)" % r0["seconds"])
        return hits[0]

    print("ranks phase: %.1f s for %d cases" % (seconds, len(RANK_CASES)))


def _binding_copy(binding, suffix, env):
    """The patched binding's file imported again as another module of the same
    package, with `env` over the phase's SGLANG_OEA_* (read at import): another
    way of running, side by side in this process (test_binding's loader)."""
    import test_binding

    phase = {k: v for k, v in os.environ.items() if k.startswith("SGLANG_OEA_")}
    return test_binding.load(binding.__file__, "%s_%s" % (binding.__name__, suffix),
                             dict(phase, **env))


def phase_bench(out_dir, oracle_library, iterations=2000, repeats=7):
    """Host overhead of the binding per call in eager mode, beside the routing
    time, at 1, 16, 64 and 256 tokens (Qwen3-30B-A3B's layer, CPU tensors, run
    with SGLANG_OEA_MIN_BATCH=1 so one token takes the whole path too), in
    three ways of running: statistics off (the phase's environment), on
    (SGLANG_OEA_STATS=true) and shadow mode (SGLANG_OEA_MODE=shadow, whose
    statistics are on), each the patched binding imported under that setting.

    routing   select_experts as the release runs it (an EXTEND batch: routed, and
              the binding's gate says no)
    liboea    oea_route_host re-routing that batch (the CPU reference; on a GPU
              the launch is asynchronous and this time is the kernel's)
    route()   the binding's route() in a DECODE batch, every row padding (ids -1):
              the whole Python path, and a liboea call that finds no row to
              process, so its time is the host's; once per way of running
    call      that prepared liboea call alone, same block and pointers: the floor
    overhead  route() - call: what the binding adds on the host
    Each figure is the median of `repeats` runs of `iterations` calls, the
    variants interleaved; wall-clock time, and the calling thread's CPU time
    (time.thread_time: what a loaded machine adds by running other work
    between the calls is not counted, what it costs in caches still is).
    """
    import statistics
    import time

    topk, binding = patched_module()
    check(binding.MIN_BATCH == 1, "run with SGLANG_OEA_MIN_BATCH=1")
    check(not binding.STATS and not binding.SHADOW, "run with statistics off, mode on")
    ways = (("off", binding),
            ("stats", _binding_copy(binding, "bench_stats", {
                "SGLANG_OEA_STATS": "true", "SGLANG_OEA_STATS_INTERVAL": "100000"})),
            ("shadow", _binding_copy(binding, "bench_shadow", {
                "SGLANG_OEA_MODE": "shadow", "SGLANG_OEA_STATS": "false",
                "SGLANG_OEA_STATS_INTERVAL": "100000"})))
    check(ways[1][1].STATS and not ways[1][1].SHADOW, "stats copy: %r" % ways[1][1].SETTINGS)
    check(ways[2][1].STATS and ways[2][1].SHADOW, "shadow copy: %r" % ways[2][1].SETTINGS)
    name = "qwen3-30b-a3b"
    spec = MODELS[name]
    cfg = dict(top_k=spec["top_k"], renormalize=True)
    clocks = (("wall", time.perf_counter_ns), ("cpu", time.thread_time_ns))

    def per_call(fn, n=iterations):
        """(wall, cpu) us per call of fn's `n` calls."""
        start = [c() for _, c in clocks]
        fn()
        return [(c() - t) / n / 1000.0 for (_, c), t in zip(clocks, start)]

    lines = []
    for rows in (1, 16, 64, 256):
        # The routing and liboea's re-routing of `rows` valid rows are context,
        # and their cost grows with the rows (2.8 ms and 0.6 ms a call at 256
        # on a quiet machine): fewer calls of them, so that the phase does not
        # spend minutes of the suite on what is not the binding's overhead.
        # route() and the bare call, the figures this phase is for, keep all
        # `iterations` calls (their difference is a few microseconds).
        heavy = max(50, iterations // rows)
        gen = torch.Generator().manual_seed(rows)
        logits = torch.randn(rows, spec["E"], generator=gen) * 2.0
        hidden = torch.zeros(rows, 64)
        kwargs, _ = select_kwargs(topk, name, None)
        w0, i0 = topk.select_experts(hidden_states=hidden, router_logits=logits, **kwargs)[:2]

        def routing(forward_batch):
            for _ in range(heavy):
                topk.select_experts(hidden_states=hidden, router_logits=logits, **kwargs)

        w = w0.clone()
        valid, padded = i0.clone(), torch.full_like(i0, -1)

        def routed(module, ids):
            def run(forward_batch):
                route = module.route
                for _ in range(iterations):
                    route(router_logits=logits, topk_weights=w, topk_ids=ids, **cfg)
            return run

        def point_at(module, ids, weights=w):
            """One route() call: the prepared block now holds these pointers."""
            (lambda forward_batch: module.route(router_logits=logits, topk_weights=weights,
                                                topk_ids=ids, **cfg))(forward_batch("DECODE"))

        plans = {}
        for way, module in ways:
            # Each plan prepared and judged on the routing's own output (a
            # re-routed one may hold weight-0 fillers, which are no scores).
            ids, weights = i0.clone(), w0.clone()
            point_at(module, ids, weights)
            if way == "shadow":
                check(torch.equal(ids, i0) and torch.equal(weights, w0),
                      "shadow wrote the framework's tensors")
            # The plan this call prepared (the release's own select_experts calls
            # above prepared others, under keys with the same first settings).
            found = [p for k, p in module._plans.items() if k[0][:2] == (spec["top_k"], True)
                     and p.problem is not None and p.problem.ids == ids.data_ptr()]
            check(len(found) == 1, "%s: %d plans hold this call's ids (of %d)"
                  % (way, len(found), len(module._plans)))
            plans[way] = found[0]
            check(found[0].checked, "%s: plan not judged: %r" % (way, found[0].skip))
            check(found[0].problem.n == rows, "%s: not launched" % way)
        check(plans["shadow"].problem.flags == 2 and plans["off"].problem.flags == 0,
              "shadow's calls count only (OEA_FLAG_COUNT_ONLY), on's write")
        fn, address = plans["off"].launch

        def native(n=iterations):
            for _ in range(n):
                fn(address)

        live = {k: [] for k in ("routing", "liboea", "off", "stats", "shadow", "call")}
        for _ in range(repeats):
            live["routing"].append(per_call(lambda: routing(forward_batch("EXTEND")), heavy))
            point_at(binding, valid)
            live["liboea"].append(per_call(lambda: native(heavy), heavy))
            for way, module in ways:
                live[way].append(per_call(lambda: routed(module, padded)(forward_batch("DECODE"))))
                check(plans[way].problem.ids == padded.data_ptr(), "%s: route() did not launch"
                      % way)
            live["call"].append(per_call(native))
        for c, (clock, _) in enumerate(clocks):
            med = {k: statistics.median(v[c] for v in runs) for k, runs in live.items()}
            lines.append(
                "BENCH sglang %s, %s, %d tokens, torch %s, python %s, %s time: routing %.1f us, "
                "liboea %.1f us; route() %.2f us (stats on %.2f, shadow %.2f), bare call %.2f us, "
                "host overhead %.2f us/call (stats on %.2f, shadow %.2f)"
                % (__import__("sglang").__version__, name, rows, torch.__version__,
                   sys.version.split()[0], clock, med["routing"], med["liboea"], med["off"],
                   med["stats"], med["shadow"], med["call"], med["off"] - med["call"],
                   med["stats"] - med["call"], med["shadow"] - med["call"]))
    lines.append("BENCH load %.1f (1-minute average) at the end" % os.getloadavg()[0])
    for line in lines:
        print(line)
    RESULTS.append(True)


def main():
    _bind_paths()
    phase, out_dir = sys.argv[1], sys.argv[2]
    if phase == "unpatched":
        phase_unpatched(out_dir)
    elif phase == "off":
        phase_off(out_dir)
    elif phase == "on":
        phase_on(out_dir, sys.argv[3])
    elif phase == "shadow":
        phase_shadow(out_dir)
    elif phase == "bench":
        phase_bench(out_dir, sys.argv[3])
    elif phase == "metrics":
        phase_metrics(out_dir)
    elif phase == "ranks":
        phase_ranks(out_dir)
    elif phase == "rank-worker":
        rank_worker(int(sys.argv[3]), int(sys.argv[4]), json.loads(os.environ["OEA_TEST_CASES"]))
        return 0
    else:
        raise SystemExit("unknown phase %s" % phase)
    return summary()


if __name__ == "__main__":
    sys.exit(main())
