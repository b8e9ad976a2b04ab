# ------------------------------------------------ the vLLM adapter (patches/vllm-oea/adapter.py)
# vLLM's gate (decode detection from the forward context, CUDA-graph modes,
# data parallelism, speculative verify) and its argument mapping for the three
# eras of select_experts; the rest is the shared core above (patches/binding-core/).

import weakref

# The module sits beside router/base_router.py (0.15 on) or layer.py (0.6 - 0.14).
TARGET_FILE = ("base_router.py" if os.path.exists(os.path.join(
    os.path.dirname(os.path.abspath(__file__)), "base_router.py")) else "layer.py")
METRICS_PREFIX = "vllm:oea_"
SKIP_REASONS = ("extend", "speculative", "no_mode", "piecewise", "cuda_graph", "dp_attention",
                "small_batch", "large_batch", "custom_routing", "zero_expert", "simulator",
                "hash", "router", "scaled_weights", "shape", "k0_ge_topk", "weights", "scoring",
                "device", "record_only", "k0_band", "error")
DECODE_DETECTION = ("the forward context's attention metadata, or V0's attn_metadata in "
                    "the calling frames (no prefill%s); off under "
                    "piecewise CUDA graphs and data parallelism; full graphs of uniform "
                    "decode batches only" % (", speculative verify too" if SPECULATIVE else
                                             ", query length 1"))


def _capturing():
    """Whether a CUDA graph is being captured on the current stream."""
    return _torch.cuda.is_available() and _torch.cuda.is_current_stream_capturing()

# ------------------------------------------------------------------ the gate

_fc = None  # vllm.forward_context, or False where the release has none (before 0.6.6)


def _context():
    """The forward context set for this forward, or None (no context: V0 before
    0.7, a dummy or profile run). The module global, not get_forward_context(),
    which asserts when none is set."""
    global _fc
    if _fc is None:
        import importlib

        root = (__package__ or "").split(".", 1)[0] or "vllm"
        try:
            _fc = importlib.import_module(root + ".forward_context")
        except ImportError:
            _fc = False
    return getattr(_fc, "_forward_context", None) if _fc else None


def _metadata_verdict(meta):
    """One attention backend's metadata: None (decode), a skip reason, or
    "unknown" when it says nothing we read."""
    prefills = getattr(meta, "num_prefills", None)
    query = getattr(meta, "max_query_len", None)
    if prefills is None and query is None:
        if getattr(meta, "num_prefill_tokens", None) is None:
            return "unknown"
        prefills = meta.num_prefill_tokens
    if prefills:
        return "extend"
    if query is not None and query > 1:
        # No prefill by the backend's own split, or a query longer than one
        # token: with speculative decoding these are the verify batches (1 + k
        # tokens per request); a backend that reports only max_query_len cannot
        # tell them from short prefills, so it is "extend" there.
        if prefills is None:
            return "extend"
        return None if SPECULATIVE else "speculative"
    return None


# V0 (0.5.5 - 0.7.x) passes the batch's attention metadata down the model's
# forward as `attn_metadata`: the decoder layer's frame holds it while its MoE
# block routes. 0.5.5 - 0.6.5 have no forward context at all, and 0.6.6 - 0.7
# may set one without metadata, so there the calling frames are read, as
# SGLang's adapter finds forward_batch. Bounded: route() is this many frames
# below the model code at most (select_experts, the quant method's apply and
# forward_cuda, FusedMoE.forward, the MoE block, nn.Module's call wrappers).
_FRAME_DEPTH = 24
_holds_metadata = {}  # code object -> whether it has a local named attn_metadata


def _frame_metadata():
    """The nearest calling frame's `attn_metadata`, or None."""
    try:
        frame = sys._getframe(2)
    except ValueError:
        return None
    for _ in range(_FRAME_DEPTH):
        if frame is None:
            return None
        code = frame.f_code
        holds = _holds_metadata.get(code)
        if holds is None:
            holds = _holds_metadata[code] = "attn_metadata" in code.co_varnames
        if holds:
            meta = frame.f_locals.get("attn_metadata")
            if meta is not None:
                return meta
        frame = frame.f_back
    return None


def _context_metadata(ctx):
    """The attention metadata of forward context `ctx`: `attn_metadata` (0.7
    on), `dynamic_forward_context` (0.6.6), else the calling frames' (V0)."""
    meta = None
    if ctx is not None:
        meta = getattr(ctx, "attn_metadata", None)
        if meta is None:
            meta = getattr(ctx, "dynamic_forward_context", None)
    if meta is None:
        meta = _frame_metadata()
    return meta


def _context_verdict(ctx):
    """None when OEA may run on the batch of forward context `ctx`, else the
    skip reason (docs/runtime.md, "Decode detection in vLLM")."""
    if ctx is None:
        # No forward context (before 0.6.6, or none set): V0's metadata in
        # the calling frames, if any. V0 captures CUDA graphs of padded decode
        # batches, whose valid row count it does not hand down: off there, as
        # with a context (_captured_verdict of no mode).
        if _capturing():
            return "cuda_graph"
        meta = _frame_metadata()
        return "no_mode" if meta is None else _metas_verdict(meta)
    if getattr(ctx, "dp_metadata", None) is not None:
        # Data-parallel ranks all-gather their tokens before the MoE (0.8 -
        # 0.13): every rank routes every rank's tokens and must choose the
        # same experts, but each knows only its own batch's mode. vLLM shares
        # token counts across ranks (DPMetadata), and from 0.13 the minimum
        # CUDA-graph mode, but no decode verdict: a FULL mode is a decode
        # graph on every rank only under FULL_DECODE_ONLY or
        # FULL_AND_PIECEWISE, which the context does not say, and idle ranks
        # run dummy batches (docs/runtime.md, "Data parallelism").
        return "dp_attention"
    mode = getattr(getattr(ctx, "cudagraph_runtime_mode", None), "name", None)
    if mode == "PIECEWISE":
        # Keyed by token count alone, shared by decode and mixed batches: a
        # decision captured into one would be wrong for the other.
        return "piecewise"
    if _capturing():
        reason = _captured_verdict(mode, getattr(ctx, "batch_descriptor", None))
        if reason is not None:
            return reason
    return _metas_verdict(_context_metadata(ctx))


def _captured_verdict(mode, desc):
    """While a CUDA graph is captured: None when the graph replays only
    batches like this one (a FULL graph of uniform decode batches, then the
    metadata decides), else "cuda_graph" (before 0.10 every capture is
    piecewise). `mode`: the runtime mode's name; `desc`: the BatchDescriptor,
    `uniform_decode` in 0.10 - 0.11 (False may still be a decode batch: off),
    `uniform` with `num_reqs` from 0.12 (a uniform speculative verify batch
    too: the metadata tells it apart)."""
    if mode == "NONE":
        # The GPU model runner of v1/worker/gpu (0.26 on; the default runner
        # in 0.33) captures its FULL graphs running the model under mode NONE
        # with batch_descriptor=None (which 0.33's set_forward_context turns
        # into a BatchDescriptor of the token count alone): the graph's key is
        # in the capturing frame. Other runners capture under FULL or
        # PIECEWISE.
        return _runner_capture_verdict(_runner_capture_key())
    uniform = getattr(desc, "uniform_decode", None) or (
        getattr(desc, "uniform", False) and getattr(desc, "num_reqs", None))
    if mode != "FULL" or not uniform:
        return "cuda_graph"
    return None


# v1/worker/gpu/cudagraph_utils.py (0.26 on): CudaGraphManager.capture loops
# `for desc in descs:` over BatchExecutionDescriptors and, for a FULL one,
# runs forward_fn(CUDAGraphMode.NONE) inside torch.cuda.graph(), whose
# set_forward_context passes batch_descriptor=None. The model's MoE custom op
# runs the router eagerly below that frame (through the compiled model's
# frames: a deep stack), so the key is read from there, once per call while
# a graph is captured.
_CAPTURE_DEPTH = 256


def _runner_capture_key():
    """The BatchExecutionDescriptor of the graph being captured by the GPU
    model runner, from the calling frames, or None."""
    root = (__package__ or "").split(".", 1)[0] or "vllm"
    cls = getattr(sys.modules.get(root + ".v1.worker.gpu.cudagraph_utils"),
                  "BatchExecutionDescriptor", None)
    if cls is None:
        return None
    try:
        frame = sys._getframe(1)
    except ValueError:
        return None
    for _ in range(_CAPTURE_DEPTH):
        if frame is None:
            return None
        if frame.f_code.co_name == "capture" and "desc" in frame.f_code.co_varnames:
            desc = frame.f_locals.get("desc")
            if isinstance(desc, cls):
                return desc
        frame = frame.f_back
    return None


def _runner_capture_verdict(desc):
    """None when the GPU model runner's graph keyed by `desc` replays decode
    batches only, else "cuda_graph". CudaGraphManager.dispatch replays a FULL
    graph for a batch only where _is_compatible holds: a graph with
    `uniform_token_count` (a uniform decode graph) only for batches whose
    requests all have exactly that many tokens and that the runner found
    decode-eligible (gather_batch_req_state: no prefill but one-token
    extensions); one with `max_query_len` (a varlen decode graph) only for
    batches with a max_query_len, which the runner passes as None for any
    batch with a prefill. A FULL graph with neither (FULL mode's mixed
    graphs) replays prefills too: off. Micro-batched (DBO) graphs run the
    model in other threads: off. The attention metadata decides the rest
    (a verify batch of speculative decoding). Releases whose descriptor has
    no `max_query_len` (0.26) key uniform graphs by token count alone, with
    no decode eligibility (get_uniform_token_count): a graph of requests of
    k > 1 tokens each replays uniform prefill chunks of k tokens too, so
    there only graphs of one token per request are taken."""
    if desc is None or getattr(getattr(desc, "cg_mode", None), "name", None) != "FULL":
        return "cuda_graph"
    if getattr(desc, "num_ubatches", 1) != 1:
        return "cuda_graph"
    uniform = getattr(desc, "uniform_token_count", None)
    bound = getattr(desc, "max_query_len", None)
    if uniform is None and bound is None:
        return "cuda_graph"
    if uniform not in (None, 1) and not hasattr(desc, "max_query_len"):
        return "cuda_graph"
    return None


def _metas_verdict(meta):
    """The verdict of attention metadata: one object (V0), a dict per layer
    (V1), or a list of those per micro-batch."""
    metas = []
    for part in (meta if isinstance(meta, list) else [meta]):  # micro-batches (0.11 on)
        metas.extend(part.values() if isinstance(part, dict) else [part])
    verdict = "no_mode"
    for m in metas:
        if m is None:
            continue
        v = _metadata_verdict(m)
        if v == "unknown":
            continue
        if v is not None:
            return v
        verdict = None
    return verdict


def _verdict_eager():
    return _context_verdict(_context())


def _verdict_deep():
    # The forward context is process state, the same inside compiled code.
    return _context_verdict(_context())


# ------------------------------------------------------------ argument mapping

# Routers (0.15 on) whose routing OEA cannot reproduce, by class, and the reason.
_ROUTER_SKIPS = {"CustomRoutingRouter": "custom_routing", "ZeroExpertRouter": "zero_expert",
                 "RoutingSimulatorRouter": "simulator"}
# Routers OEA reproduces; any other is skipped ("router") rather than guessed.
_ROUTERS = ("FusedTopKRouter", "GroupedTopKRouter", "FusedTopKBiasRouter")
# 0.12 - 0.14: the simulator is a branch of the chain, chosen by this variable;
# read once (compiled code must not read the environment).
_SIMULATOR = bool(os.environ.get("VLLM_MOE_ROUTING_SIMULATION_STRATEGY", "").strip())
_owner_skip = {}  # type -> skip reason or None
_layers_seen = weakref.WeakSet()  # the layers (or routers) whose calls reached route()


def _owner_verdict(owner):
    """None when OEA can reproduce the routing of `owner` (the FusedMoE layer,
    0.12 - 0.14, or its router, 0.15 on), else the skip reason; per type."""
    if _hash_table(owner) is not None:
        return "hash"
    kind = type(owner)
    if kind not in _owner_skip:
        name = kind.__name__
        if name in _ROUTER_SKIPS:
            _owner_skip[kind] = _ROUTER_SKIPS[name]
        elif name.endswith("Router") and name not in _ROUTERS:
            _owner_skip[kind] = "router"
        else:
            _owner_skip[kind] = None
    reason = _owner_skip[kind]
    if reason is None:
        if getattr(owner, "zero_expert_num", 0) or getattr(owner, "bias_vl", None) is not None:
            return "zero_expert" if getattr(owner, "zero_expert_num", 0) else "custom_routing"
        if _SIMULATOR and not type(owner).__name__.endswith("Router"):
            return "simulator"
    return reason


def _hash_table(owner):
    """The token-id table of a hash-routed layer (FusedTopKBiasRouter's
    `_hash_indices_table`, 0.33's CPURouter's `hash_indices_table`:
    DeepSeek-V4's hash layers), or None. Such a layer takes each token's
    experts from the table by its input id, not from its scores: nothing for
    OEA to re-route (the ROCm aiter torch path of fused_topk_bias looks the
    ids up in the table; re-routing them by score would move every row)."""
    table = getattr(owner, "_hash_indices_table", None)
    if table is None:
        table = getattr(owner, "hash_indices_table", None)
    return table


def route(router_logits, topk_weights, topk_ids, owner=None, top_k=_MISSING,
          renormalize=_MISSING, use_grouped_topk=_MISSING, num_expert_group=_MISSING,
          topk_group=_MISSING, scoring_func=_MISSING, e_score_correction_bias=_MISSING,
          custom_routing_function=_MISSING, routed_scaling_factor=_MISSING,
          num_fused_shared_experts=_MISSING, **unknown):
    """Re-route one MoE layer's decode batch; returns (topk_weights, topk_ids).

    Settings come as parameters (0.6 - 0.11: select_experts is a staticmethod)
    or from `owner`, the FusedMoE layer (0.12 - 0.14) or its router (0.15 on),
    read with getattr where a parameter was not passed. Inputs come back
    unchanged whenever a gate says no (docs/runtime.md; counted with
    VLLM_OEA_STATS). The ids keep their dtype (0.9 on may convert them inside
    the chain)."""
    if not ENABLED:
        return topk_weights, topk_ids
    try:
        compiling = _is_compiling()
        if (not _ranks_done or _lib is None) and _cold(compiling):
            return topk_weights, topk_ids
        if STATS and not compiling:
            layer = owner if owner is not None else _caller_layer()
            try:
                _layers_seen.add(layer)
            except TypeError:  # None, or an object without weak references
                pass

        # ---- gate: the routing path (no tensor work)
        if owner is not None:
            reason = _owner_verdict(owner)
            if reason is not None:
                _skip_args(reason, topk_ids, compiling)
                return topk_weights, topk_ids
        if _setting(custom_routing_function, owner, "custom_routing_function") is not None:
            _skip_args("custom_routing", topk_ids, compiling)
            return topk_weights, topk_ids
        scale = _setting(routed_scaling_factor, owner, "routed_scaling_factor")
        if scale is not None and float(scale) != 1.0:
            # vLLM multiplies the weights by it inside the routing (grouped and
            # biased top-k); liboea's weights are the scores times one per-row
            # normaliser, without it.
            _skip_args("scaled_weights", topk_ids, compiling)
            return topk_weights, topk_ids
        bias = _setting(e_score_correction_bias, owner, "e_score_correction_bias")

        # ---- the layer's settings (an owner's fields are its own, so its id
        # stands for them; the bias too, since a weight reload may replace it)
        settings = (None if owner is None else id(owner), top_k, renormalize, use_grouped_topk,
                    num_expert_group, topk_group, None if bias is None else id(bias), scoring_func,
                    num_fused_shared_experts)
        out = _route(settings, router_logits, topk_weights, topk_ids, None, compiling)
        if out is None:  # ---- prepare: once per configuration
            plan = _new_plan(_plan_key(settings, router_logits, topk_ids, topk_weights),
                             router_logits, topk_ids, topk_weights, (owner, bias),
                             _layer(owner, top_k, renormalize, use_grouped_topk, num_expert_group,
                                    topk_group, bias, scoring_func, num_fused_shared_experts))
            out = _route(settings, router_logits, topk_weights, topk_ids, None, compiling, plan)
        return out
    except Exception as exc:  # never into the model: the framework's routing stays
        return _failed(exc, topk_weights, topk_ids)


def _setting(value, owner, name, default=None):
    """A parameter the call site passed, else the owner's attribute."""
    if value is not _MISSING:
        return value
    if owner is not None:
        return getattr(owner, name, default)
    return default


def _layer(owner, top_k, renormalize, use_grouped_topk, num_expert_group, topk_group, bias,
           scoring_func, num_fused_shared_experts):
    """The layer's routing settings as the core's _new_plan takes them. vLLM's
    grouped top-k follows scoring_func (softmax or sigmoid), with the bias when
    there is one; fused top-k is softmax."""
    grouped = bool(_setting(use_grouped_topk, owner, "use_grouped_topk", False)) or \
        type(owner).__name__ == "GroupedTopKRouter"
    scoring = _setting(scoring_func, owner, "scoring_func") or "softmax"
    return (_setting(top_k, owner, "top_k"),
            _setting(num_fused_shared_experts, owner, "num_fused_shared_experts", 0) or 0,
            grouped, scoring,
            _setting(num_expert_group, owner, "num_expert_group") if grouped else None,
            _setting(topk_group, owner, "topk_group") if grouped else None,
            bias, _setting(renormalize, owner, "renormalize", True))


_moe_classes = []  # the release's MoE layer classes, once one is loaded


def _moe_layer_types():
    """The classes whose instances are the model's MoE layers, in this
    release: FusedMoE (layer.py, 0.5 - about 0.32; models subclass it, e.g.
    SharedFusedMoE) and MoERunnerInterface (runner/, 0.33: what
    FusedMoEFactory returns, MoERunner and the models' runners). Looked up
    lazily in the modules already imported (a model with MoE layers has
    imported them), never imported here."""
    if not _moe_classes:
        root = (__package__ or "").split(".", 1)[0] or "vllm"
        found = []
        for module, name in ((".model_executor.layers.fused_moe.layer", "FusedMoE"),
                             (".model_executor.layers.fused_moe.runner.moe_runner_interface",
                              "MoERunnerInterface")):
            cls = getattr(sys.modules.get(root + module), name, None)
            if isinstance(cls, type):
                found.append(cls)
        if not found:
            return ()
        _moe_classes.append(tuple(found))
    return _moe_classes[0]


def _is_moe_layer(obj):
    types = _moe_layer_types()
    return bool(types) and isinstance(obj, types)


def _caller_layer():
    """0.6 - 0.11 (a staticmethod, no owner): the FusedMoE layer of the quant
    method's apply(layer, ...) that called select_experts, for the statistics."""
    frame = sys._getframe(3)  # 0 this, 1 route, 2 select_experts, 3 its caller
    for _ in range(3):
        if frame is None:
            return None
        layer = frame.f_locals.get("layer", frame.f_locals.get("self"))
        if _is_moe_layer(layer):
            return layer
        frame = frame.f_back
    return None


def never_routed():
    """The names of the model's MoE layers whose calls never reached route():
    paths that route inside one kernel (monolithic MoE kernels, gpt-oss's
    Triton routing) never reach the call site. From the forward context's
    layers (0.8 on); None where it holds none."""
    ctx = _context()
    layers = getattr(ctx, "no_compile_layers", None) or getattr(ctx, "static_forward_context", None)
    if not layers and _model_layers:
        # Outside a forward (the idle line below), or a release whose context
        # holds no layers (before 0.8): the model's own, from its first forward.
        layers = {name: ref() for name, ref in _model_layers.items()}
    if not layers:
        return None
    # Calls under torch.compile run route() only while traced, so a layer
    # (or router) that has a plan reached it too.
    seen = {id(x) for x in _layers_seen} | {id(p.owners[0]) for p in _plans.values()
                                            if p.owners and p.owners[0] is not None}
    out = []
    for name, layer in layers.items():
        if _is_moe_layer(layer):
            router = getattr(layer, "router", None)
            if id(layer) not in seen and (router is None or id(router) not in seen):
                out.append(name)
    return out


_core_stats_line = stats_line


def stats_line(snapshot=None):
    """The core's line, and the MoE layers OEA was never called for."""
    line = _core_stats_line(snapshot)
    missing = never_routed()
    if missing:
        line += "; layers never reaching OEA: %d (%s)" % (len(missing), ", ".join(missing[:8]) +
                                                           (", ..." if len(missing) > 8 else ""))
    elif _model_layers == {} and not _tally[0]:
        line += "; no FusedMoE layer in the model: its MoE blocks route without the call site"
    return line


# ------------------------------------------- layers that never reach OEA at all
# The statistics line is written from route(): a model none of whose layers
# reaches the call site (gpt-oss's Triton routing, a monolithic kernel, a
# model calling fused_moe() itself) would write none, and look like a model
# OEA runs on. So, with statistics on, the model's FusedMoE layers are taken
# from its first forward (a global forward pre-hook that removes itself: it
# sees the model's outermost call, eager even where vLLM compiles the inner
# model), and a daemon thread writes the line every interval for as long as
# no call has reached OEA. Once one has, route() writes it, as before.

_model_layers = None  # name -> weak reference to each FusedMoE layer; None: not seen yet
_first_forward_hook = None
_first_forward_budget = [64]  # modules inspected at most (a model without FusedMoE)


def _first_forward(module, args):
    """The first forwards' pre-hook: the model's FusedMoE layers by name."""
    global _model_layers, _first_forward_hook
    _first_forward_budget[0] -= 1
    found = {}
    for name, sub in module.named_modules():
        # the outermost MoE layer only (a layer holding another is one layer)
        if _is_moe_layer(sub) and not any(name.startswith(n + ".") for n in found):
            found[name] = weakref.ref(sub)
    if found or _first_forward_budget[0] <= 0:
        _model_layers = found
        if _first_forward_hook is not None:
            _first_forward_hook.remove()
            _first_forward_hook = None


def _model_seen():
    """Whether this process runs a model: its first forward was seen
    (_first_forward took its MoE layers, or found none)."""
    return _model_layers is not None


def _watch_layers():
    global _first_forward_hook
    if not (ENABLED and STATS and _lib is not None):
        return
    _first_forward_hook = _torch.nn.modules.module.register_module_forward_pre_hook(
        _first_forward)
    import threading

    threading.Thread(target=_idle_stats_loop, name="oeapatch-oea-stats", daemon=True).start()


_start()
_watch_layers()
