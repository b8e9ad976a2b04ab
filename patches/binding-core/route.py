# ------------------------------------------------------------------- launch
# (patches/binding-core/route.py) one liboea call on prepared tensors, the
# ranks' check, and the skeleton every adapter's route() follows.


def _launch(plan, logits, ids, weights, num_valid, rows):
    """One liboea call from the custom op, or for tensors off the fast path of
    route(): dtype, strides and pointers into the prepared block."""
    p = plan.problem
    p.n = rows
    p.logits_dtype = _LOGITS_DTYPES[logits.dtype]
    p.logits_row_stride = logits.stride(0) if rows > 1 else logits.shape[1]
    p.logits = logits.data_ptr()
    p.ids_row_stride = ids.stride(0) if rows > 1 else ids.shape[1]
    p.weights_row_stride = weights.stride(0) if rows > 1 else weights.shape[1]
    p.ids = ids.data_ptr()
    p.weights = weights.data_ptr()
    p.num_valid_rows = num_valid.data_ptr() if num_valid is not None else None
    plan.valid_set = num_valid is not None
    plan.dirty = True  # route()'s fast path sets its own strides and dtype again
    _call(plan, ids)


def _call(plan, ids):
    if plan.k0_rows is not None:
        # K0 bands, for calls from the custom op too: the k0 of the call's rows
        k0 = plan.k0_rows[plan.problem.n]
        if not k0:
            return  # this band leaves its calls alone
        plan.problem.k0 = k0
    if plan.bias_source is not None:
        plan.bias.copy_(plan.bias_source.reshape(-1))
    fn, address = plan.launch
    index = plan.cuda_index
    if index is None:
        status = fn(address)
    elif _cuda_device() == index:
        # The caller's stream, read now: a stream cached earlier would put the
        # launch outside the CUDA graph being captured.
        status = fn(address, _current_stream(index))
    else:
        # liboea launches on the current device: make it the tensors' one.
        with _torch.cuda.device(index):
            status = fn(address, _current_stream(index))
    if status != OEA_OK:
        _raise_status(status)


def _raise_status(status):
    raise RuntimeError("oeapatch: liboea failed (status %d): %s"
                       % (status, _message(_lib, status)))


def _current_stream_fallback(index):
    torch = _torch
    return torch.cuda.current_stream(torch.device("cuda", index)).cuda_stream


_current_stream = _current_stream_fallback
_cuda_device = None  # torch._C._cuda_getDevice, or torch.cuda.current_device


def _row_ok(t, width):
    """Columns contiguous and rows that do not overlap."""
    if t.dim() != 2:
        return False
    if t.shape[0] <= 1:
        return t.shape[1] <= 1 or t.stride(1) == 1
    return (t.shape[1] <= 1 or t.stride(1) == 1) and t.stride(0) >= width


def _normalise(logits, ids, weights):
    """Tensors liboea can take, for calls off the fast path: returns (logits,
    ids, weights, dtype to cast the weights back to or None)."""
    if logits.dtype not in _LOGITS_DTYPES:
        logits = logits.float()
    if not _row_ok(logits, logits.shape[1]):
        logits = logits.contiguous()
    num_columns = ids.shape[1]
    if not _row_ok(ids, num_columns):
        ids = ids.contiguous() if not ids.is_contiguous() else ids.clone()
    cast_back = None
    if weights.dtype != _torch.float32:
        cast_back = weights.dtype
        weights = weights.float()
    if not _row_ok(weights, num_columns):
        weights = weights.contiguous() if not weights.is_contiguous() else weights.clone()
    return logits, ids, weights, cast_back


# ------------------------------------------------------------------- ranks
# the same OEA settings on every rank.

# How long a silent rank is waited for before a warning. A module constant, not
# a setting: the multi-process test (tests/sglang/release_check.py, phase ranks)
# sets it to a few seconds before the first call.
_RANKS_WAIT_S = 120.0
_ranks = {}  # the check's state: keys, mine, deadline, next poll
_ranks_done = False  # the check is over (compared, warned, or no torch.distributed)


def _ranks_over():
    global _ranks_done
    _ranks_done = True


def check_ranks():
    """Where torch.distributed is initialised, every rank publishes its OEA
    settings and library ABI once in the default store; once all ranks have,
    each compares them with its own: different ones would combine partial
    results of different experts, so a difference raises RuntimeError naming
    the ranks. Never blocks: a rank may reach its first MoE layer late or never
    (a pipeline stage without one, an idle DP-attention rank), so the store is
    polled without waiting, at most once a second, and ranks still silent after
    _RANKS_WAIT_S (120 s) get one warning naming them. Returns this rank's
    settings string when the comparison was made, else None."""
    if _ranks_done:
        return None
    now = time.monotonic()
    if now < _ranks.get("next", now):
        return None
    torch = _torch
    dist = getattr(torch, "distributed", None)
    if dist is None or not dist.is_available() or not dist.is_initialized():
        _ranks_over()
        return None
    from torch.distributed import distributed_c10d

    store = distributed_c10d._get_default_store()
    if "keys" not in _ranks:
        rank, world = dist.get_rank(), dist.get_world_size()
        mine = "k0=%s min_batch=%d max_tokens=%d speculative=%d mode=%s abi=%s" % (
            K0_TEXT, MIN_BATCH, MAX_TOKENS, SPECULATIVE, SETTINGS["mode"],
            ABI_VERSION if _lib is not None else "off")
        prefix = "oeapatch/%s/%d/" % (_PATCH, _PATCH_VERSION)
        store.set(prefix + str(rank), mine)
        _ranks.update(rank=rank, mine=mine, keys=[prefix + str(r) for r in range(world)],
                      deadline=now + _RANKS_WAIT_S)
    _ranks["next"] = now + 1.0
    keys, rank, mine = _ranks["keys"], _ranks["rank"], _ranks["mine"]
    if not store.check(keys):
        if now >= _ranks["deadline"]:
            _ranks_over()
            silent = [r for r, k in enumerate(keys) if not store.check([k])]
            logger.warning("oeapatch: rank %d runs OEA (%s); ranks %s reported no OEA settings "
                           "within %d s (started with {{env_prefix}}K0=0, or no MoE layer on "
                           "them?): set the same {{env_prefix}}* on every rank", rank, mine,
                           silent, int(_RANKS_WAIT_S))
        return None
    _ranks_over()
    theirs = {r: store.get(k).decode() for r, k in enumerate(keys)}
    differ = sorted(r for r, v in theirs.items() if v != mine)
    if differ:
        raise StopServing("oeapatch: OEA settings differ between ranks: rank %d has %s; %s"
                           % (rank, mine, "; ".join("rank %d has %s" % (r, theirs[r])
                                                    for r in differ)))
    return mine

# ------------------------------------------------------------- the route skeleton
# route() is the adapter's (its parameters are the call site's arguments). It
# runs, so that every framework counts and gates alike: the compiling check and
# _cold() until the ranks agree and liboea is loaded; its argument gates (a skip
# counted with _skip_args); the layer's settings as one tuple; then _route(),
# which does the rest with as few Python steps as a call allows (it runs once
# per MoE layer per eager step: docs/performance.md, host overhead), or says
# that the call's configuration has no plan yet (None): the adapter prepares
# one (_new_plan under _plan_key) and hands it to _route() again.


def _cold(compiling):
    """route()'s first step while the ranks' check is not over or no liboea
    is loaded: the check, then True when the call has nothing to do (no
    liboea, and not recording)."""
    if not _ranks_done and not compiling:
        check_ranks()
    return _lib is None and _rec["recorder"] is None


def _skip_args(reason, topk_ids, compiling):
    """A call the adapter's argument gates leave alone, counted with its rows
    (statistics on, eager: a trace counts nothing, the custom op counts)."""
    if STATS and not compiling:
        shape = topk_ids.shape
        _skip(reason, shape[0] if len(shape) == 2 else 0)


def _plan_key(settings, router_logits, topk_ids, topk_weights):
    """The plan's key: the layer's settings as the adapter keys them, then what
    the prepared block depends on in the tensors (_route's `facts`)."""
    return (settings, router_logits.shape[1], topk_ids.shape[1], router_logits.dtype,
            topk_ids.dtype, topk_weights.dtype, router_logits.device, topk_ids.device,
            topk_weights.device)


# settings -> (facts, plan): the plan a layer's last call used, so that a call
# compares its tensors' facts with one tuple instead of hashing them into a
# key. Always a plan of _plans under (settings,) + facts: plans are never
# replaced or dropped once made.
_hot = {}


def _route(settings, router_logits, topk_weights, topk_ids, num_token_non_padded, compiling,
           plan=None, used=None):
    """Everything after the adapter's argument gates: the row-count and shape
    gate, the plan (`plan`, else the one of `settings` and the tensors' facts;
    None when there is none yet), its skip, the weights check, the adapter's
    decode gate (_verdict_eager, or the custom op's), the K0 bands, the
    recording and the launch. Returns (weights, ids), or None for a call whose
    configuration has no plan yet (nothing counted: the adapter prepares it
    and calls again with it). num_token_non_padded: the valid rows (a host int,
    or a device tensor read by liboea's min_valid_rows gate), or None: all n;
    `used`, a list the plan is appended to once the call has one. Each tensor
    attribute is read once."""
    ids_shape = topk_ids.shape
    if len(ids_shape) == 2:
        n, width = ids_shape
    else:  # no rows to route
        n = width = 0
    counted = n if STATS and not compiling else None
    if n < MIN_BATCH:
        _skip("small_batch", counted)
        return topk_weights, topk_ids
    if n > MAX_TOKENS:
        _skip("large_batch", counted)
        return topk_weights, topk_ids
    logits_shape = router_logits.shape
    if len(logits_shape) != 2 or logits_shape[0] != n or topk_weights.shape != ids_shape:
        _warn_once("shape", "router_logits %s, topk_ids %s, topk_weights %s",
                   tuple(logits_shape), tuple(ids_shape), tuple(topk_weights.shape))
        _skip("shape", counted)
        return topk_weights, topk_ids
    if plan is None:
        facts = (logits_shape[1], width, router_logits.dtype, topk_ids.dtype,
                 topk_weights.dtype, router_logits.device, topk_ids.device, topk_weights.device)
        # (not while torch.compile traces: a global dict read there is guarded
        # on, and one written is replayed after the graph; _plans is only read)
        hot = None if compiling else _hot.get(settings)
        if hot is not None and hot[0] == facts:
            plan = hot[1]
        else:
            plan = _plans.get((settings,) + facts)
            if plan is None:
                return None
            if not compiling:
                _hot[settings] = (facts, plan)
    if used is not None:
        used.append(plan)

    if not plan.ready:
        # the plan's own skip, the weights not judged yet, K0 bands, recording
        if plan.skip is not None:
            if plan.rec is not None and not compiling and _verdict_eager() is None:
                _record(plan, router_logits, topk_ids, num_token_non_padded, 0)
            _skip(plan.skip, counted)
            return topk_weights, topk_ids
        if not plan.checked and not _check_weights(plan, router_logits, topk_ids,
                                                   topk_weights, compiling):
            _skip(plan.skip or "weights", counted)
            return topk_weights, topk_ids
    if compiling:
        if _op is not None:
            verdict = None  # the custom op decides each time it runs
        else:
            verdict = _verdict_compiled() if _verdict_compiled is not None else "no_mode"
    else:
        verdict = _verdict_eager()
    if verdict is not None:
        _skip(verdict, counted)
        return topk_weights, topk_ids
    if not plan.ready and not compiling:
        if plan.k0_rows is not None:
            # K0 bands: the k0 of the call's valid rows where the host has them,
            # else of its rows (a CUDA graph's rows, padding included)
            valid = num_token_non_padded
            k0 = plan.k0_rows[max(0, min(n, valid)) if type(valid) is int else n]
            if not k0:
                if plan.rec is not None:
                    _record(plan, router_logits, topk_ids, num_token_non_padded, 0)
                _skip("k0_band", counted)
                return topk_weights, topk_ids
            plan.problem.k0 = k0
        if plan.rec is not None:
            _record(plan, router_logits, topk_ids, num_token_non_padded, plan.problem.k0)

    # ---- launch
    rows = n
    num_valid = None
    if num_token_non_padded is not None:
        if isinstance(num_token_non_padded, _Tensor):
            # On the device, liboea's min_valid_rows gate (ABI 2) counts the
            # valid rows where they are: graph-safe, no host read.
            num_valid = num_token_non_padded
            if num_valid.dtype != _int32 or num_valid.device != topk_ids.device or \
                    num_valid.dim() != 1 or compiling:
                num_valid = num_valid.reshape(-1)[:1].to(device=topk_ids.device,
                                                          dtype=_int32)
        else:
            rows = max(0, min(n, int(num_token_non_padded)))
            if rows < MIN_BATCH:
                _skip("small_batch", counted)
                return topk_weights, topk_ids

    if compiling or not plan.fast or not (router_logits.is_contiguous() and
                                          topk_ids.is_contiguous() and
                                          topk_weights.is_contiguous()):
        logits, ids, weights, cast_back = _normalise(router_logits, topk_ids, topk_weights)
        if _op is not None and compiling:
            _op(logits, ids, weights, num_valid, plan.scratch, plan.index, rows)
        else:
            _launch(plan, logits, ids, weights, num_valid, rows)
        if counted is not None:
            _launched(counted)
        if SHADOW:
            return topk_weights, topk_ids  # counted only (OEA_FLAG_COUNT_ONLY)
        if cast_back is not None:
            weights = weights.to(cast_back)
        return weights, ids
    # The fast path, shadow mode's too: contiguous tensors of the plan's dtypes,
    # whose row strides are the widths the block was prepared with, so only the
    # row count and the pointers are written; shadow's calls write nothing (the
    # plan's OEA_FLAG_COUNT_ONLY), so the framework's tensors go back as they came.
    p = plan.problem
    if plan.dirty:
        plan.reset_strides()
    p.n = rows
    p.logits = router_logits.data_ptr()
    p.ids = topk_ids.data_ptr()
    p.weights = topk_weights.data_ptr()
    if num_valid is not None:
        p.num_valid_rows = num_valid.data_ptr()
        plan.valid_set = True
    elif plan.valid_set:
        p.num_valid_rows = None
        plan.valid_set = False
    if plan.plain:
        fn, address = plan.launch  # CPU, one k0, no bias copy: nothing more
        status = fn(address)
        if status != OEA_OK:
            _raise_status(status)
    else:
        _call(plan, topk_ids)
    if counted is not None:
        _launched(counted)
    return topk_weights, topk_ids


def _check_weights(plan, router_logits, topk_ids, topk_weights, compiling):
    """Once per plan, on an eager call outside CUDA-graph capture: are the
    routing path's weights reproducible by liboea? False: skip this call."""
    if compiling or (topk_ids.is_cuda and _torch.cuda.is_current_stream_capturing()):
        return False  # not judged yet: never approximate
    ok = _weights_reproducible(plan, router_logits, topk_ids, topk_weights)
    if ok is None:
        return False
    plan.checked = True
    plan.ready = ok and plan.skip is None and plan.k0_rows is None and plan.rec is None
    if not ok:
        logger.warning("oeapatch: OEA skipped on a layer whose routing path returns "
                       "weights that are not %s scores times one factor per row "
                       "(not reproducible)", plan.scoring)
        plan.skip = "weights"
        plan.rec = None  # a layer liboea never routes is no traffic to replay
        return False
    return True



def _verdict_traced():
    # torch < 2.4 (no custom op): run for real once while torch.compile traces
    # (assume_constant_result), so the decision is part of the graph: right for
    # a graph compiled for one mode only (SGLang's decode graphs), which is why
    # torch >= 2.4 decides in the op instead, each time it runs.
    return _verdict_deep()


_verdict_compiled = None  # _verdict_traced wrapped by assume_constant_result


def _start():
    """The adapter's last statement: the skip counters in its order, then, with
    K0 > 0, liboea, torch and the custom op, and the start-up line."""
    missing = [r for r in CORE_SKIP_REASONS if r not in SKIP_REASONS]
    if missing:
        raise RuntimeError("oeapatch: the adapter's SKIP_REASONS lacks %s" % ", ".join(missing))
    _skipped.update(dict.fromkeys(SKIP_REASONS, 0))
    if K0 > 0:
        _enable()
    _record_start()
    if ENABLED:
        _init_torch()
    _startup_line()


def _startup_line():
    if not ENABLED or _lib is None:
        return  # off, or the warning of _enable() said why
    logger.info(
        "oeapatch: OEA routing %s: k0=%s (layers with routed top-k <= %d are left alone), "
        "batches of %d..%d valid rows, decode detection: %s, strict=%s, stats=%s, "
        "liboea %s (ABI %d, %s)",
        "in shadow mode (decided, computed and counted; the framework's routing is kept)"
        if SHADOW else "on", K0_TEXT, K0, MIN_BATCH, MAX_TOKENS, DECODE_DETECTION, STRICT,
        ("every %d s" % STATS_INTERVAL) if STATS else "off", LIBRARY, ABI_VERSION,
        "CUDA" if _has_cuda else "CPU only")
