# --------------------------------------------------------------- preparation
# (patches/binding-core/plans.py) torch's set-up, the custom op and one plan
# per layer configuration.

_torch = None
_ctypes = None
_Tensor = None
_int32 = None
_is_compiling = None


def _not_compiling():
    return False


_LOGITS_DTYPES = {}
_IDS_DTYPES = {}
_op = None
_plans = {}


class _MISSING:
    """An argument the call site did not pass. A class, not an object(): plan keys
    hold it, and torch 2.5's dynamo can hash a class in a dict key, not an object."""


_warned = set()


class StopServing(RuntimeError):
    """Raised on purpose, and the only exception route() lets reach the model:
    a server that must not run as it is (ranks with different OEA settings
    would combine different experts; under {{env_prefix}}STRICT, CUDA tensors
    with a liboea built without CUDA). Both are met at the first MoE call, in
    the server's start-up forward (warm-up, CUDA-graph capture), not while it
    serves. Everything else that goes wrong inside route() is _failed()."""


def _failed(exc, topk_weights, topk_ids):
    """route()'s fallback: an error inside it (a bug of ours, a tensor we did
    not expect) must never fail the model's forward. The call keeps the
    framework's own routing, counted as "error", logged once per kind with the
    traceback; returns (topk_weights, topk_ids) as they came. liboea checks
    every argument before it writes, so a failed call has written nothing."""
    if isinstance(exc, StopServing):
        raise exc
    shape = getattr(topk_ids, "shape", ())
    rows = shape[0] if len(shape) == 2 else 0
    _skip("error", rows if STATS else None)
    key = ("error", type(exc).__name__, str(exc)[:160])
    if key not in _warned:
        _warned.add(key)
        logger.warning("oeapatch: OEA skipped: an error inside the binding (%s: %s); this call "
                       "keeps the framework's routing, and so does every call that meets it "
                       "(counted as \"error\")", type(exc).__name__, exc, exc_info=exc)
    return topk_weights, topk_ids


def _warn_once(key, text, *args):
    if key not in _warned:
        _warned.add(key)
        logger.warning("oeapatch: OEA skipped: " + text, *args)


def _num_shared(num_columns, top_k, fused):
    """Fused shared-expert columns present in topk_ids at the call site, or None
    when the shapes do not add up."""
    fused = int(fused or 0)
    if top_k is None:
        return fused if fused < num_columns else None
    top_k = int(top_k)
    if fused == 0:
        return 0 if num_columns == top_k else None
    if num_columns == top_k:
        return fused  # appended by the routing helper (DeepSeek grouped paths)
    if num_columns == top_k - fused:
        return 0  # appended after the chain (aiter, _post_process_topk_ids)
    return None


class _Plan:
    """One layer configuration: what liboea gets besides pointers and rows."""

    __slots__ = ("skip", "problem", "num_shared", "routed", "scoring", "bias", "bias_source",
                 "checked", "renormalize", "launch", "owners", "index", "scratch", "fast",
                 "dirty", "valid_set", "cuda_index", "widths", "rec", "k0_rows", "ready", "plain")

    def __init__(self):
        self.skip = None
        self.problem = None
        self.checked = False
        self.bias_source = None
        self.fast = False  # the tensors' dtypes are liboea's: route()'s fast path
        self.dirty = False  # _launch wrote strides or a dtype of its own
        self.valid_set = False  # num_valid_rows points at a caller's tensor
        self.cuda_index = None
        self.rec = None  # what its calls record (record_hook.py), or None
        self.k0_rows = None  # K0 bands: the k0 of each row count (0: left alone), else None
        # route()'s shortcuts, each fixed once it is True: `ready`, judged and
        # nothing to do per call besides the launch (no skip, no bands, no
        # recording: set by _check_weights); `plain`, a launch that is the
        # ctypes call alone (CPU, one k0, no bias copy: set by _plan_for).
        self.ready = False
        self.plain = False

    def reset_strides(self):
        """The fields route()'s fast path relies on: contiguous rows of the
        plan's widths, logits of the plan's dtype."""
        p = self.problem
        p.logits_dtype, num_experts, num_columns = self.widths
        p.logits_row_stride = num_experts
        p.ids_row_stride = num_columns
        p.weights_row_stride = num_columns
        self.dirty = False


def _new_plan(key, router_logits, topk_ids, topk_weights, owners, layer, layer_id=None):
    """The plan for `key`, prepared and kept (a half-built one is dropped when
    preparing raises). `layer` is the adapter's mapping of the call's settings:
    (top_k, fused shared experts, grouped, scoring name, num_expert_group,
    topk_group, bias tensor or None, renormalize); `owners` keeps alive the
    objects whose id() is in the key, so that no other object reuses them;
    `layer_id` the framework's layer number where the call site has one (the
    recording's). Without liboea (recording only) a plan only records."""
    try:
        if _lib is None:
            plan = _plans[key] = _Plan()
            plan.owners, plan.skip = owners, "record_only"
        else:
            plan = _plan_for(key, router_logits, topk_ids, topk_weights, owners, *layer)
        if _rec["recorder"] is not None and plan.skip in (None, "k0_ge_topk", "record_only"):
            plan.rec = _rec_plan(layer_id, owners, layer, router_logits, topk_ids)
        return plan
    except BaseException:
        # Not kept half-built: a later call prepares again and meets the same
        # error (strict settings, a bias that cannot be converted).
        _plans.pop(key, None)
        raise


def _plan_for(key, router_logits, topk_ids, topk_weights, owners, top_k_v, fused, grouped,
              scoring_name, groups, group_pick, bias, renorm):
    plan = _Plan()
    plan.owners = owners
    _plans[key] = plan
    n, num_columns = topk_ids.shape
    num_experts = router_logits.shape[1]
    if num_experts > OEA_MAX_EXPERTS or num_columns > OEA_MAX_TOPK or num_columns < 1:
        _warn_once("limits", "%d experts x %d columns exceed liboea's limits (%d, %d)",
                   num_experts, num_columns, OEA_MAX_EXPERTS, OEA_MAX_TOPK)
        plan.skip = "shape"
        return plan
    num_shared = _num_shared(num_columns, top_k_v, fused)
    if num_shared is None:
        _warn_once(("shared", num_columns, top_k_v, fused),
                   "topk_ids has %d columns, which fits neither top_k=%s nor top_k minus "
                   "%s fused shared experts", num_columns, top_k_v, fused)
        plan.skip = "shape"
        return plan
    routed = num_columns - num_shared
    k0_rows = _k0_rows(routed) if K0_BANDS is not None else None
    if (K0 >= routed) if k0_rows is None else not any(k0_rows):
        logger.warning("oeapatch: {{env_prefix}}K0=%s >= this layer's routed top-k (%d): "
                       "OEA leaves its routing unchanged", K0_TEXT, routed)
        plan.skip = "k0_ge_topk"
        return plan

    scoring = _SCORING.get(scoring_name)
    if scoring is None:
        _warn_once(("scoring", scoring_name), "scoring function %r is not supported "
                   "(softmax, sigmoid)", scoring_name)
        plan.skip = "scoring"
        return plan

    if not grouped:
        groups, group_pick = 0, 0
    else:
        groups = int(groups or 0)
        group_pick = int(group_pick or groups)
        if groups > 0 and (num_experts % groups != 0 or not 1 <= group_pick <= groups):
            _warn_once(("groups", groups, group_pick), "num_expert_group=%d, topk_group=%d "
                       "do not fit %d experts", groups, group_pick, num_experts)
            plan.skip = "shape"
            return plan
        if groups <= 1:
            groups, group_pick = 0, 0

    device = topk_ids.device
    if router_logits.device != device or topk_weights.device != device:
        _warn_once("devices", "router_logits on %s, topk_ids on %s, topk_weights on %s",
                   router_logits.device, device, topk_weights.device)
        plan.skip = "shape"
        return plan
    if device.type == "cuda" and not _has_cuda:
        # The first CUDA batch is met during the server's start (warm-up, graph
        # capture), so under strict settings this stops the server at start
        # like any other failure to enable OEA, rather than serving without it.
        text = "CUDA tensors, but liboea at %s was built without CUDA" % LIBRARY
        if STRICT:
            raise StopServing("oeapatch: {{env_prefix}}K0=%d: %s (rebuild liboea with a CUDA "
                               "toolkit, or set {{env_prefix}}STRICT=false to run without OEA)"
                               % (K0, text))
        _warn_once("nocuda", "%s", text)
        plan.skip = "device"
        return plan
    if device.type not in ("cuda", "cpu"):
        _warn_once(("devtype", device.type), "device type %s is not supported", device.type)
        plan.skip = "device"
        return plan
    torch = _torch
    if topk_ids.dtype not in _IDS_DTYPES or not router_logits.is_floating_point() or \
            not topk_weights.is_floating_point():
        _warn_once(("dtypes", topk_ids.dtype, router_logits.dtype, topk_weights.dtype),
                   "dtypes ids %s, logits %s, weights %s", topk_ids.dtype,
                   router_logits.dtype, topk_weights.dtype)
        plan.skip = "shape"
        return plan
    if bias is not None:
        if bias.numel() != num_experts:
            _warn_once("bias", "correction_bias has %d entries for %d experts",
                       bias.numel(), num_experts)
            plan.skip = "shape"
            return plan
        source = bias
        bias = bias.reshape(-1).to(device=device, dtype=torch.float32).contiguous()
        # A converted copy is refreshed before every launch (_launch), so that a
        # weight update in place (update_weights_from_*) reaches the routing;
        # a float32 bias is read where it lives.
        plan.bias_source = source if bias.data_ptr() != source.data_ptr() else None

    renorm = bool(renorm)
    ctypes = _ctypes
    p = OeaProblem()
    p.struct_size = ctypes.sizeof(OeaProblem)
    p.num_experts = num_experts
    p.top_k = num_columns
    p.num_shared = num_shared
    p.k0 = K0 if k0_rows is None else max(k0_rows)  # bands: set per call (route.py)
    plan.k0_rows = k0_rows
    p.scoring = scoring
    p.renormalize = 1 if renorm else 0
    p.num_expert_group = groups
    p.topk_group = group_pick
    p.correction_bias = bias.data_ptr() if bias is not None else None
    p.ids_dtype = _IDS_DTYPES[topk_ids.dtype]
    p.weights_dtype = _DTYPE_F32
    p.min_valid_rows = MIN_BATCH
    # Shadow: the same call, counted, writing nothing (the framework's ids and
    # weights are only read): no copy, no scratch, no work per call.
    p.flags = _FLAG_COUNT_ONLY if SHADOW else 0
    # No per-call oea_stats: liboea adds the call's figures to the device's
    # running totals itself (stats.py), graph replays included.
    totals = _stats_buffer(device) if STATS else None
    if totals is not None:
        p.totals = totals.data_ptr()
    plan.problem = p
    plan.num_shared = num_shared
    plan.routed = routed
    plan.scoring = scoring_name
    plan.bias = bias  # keeps the float32 copy alive for the pointer above
    plan.renormalize = renorm
    plan.launch = (_lib.oea_route_cuda if device.type == "cuda" else _lib.oea_route_host,
                   ctypes.addressof(p))
    if device.type == "cuda":
        plan.cuda_index = device.index if device.index is not None else \
            _torch.cuda.current_device()
    plan.plain = plan.cuda_index is None and k0_rows is None and plan.bias_source is None
    logits_dtype = _LOGITS_DTYPES.get(router_logits.dtype)
    plan.fast = logits_dtype is not None and topk_weights.dtype == torch.float32
    plan.widths = (logits_dtype if logits_dtype is not None else _DTYPE_F32, num_experts,
                   num_columns)
    plan.reset_strides()
    # The custom op names its plan by index: registered here, in eager code, since
    # torch.compile defers a traced function's list mutations past the graph.
    plan.index = len(_plan_ids)
    _plan_ids.append(plan)
    # the custom op's totals argument (what it declares it mutates): a tensor
    # even with statistics off, never written then (p.totals stays NULL)
    plan.scratch = totals if totals is not None else _stats_buffer(device)
    return plan


def _k0_rows(routed):
    """K0 bands as a k0 per row count 0..OEA_MAX_ROWS for a layer of `routed`
    routed columns: a band's k0 at or above it leaves its calls alone (0),
    as one K0 would the whole layer. Made once per plan: a call's k0 is then
    one index."""
    out = [0] * (OEA_MAX_ROWS + 1)
    for lo, hi, k0 in K0_BANDS:
        for rows in range(lo, (hi or OEA_MAX_ROWS) + 1):
            if rows <= OEA_MAX_ROWS:
                out[rows] = k0 if k0 < routed else 0
    return tuple(out)


def _weights_tolerance(*dtypes):
    """How far apart one row's weight/score ratios may be, relative to the
    largest, for weights that are score(e) times one factor: 2e-3 for fp32
    arithmetic, and 4 machine epsilons of the coarsest dtype the framework
    computed in. Grouped and biased top-k compute softmax or sigmoid in the
    router logits' dtype (vLLM up to 0.26, SGLang's torch paths), and some
    paths return bf16 or fp16 weights: each weight is then rounded a few times
    (the score, the sum that renormalises it, the division), a relative error
    of up to about 2 epsilon each way, so ratios 4 epsilon apart (3.1% in
    bf16, 0.39% in fp16) are still one factor. Weights that are not scores at
    all (raw logits, another scoring function) differ by far more: their ratio
    follows exp(-x) or 1/sigmoid(x) across the row."""
    eps = max((_torch.finfo(d).eps for d in dtypes if d.is_floating_point), default=0.0)
    return max(2e-3, 4.0 * eps)


def _weights_reproducible(plan, logits, ids, weights):
    """liboea writes score(e) times one factor per row (docs/runtime.md). A routing
    path whose weights are not score(e) times a per-row factor (raw logits, other
    scoring) cannot be reproduced and is skipped. Checked on the host once per
    configuration, on a call made outside CUDA-graph capture, with a tolerance
    for the rounding of the dtypes the framework computed in (_weights_tolerance)."""
    torch = _torch
    tolerance = _weights_tolerance(logits.dtype, weights.dtype)
    routed = plan.routed
    ids = ids[:, :routed].long()
    valid = (ids >= 0).all(dim=1)
    if not bool(valid.any()):
        return None  # nothing to judge by yet
    logits = logits[valid].float()
    ids = ids[valid]
    w = weights[valid][:, :routed].float()
    scores = logits.softmax(-1) if plan.scoring == "softmax" else logits.sigmoid()
    ratio = w / scores.gather(1, ids).clamp_min(1e-30)
    spread = (ratio.amax(1) - ratio.amin(1)).abs()
    return bool((spread <= tolerance * ratio.abs().amax(1) + 1e-6).all())


def _init_torch():
    import ctypes

    import torch

    global _op, _torch, _ctypes, _is_compiling, _verdict_compiled, _Tensor, _int32
    global _current_stream, _cuda_device
    _torch, _ctypes = torch, ctypes
    _Tensor, _int32 = torch.Tensor, torch.int32
    compiler = getattr(torch, "compiler", None)
    _is_compiling = getattr(compiler, "is_compiling", None)
    if _is_compiling is None:  # torch 2.0 - 2.2
        _is_compiling = getattr(getattr(torch, "_dynamo", None), "is_compiling", None)
    if _is_compiling is None:
        _is_compiling = _not_compiling
    # The raw stream getter torch's own compiled code uses (an int, no Stream
    # object); torch.cuda.current_stream where a build lacks it.
    raw = getattr(torch._C, "_cuda_getCurrentRawStream", None)
    if raw is not None:
        _current_stream = raw
    # Likewise the current device (torch.cuda.current_device without its
    # initialisation check: a CUDA tensor exists when this is asked).
    _cuda_device = getattr(torch._C, "_cuda_getDevice", None) or torch.cuda.current_device
    acr = getattr(compiler, "assume_constant_result", None)
    if acr is None:
        acr = getattr(getattr(torch, "_dynamo", None), "assume_constant_result", None)
    if acr is not None:
        _verdict_compiled = acr(_verdict_traced)
    _LOGITS_DTYPES.update({torch.float32: _DTYPE_F32, torch.bfloat16: _DTYPE_BF16,
                           torch.float16: _DTYPE_F16})
    _IDS_DTYPES.update({torch.int32: _DTYPE_I32, torch.int64: _DTYPE_I64})
    _op = _register_op()


def _register_op():
    """torch.library.custom_op (torch >= 2.4): torch.compile sees one opaque
    op that mutates ids, weights and the totals (in shadow mode: the totals
    only), with a fake impl."""
    import torch
    from typing import Optional

    library = getattr(torch, "library", None)
    if library is None or not hasattr(library, "custom_op"):
        return None
    # One op per definition: the op's body routes by this module's plans, so a
    # process that imports two bindings (SGLang 0.4 installs vLLM) keeps two.
    name = "oeapatch::%s_route_abi%d%s" % (_PATCH.replace("-", "_"), ABI_VERSION,
                                           "_shadow" if SHADOW else "")
    namespace, _, opname = name.partition("::")
    if hasattr(getattr(torch.ops, namespace), opname):
        # Registered already in this process (a second copy of the framework): reuse it.
        return getattr(getattr(torch.ops, namespace), opname).default

    @library.custom_op(name, mutates_args=("totals",) if SHADOW else
                       ("topk_ids", "topk_weights", "totals"))
    def oea_route_op(
        router_logits: torch.Tensor,
        topk_ids: torch.Tensor,
        topk_weights: torch.Tensor,
        num_valid_rows: Optional[torch.Tensor],
        totals: torch.Tensor,
        plan_id: int,
        rows: int,
    ) -> None:
        # Decided here, each time the compiled code runs (or is captured into
        # a CUDA graph), not when it was traced: a decision traced into the
        # graph would be reused by every later call that passes the graph's
        # guards, whatever the batch's mode (an extend batch through a graph
        # first traced for decode would be re-routed).
        # Compiled code runs no counting of route()'s: the call is counted
        # here, once, with all its rows (padding included, as route() counts).
        try:
            verdict = _verdict_deep()
            if verdict is not None:
                if STATS:
                    _skip(verdict, topk_ids.shape[0])
                return
            # rows: all of them, or a host-side num_token_non_padded (a tensor
            # count travels in num_valid_rows and is read on the device).
            plan = _plan_ids[plan_id]
            _launch(plan, router_logits, topk_ids, topk_weights, num_valid_rows, rows)
        except Exception as exc:  # route()'s rule holds in compiled code too
            _failed(exc, topk_weights, topk_ids)
            return
        if STATS:
            _launched(topk_ids.shape[0])

    @oea_route_op.register_fake
    def _(router_logits, topk_ids, topk_weights, num_valid_rows, totals, plan_id, rows):
        return None

    return oea_route_op


_plan_ids = []
