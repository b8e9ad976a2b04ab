# ------------------------------------------------------------ the recorder's hook
# (patches/binding-core/record_hook.py) what ties the recorder above
# (oea_record.py) to route(): with {{env_prefix}}RECORD set, every decode call
# that passes the adapter's gates is recorded (docs/recording.md), with OEA on,
# in shadow mode, or with {{env_prefix}}K0=0 (recording only: liboea is loaded
# for its recorder, the routing is left as it is). What a call records is fixed per plan (_rec_plan:
# the layer's number, its settings, the bias's bytes), so that a call adds
# one record() to route(): a few attribute reads and one ctypes call into liboea.
#
# Under CUDA graphs only eager calls run Python: a graph's replays are not
# recorded. Calls made while a graph is captured are counted by the recorder
# (graph_missed); with statistics on, liboea's own call count (graph replays
# included) less the eager calls that went to it is the number of calls the
# recording lacks, which the statistics line says.

_rec = dict(recorder=None, eager=0, numbers={}, taken={})


def _record_start():
    """_start()'s part with {{env_prefix}}RECORD set: route() runs (ENABLED)
    even with K0=0, and the recorder is made at the first call, when the
    process's rank is known (torch.distributed starts after this import)."""
    global ENABLED
    if not RECORD:
        return
    ENABLED = True
    _rec["recorder"] = False  # asked for, not made yet
    os.register_at_fork(after_in_child=_rec_forked)
    logger.info("oeapatch: recording the routing inputs of the decode calls to %s (each "
                "process: %s, at most %d MiB)%s", RECORD,
                recording_path(RECORD, 0, os.getpid()).replace("-rank0-", "-rank<R>-"),
                RECORD_CAP, "" if K0 > 0 else "; OEA is off ({{env_prefix}}K0=0): recording only")


def _rec_forked():
    """In a forked child (a worker forked by the framework after a first
    call): the parent's recorder is not this process's (its Recorder let go of
    it), so the child's first call makes its own, to its own file."""
    _rec["recorder"] = False
    _rec["eager"] = 0


def _recorder():
    """The process's Recorder, made at the first call (None: not recording,
    or it could not be made, which was said once). The recorder is liboea's:
    with {{env_prefix}}K0=0 (recording only) liboea is loaded for it, by the
    same rules as for routing."""
    rec = _rec["recorder"]
    if rec is False:
        rec = None
        try:
            dist = getattr(_torch, "distributed", None)
            rank = dist.get_rank() if dist is not None and dist.is_available() and \
                dist.is_initialized() else 0
            if _lib is not None:
                lib = _lib
            elif LIBRARY:
                lib = load_library(LIBRARY)
            else:
                raise OSError("no library path recorded and {{env_prefix}}LIBRARY is not set")
            rec = Recorder(RECORD, rank, RECORD_CAP << 20, "{{framework}}".lower(),
                           "{{env_prefix}}", lib)
            import atexit

            atexit.register(rec.close)
        except Exception as exc:  # never into the model: the server serves without it
            logger.warning("oeapatch: the routing recorder could not start (%s): nothing is "
                           "recorded", exc)
        _rec["recorder"] = rec
    return rec


def _rec_number(layer_id, owners, settings):
    """The layer's number in the recording: the framework's layer id where the
    call site has one (SGLang), else the number in the layer's name
    (vLLM's "model.layers.12.mlp.experts"), else one from 1000000 up in the
    order layers are first met. A number already taken by another
    configuration (settings, bias, dtypes: replay holds a layer to one) is
    not used twice."""
    number = _rec_named(layer_id, owners)
    taken = _rec["taken"]
    if number is None or taken.setdefault(number, settings) != settings:
        number = 1000000 + len(_rec["numbers"])
        _rec["numbers"][number] = True
        taken[number] = settings
    return number


def _rec_named(layer_id, owners):
    if isinstance(layer_id, int):
        return layer_id
    for owner in owners or ():
        for attr in ("layer_name", "prefix"):
            name = getattr(owner, attr, None)
            if isinstance(name, str):
                parts = name.split(".")
                for i, part in enumerate(parts[:-1]):
                    if part == "layers" and parts[i + 1].isdigit():
                        return int(parts[i + 1])
    return None


def _rec_plan(layer_id, owners, layer, router_logits, topk_ids):
    """What the plan's calls record: (layer number, settings, bias bytes), or
    None where a call of this configuration cannot be recorded (replay could
    not read it: docs/recording.md, "What replay checks")."""
    top_k_v, fused, grouped, scoring, groups, group_pick, bias, renorm = layer
    if router_logits.dim() != 2 or topk_ids.dim() != 2 or \
            router_logits.dtype not in _LOGITS_DTYPES or topk_ids.dtype not in _IDS_DTYPES:
        return None
    experts, columns = router_logits.shape[1], topk_ids.shape[1]
    shared = _num_shared(columns, top_k_v, fused)
    if shared is None or scoring not in _SCORING or experts > OEA_MAX_EXPERTS or \
            not 1 <= columns <= OEA_MAX_TOPK or (bias is not None and bias.numel() != experts):
        return None
    groups = int(groups or 0) if grouped else 0
    group_pick = int(group_pick or groups) if grouped else 0
    if groups <= 1 or experts % groups or not 1 <= group_pick <= groups:
        groups, group_pick = 0, 0  # as _plan_for hands them to liboea
    settings = {"experts": experts, "top_k": columns, "shared": shared, "scoring": scoring,
                "renormalize": bool(renorm), "groups": groups, "topk_group": group_pick,
                "min_batch": MIN_BATCH}
    bias = bias_bytes(bias)
    # one number, one configuration: replay batches a layer's rows together, so a
    # layer called with another dtype (a test's, a mixed deployment's) is another
    number = _rec_number(layer_id, owners, (settings, bias, router_logits.dtype, topk_ids.dtype))
    return (number, settings, bias)


def _record(plan, router_logits, topk_ids, num_token_non_padded, k0):
    """One eager decode call to the recorder, before liboea rewrites its ids."""
    rec = _rec["recorder"]
    if rec is False:
        rec = _recorder()
    if rec is None:
        return
    number, settings, bias = plan.rec
    if rec.record(number, settings, k0, router_logits, topk_ids, bias,
                  rows=num_token_non_padded) != 2 and k0:
        _rec["eager"] += 1  # a liboea call that runs now (not one captured into a graph)


def recording():
    """The recorder's figures (None: not recording): its file, calls recorded
    and dropped, calls made during CUDA-graph capture, bytes written, and why
    it stopped (None: it has not)."""
    rec = _rec["recorder"]
    if rec is None or not RECORD:
        return None
    if rec is False:
        return {"file": None, "recorded": 0, "dropped": 0, "graph_missed": 0, "written": 0,
                "stopped": None}
    figures = rec.figures()
    return {"file": rec.path, "recorded": figures["recorded"], "dropped": figures["dropped"],
            "graph_missed": figures["graph_missed"], "written": figures["written"],
            "stopped": figures["stopped"]}


def _graph_unseen(devices):
    """liboea calls the recording lacks because CUDA graphs replayed them (no
    Python runs then), or None where nobody can tell: no CUDA-graph capture
    seen (0), or statistics off (no device count)."""
    rec = _rec["recorder"]
    if not rec or not rec.graph_missed:
        return 0
    if not devices:
        return None
    calls = sum(row["calls"] for row in devices.values())
    return max(calls - _rec["eager"], 0)


_stats_line_before_recording = stats_line


def stats_line(snapshot=None):
    """The core's line, and the recorder's figures."""
    snapshot = snapshot if snapshot is not None else _snapshot()
    line = _stats_line_before_recording(snapshot)
    figures = recording()
    if figures is None:
        return line
    unseen = _graph_unseen(snapshot[2])
    line += "; recording %s: %d calls recorded, %d dropped%s%s" % (
        figures["file"] or "(no call yet)", figures["recorded"], figures["dropped"],
        "" if not figures["graph_missed"] else
        ", CUDA-graph replays not recorded: %s" % (
            "%d calls" % unseen if unseen is not None else "unknown (statistics with OEA on "
            "count them)"),
        ", stopped: " + figures["stopped"] if figures["stopped"] else "")
    return line
