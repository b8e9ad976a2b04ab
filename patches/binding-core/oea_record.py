# ------------------------------------------------------------------ recording
# The routing recorder ({{env_prefix}}RECORD; oeapatch's docs/recording.md is the
# format, docs/runtime.md the walk-through). This part of the module names no
# other part and no template value, so that tests and benchmarks run it on its
# own: the core hands it everything (the path, the rank, the cap, the prefix).
#
# The forward never waits on it: record() copies the call's tensors (a
# non-blocking device-to-host copy into pinned memory on CUDA, with an event
# the writer waits on) and appends them to a bounded queue; a call that does
# not fit is dropped and counted. A daemon thread encodes whole chunks and
# appends each with one write, so a crash, a kill or a full disk can only cut
# the chunk being written: the file stays readable up to there. A write error
# or the size cap stops the recorder for good (the server keeps serving); the
# reason is kept for the stats line.

import collections as _collections
import json as _json
import os as _os
import struct as _struct
import threading as _threading

RECORDING_FORMAT = "oeapatch-routing"
RECORDING_VERSION = "1"
_REC_DTYPES = {"float32": "F32", "bfloat16": "BF16", "float16": "F16", "int32": "I32",
               "int64": "I64"}
_SCORINGS = ("softmax", "sigmoid")


def recording_path(path, rank, pid):
    """The file of this process: PATH with -rank<R>-<pid> before the
    .safetensors suffix (appended when PATH has another one)."""
    folder, name = _os.path.split(path)
    stem = name[:-len(".safetensors")] if name.endswith(".safetensors") else name
    return _os.path.join(folder, "%s-rank%d-%d.safetensors" % (stem, rank, pid))


def encode_chunk(meta, layers, calls, tensors):
    """One self-contained safetensors file: meta (str -> str) plus the format
    fields, layers ({layer: settings}), calls ([{seq, layer, k0}]) and
    tensors [(name, dtype, shape, bytes)] laid out in that order."""
    header = {}
    md = {"format": RECORDING_FORMAT, "version": RECORDING_VERSION}
    md.update(meta)
    md["layers"] = _json.dumps({str(k): v for k, v in layers.items()}, separators=(",", ":"))
    md["calls"] = _json.dumps(calls, separators=(",", ":"))
    header["__metadata__"] = md
    at = 0
    for name, dtype, shape, data in tensors:
        header[name] = {"dtype": dtype, "shape": list(shape), "data_offsets": [at, at + len(data)]}
        at += len(data)
    text = _json.dumps(header, separators=(",", ":")).encode("utf-8")
    text += b" " * (-(len(text) + 8) % 8)  # the data starts 8-aligned, as safetensors writes it
    return b"".join([_struct.pack("<Q", len(text)), text] + [t[3] for t in tensors])


class Recorder:
    """One process's recording. `layer settings` are the dict docs/recording.md
    describes (experts, top_k, shared, scoring, renormalize, groups,
    topk_group, min_batch); the bias is a host float32 tensor or None."""

    def __init__(self, path, rank, cap_bytes, framework, prefix, max_queue=1024,
                 chunk_bytes=4 << 20, opener=None):
        self.path = recording_path(path, rank, _os.getpid())
        self.rank = rank
        self.cap = cap_bytes
        self.meta = {"framework": framework, "prefix": prefix, "rank": str(rank)}
        self.max_queue = max_queue
        self.chunk_bytes = chunk_bytes
        self.recorded = 0      # calls written to the file
        self.dropped = 0       # calls not recorded: queue full, cap reached, writer stopped
        self.graph_missed = 0  # calls made while a CUDA graph was being captured
        self.written = 0       # bytes in the file
        self.chunks = 0
        self.stopped = None    # why the recorder stopped writing, or None
        self._seq = 0
        self._queue = _collections.deque()
        self._cond = _threading.Condition()
        self._opener = opener or (lambda p: _os.open(
            p, _os.O_WRONLY | _os.O_CREAT | _os.O_EXCL | _os.O_APPEND | _os.O_CLOEXEC, 0o640))
        self._fd = None
        self._closing = False
        self._waiting = False
        import ctypes
        self._string_at = ctypes.string_at
        self._thread = _threading.Thread(target=self._run, name="oeapatch-recorder", daemon=True)
        self._thread.start()

    # ---- the forward's side: a few attribute reads, a copy, an append
    def record(self, layer, settings, k0, logits, ids, bias, rows=None):
        """Queues one call: logits [n, E] and ids [n, K] (any device), `rows`
        the valid rows (an int, a 1-element tensor, or None: all n), `bias`
        bias_bytes() of the layer's correction bias or None. Host tensors
        are copied here as bytes (ids are rewritten after this call); CUDA
        tensors by non-blocking copies the writer waits for."""
        seq = self._seq
        self._seq = seq + 1
        if self.stopped is not None or len(self._queue) >= self.max_queue:
            self.dropped += 1
            return
        event = None
        if logits.is_cuda:
            import torch
            if torch.cuda.is_current_stream_capturing():
                self.graph_missed += 1
                return
            logits = logits.to("cpu", non_blocking=True)
            ids = ids.to("cpu", non_blocking=True)
            if rows is not None and not isinstance(rows, int):
                rows = rows.reshape(-1)[:1].to("cpu", non_blocking=True)
            event = torch.cuda.Event()
            event.record()
            data = (logits, ids)
        elif logits.is_contiguous() and ids.is_contiguous():
            # two memcpys into bytes: the cheapest copy Python has of a host tensor
            data = (self._string_at(logits.data_ptr(), logits.numel() * logits.element_size()),
                    self._string_at(ids.data_ptr(), ids.numel() * ids.element_size()))
        else:
            data = (logits.clone(), ids.clone())
        self._queue.append((seq, layer, settings, k0, data, logits.dtype, ids.dtype,
                            tuple(logits.shape), tuple(ids.shape), bias, rows, event))
        if self._waiting:
            with self._cond:
                self._cond.notify()

    # ---- the writer's side
    def close(self, timeout=10.0):
        """Writes what is queued and stops (the process's exit, or a test)."""
        with self._cond:
            self._closing = True
            self._cond.notify()
        self._thread.join(timeout)

    def _stop(self, why):
        if self.stopped is None:
            self.stopped = why
        self.dropped += len(self._queue)
        self._queue.clear()

    def _run(self):
        pending = []
        size = 0
        while True:
            idle = False
            with self._cond:
                if not self._queue and not self._closing:
                    # a quiet server still gets its calls onto disk within a second
                    self._waiting = True
                    idle = not self._cond.wait(1.0)
                    self._waiting = False
                closing = self._closing
            while self._queue and size < self.chunk_bytes:
                item = self._queue.popleft()
                try:
                    call = self._take(item)
                except Exception as exc:  # a tensor that cannot be read: counted, never raised
                    self.dropped += 1
                    self.stopped = self.stopped or "unreadable call: %s" % exc
                    continue
                pending.append(call)
                size += len(call[4]) + len(call[5])
            if pending and (size >= self.chunk_bytes or idle or closing):
                self._flush(pending)
                pending, size = [], 0
            if closing and not self._queue and not pending:
                if self._fd is not None:
                    _os.close(self._fd)
                    self._fd = None
                return

    def _take(self, item):
        seq, layer, settings, k0, data, ldtype, idtype, lshape, ishape, bias, rows, event = item
        if event is not None:
            event.synchronize()
        n = lshape[0]
        if rows is not None:
            n = max(0, min(n, int(rows) if isinstance(rows, int) else int(rows.item())))
        ldt = _REC_DTYPES.get(str(ldtype).replace("torch.", ""))
        idt = _REC_DTYPES.get(str(idtype).replace("torch.", ""))
        if ldt not in ("F32", "BF16", "F16") or idt not in ("I32", "I64") or len(lshape) != 2 or \
                len(ishape) != 2 or ishape[0] != lshape[0]:
            raise ValueError("logits %s %s, ids %s %s" % (ldtype, lshape, idtype, ishape))
        lb, ib = (x if isinstance(x, bytes) else _bytes_of(x.contiguous()) for x in data)
        lrow, irow = len(lb) // max(1, lshape[0]), len(ib) // max(1, ishape[0])
        return (seq, layer, settings, k0, lb[:n * lrow], ib[:n * irow], bias, ldt, idt,
                (n, lshape[1]), (n, ishape[1]))

    def _flush(self, calls):
        layers, tensors, entries = {}, [], []
        for seq, layer, settings, k0, lb, ib, bias, ldt, idt, lshape, ishape in calls:
            if layer not in layers:
                s = dict(settings)
                if bias is not None:
                    s["bias"] = "l%d.bias" % layer
                    tensors.append((s["bias"], "F32", [len(bias) // 4], bias))
                else:
                    s["bias"] = None
                layers[layer] = s
            entries.append({"seq": seq, "layer": layer, "k0": k0})
            tensors.append(("c%d.logits" % seq, ldt, lshape, lb))
            tensors.append(("c%d.ids" % seq, idt, ishape, ib))
        meta = dict(self.meta, chunk=str(self.chunks), dropped=str(self.dropped),
                    graph_missed=str(self.graph_missed))
        data = encode_chunk(meta, layers, entries, tensors)
        if self.cap and self.written + len(data) > self.cap:
            self.dropped += len(calls)
            self._stop("the size cap of %d bytes is reached" % self.cap)
            return
        try:
            if self._fd is None:
                self._fd = self._opener(self.path)
            done = 0
            while done < len(data):  # one write normally; a short one is continued
                done += _os.write(self._fd, data[done:])
        except OSError as exc:
            # A full disk or a folder that is not writable: the chunk may be cut,
            # which the reader tolerates at the end of a file; nothing follows it.
            self.dropped += len(calls)
            self._stop("cannot write %s: %s" % (self.path, exc.strerror or exc))
            return
        self.written += len(data)
        self.recorded += len(calls)
        self.chunks += 1


def _bytes_of(t):
    """A host tensor's bytes (bf16 has no numpy dtype: viewed as int16)."""
    import torch
    if t.dtype == torch.bfloat16:
        t = t.view(torch.int16)
    return t.numpy().tobytes()


def bias_bytes(bias):
    """The layer's correction bias as the recording keeps it (float32 on the host), or None."""
    if bias is None:
        return None
    import torch
    return bias.detach().reshape(-1).to(device="cpu", dtype=torch.float32).numpy().tobytes()
