# ------------------------------------------------ the SGLang adapter (patches/sglang-oea/adapter.py)
# SGLang's gate (decode detection, DP attention, piecewise CUDA graphs,
# speculative verify) and its argument mapping (select_experts' parameters,
# TopKConfig); the rest is the shared core above (patches/binding-core/).

from enum import Enum as _Enum  # noqa: E402 (ForwardMode's base: _mode_verdict)

TARGET_FILE = "topk.py"
METRICS_PREFIX = "sglang:oea_"
SKIP_REASONS = ("extend", "idle", "speculative", "no_mode", "dp_attention", "small_batch",
                "large_batch", "eplb", "custom_routing", "shape", "k0_ge_topk", "weights", "scoring",
                "device", "token_bias", "simulator", "packed", "record_only", "k0_band", "error")

# SGLang keeps the batch's forward mode on its ForwardBatch, which every model's
# forward (and the CUDA-graph runner's capture, and the model runner) holds as
# a local named `forward_batch`. select_experts is not given it, so the gate
# reads it from the nearest caller frame that has one: the same object the
# model runner set, in every release since topk.py exists (Dec 2024).
DECODE_DETECTION = ("ForwardBatch.forward_mode of the calling model (decode%s); "
                    "under DP attention, decode or idle and no rank extending "
                    "(is_extend_in_batch); piecewise-CUDA-graph flag while compiled"
                    % (" + target-verify" if SPECULATIVE else " only"))
_MAX_FRAMES = 64
_holds_batch = {}  # code object -> whether `forward_batch` is one of its names


def _has_batch_name(code):
    return ("forward_batch" in code.co_varnames or "forward_batch" in code.co_cellvars
            or "forward_batch" in code.co_freevars)


def _find_forward_batch(frame, max_frames=_MAX_FRAMES, depth=None):
    """The nearest ForwardBatch from `frame` up, or None. With `depth` (the
    frame's depth below _verdict_eager's), the path to it is remembered (_batch_path)."""
    global _batch_path
    holders = []
    d = depth or 0
    for _ in range(max_frames):
        if frame is None:
            break
        code = frame.f_code
        holds = _holds_batch.get(code)
        if holds is None:
            holds = _holds_batch[code] = _has_batch_name(code)
        if holds:
            batch = frame.f_locals.get("forward_batch")
            if getattr(batch, "forward_mode", None) is not None:
                if depth is not None:
                    _batch_path = (d, code, tuple(holders))
                return batch
            holders.append((d, code))
        frame = frame.f_back
        d += 1
    return None


def _mode_verdict(mode):
    """None when OEA may run on this forward mode, else the skip reason."""
    if mode is None:
        return "no_mode"
    if mode.is_decode():
        return None
    target_verify = getattr(mode, "is_target_verify", None)
    if target_verify is not None and target_verify():
        return None if SPECULATIVE else "speculative"
    if mode.is_idle():
        return "idle"
    return "extend"


# (member, its _mode_verdict) of the mode judged last. SGLang's ForwardMode is an
# IntEnum: a member is a fixed object whose predicates compare it with other
# members (about 0.3 us a call), so the verdict of the mode every layer of a
# step meets is kept; any other kind of mode is asked each time.
_last_mode = (_MISSING, None)


def _batch_verdict(batch):
    """None when OEA may run on this batch, else the skip reason.

    Under DP attention every rank's MoE layer routes the same gathered tokens
    (or, with an all-to-all MoE, only its own), and tensor-parallel peers must
    choose the same experts for them: the decision must be the same on every
    rank, so it cannot come from the rank's own mode alone. An idle rank
    (nothing of its own to run) routes its peers' decode tokens; a rank in
    decode must not re-route while a peer's share is a prefill. SGLang's MLP
    sync records "some rank extends" on every rank's batch
    (is_extend_in_batch, the same value on all of them, TARGET_VERIFY
    included): OEA runs only when it is false and this rank decodes or idles.
    Releases without that flag cannot tell, so OEA stays off under DP
    attention there ("dp_attention")."""
    global _last_mode
    if batch is None:
        return "no_mode"
    mode = batch.forward_mode
    # DP attention's per-rank token counts, recorded on the batch when it is
    # one DP-attention rank's share of a step whose MoE layers may route the
    # tokens of every DP rank (gathered before the MoE): global_num_tokens_cpu,
    # or in early releases (0.4.1) global_num_tokens; no release has both.
    counts = getattr(batch, "global_num_tokens_cpu", _MISSING)
    if counts is _MISSING:
        counts = getattr(batch, "global_num_tokens", None)
    if counts is not None:
        try:
            gathered = len(counts) > 1
        except TypeError:
            gathered = False
        if gathered:
            if not hasattr(batch, "is_extend_in_batch"):
                return "dp_attention"
            if batch.is_extend_in_batch:
                return "extend"
            if mode.is_decode() or mode.is_idle():
                return None
    last = _last_mode
    if mode is last[0]:
        return last[1]
    verdict = _mode_verdict(mode)
    if isinstance(mode, _Enum):
        _last_mode = (mode, verdict)
    return verdict


# The path of the last walk that found a batch: (depth, code object of the frame
# that held it, ((depth, code) of nearer frames that hold the name but held no
# batch then)), depths counted from _verdict_eager's frame. Every MoE layer of a
# step comes through the same path, so the next call looks at that one frame
# (sys._getframe(depth): one C call) instead of walking; nearer holders are
# looked at again so that a batch appearing there still wins, and a frame at
# that depth running other code means a walk.
_batch_path = None
_getframe = sys._getframe
# The frames between _verdict_eager's and the call site's caller: 0 is
# _verdict_eager, 1 the core's _route, 2 route(), 3 select_experts.
_CALLER_DEPTH = 3


def _walk(depth):
    """_find_forward_batch from _getframe(depth) (counted from _verdict_eager's
    frame, its caller's), remembering the path where a batch was found."""
    return _find_forward_batch(_getframe(depth + 1), _MAX_FRAMES, depth)


def _verdict_eager():
    """Eager calls: the verdict for the batch in scope, found on the stack.
    Judged on each call (a few attribute reads): SGLang may change a batch's
    fields between uses, so no verdict is kept for a batch object."""
    path = _batch_path
    if path is not None:
        depth, code, holders = path
        try:
            frame = _getframe(depth)
        except ValueError:  # a shallower stack than last time
            frame = None
        if frame is not None and frame.f_code is code:
            for d, c in holders:
                nearer = _getframe(d)
                if nearer.f_code is not c or getattr(
                        nearer.f_locals.get("forward_batch"), "forward_mode", None) is not None:
                    return _batch_verdict(_walk(_CALLER_DEPTH))
            batch = frame.f_locals.get("forward_batch")
            mode = getattr(batch, "forward_mode", None)
            if mode is not None:
                # _batch_verdict's common case inline: the mode judged last
                # (one decode step after another), no DP attention's counts
                last = _last_mode
                if mode is last[0] and getattr(batch, "global_num_tokens_cpu", _MISSING) is None:
                    return last[1]
                return _batch_verdict(batch)
    return _batch_verdict(_walk(_CALLER_DEPTH))


def _verdict_deep():
    """The verdict from deeper inside a call chain: the custom op's body (called
    by compiled code through torch's dispatcher) or a trace; the frames above
    are real ones either way."""
    for fn in _pcg_probes():
        if fn():
            return "extend"  # piecewise CUDA graphs run extend batches only
    return _batch_verdict(_find_forward_batch(sys._getframe(2), 1024))


_pcg = None


def _pcg_probes():
    """SGLang's piecewise-CUDA-graph flags (Oct 2025 on), looked up once."""
    global _pcg
    if _pcg is None:
        import importlib

        found, package = [], __package__ or ""
        if package.endswith(".layers.moe"):
            try:
                module = importlib.import_module(package[: -len(".layers.moe")] +
                                                 ".compilation.piecewise_context_manager")
            except ImportError:
                module = None  # releases before piecewise CUDA graphs
            found = [fn for fn in (getattr(module, attr, None) for attr in (
                "is_in_piecewise_cuda_graph", "is_in_pcg_torch_compile")) if callable(fn)]
        _pcg = tuple(found)
    return _pcg


def route(router_logits, topk_weights, topk_ids, topk_config=None, top_k=_MISSING,
          renormalize=_MISSING, use_grouped_topk=_MISSING, num_expert_group=_MISSING,
          topk_group=_MISSING, correction_bias=_MISSING, scoring_func=_MISSING,
          custom_routing_function=_MISSING, routed_scaling_factor=_MISSING,
          num_fused_shared_experts=_MISSING, num_token_non_padded=None,
          expert_location_dispatch_info=None, layer_id=None, packed_topk=None, **unknown):
    """Re-route one MoE layer's decode batch; returns (topk_weights, topk_ids).

    Inputs come back unchanged whenever a gate says no (docs/runtime.md lists
    them; with SGLANG_OEA_STATS on each is counted). An error inside it (a
    liboea error, a tensor it did not expect) leaves them unchanged too,
    counted as "error" and logged once (_failed); only StopServing reaches the
    model. This runs once per MoE layer per step, so its eager
    path is a few attribute reads (docs/performance.md, host overhead): shapes,
    one tuple for the plan, one frame for the decode verdict (_verdict_eager).
    """
    if not ENABLED:
        return topk_weights, topk_ids
    try:
        compiling = _is_compiling()
        if (not _ranks_done or _lib is None) and _cold(compiling):
            return topk_weights, topk_ids
        if not compiling:
            _reached.add(id(topk_config))  # for never_routed(): this layer reaches the call site

        # ---- gate: arguments (no tensor work)
        if expert_location_dispatch_info is not None:
            # ids may be physical ids, which no longer index the logits
            _skip_args("eplb", topk_ids, compiling)
            return topk_weights, topk_ids
        custom = custom_routing_function
        if custom is _MISSING:  # (no getattr on None: a failed lookup costs)
            custom = None if topk_config is None else getattr(
                topk_config, "custom_routing_function", None)
        if custom is not None:
            _skip_args("custom_routing", topk_ids, compiling)
            return topk_weights, topk_ids

        # The bias this call routes by: its own argument, else its config's. liboea
        # takes one bias per expert for every row; a bias per token (SGLang
        # 0.5.22's select_experts(dynamic_expert_bias=...) puts one in the
        # correction_bias this call site passes) cannot be honoured, and a plan
        # prepared with another bias must never stand in for it. A call site that
        # passes dynamic_expert_bias itself (the definition does not, today) is
        # held to the same rule.
        bias = correction_bias
        if bias is _MISSING:
            bias = None if topk_config is None else getattr(topk_config, "correction_bias", None)
        if (bias is not None and bias.dim() > 1) or (
                unknown and unknown.get("dynamic_expert_bias") is not None):
            _skip_args("token_bias", topk_ids, compiling)
            return topk_weights, topk_ids
        # SGLang 0.5.23 on: a fused router may also write the ids and bf16 weights
        # packed as (id << 16) | bf16_bits(weight) (StandardTopKOutputPacked), which
        # some MoE runners read instead of the two tensors. OEA rewrites the pack's
        # valid rows from its own output (_repack); a pack of another layout than
        # the ids' is left alone with them.
        if packed_topk is not None and (packed_topk.shape != topk_ids.shape or
                                        packed_topk.dtype != _int32):
            _warn_once("packed", "a packed top-k of shape %s, dtype %s beside topk_ids %s",
                       tuple(packed_topk.shape), packed_topk.dtype, tuple(topk_ids.shape))
            _skip_args("packed", topk_ids, compiling)
            return topk_weights, topk_ids

        # ---- the layer's settings, the plan's key: everything a plan is prepared
        # from that the call passes, in every era: the bias (the plan holds a
        # pointer to it) and the arguments, which win over the config's fields;
        # so a call that passes other ones never finds a plan made for the first.
        # No id() of None (no bias): torch 2.5's dynamo cannot trace it (fullgraph
        # failed in the releases of Dec 2024 - Jul 2025).
        bias_key = None if bias is None else id(bias)
        if topk_config is not None:
            settings = (id(topk_config), layer_id, top_k, renormalize, use_grouped_topk,
                        num_expert_group, topk_group, bias_key, scoring_func,
                        num_fused_shared_experts)
        else:
            if num_fused_shared_experts is _MISSING and unknown and \
                    "n_share_experts_fusion" in unknown:
                # SGLang of about Apr - Jun 2025: n_share_experts_fusion counts the
                # shared expert's replicas (DeepSeek-V3 defaults it to the TP size),
                # and the routing overwrites ONE column (topk_ids[:, -1]) with one of
                # them: one fused column whatever the count.
                num_fused_shared_experts = 1 if unknown["n_share_experts_fusion"] else 0
            settings = (top_k, renormalize, use_grouped_topk, num_expert_group, topk_group,
                        bias_key, scoring_func, num_fused_shared_experts)
        # the plan the call reached, for the pack (a list only with one)
        used = None if packed_topk is None or SHADOW else []
        out = _route(settings, router_logits, topk_weights, topk_ids, num_token_non_padded,
                     compiling, None, used)
        if out is None:
            # ---- prepare: once per configuration (extend batches prepare too, so
            # the decode graphs captured later find their layer ready)
            plan = _new_plan(_plan_key(settings, router_logits, topk_ids, topk_weights),
                             router_logits, topk_ids, topk_weights, (topk_config, bias),
                             _layer(topk_config, top_k, renormalize, use_grouped_topk,
                                    num_expert_group, topk_group, bias, scoring_func,
                                    num_fused_shared_experts), layer_id)
            if plan.skip is None and _simulating():
                # SGLANG_SIMULATE_UNIFORM_EXPERTS / _ROUND_ROBIN_EXPERTS (benchmark
                # modes): apply_routing_simulation overwrites the routing after the
                # call site, so re-routing it would be counted and then discarded.
                plan.skip = "simulator"
            out = _route(settings, router_logits, topk_weights, topk_ids,
                         num_token_non_padded, compiling, plan, used)
        if used:
            plan = used[0]
            if plan.skip is None and (plan.checked or compiling):
                _repack(packed_topk, out[0], out[1], num_token_non_padded)
        return out
    except Exception as exc:  # never into the model: the framework's routing stays
        return _failed(exc, topk_weights, topk_ids)


def _repack(packed, weights, ids, num_token_non_padded):
    """The pack's valid rows rewritten from (ids, weights) as SGLang's kernels
    write it: (id << 16) | the bf16 bits of the weight (round to nearest even,
    as torch's and CUDA's float -> bf16 conversions do). Rows from
    num_token_non_padded on are left as the kernel wrote them. Torch ops on
    the device only (no host read): safe inside CUDA-graph capture and
    torch.compile. On a call whose rows OEA left alone this writes the values
    the pack already holds (the kernel packs the same final ids and weights)."""
    torch = _torch
    new = (ids.to(_int32) << 16) | (weights.to(torch.bfloat16).view(torch.int16).to(_int32)
                                    & 0xFFFF)
    if num_token_non_padded is None:
        packed.copy_(new)
    elif isinstance(num_token_non_padded, _Tensor):
        rows = torch.arange(ids.shape[0], device=ids.device).unsqueeze(1)
        valid = rows < num_token_non_padded.reshape(-1)[:1].to(device=ids.device)
        packed.copy_(torch.where(valid, new, packed))
    else:
        rows = max(0, min(ids.shape[0], int(num_token_non_padded)))
        packed[:rows].copy_(new[:rows])


def _simulating():
    """Whether the release's routing simulation (benchmark modes) is on, read
    as select_experts reads it: routing_simulation_enabled() of topk.py, else
    its envs (0.5.23 on; earlier releases have neither: False)."""
    topk = sys.modules.get((__package__ or "") + ".topk")
    probe = getattr(topk, "routing_simulation_enabled", None)
    if callable(probe):
        return bool(probe())
    envs = getattr(topk, "envs", None)
    for name in ("SGLANG_SIMULATE_UNIFORM_EXPERTS", "SGLANG_SIMULATE_ROUND_ROBIN_EXPERTS"):
        field = getattr(envs, name, None)
        if field is not None and hasattr(field, "get") and field.get():
            return True
    return False


def _setting(value, config, name, default=None):
    """An argument the call site passed, else its TopKConfig's field (Aug 2025 on)."""
    if value is not _MISSING:
        return value
    if config is not None:
        return getattr(config, name, default)
    return default


def _layer(cfg, top_k, renormalize, use_grouped_topk, num_expert_group, topk_group, bias,
           scoring_func, num_fused_shared_experts):
    """The layer's routing settings as the core's _new_plan takes them."""
    grouped = bool(_setting(use_grouped_topk, cfg, "use_grouped_topk", False))
    if grouped:
        # SGLang's grouped helpers fix the scoring themselves: biased_grouped_topk
        # is sigmoid, grouped_topk softmax, whatever scoring_func says.
        scoring_name = "sigmoid" if bias is not None else "softmax"
    else:
        scoring_name = _setting(scoring_func, cfg, "scoring_func")
        if scoring_name is None:
            scoring_name = "sigmoid" if bias is not None else "softmax"
    # Fused shared-expert columns: the call's argument, else the config's
    # num_fused_shared_experts (Aug - Dec 2025), else its num_shared_topk_slots
    # (0.5.23 on: a property over TopKConfig.shared_experts; 0 under Waterfill).
    shared = _setting(num_fused_shared_experts, cfg, "num_fused_shared_experts", None)
    if shared is None:
        shared = getattr(cfg, "num_shared_topk_slots", 0) if cfg is not None else 0
    return (_setting(top_k, cfg, "top_k"), shared or 0,
            grouped, scoring_name,
            _setting(num_expert_group, cfg, "num_expert_group") if grouped else None,
            _setting(topk_group, cfg, "topk_group") if grouped else None,
            bias, _setting(renormalize, cfg, "renormalize", True))



# ------------------------------------------- layers that never reach OEA at all
# Some MoE layers route without select_experts, so without the call site: a
# TopK whose output is BYPASSED (the MoE kernel routes from the logits:
# FlashInfer TRT-LLM and the like) or TRITON_KERNEL (gpt-oss), TopK on NPU
# (fused_topk_npu), HashTopK (hash_topk.py: experts from a token-id table),
# and MoE blocks that route with a fused gate of their own (mega_gate.py,
# precomputed top-k) while their TopK is never called. Such layers are the
# model's routers (the release's TopK and HashTopK modules, by isinstance, the
# classes select_experts' module and hash_topk.py define) whose TopKConfig never
# came through route(). They are found at the model's first forward (a global
# forward pre-hook: at the first module call given the ForwardBatch, the
# outermost module on the stack, the model the runner calls), named in the
# statistics line and the Prometheus export, and warned about once after the
# first decode steps (the hook stays until then, looking only at its calls'
# positional arguments for the forward batch). Needs
# select_experts(topk_config=...) (SGLang of Aug 2025 on); earlier releases get
# no report. With statistics on, a daemon thread writes the line every
# interval while no call has reached OEA at all (route() writes it after).

_routers = None  # name -> weak reference to each router of the model; None: not seen yet
_reached = set()  # id() of each TopKConfig a call reached route() with
_WATCH_CALLS = 1 << 20  # module calls the hook looks at, at most (about 1 us each)
_watch_state = {"hook": None, "budget": _WATCH_CALLS, "decode": None}


def _router_classes():
    """The release's router classes: TopK of topk.py, HashTopK of hash_topk.py
    (where a model imported it)."""
    found = []
    for module, name in ((".topk", "TopK"), (".hash_topk", "HashTopK")):
        cls = getattr(sys.modules.get((__package__ or "") + module), name, None)
        if isinstance(cls, type):
            found.append(cls)
    return tuple(found)


def _router_text(name, router):
    cfg = getattr(router, "topk_config", None)
    if cfg is None:
        return "%s [%s]" % (name, type(router).__name__)
    fmt = getattr(cfg, "output_format", None)
    return "%s [%s]" % (name, getattr(fmt, "name", None) or "not called")


def never_routed():
    """The model's routers (TopK, HashTopK modules) whose calls never reached
    route(), named as in the model with how they route; None before the
    model's first forward."""
    if _routers is None:
        return None
    if id(_MISSING) in _reached or id(None) in _reached:
        return None  # a release whose call site passes no TopKConfig: no report
    # Calls under torch.compile run route() only while traced: a layer with a
    # plan reached it too.
    seen = _reached | {id(p.owners[0]) for p in list(_plans.values())
                       if p.owners and p.owners[0] is not None}
    out = []
    for name, ref in _routers.items():
        router = ref()
        if router is None:
            continue
        cfg = getattr(router, "topk_config", None)
        if cfg is None or id(cfg) not in seen:
            out.append(_router_text(name, router))
    return out


def _never_text(missing):
    return "%d (%s)" % (len(missing), ", ".join(missing[:8]) +
                        (", ..." if len(missing) > 8 else ""))


_core_stats_line = stats_line


def stats_line(snapshot=None):
    """The core's line, and the MoE layers OEA was never called for."""
    line = _core_stats_line(snapshot)
    missing = never_routed()
    if missing:
        line += "; layers never reaching OEA: " + _never_text(missing)
    elif missing is not None and _routers == {}:
        line += "; no MoE router (TopK) in the model: its MoE blocks route without the call site"
    return line


_core_export_metrics = export_metrics
_never_gauge = [None]


def export_metrics(snapshot=None):
    """The core's counters, and a gauge of the routers never reaching OEA
    ({prefix}layers_never_routed, per rank) once the model has been seen."""
    global _metrics
    done = _core_export_metrics(snapshot)
    missing = never_routed() if done else None
    if missing is None:
        return done
    try:
        if _never_gauge[0] is None:
            from prometheus_client import Gauge

            _never_gauge[0] = Gauge(
                METRICS_PREFIX + "layers_never_routed", "MoE layers (routers) of the model "
                "whose routing never reached the OEA call site", ("rank",), registry=None,
                multiprocess_mode="livemax")
        _never_gauge[0].labels(_rank_label()).set(len(missing))
    except OSError as exc:
        logger.warning("oeapatch: exporting OEA counters to %s failed (%s); not exported "
                       "any more", os.environ.get("PROMETHEUS_MULTIPROC_DIR"), exc)
        _metrics = False
        return False
    return done


def _outermost_module(frame, module):
    """The outermost nn.Module running on the stack from `frame` up (the model
    its runner calls), else `module`."""
    found = module
    for _ in range(_MAX_FRAMES):
        if frame is None:
            break
        owner = frame.f_locals.get("self") if "self" in frame.f_code.co_varnames else None
        if isinstance(owner, _torch.nn.Module):
            found = owner
        frame = frame.f_back
    return found


def _watch_forward(module, args):
    """The global forward pre-hook, until the first decode steps are over: a
    module call whose positional arguments hold SGLang's ForwardBatch runs
    inside a model forward, so its outermost module on the stack is the model:
    its routers are taken at the first such call. At the second decode batch
    (one OEA would re-route) the first is over: the report is made and the hook
    removed. It also removes itself after _WATCH_CALLS module calls (a server
    that never decodes, a model whose modules get no forward batch)."""
    global _routers
    if _is_compiling():
        return
    state = _watch_state
    state["budget"] -= 1
    if state["budget"] <= 0:
        _unwatch()
        return
    batch_class = state.get("batch_class")
    if batch_class is None:
        package = __package__ or ""
        batch_class = state["batch_class"] = getattr(sys.modules.get(
            package[: -len(".layers.moe")] + ".model_executor.forward_batch_info"),
            "ForwardBatch", None) or type(None)
    batch = None
    for arg in args[:4]:
        if isinstance(arg, batch_class) and arg is not None:
            batch = arg
            break
    if batch is None:
        return
    if _routers is None:
        import weakref

        classes = _router_classes()
        if not classes:  # a release without TopK (before Jul 2025): no report
            _unwatch()
            return
        model = _outermost_module(sys._getframe(1), module)
        _routers = {name: weakref.ref(sub) for name, sub in model.named_modules()
                    if isinstance(sub, classes)}
    if getattr(batch, "forward_mode", None) is None or _batch_verdict(batch) is not None:
        return
    first = state["decode"]
    if first is None:
        state["decode"] = _weak_or_id(batch)
        return
    if first() is batch:
        return
    _unwatch()
    _warn_never_routed()


def _weak_or_id(obj):
    import weakref

    try:
        return weakref.ref(obj)
    except TypeError:
        return lambda: None


def _unwatch():
    hook = _watch_state["hook"]
    if hook is not None:
        hook.remove()
        _watch_state["hook"] = None


def _warn_never_routed():
    missing = never_routed()
    if missing:
        logger.warning("oeapatch: OEA is on (k0=%d) but never reached %s of the model's %d "
                       "MoE layers in its first decode steps: they route without "
                       "select_experts (in-kernel routing, hash routing, a fused gate of "
                       "their own), so OEA leaves them as they are (`man "
                       "oeapatch`, \"Where OEA acts\")",
                       K0, _never_text(missing), len(_routers))
    return missing


def _model_seen():
    """Whether this process runs a model: its routers were taken at its first
    forward (_watch_forward)."""
    return _routers is not None


def _watch_layers():
    if not (ENABLED and _lib is not None):
        return
    _watch_state["hook"] = _torch.nn.modules.module.register_module_forward_pre_hook(
        _watch_forward)
    if STATS:
        import threading

        threading.Thread(target=_idle_stats_loop, name="oeapatch-oea-stats",
                         daemon=True).start()


_start()
_watch_layers()
