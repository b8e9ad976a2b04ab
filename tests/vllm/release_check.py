#!/usr/bin/env python3
"""One phase of the real-vLLM test, run by the interpreter of one release's
cached environment (tests/vllm/make_env.sh); driven by run_releases.py.

    python release_check.py PHASE OUT_DIR [ORACLE_LIBRARY]

PHASE:
  unpatched  the routing file as the wheel has it: record the outputs of the
             release's real routing method for every path and batch
  off        patched, VLLM_OEA_K0=0: the outputs must be the unpatched ones
  on         patched, VLLM_OEA_K0=3 (stats on): decode batches of the grouped
             path equal liboea's reference (oea_route_host through this test's
             own struct, from oea.h) applied to the unpatched outputs; prefill
             and mixed batches, decode batches under piecewise CUDA graphs, the
             custom routing path and calls outside any forward are left exactly
             as they were, each skip counted under its reason; with
             VLLM_OEA_RECORD set, `oeapatch replay` of the process's recording
             at k0 3 gives liboea's live sums (issue 33)

Everything runs vLLM's real code on the CPU: the routing method the definition
patches (FusedMoE.select_experts, a staticmethod up to 0.11; the router
classes' select_experts from 0.15) on the paths that run without vLLM's
compiled ops (grouped top-k in pure torch, a model's custom routing function),
under forward contexts made by the release's own set_forward_context with a
real VllmConfig for the CPU and a real attention-metadata object of one of
its backends (V0: one object; V1: a dict by layer name). No vLLM module is
replaced by a stub.

0.12 - 0.14: the routing method is an instance method of FusedMoE: real
FusedMoE layers are built (their unquantized method), with vLLM's distributed
state initialised for one process (gloo), as a single-CPU worker does.
"""
import dataclasses
import hashlib
import importlib
import inspect
import json
import os
import sys

# grouped_topk is compiled with torch.compile(backend="inductor") when vLLM
# knows no platform; eager runs the same torch operations without a compiler.
os.environ.setdefault("TORCHDYNAMO_DISABLE", "1")

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(os.path.dirname(HERE), "e2e"))

from oea_testlib import (HEADER, RESULTS, Oracle, case, check, distinct,  # noqa: E402
                         keep_sums, same_as_replay, same_sums, summary)

import torch  # noqa: E402

EXPERTS, TOP_K, HIDDEN, GROUPS, TOPK_GROUP = 64, 6, 16, 8, 3
K0 = 3
ROWS = 8
# (kind, tokens, requests, prefills, prefill tokens): decode = one token per
# request; prefill = one request of 8 tokens; mixed = 4 decodes and a prefill
# of 4 tokens.
BATCHES = [("decode", ROWS, ROWS, 0, 0), ("prefill", ROWS, 1, 1, ROWS),
           ("mixed", ROWS, 5, 1, 4)]

def forward_context_kwargs(set_forward_context, kind, n, reqs):
    """The keyword arguments this release's set_forward_context takes, for a batch
    of n tokens in `reqs` requests (kind: decode, prefill or mixed)."""
    params = inspect.signature(set_forward_context).parameters
    kw = {}
    if "num_tokens" in params:
        kw["num_tokens"] = n
    try:
        from vllm.forward_context import BatchDescriptor
    except ImportError:
        BatchDescriptor = None
    if BatchDescriptor is not None and "batch_descriptor" in params:
        fields = getattr(BatchDescriptor, "_fields", None) or list(
            getattr(BatchDescriptor, "__dataclass_fields__", {}))
        if "uniform" in fields:  # 0.12 on
            kw["batch_descriptor"] = BatchDescriptor(
                num_tokens=n, num_reqs=reqs, uniform=(kind != "mixed"))
        elif "uniform_decode" in fields:  # 0.10, 0.11
            kw["batch_descriptor"] = BatchDescriptor(num_tokens=n, uniform_decode=(kind == "decode"))
    if "cudagraph_runtime_mode" in params:
        from vllm.config import CUDAGraphMode
        kw["cudagraph_runtime_mode"] = CUDAGraphMode.NONE
    return kw


def custom_routing(hidden_states, gating_output, topk, renormalize):
    # a model's own routing function (the shape Mixtral-style models pass)
    weights, ids = torch.topk(torch.softmax(gating_output.float(), dim=-1), topk, dim=-1)
    if renormalize:
        weights = weights / weights.sum(dim=-1, keepdim=True)
    return weights, ids.to(torch.int32)


def routers(cfg, experts, top_k):
    """(name, callable(hidden, logits)) for the routing paths that run on a CPU."""
    base = "vllm.model_executor.layers.fused_moe.router.base_router"
    try:
        __import__(base)
    except ModuleNotFoundError:
        base = None
    if base:  # 0.15 on: the router classes
        from vllm.config import set_current_vllm_config
        from vllm.distributed.eplb.eplb_state import EplbLayerState
        from vllm.model_executor.layers.fused_moe.router.custom_routing_router import (
            CustomRoutingRouter)
        from vllm.model_executor.layers.fused_moe.router.grouped_topk_router import (
            GroupedTopKRouter)
        # EPLB off: up to about 0.2x an empty state and enable_eplb=False,
        # later no state at all (a state there means EPLB is on)
        takes_flag = "enable_eplb" in inspect.signature(GroupedTopKRouter).parameters
        with set_current_vllm_config(cfg):
            grouped = GroupedTopKRouter(top_k=top_k, global_num_experts=experts,
                                        eplb_state=EplbLayerState() if takes_flag else None,
                                        num_expert_group=8, topk_group=3)
            custom = CustomRoutingRouter(top_k=top_k, global_num_experts=experts,
                                         eplb_state=EplbLayerState() if takes_flag else None,
                                         custom_routing_function=custom_routing)
        route = "_select_experts" if hasattr(grouped, "_select_experts") else "select_experts"
        return [("grouped", getattr(grouped, route)), ("custom", getattr(custom, route))]
    from vllm.model_executor.layers.fused_moe.layer import FusedMoE
    if not isinstance(inspect.getattr_static(FusedMoE, "select_experts", None), staticmethod):
        return instance_routers(cfg, experts, top_k)
    params = inspect.signature(FusedMoE.select_experts).parameters

    def static(**kw):
        kw = {k: v for k, v in kw.items() if k in params}
        return lambda h, logits: FusedMoE.select_experts(
            hidden_states=h, router_logits=logits, top_k=top_k, renormalize=True, **kw)
    paths = [("grouped", static(use_grouped_topk=True, num_expert_group=8, topk_group=3))]
    if "custom_routing_function" in params:
        paths.append(("custom", static(use_grouped_topk=False,
                                       custom_routing_function=custom_routing)))
    return paths


def version():
    import vllm

    return getattr(vllm, "__version__", "0")


def v0():
    """The V0 engine's forward context (0.6.6, 0.7): one attention-metadata
    object for the whole model."""
    major, minor = (int(x) for x in version().split(".")[:2])
    return (major, minor) < (0, 8)


# Attention backends whose metadata class imports on a CPU (the CPU backend's
# first, then others that load without compiled ops), per engine.
# V0's CPU backend (torch_sdpa) imports the CPU model runner and with it
# sentencepiece, which the routing chain does not need; the placeholder
# backend's metadata (attention-free models) is the same V0 dataclass shape
# (num_prefills, num_prefill_tokens, num_decode_tokens) and imports plainly.
V0_METADATA = ["vllm.attention.backends.torch_sdpa:TorchSDPAMetadata",
               "vllm.attention.backends.xformers:XFormersMetadata",
               "vllm.attention.backends.placeholder_attn:PlaceholderAttentionMetadata"]
V1_METADATA = ["vllm.v1.attention.backends.cpu_attn:TorchSDPAMetadata",
               "vllm.v1.attention.backends.triton_attn:TritonAttentionMetadata",
               "vllm.v1.attention.backends.flash_attn:FlashAttentionMetadata"]
_meta_class = []


def metadata_class():
    if not _meta_class:
        errors = []
        for spec in V0_METADATA if v0() else V1_METADATA:
            module, name = spec.split(":")
            try:
                _meta_class.append(getattr(importlib.import_module(module), name))
                break
            except Exception as exc:  # a backend that needs a compiled op
                errors.append("%s: %s" % (spec, exc))
        check(_meta_class, "no attention metadata class loads: %s" % "; ".join(errors))
    return _meta_class[0]


def attn_metadata(kind, n, reqs, prefills, prefill_tokens):
    """A real metadata object of the release's backend for this batch: the
    fields that say its shape set, the rest (tensors the kernels read) None."""
    cls = metadata_class()
    decodes = reqs - prefills
    values = dict(num_prefills=prefills, num_prefill_tokens=prefill_tokens,
                  num_decode_tokens=n - prefill_tokens, num_decodes=decodes,
                  num_actual_tokens=n, num_reqs=reqs, num_input_tokens=n,
                  max_query_len=max(1, prefill_tokens if prefills else 1),
                  max_prefill_seq_len=prefill_tokens, max_decode_seq_len=16 if decodes else 0,
                  num_decode_tokens_padded=n - prefill_tokens,
                  multi_modal_placeholder_index_maps=None,
                  enable_kv_scales_calculation=False, is_prompt=bool(prefills),
                  use_cascade=False, causal=True)
    kw = {}
    for f in dataclasses.fields(cls):
        if f.name in values:
            kw[f.name] = values[f.name]
        elif f.default is dataclasses.MISSING and f.default_factory is dataclasses.MISSING:
            kw[f.name] = None
    obj = cls.__new__(cls)
    # __init__ only assigns the fields; a __post_init__ would derive tensors
    # from the ones left None, which no routing reads.
    for k, v in kw.items():
        object.__setattr__(obj, k, v)
    if v0():
        return obj
    return {"model.layers.0.self_attn.attn": obj}


def forward_context(cfg, kind, n, reqs, prefills, prefill_tokens, mode=None):
    """The release's own set_forward_context for this batch."""
    from vllm.forward_context import set_forward_context

    kw = forward_context_kwargs(set_forward_context, kind, n, reqs)
    if mode is not None:
        from vllm.config import CUDAGraphMode

        kw["cudagraph_runtime_mode"] = getattr(CUDAGraphMode, mode)
    params = inspect.signature(set_forward_context).parameters
    first = next(iter(params))  # attn_metadata (0.7 on) or context (0.6.6)
    return set_forward_context(**{first: attn_metadata(kind, n, reqs, prefills,
                                                       prefill_tokens)},
                               vllm_config=cfg, **kw)


def inputs(kind):
    gen = torch.Generator().manual_seed(sum(map(ord, kind)))
    return torch.randn(ROWS, HIDDEN, generator=gen), torch.randn(ROWS, EXPERTS, generator=gen) * 2


_setup = []


def setup():
    if not _setup:
        from vllm.config import DeviceConfig, VllmConfig

        # No GPU: vLLM cannot infer a platform, hence the CPU device.
        cfg = VllmConfig(device_config=DeviceConfig(device="cpu"))
        _setup.extend([cfg, routers(cfg, EXPERTS, TOP_K)])
    return _setup[:2]


def run_batches(mode=None):
    """{(kind, path): (weights, ids)} under a forward context per batch."""
    cfg, paths = setup()
    out = {}
    for kind, n, reqs, prefills, prefill_tokens in BATCHES:
        h, logits = inputs(kind)
        with forward_context(cfg, kind, n, reqs, prefills, prefill_tokens, mode):
            for name, route in paths:
                w, i = route(h, logits)[:2]
                out[(kind, name)] = (w.clone(), i.clone())
    return out


# ---- logits dtypes (issue 24, defect 7): the routing each path computes in
# the logits' dtype. grouped: 8 groups of which 3, softmax; biased: grouped,
# sigmoid with a correction bias (DeepSeek-V3's gate); plain: one group, so
# plain softmax top-k (a grouped router with one group is vLLM's plain top-k
# in pure torch: its fused top-k needs the compiled topk_softmax op).
DTYPES = (("fp32", torch.float32), ("bf16", torch.bfloat16), ("fp16", torch.float16))
DTYPE_PATHS = {"grouped": dict(groups=8, topk_group=3, scoring="softmax", bias=False),
               "biased": dict(groups=8, topk_group=3, scoring="sigmoid", bias=True),
               "plain": dict(groups=1, topk_group=1, scoring="softmax", bias=False)}


def correction_bias():
    gen = torch.Generator().manual_seed(24)
    return torch.rand(EXPERTS, generator=gen) * 0.1


def dtype_routers(cfg):
    """{path: callable(hidden, logits)} of the three paths, or {} where the
    release cannot build them on a CPU."""
    out = {}
    base = "vllm.model_executor.layers.fused_moe.router.grouped_topk_router"
    try:
        __import__(base)
    except ModuleNotFoundError:
        base = None
    if base:  # 0.15 on
        from vllm.config import set_current_vllm_config
        from vllm.distributed.eplb.eplb_state import EplbLayerState
        from vllm.model_executor.layers.fused_moe.router.grouped_topk_router import (
            GroupedTopKRouter)
        params = inspect.signature(GroupedTopKRouter).parameters
        takes_flag = "enable_eplb" in params
        with set_current_vllm_config(cfg):
            for name, p in DTYPE_PATHS.items():
                kw = dict(top_k=TOP_K, global_num_experts=EXPERTS,
                          eplb_state=EplbLayerState() if takes_flag else None,
                          num_expert_group=p["groups"], topk_group=p["topk_group"],
                          scoring_func=p["scoring"], renormalize=True)
                if p["bias"]:
                    kw["e_score_correction_bias"] = correction_bias()
                router = GroupedTopKRouter(**{k: v for k, v in kw.items() if k in params})
                fn = getattr(router, "_select_experts", None) or router.select_experts
                out[name] = fn
        return out
    from vllm.model_executor.layers.fused_moe.layer import FusedMoE
    if not isinstance(inspect.getattr_static(FusedMoE, "select_experts", None), staticmethod):
        _distributed(cfg)
        from vllm.config import set_current_vllm_config
        with set_current_vllm_config(cfg):
            for i, (name, p) in enumerate(DTYPE_PATHS.items()):
                layer = FusedMoE(num_experts=EXPERTS, top_k=TOP_K, hidden_size=16,
                                 intermediate_size=32, params_dtype=torch.float32,
                                 renormalize=True, use_grouped_topk=True,
                                 num_expert_group=p["groups"], topk_group=p["topk_group"],
                                 scoring_func=p["scoring"],
                                 e_score_correction_bias=correction_bias() if p["bias"] else None,
                                 prefix="model.layers.%d.mlp.experts" % (10 + i))
                out[name] = layer.select_experts
        return out
    params = inspect.signature(FusedMoE.select_experts).parameters
    if "scoring_func" not in params or "e_score_correction_bias" not in params:
        return out
    for name, p in DTYPE_PATHS.items():
        def static(h, logits, p=p, bias=correction_bias() if p["bias"] else None):
            kw = dict(use_grouped_topk=True, num_expert_group=p["groups"],
                      topk_group=p["topk_group"], scoring_func=p["scoring"],
                      e_score_correction_bias=bias)
            return FusedMoE.select_experts(hidden_states=h, router_logits=logits, top_k=TOP_K,
                                           renormalize=True,
                                           **{k: v for k, v in kw.items() if k in params})
        out[name] = static
    return out


def per_row(weights, scores, ids, tol):
    """Whether weights are scores[ids] times one factor per row (within tol)."""
    ratio = weights.float() / scores.gather(1, ids.long()).clamp_min(1e-30)
    return bool(((ratio.amax(1) - ratio.amin(1)).abs() <= tol * ratio.abs().amax(1)).all())


def run_dtypes():
    """{("dtype", path, dtype name): (weights, ids)} for the decode batch, its
    logits cast to each dtype, under a decode forward context."""
    cfg, _ = setup()
    if len(_setup) < 3:
        _setup.append(dtype_routers(cfg))
    routes = _setup[2]
    out = {}
    kind, n, reqs, prefills, prefill_tokens = BATCHES[0]
    h, logits = inputs("decode")
    with forward_context(cfg, kind, n, reqs, prefills, prefill_tokens):
        for name, route in routes.items():
            for dname, dtype in DTYPES:
                w, i = route(h.to(dtype), logits.to(dtype))[:2]
                out[("dtype", name, dname)] = (w.clone(), i.clone())
    return out


# ---- hash routing (issue 24, defect 4): FusedTopKBiasRouter with a
# hash_indices_table (DeepSeek-V4's hash layers) takes each token's experts
# from the table by its input id. Its pure-torch path is the one ROCm aiter
# takes (fused_topk_bias: rocm_aiter_ops.is_fused_moe_enabled(), scoring not
# sigmoid): that platform check is the one stand-in here, named and checked
# on the unpatched release (ids == table[input_ids]); elsewhere the path
# needs the compiled topk_softmax / topk_hash_softplus_sqrt ops.
HASH_STANDIN = "rocm_aiter_ops.is_fused_moe_enabled -> True (ROCm aiter's MoE on)"


def hash_router(cfg):
    """(router's _select_experts, table, input_ids), or None before hash routing."""
    try:
        from vllm.model_executor.layers.fused_moe.router import fused_topk_bias_router as fb
    except ModuleNotFoundError:
        return None
    if "hash_indices_table" not in inspect.signature(fb.FusedTopKBiasRouter).parameters:
        return None
    from vllm.config import set_current_vllm_config

    gen = torch.Generator().manual_seed(4)
    table = torch.stack([torch.randperm(EXPERTS, generator=gen)[:TOP_K]
                         for _ in range(100)]).to(torch.int32)
    input_ids = torch.randint(0, 100, (ROWS,), generator=gen)
    with set_current_vllm_config(cfg):
        router = fb.FusedTopKBiasRouter(top_k=TOP_K, global_num_experts=EXPERTS,
                                        renormalize=True, scoring_func="softmax",
                                        hash_indices_table=table)
    fn = getattr(router, "_select_experts", None) or router.select_experts
    return fn, table, input_ids


def run_hash():
    cfg, _ = setup()
    made = hash_router(cfg)
    if made is None:
        return {}
    fn, table, input_ids = made
    kind, n, reqs, prefills, prefill_tokens = BATCHES[0]
    h, logits = inputs("decode")
    from vllm.model_executor.layers.fused_moe.router import fused_topk_bias_router as fb

    aiter = fb.rocm_aiter_ops
    real = aiter.__dict__.get("is_fused_moe_enabled")
    aiter.is_fused_moe_enabled = classmethod(lambda cls: True) if isinstance(aiter, type) \
        else (lambda: True)
    try:
        check(fb.rocm_aiter_ops.is_fused_moe_enabled() is True, "the stand-in is not in place")
        with forward_context(cfg, kind, n, reqs, prefills, prefill_tokens):
            w, i = fn(h, logits, input_ids=input_ids)[:2]
    finally:  # only while the hash router runs
        if real is None:
            del aiter.is_fused_moe_enabled
        else:
            aiter.is_fused_moe_enabled = real
    return {("hash", "decode"): (w.clone(), i.clone()), ("hash", "expected"):
            (None, table[input_ids].clone())}


def same(a, b):
    return a.dtype == b.dtype and a.shape == b.shape and torch.equal(a, b)


def routing_file():
    for mod in ("vllm.model_executor.layers.fused_moe.router.base_router",
                "vllm.model_executor.layers.fused_moe.layer"):
        try:
            return importlib.import_module(mod)
        except ModuleNotFoundError:
            continue
    raise SystemExit("release_check: no routing module")


def phase_unpatched(out_dir):
    module = routing_file()

    @case("unpatched: outputs recorded")
    def _():
        check("_oeapatch_oea" not in open(module.__file__).read(), "the target is patched already")
        got = run_batches()
        got.update(run_dtypes())
        hashed = run_hash()
        if hashed:  # the stand-in gives the release's own result: the table's ids
            check(torch.equal(hashed[("hash", "decode")][1].long(),
                              hashed[("hash", "expected")][1].long()),
                  "with %s the unpatched router's ids are not hash_indices_table[input_ids]"
                  % HASH_STANDIN)
            got.update(hashed)
        torch.save(got, os.path.join(out_dir, "unpatched.pt"))
        print("RECORD " + json.dumps({"/".join(k): hashlib.sha256(
            v[1].numpy().tobytes() + (v[0].float().numpy().tobytes() if v[0] is not None
                                      else b"")).hexdigest()[:16]
            for k, v in got.items()}))
        return "%s, paths %s, batches %s, metadata %s" % (
            os.path.basename(module.__file__), ", ".join(p for p, _ in setup()[1]),
            ", ".join(b[0] for b in BATCHES), metadata_class().__name__ +
            (" (V0: one object)" if v0() else " (V1: by layer)")) + \
            (", dtype paths %s" % ", ".join(_setup[2]) if _setup[2:] and _setup[2] else "") + \
            (", hash routing with the stand-in %s" % HASH_STANDIN if hashed else "")
    _()


def patched():
    module = routing_file()
    check("_oeapatch_oea" in open(module.__file__).read(), "the target is not patched")
    return importlib.import_module(module.__package__ + "._oeapatch_vllm_oea")


def phase_off(out_dir):
    ref = torch.load(os.path.join(out_dir, "unpatched.pt"))
    binding = patched()

    @case("K0=0: the binding is off and loaded no library")
    def _():
        check(binding.ENABLED is False and binding._lib is None, "ENABLED %r, lib %r"
              % (binding.ENABLED, binding._lib))
    _()

    @case("K0=0: every path and batch bitwise the unpatched outputs")
    def _():
        return outputs_as_unpatched(ref)
    _()


def outputs_as_unpatched(ref):
    """Every path and batch bitwise the unpatched outputs (phases off and shadow)."""
    got = run_batches()
    got.update(run_dtypes())
    for key, (w, i) in got.items():
        check(same(w, ref[key][0]) and same(i, ref[key][1]), "%s differs" % "/".join(key))
    return "%d outputs" % len(got)


def phase_on(out_dir, oracle_library):
    ref = torch.load(os.path.join(out_dir, "unpatched.pt"))
    binding = patched()
    with open(HEADER, "r", encoding="utf-8") as f:
        oracle = Oracle(oracle_library, f.read())

    @case("K0=3: the binding is on, strict")
    def _():
        check(binding.ENABLED and binding._lib is not None, "not enabled")
        check(binding.STRICT is True, "strict is not the default")
        return binding.DECODE_DETECTION
    _()

    got = run_batches()
    skipped = binding.host_counts()["skipped"]

    @case("K0=3, decode batch, grouped top-k: equals liboea's reference on the unpatched outputs")
    def _():
        w, i = got[("decode", "grouped")]
        rw, ri = ref[("decode", "grouped")]
        _, logits = inputs("decode")
        ew, ei, _ = oracle.route(logits, ri, rw.float(), k0=K0, num_shared=0,
                                 scoring="softmax", renormalize=True, groups=GROUPS,
                                 topk_group=TOPK_GROUP)
        check(same(i, ei.to(i.dtype)), "ids differ from the reference")
        check(torch.equal(w.float(), ew), "weights differ (max |d| %g)" % (w.float() - ew).abs().max())
        check(not torch.equal(i, ri), "nothing was re-routed")
        return "distinct experts %d -> %d" % (distinct(ri, ROWS, TOP_K), distinct(i, ROWS, TOP_K))
    _()

    @case("K0=3, prefill and mixed batches: bitwise the unpatched outputs")
    def _():
        for key in [k for k in got if k[0] != "decode"]:
            check(same(got[key][0], ref[key][0]) and same(got[key][1], ref[key][1]),
                  "%s/%s re-routed" % key)
        check(skipped["extend"] >= 2 * ROWS, "not counted as extend: %s" % skipped)
    _()

    @case("K0=3, custom routing function in a decode batch: left alone, counted as custom_routing")
    def _():
        if ("decode", "custom") not in got:
            return "this release has no custom routing function"
        check(same(got[("decode", "custom")][0], ref[("decode", "custom")][0]) and
              same(got[("decode", "custom")][1], ref[("decode", "custom")][1]),
              "custom routing re-routed")
        check(skipped["custom_routing"] >= ROWS, "not counted: %s" % skipped)
        return "%d rows" % skipped["custom_routing"]
    _()

    @case("K0=3, decode batch under a piecewise CUDA-graph runtime mode: left alone")
    def _():
        try:
            from vllm.config import CUDAGraphMode  # noqa: F401
        except ImportError:
            return "this release has no CUDA-graph runtime mode (before 0.10)"
        before = binding.host_counts()["skipped"]["piecewise"]
        out = run_batches(mode="PIECEWISE")
        for key, (w, i) in out.items():
            check(same(w, ref[key][0]) and same(i, ref[key][1]), "%s/%s re-routed" % key)
        after = binding.host_counts()["skipped"]["piecewise"]
        check(after > before, "not counted as piecewise")
        return "%d rows" % (after - before)
    _()

    @case("K0=3, a call outside any forward context: left alone")
    def _():
        _, paths = setup()
        h, logits = inputs("decode")
        w, i = dict(paths)["grouped"](h, logits)[:2]
        rw, ri = ref[("decode", "grouped")]
        check(same(w, rw) and same(i, ri), "re-routed without a forward context")
    _()

    phase_on_issue24(ref, binding, oracle)

    @case("K0=3, VLLM_OEA_RECORD: the replay of this process's recording = liboea's live sums")
    def _():
        # issue 33's exactness: every call that reached liboea above, recorded
        # by the binding (its decode gate passed), replayed at the live k0
        rec = binding._recorder()
        check(rec is not None, "not recording: %s" % binding.recording())
        rec.close()
        figures = binding.recording()
        check(figures["stopped"] is None and figures["dropped"] == 0 and figures["recorded"] > 0,
              "recorder: %s" % figures)
        return same_as_replay(binding.stats("cpu"), rec.path, K0)
    _()

    @case("K0=3: liboea's sums over one pass of the batches, kept for phase shadow")
    def _():
        return keep_sums(pass_sums(binding), out_dir)
    _()


def pass_sums(binding):
    """liboea's running sums (binding.stats()) over one pass of BATCHES, from
    zero: what phases on and shadow compare."""
    binding.reset_stats()
    run_batches()
    sums = binding.stats("cpu")
    check(sums is not None, "no liboea call counted")
    return sums


def phase_shadow(out_dir):
    """VLLM_OEA_MODE=shadow: every path and batch bitwise the unpatched
    outputs, and liboea's sums over a pass equal phase on's."""
    ref = torch.load(os.path.join(out_dir, "unpatched.pt"))
    binding = patched()

    @case("shadow: K0=3 loaded liboea, statistics on")
    def _():
        check(binding.ENABLED and binding._lib is not None and binding.SHADOW and
              binding.STATS, "enabled %r, shadow %r" % (binding.ENABLED, binding.SHADOW))
    _()

    @case("shadow: every path and batch bitwise the unpatched outputs")
    def _():
        return outputs_as_unpatched(ref)
    _()

    @case("shadow: liboea's sums over the pass equal phase on's")
    def _():
        return same_sums(pass_sums(binding), out_dir)
    _()


def phase_on_issue24(ref, binding, oracle):
    """Issue 24's checks (defects 4, 5, 7, 8), in the `on` phase's process."""
    got = run_dtypes()
    for path, p in DTYPE_PATHS.items():
        for dname, dtype in DTYPES:
            @case("K0=3, decode batch, %s path, %s logits: re-routed, equal to liboea's "
                  "reference" % (path, dname))
            def _(path=path, p=p, dname=dname, dtype=dtype):
                if ("dtype", path, dname) not in got:
                    return "this release has no %s path on a CPU" % path
                w, i = got[("dtype", path, dname)]
                rw, ri = ref[("dtype", path, dname)]
                _, logits = inputs("decode")
                scores = torch.sigmoid(logits.to(dtype).float())
                tol = 1e-3 if dtype == torch.float32 else 2e-2
                if p["bias"] and per_row(rw, scores + correction_bias(), ri, tol) and \
                        not per_row(rw, scores, ri, tol):
                    # 0.6.6's grouped_topk adds the bias to the scores in place,
                    # so its weights are score + bias: not reproducible, left alone
                    check(same(w, rw) and same(i, ri), "weights of score + bias re-routed")
                    check(binding.host_counts()["skipped"]["weights"] > 0, "not counted")
                    return "this release's weights are score + bias: left alone (weights)"
                ew, ei, _ = oracle.route(logits.to(dtype), ri, rw.float(), k0=K0,
                                         num_shared=0, scoring=p["scoring"], renormalize=True,
                                         groups=p["groups"] if p["groups"] > 1 else 0,
                                         topk_group=p["topk_group"] if p["groups"] > 1 else 0,
                                         bias=correction_bias() if p["bias"] else None)
                check(not torch.equal(ei.long(), ri.long()),
                      "the reference re-routes nothing: the case proves nothing")
                check(not torch.equal(i.long(), ri.long()),
                      "not re-routed (skipped: %s)" % {k: v for k, v in
                                                        binding.host_counts()["skipped"].items()
                                                        if v})
                check(same(i, ei.to(i.dtype)), "ids differ from the reference")
                check(torch.equal(w.float(), ew), "weights differ (max |d| %g)"
                      % (w.float() - ew).abs().max())
                return "weights %s, distinct experts %d -> %d" % (
                    str(rw.dtype).replace("torch.", ""), distinct(ri, ROWS, TOP_K),
                    distinct(i, ROWS, TOP_K))
            _()

    @case("K0=3, hash-routed layer (FusedTopKBiasRouter with hash_indices_table, stand-in: "
          + HASH_STANDIN + "): left alone, counted as hash")
    def _():
        before = binding.host_counts()["skipped"].get("hash")
        hashed = run_hash()
        if not hashed:
            return "this release has no hash routing"
        w, i = hashed[("hash", "decode")]
        rw, ri = ref[("hash", "decode")]
        check(same(w, rw) and same(i, ri), "re-routed: %d of %d rows moved off "
              "hash_indices_table[input_ids]" % (int((i != ri).any(1).sum()), ROWS))
        check(before is not None and binding.host_counts()["skipped"]["hash"] == before + ROWS,
              "not counted as hash: %s" % binding.host_counts()["skipped"])
        return "%d rows" % ROWS
    _()

    runner_never_routed(binding)
    runner_capture(binding, oracle, ref)
    full_capture(binding, oracle, ref)


def runner_never_routed(binding):
    """0.33 on: MoE layers are MoERunner objects (FusedMoEFactory); one whose
    path reaches the router is not named by the statistics, one whose path
    never calls it (a monolithic kernel) is."""
    @case("K0=3, MoERunner layers: one that never calls its router is named in the stats "
          "line, one that reaches OEA is not")
    def _():
        try:
            from vllm.model_executor.layers.fused_moe.runner.moe_runner import MoERunner
        except ImportError:
            return "this release has no MoERunner"
        from vllm.config import set_current_vllm_config
        from vllm.distributed.eplb.eplb_state import EplbLayerState  # noqa: F401
        from vllm.model_executor.layers.fused_moe.router.grouped_topk_router import (
            GroupedTopKRouter)
        cfg, _ = setup()
        names = ("model.layers.20.mlp.experts", "model.layers.21.mlp.experts")
        calls = []

        # Stand-ins for the expert kernels, GPU-only (the unquantized method's
        # Triton fused experts, FlashInfer's TensorRT-LLM monolithic kernel),
        # with the attribute the runner reads to choose between them; a real
        # RoutedExperts picks its kernel through a platform this CPU lacks.
        class Method:
            topk_indices_dtype = None

            def __init__(self, monolithic):
                self.is_monolithic = monolithic

        class Experts(torch.nn.Module):  # the routed experts: kernel stand-ins
            def __init__(self, monolithic):
                super().__init__()
                self.quant_method = Method(monolithic)

            def forward_modular(self, x, topk_weights, topk_ids, **kw):
                calls.append(("modular", topk_ids))
                return x

            # RoutedExperts.forward_monolithic's signature: 0.34 added x_scale.
            def forward_monolithic(self, x, router_logits=None, input_ids=None, x_scale=None):
                calls.append(("monolithic", None))
                return x

        with set_current_vllm_config(cfg):
            runners = [MoERunner(layer_name=name, moe_config=None,
                                 router=GroupedTopKRouter(top_k=TOP_K,
                                                          global_num_experts=EXPERTS,
                                                          num_expert_group=GROUPS,
                                                          topk_group=TOPK_GROUP),
                                 routed_experts=Experts(monolithic))
                       for name, monolithic in zip(names, (False, True))]
        for r in runners:
            check(not type(r).__name__.endswith("FusedMoE"), type(r).__name__)
        reached, never = runners
        kind, n, reqs, prefills, prefill_tokens = BATCHES[0]
        h, logits = inputs("decode")
        with forward_context(cfg, kind, n, reqs, prefills, prefill_tokens):
            ctx_layers = binding._context().no_compile_layers
            check(all(ctx_layers.get(name) is r for name, r in zip(names, runners)),
                  "the runners are not the forward context's layers")
            for r in runners:  # the runner's own choice of path
                r._apply_quant_method(h, logits, None)
            missing = binding.never_routed()
            line = binding.stats_line()
        check([c[0] for c in calls] == ["modular", "monolithic"], "paths taken: %s"
              % [c[0] for c in calls])
        check(names[1] in (missing or []), "never_routed() is %r" % missing)
        check(names[0] not in (missing or []), "the layer that reached OEA is named: %r"
              % missing)
        check(names[1] in line and names[0] not in line.split("never reaching OEA")[-1],
              "stats line: %s" % line)
        return line.split("; ")[-1]
    _()


def runner_capture(binding, oracle, ref):
    """The GPU model runner (v1/worker/gpu, the default where it exists):
    CudaGraphManager.capture runs forward_fn(CUDAGraphMode.NONE) inside
    torch.cuda.graph() for a FULL graph, whose set_forward_context passes
    batch_descriptor=None; the graph's key is the loop variable `desc` of that
    frame. No graph is captured on a CPU: torch.cuda's capture probe
    (is_available, is_current_stream_capturing) answers as inside
    torch.cuda.graph(), and the frame is this test's function named capture
    holding the release's BatchExecutionDescriptor as CudaGraphManager.capture
    holds it."""
    @case("K0=3, GPU model runner's FULL capture (mode NONE, no batch descriptor): uniform "
          "decode graph re-routed, mixed and DBO graphs left alone (cuda_graph)")
    def _():
        try:
            from vllm.v1.worker.gpu.cudagraph_utils import BatchExecutionDescriptor
        except ImportError:
            return "this release has no GPU model runner (v1/worker/gpu)"
        from vllm.config import CUDAGraphMode
        from vllm.forward_context import set_forward_context

        cfg, paths = setup()
        grouped = dict(paths)["grouped"]
        kind, n, reqs, prefills, prefill_tokens = BATCHES[0]
        h, logits = inputs("decode")
        rw, ri = ref[("decode", "grouped")]
        ew, ei, _ = oracle.route(logits, ri, rw.float(), k0=K0, num_shared=0,
                                 scoring="softmax", renormalize=True, groups=GROUPS,
                                 topk_group=TOPK_GROUP)

        def capture(desc):  # CudaGraphManager.capture's loop: `for desc in descs:`
            # forward_fn(CUDAGraphMode.NONE), as ModelCudaGraphManager sets it
            with set_forward_context(attn_metadata(kind, n, reqs, prefills, prefill_tokens),
                                     cfg, num_tokens=n,
                                     cudagraph_runtime_mode=CUDAGraphMode.NONE,
                                     batch_descriptor=None):
                ctx = binding._context()
                desc_seen.append(ctx.batch_descriptor)
                check(ctx.cudagraph_runtime_mode == CUDAGraphMode.NONE, "not the runner's mode")
                return grouped(h, logits)[:2]

        desc_seen = []

        fields = BatchExecutionDescriptor.__dataclass_fields__
        D = BatchExecutionDescriptor
        decode = D(cg_mode=CUDAGraphMode.FULL, num_tokens=n, num_reqs=n, uniform_token_count=1)
        mixed = D(cg_mode=CUDAGraphMode.FULL, num_tokens=n, num_reqs=n)
        cases = [(decode, True), (mixed, False)]
        if "num_ubatches" in fields:
            cases.append((D(cg_mode=CUDAGraphMode.FULL, num_tokens=n, num_reqs=n,
                            uniform_token_count=1, num_ubatches=2), False))
        # torch's capture probe says what it says inside torch.cuda.graph()
        probe = torch.cuda.is_available, torch.cuda.is_current_stream_capturing
        torch.cuda.is_available = torch.cuda.is_current_stream_capturing = lambda: True
        try:
            for desc, rerouted in cases:
                before = binding.host_counts()["skipped"]["cuda_graph"]
                w, i = capture(desc)
                if rerouted:
                    check(same(i, ei.to(i.dtype)) and torch.equal(w.float(), ew),
                          "%r: not liboea's reference (skipped: %s)"
                          % (desc, binding.host_counts()["skipped"]))
                else:
                    check(same(w, rw) and same(i, ri), "%r: re-routed" % (desc,))
                    check(binding.host_counts()["skipped"]["cuda_graph"] == before + ROWS,
                          "%r: not counted as cuda_graph" % (desc,))
        finally:
            torch.cuda.is_available, torch.cuda.is_current_stream_capturing = probe
        return "%d descriptors (%s); the context's batch descriptor: %r" % (
            len(cases), ", ".join(fields), desc_seen[0])
    _()


def full_capture(binding, oracle, ref):
    """A FULL CUDA graph captured under the release's own forward context
    (runners that capture under mode FULL with a BatchDescriptor: 0.10 on): a
    FULL graph replays every batch of its key, so only a graph keyed as
    uniform decode may be re-routed. A graph keyed as mixed is often captured
    with a batch of decodes only (a dummy run) and then replays prefills: left
    alone (cuda_graph), whatever the batch it is captured with. No graph is
    captured on a CPU: torch.cuda's capture probe answers as inside
    torch.cuda.graph() (as in runner_capture)."""
    @case("K0=3, FULL CUDA-graph capture with the release's BatchDescriptor: the uniform "
          "decode graph re-routed; a graph keyed as mixed left alone (cuda_graph), captured "
          "with a decode batch or a mixed one")
    def _():
        try:
            from vllm.config import CUDAGraphMode
            from vllm.forward_context import BatchDescriptor, set_forward_context  # noqa: F401
        except ImportError:
            return "this release has no FULL CUDA graphs keyed by a BatchDescriptor (before 0.10)"
        cfg, paths = setup()
        grouped = dict(paths)["grouped"]
        first = next(iter(inspect.signature(set_forward_context).parameters))
        _, _, mixed_reqs, _, _ = BATCHES[2]

        def capture(key, batch):
            """The grouped router under a FULL capture whose graph is keyed by
            the descriptor of a `key` batch, run with `batch`."""
            kind, n, reqs, prefills, prefill_tokens = batch
            kw = forward_context_kwargs(set_forward_context, key, n,
                                        reqs if key == kind else mixed_reqs)
            kw["cudagraph_runtime_mode"] = CUDAGraphMode.FULL
            h, logits = inputs(kind)
            with set_forward_context(**{first: attn_metadata(kind, n, reqs, prefills,
                                                             prefill_tokens)},
                                     vllm_config=cfg, **kw):
                return grouped(h, logits)[:2], kw.get("batch_descriptor")

        rw, ri = ref[("decode", "grouped")]
        _, logits = inputs("decode")
        ew, ei, _ = oracle.route(logits, ri, rw.float(), k0=K0, num_shared=0,
                                 scoring="softmax", renormalize=True, groups=GROUPS,
                                 topk_group=TOPK_GROUP)
        probe = torch.cuda.is_available, torch.cuda.is_current_stream_capturing
        torch.cuda.is_available = torch.cuda.is_current_stream_capturing = lambda: True
        seen = []
        try:
            (w, i), desc = capture("decode", BATCHES[0])
            seen.append(desc)
            check(same(i, ei.to(i.dtype)) and torch.equal(w.float(), ew),
                  "%r: the uniform decode graph is not liboea's reference (skipped: %s)"
                  % (desc, binding.host_counts()["skipped"]))
            for batch in (BATCHES[0], BATCHES[2]):
                before = binding.host_counts()["skipped"]["cuda_graph"]
                (w, i), desc = capture("mixed", batch)
                seen.append(desc)
                rw, ri = ref[(batch[0], "grouped")]
                check(same(w, rw) and same(i, ri), "%r with a %s batch: re-routed"
                      % (desc, batch[0]))
                check(binding.host_counts()["skipped"]["cuda_graph"] == before + ROWS,
                      "%r with a %s batch: not counted as cuda_graph" % (desc, batch[0]))
        finally:
            torch.cuda.is_available, torch.cuda.is_current_stream_capturing = probe
        return "descriptors %s" % ", ".join(repr(d) for d in seen)
    _()


_dist_ready = []


def _distributed(cfg):
    """vLLM's own distributed state for one process (gloo), once."""
    if _dist_ready:
        return
    import socket

    from vllm.config import set_current_vllm_config
    from vllm.distributed import init_distributed_environment, initialize_model_parallel

    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    with set_current_vllm_config(cfg):
        init_distributed_environment(world_size=1, rank=0, local_rank=0, backend="gloo",
                                     distributed_init_method="tcp://127.0.0.1:%d" % port)
        initialize_model_parallel(1, 1)
    _dist_ready.append(True)


def instance_routers(cfg, experts, top_k):
    """0.12 - 0.14: select_experts is a method of a real FusedMoE layer, which
    reads the tensor-, data- and context-parallel groups when it is built:
    vLLM's own distributed state, initialised for one process with gloo."""
    from vllm.config import set_current_vllm_config
    from vllm.model_executor.layers.fused_moe.layer import FusedMoE

    _distributed(cfg)
    with set_current_vllm_config(cfg):
        common = dict(num_experts=experts, top_k=top_k, hidden_size=16, intermediate_size=32,
                      params_dtype=torch.float32, renormalize=True)
        grouped = FusedMoE(use_grouped_topk=True, num_expert_group=8, topk_group=3,
                           prefix="model.layers.0.mlp.experts", **common)
        custom = FusedMoE(custom_routing_function=custom_routing,
                          prefix="model.layers.1.mlp.experts", **common)
    return [("grouped", grouped.select_experts), ("custom", custom.select_experts)]


def main():
    phase, out_dir = sys.argv[1], sys.argv[2]
    if phase == "unpatched":
        phase_unpatched(out_dir)
    elif phase == "off":
        phase_off(out_dir)
    elif phase == "on":
        phase_on(out_dir, sys.argv[3])
    elif phase == "shadow":
        phase_shadow(out_dir)
    else:
        raise SystemExit("unknown phase %s" % phase)
    return summary()


if __name__ == "__main__":
    sys.exit(main())
