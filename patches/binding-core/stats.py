# ------------------------------------------------------------------ statistics
# (patches/binding-core/stats.py) counts, the statistics line, the Prometheus export.

# Skip reasons counted (rows) with {{env_prefix}}STATS on: the core's own; the
# adapter's SKIP_REASONS lists them with its gate's, in the order they are shown.
CORE_SKIP_REASONS = ("small_batch", "large_batch", "shape", "k0_ge_topk", "weights", "scoring",
                     "device", "record_only", "k0_band", "error")
# Each call counted once, where it ends: its rows either went to liboea
# ("launched") or were left alone (_skipped, by reason); rows is their sum,
# worked out when read, so a line can never show rows that are in neither.
# [calls, rows launched]: a list, the cheapest count per call (route()'s path).
_tally = [0, 0]
_skipped = {}  # reason -> rows, the adapter's SKIP_REASONS in order (_start)
_last_log = [0.0]
_monotonic = time.monotonic
_stats_buffers = {}

# oea_totals (native/include/oea.h; docs/oea-semantics.md rule 10): the
# running sums liboea adds to in the call itself (device atomics on the GPU),
# so counting costs route() nothing per call and a CUDA-graph replay counts
# too. One per device, passed to every call while statistics are on.
_TOTALS = ("calls", "gated", "t_before", "t_after", "valid_rows", "invalid_rows",
           "nonfinite_rows", "rerouted_rows", "changed_slots", "kept_fx", "kept_undefined")
_KEPT_BUCKETS = 16
_KEPT_FX = float(1 << 24)  # OEA_KEPT_FX_BITS
# Rule 10's bucket edges: bucket b holds kept in [_KEPT_EDGES[b], _KEPT_EDGES[b + 1]);
# bucket 14 exactly 1, bucket 15 above 1.
_KEPT_EDGES = (0.0, 0.25, 0.5, 0.6, 0.7, 0.75, 0.8, 0.85, 0.9, 0.93, 0.95, 0.97, 0.98, 0.99,
               1.0, 1.0, 1.0)


def _stats_buffer(device):
    """This device's oea_totals, as int64 words (liboea adds modulo 2^64;
    no sum here comes near 2^63)."""
    import torch

    key = str(device)
    entry = _stats_buffers.get(key)
    if entry is None:
        entry = torch.zeros(len(_TOTALS) + _KEPT_BUCKETS, dtype=torch.int64, device=device)
        _stats_buffers[key] = entry
    return entry


def kept_figures(row):
    """(mean kept, p5 kept, changed slots per re-routed row) of a stats()
    row, or of the difference of two (a window), by the spec's formulas
    (docs/oea-semantics.md, rule 10); None where no row had a defined kept."""
    hist = row["kept_hist"]
    defined = row["rerouted_rows"] - row["kept_undefined"]
    mean = row["kept_fx"] / _KEPT_FX / defined if defined > 0 else None
    changed = row["changed_slots"] / row["rerouted_rows"] if row["rerouted_rows"] else None
    total = sum(hist)
    p5 = None
    if total:
        want, below = 0.05 * total, 0
        for b, count in enumerate(hist):
            if count and below + count >= want:
                lo, hi = _KEPT_EDGES[b], _KEPT_EDGES[b + 1]
                p5 = lo + (hi - lo) * (want - below) / count
                break
            below += count
    return mean, p5, changed


def stats(device=None):
    """liboea's running sums (oea_totals; host sync here, never on the hot
    path), per device name, or one dict for `device`: calls and gated count
    every liboea call; t_before, t_after, valid_rows, invalid_rows,
    nonfinite_rows are sums over the calls not gated; rerouted_rows,
    changed_slots, kept_fx, kept_undefined and kept_hist (16 buckets) describe
    the rows OEA re-routed (or would have: shadow), and kept_mean, kept_p5 and
    changed_per_row are worked out from them (kept_figures)."""
    out = {}
    for key, acc in _stats_buffers.items():
        values = acc.tolist()
        row = dict(zip(_TOTALS, values))
        row["kept_hist"] = values[len(_TOTALS):]
        row["kept_mean"], row["kept_p5"], row["changed_per_row"] = kept_figures(row)
        out[key] = row
    if device is not None:
        return out.get(str(device))
    return out


def host_counts():
    """Calls and rows that reached route() in Python: rows = launched (handed to
    liboea) + the rows skipped per reason (CUDA-graph replays run no Python: the
    device sums count those)."""
    counts, skipped, _ = _snapshot(devices=False)
    return dict(counts, skipped=skipped)


def reset_stats():
    for acc in _stats_buffers.values():
        acc.zero_()
    _tally[:] = [0, 0]
    for key in _skipped:
        _skipped[key] = 0
    # Exported counters only grow: after a reset, the next export adds the new
    # counts in full.
    _exported.clear()


def _snapshot(devices=True):
    """Host counts and device sums read together (one host sync per device)."""
    counts, skipped = {"calls": _tally[0], "launched": _tally[1]}, dict(_skipped)
    counts["rows"] = counts["launched"] + sum(skipped.values())
    return counts, skipped, stats() if devices else {}


def stats_line(snapshot=None):
    """The line logged every {{env_prefix}}STATS_INTERVAL seconds."""
    counts, skipped, devices = snapshot if snapshot is not None else _snapshot()
    parts = []
    for key, row in sorted(devices.items()):
        calls = row["calls"]
        rerouted = max(calls - row["gated"], 0)
        if rerouted:
            kept = row.get("kept_mean"), row.get("kept_p5"), row.get("changed_per_row")
            kept_text = (", kept mean %.3f, p5 %.3f, %.2f slots changed per row" % kept
                         if None not in kept else "")
            parts.append("%s: %d routed calls, mean T %.1f -> %.1f, %d rows, %d gated%s"
                         % (key, rerouted, row["t_before"] / rerouted,
                            row["t_after"] / rerouted, row["valid_rows"], row["gated"],
                            kept_text))
        else:
            parts.append("%s: %d routed calls, %d gated" % (key, rerouted, row["gated"]))
    skipped_text = ", ".join("%s=%d" % (k, v) for k, v in skipped.items() if v) or "none"
    return ("oeapatch: OEA stats (pid %d, since start%s): python calls=%d rows=%d (to liboea "
            "%d, skipped %d); %s; rows skipped: %s"
            % (os.getpid(), ", shadow: the framework's routing kept" if SHADOW else "",
               counts["calls"], counts["rows"], counts["launched"],
               counts["rows"] - counts["launched"], "; ".join(parts) or "no routed call",
               skipped_text))


def _maybe_log_stats():
    now = _monotonic()
    if now - _last_log[0] < STATS_INTERVAL:
        return
    _last_log[0] = now
    torch = _torch
    if torch.cuda.is_available() and torch.cuda.is_current_stream_capturing():
        return  # reading device counters would synchronise inside a capture
    snapshot = _snapshot()
    logger.info("%s", stats_line(snapshot))
    if _metrics is not False:
        export_metrics(snapshot)


def idle_stats():
    """The statistics line while no call has reached OEA (logged, exported
    and returned), else None: route() writes it then. A model none of whose
    MoE layers reaches the call site would otherwise never say so; the
    adapters' _watch_layers start _idle_stats_loop for it."""
    if _tally[0]:
        return None
    snapshot = _snapshot(devices=False)
    line = stats_line(snapshot)
    logger.info("%s", line)
    if _metrics is not False:
        export_metrics(snapshot)
    return line


def _idle_tick():
    """One interval of _idle_stats_loop: the idle line, but only in a process
    that runs a model (the adapter's _model_seen(): its first forward was
    seen). Every process of a server that imports the routing module imports
    the binding too (SGLang's tokenizer and detokenizer processes, vLLM's API
    server); one that never runs a model would otherwise write "no routed
    call" every interval for as long as it lives."""
    return idle_stats() if _model_seen() else None


def _idle_stats_loop():
    while not _tally[0]:
        time.sleep(STATS_INTERVAL)
        _idle_tick()


# ------------------------------------------------------------ Prometheus export

# The framework's metrics (SGLang's --enable-metrics, vLLM's multi-process
# /metrics) set PROMETHEUS_MULTIPROC_DIR before they start worker processes,
# and /metrics serves prometheus_client's MultiProcessCollector over that
# directory: a counter created in any worker process appears there. So the
# counters of the stats line are exported where that variable is set, at the
# line's interval, from the same snapshot, named with the adapter's
# METRICS_PREFIX; prometheus_client is imported only then. docs/runtime.md
# lists the names.
#
# A default vLLM server sets no PROMETHEUS_MULTIPROC_DIR: oeapatch's plugin
# then names a folder of its own in OEAPATCH_METRICS_DIR, whose files its
# collector in the API server process serves on /metrics (the wheel's
# oeapatch/metrics.py), and the counters' totals are written there as JSON,
# one file per process, replaced whole.
_metrics = None  # None: not looked at yet; False: metrics off; "files": that folder; else the counters
_exported = {}  # (counter, labels) -> value exported so far
_RANK, _DEVICE = ("rank",), ("rank", "device")
_METRICS = (
    ("python_calls", "Calls of the OEA call site that ran Python (eager batches; CUDA-graph "
     "replays run none)", _RANK),
    ("python_rows", "Rows of those calls", _RANK),
    ("python_rows_launched", "Rows of those calls handed to liboea (the others are "
     "rows_skipped)", _RANK),
    ("rows_skipped", "Rows OEA left alone, by reason", ("rank", "reason")),
    ("routed_calls", "liboea calls that re-routed (not gated), graph replays included", _DEVICE),
    ("gated_calls", "liboea calls left alone by its {{env_prefix}}MIN_BATCH gate", _DEVICE),
    ("routed_rows", "Valid rows of the re-routed calls", _DEVICE),
    ("experts_before", "Sum over re-routed calls of the distinct experts before OEA "
     "(T before)", _DEVICE),
    ("experts_after", "Sum over re-routed calls of the distinct experts after OEA "
     "(T after)", _DEVICE),
    ("rerouted_rows", "Rows OEA re-routed (in shadow mode: would have)", _DEVICE),
    ("changed_slots", "Routed slots whose expert OEA changed, summed over those rows "
     "(/ rerouted_rows: per row)", _DEVICE),
    ("kept_weight", "Sum over those rows of the share of the routing weight their new "
     "experts keep (/ kept_rows: the mean)", _DEVICE),
    ("kept_rows", "Rows of kept_weight (re-routed rows whose kept weight is defined)",
     _DEVICE),
    ("kept_rows_bucket", "Rows of kept_rows by kept weight below le (le=1: at most 1), "
     "cumulative: histogram_quantile(0.05, ...) gives p5", ("rank", "device", "le")))
# The le of each kept bucket's upper edge (bucket 14, exactly 1: "1"; 15: "+Inf").
_KEPT_LE = ("0.25", "0.5", "0.6", "0.7", "0.75", "0.8", "0.85", "0.9", "0.93", "0.95", "0.97",
            "0.98", "0.99", "1", "1", "+Inf")


def _metric_objects():
    from prometheus_client import Counter

    # registry=None: in multiprocess mode the values live in the directory's
    # files, which the framework's collector reads; registering in this process's
    # default registry would only add a name clash with a second import.
    return {name: Counter(METRICS_PREFIX + name, text, labels, registry=None)
            for name, text, labels in _METRICS}


def _write_metrics_file(values):
    """The totals as OEAPATCH_METRICS_DIR's file of this process (see above),
    written by the module that owns the folder's format: the wheel's
    oeapatch.metrics, importable wherever its plugin named the folder."""
    from oeapatch import metrics

    doc = {METRICS_PREFIX + name: {"help": text, "labels": list(labels), "samples": []}
           for name, text, labels in _METRICS}
    for name, labels, value in values:
        doc[METRICS_PREFIX + name]["samples"].append([list(labels), value])
    metrics.write(os.environ["OEAPATCH_METRICS_DIR"], "counters-%d.json" % os.getpid(), doc)


def _rank_label():
    dist = getattr(_torch, "distributed", None)
    if dist is not None and dist.is_available() and dist.is_initialized():
        return str(dist.get_rank())
    return ""


def export_metrics(snapshot=None):
    """Add what changed since the last export to the Prometheus counters, where
    the framework's metrics are on (PROMETHEUS_MULTIPROC_DIR set), or write the
    totals to OEAPATCH_METRICS_DIR's file (a default vLLM server, see above);
    returns False where neither is there. Called at the stats interval; device sums are read here only
    through the snapshot the log line reads."""
    global _metrics
    if _metrics is None:
        if not os.environ.get("PROMETHEUS_MULTIPROC_DIR"):
            _metrics = "files" if os.environ.get("OEAPATCH_METRICS_DIR") else False
        if _metrics is False:
            return False
    if _metrics is None:
        try:
            _metrics = _metric_objects()
        except ImportError as exc:
            logger.warning("oeapatch: PROMETHEUS_MULTIPROC_DIR is set but prometheus_client "
                           "cannot be imported (%s): OEA counters are not exported", exc)
            _metrics = False
            return False
    if _metrics is False:
        return False
    counts, skipped, devices = snapshot if snapshot is not None else _snapshot()
    rank = _rank_label()
    values = [("python_calls", (rank,), counts["calls"]),
              ("python_rows", (rank,), counts["rows"]),
              ("python_rows_launched", (rank,), counts["launched"])]
    values += [("rows_skipped", (rank, reason), v) for reason, v in skipped.items()]
    for device, row in devices.items():
        labels = (rank, device)
        values += [("routed_calls", labels, max(row["calls"] - row["gated"], 0)),
                   ("gated_calls", labels, row["gated"]),
                   ("routed_rows", labels, row["valid_rows"]),
                   ("experts_before", labels, row["t_before"]),
                   ("experts_after", labels, row["t_after"]),
                   ("rerouted_rows", labels, row["rerouted_rows"]),
                   ("changed_slots", labels, row["changed_slots"]),
                   ("kept_weight", labels, row["kept_fx"] / _KEPT_FX),
                   ("kept_rows", labels, row["rerouted_rows"] - row["kept_undefined"])]
        cumulative = 0
        for b, count in enumerate(row["kept_hist"]):
            cumulative += count
            if b != 13:  # 13 ([0.99, 1)) and 14 (1) share le=1
                values.append(("kept_rows_bucket", labels + (_KEPT_LE[b],), cumulative))
    try:
        if _metrics == "files":
            _write_metrics_file(values)
            return True
        for name, labels, value in values:
            before = _exported.get((name, labels))
            # Counters only grow: after reset_stats() the new count is all new. A
            # series is created at its first export, zero included, so that a
            # rate has a start.
            delta = value if before is None or value < before else value - before
            if delta or before is None:
                _metrics[name].labels(*labels).inc(delta)
            _exported[(name, labels)] = value
    except (OSError, ImportError) as exc:  # the folder's files (gone, full disk): routing goes on
        logger.warning("oeapatch: exporting OEA counters to %s failed (%s); not exported "
                       "any more", os.environ.get("PROMETHEUS_MULTIPROC_DIR")
                       or os.environ.get("OEAPATCH_METRICS_DIR"), exc)
        _metrics = False
        return False
    return True


def _skip(reason, rows):
    """A call that leaves its `rows` alone: counted, then the line if it is due
    (rows None: not counted, stats off or a trace)."""
    if rows is not None:
        _skipped[reason] += rows
        _tally[0] += 1
        _maybe_log_stats()


def _launched(rows):
    """A call whose `rows` went to liboea: counted, then the line if it is due
    (the clock read here; the line's work only then)."""
    tally = _tally
    tally[0] += 1
    tally[1] += rows
    if _monotonic() - _last_log[0] >= STATS_INTERVAL:
        _maybe_log_stats()
