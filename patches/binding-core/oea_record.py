# ------------------------------------------------------------------ recording
# The routing recorder ({{env_prefix}}RECORD; oeapatch's docs/recording.md is the
# format, docs/runtime.md the walk-through). This part of the module names no
# other part and no template value, so that tests and benchmarks run it on its
# own: the core hands it everything (liboea, the path, the rank, the cap, the
# prefix).
#
# The recorder is liboea's (native/include/oea_record.h): record() is one
# ctypes call, which releases Python's lock while it copies the call's rows
# into a bounded ring (on CUDA: non-blocking device-to-host copies on the
# caller's stream into the pinned ring, and an event), and liboea's writer
# thread encodes and appends whole chunks without ever taking Python's lock.
# So neither the call nor the writer makes the forward wait on Python: a
# call that does not fit is dropped and counted, a crash, a kill or a full
# disk can only cut the chunk being written (the file stays readable up to
# there), and a write error or the size cap stops the recorder for good (the
# server keeps serving) with the reason kept for the stats line.

import json as _json
import os as _os
import weakref as _weakref

RECORDING_FORMAT = "oeapatch-routing"
RECORDING_VERSION = "1"
# the dtype codes of oea.h (OEA_DTYPE_*), by torch dtype name
_REC_CODES = {"float32": 0, "bfloat16": 1, "float16": 2, "int32": 3, "int64": 4}
_REC_ENTRY_POINTS = ("oea_rec_open", "oea_rec_layer", "oea_rec_call", "oea_rec_figures_get",
                     "oea_rec_close")
_REC_FIGURES = ("calls", "recorded", "dropped", "graph_missed", "written", "chunks")


def recording_path(path, rank, pid):
    """The file of this process: PATH with -rank<R>-<pid> before the
    .safetensors suffix (appended when PATH has another one)."""
    folder, name = _os.path.split(path)
    stem = name[:-len(".safetensors")] if name.endswith(".safetensors") else name
    return _os.path.join(folder, "%s-rank%d-%d.safetensors" % (stem, rank, pid))


class Recorder:
    """One process's recording, written by liboea (`lib`: its ctypes handle or
    path). `settings` of a layer are the dict docs/recording.md describes
    (experts, top_k, shared, scoring, renormalize, groups, topk_group,
    min_batch); the bias is bias_bytes() of the layer's correction bias or
    None. `opener(path)` returns the file's descriptor (tests hand /dev/full
    or a pipe); ring_bytes is the queue's memory, chunk_bytes the calls'
    bytes per chunk."""

    def __init__(self, path, rank, cap_bytes, framework, prefix, lib, ring_bytes=64 << 20,
                 chunk_bytes=4 << 20, opener=None):
        import ctypes

        self.path = recording_path(path, rank, _os.getpid())
        self.rank = rank
        if isinstance(lib, str):
            lib = ctypes.CDLL(lib)
        missing = [name for name in _REC_ENTRY_POINTS if not hasattr(lib, name)]
        if missing:
            raise RuntimeError("liboea lacks the recorder (%s): a liboea older than 3.1"
                               % ", ".join(missing))
        i32, i64, u64, ptr = ctypes.c_int32, ctypes.c_int64, ctypes.c_uint64, ctypes.c_void_p

        class Figures(ctypes.Structure):
            _fields_ = [(name, u64) for name in _REC_FIGURES] + [("stopped", ctypes.c_char * 256)]

        class Args(ctypes.Structure):  # oea_rec_args
            _fields_ = [(name, i32) for name in ("layer", "k0", "n", "experts", "columns",
                                                 "valid_dtype", "device", "reserved")] + \
                [(name, i64) for name in ("logits_row_stride", "ids_row_stride", "valid_rows")] + \
                [(name, ptr) for name in ("logits", "ids", "valid_ptr", "stream")]

        lib.oea_rec_open.argtypes = [ctypes.c_int, ctypes.c_char_p, ctypes.c_char_p, i32, u64, u64,
                                     u64]
        lib.oea_rec_open.restype = ptr
        lib.oea_rec_layer.argtypes = [ptr, i32, ctypes.c_char_p, ctypes.c_char_p, i32, i32, i32, i32]
        lib.oea_rec_layer.restype = i32
        lib.oea_rec_call.argtypes = [ptr, ptr]
        lib.oea_rec_call.restype = ctypes.c_int
        lib.oea_rec_figures_get.argtypes = [ptr, ctypes.POINTER(Figures)]
        lib.oea_rec_figures_get.restype = None
        lib.oea_rec_close.argtypes = [ptr, i32, ctypes.POINTER(Figures)]
        lib.oea_rec_close.restype = ctypes.c_int
        self._lib, self._figures, self._args = lib, Figures(), Args
        self._call = lib.oea_rec_call
        self._addressof = ctypes.addressof
        # layer number -> [its oea_rec_args, logits dtype, ids dtype, the block's address,
        # strides or valid_ptr written (restored at the next plain call)]
        self._layers = {}
        self._refused = 0    # calls this side could not hand over (counted as dropped)
        self._why = None     # why this side stopped (the file could not be opened)
        self._stream = None  # the current CUDA stream of a device, as an int
        self._handle = None
        if not _REC_VALID:
            import torch
            _REC_VALID.update({torch.int32: 3, torch.int64: 4})
        try:
            fd = (opener or (lambda p: _os.open(p, _os.O_WRONLY | _os.O_CREAT | _os.O_EXCL |
                                                _os.O_APPEND | _os.O_CLOEXEC, 0o640)))(self.path)
        except OSError as exc:
            self._why = "cannot write %s: %s" % (self.path, exc.strerror or exc)
            return
        handle = lib.oea_rec_open(fd, framework.encode(), prefix.encode(), rank, ring_bytes,
                                  chunk_bytes, cap_bytes)
        if not handle:
            raise OSError(ctypes.get_errno() or 12, "liboea's recorder did not start")
        self._handle = handle
        # A forked child inherits this object but not liboea's writer: it lets
        # go of the handle there (liboea frees the child's copy without
        # touching the parent's lock or file) and records nothing more.
        me = _weakref.ref(self)
        _os.register_at_fork(after_in_child=lambda: me() is not None and me()._forked())

    def _forked(self):
        handle, self._handle = self._handle, None
        if handle is not None:
            self._lib.oea_rec_close(handle, 0, self._figures)
            self._why = self._why or ("inherited by a forked process (pid %d), which does not "
                                      "write %s" % (_os.getpid(), self.path))

    # ---- the forward's side: one ctypes call (Python's lock released inside)
    def record(self, layer, settings, k0, logits, ids, bias, rows=None):
        """Hands one call to liboea: logits [n, E] and ids [n, K] (host or
        CUDA), `rows` the valid rows (an int, a 1-element int32/int64 tensor
        on the tensors' device, or None: all n), `bias` bias_bytes() of the
        layer's correction bias or None. Host rows are copied before it
        returns (ids are rewritten after this call); CUDA rows by
        non-blocking copies on the current stream. Returns liboea's answer:
        0 queued, 1 dropped, 2 not recorded (a CUDA graph is being captured)."""
        known = self._layers.get(layer)
        if known is None or known[1] is not logits.dtype or known[2] is not ids.dtype:
            known = self._layer(layer, settings, bias, logits, ids)
            if known is None:
                return 1
        handle = self._handle
        if handle is None:
            self._refused += 1
            return 1
        args = known[0]
        if known[4]:  # the last call wrote strides or a valid-rows pointer: back to plain
            args.logits_row_stride, args.ids_row_stride = args.experts, args.columns
            args.valid_ptr = None
            known[4] = False
        if not (logits.is_contiguous() and ids.is_contiguous()):
            if logits.stride(-1) != 1:
                logits = logits.contiguous()
            if ids.stride(-1) != 1:
                ids = ids.contiguous()
            args.logits_row_stride, args.ids_row_stride = logits.stride(0), ids.stride(0)
            known[4] = True
        args.n = logits.shape[0]
        args.k0 = k0
        args.logits = logits.data_ptr()
        args.ids = ids.data_ptr()
        if rows is None:
            args.valid_rows = -1
        elif type(rows) is int:
            args.valid_rows = rows
        elif rows.dtype in _REC_VALID and rows.is_cuda == logits.is_cuda:
            args.valid_ptr, args.valid_dtype = rows.data_ptr(), _REC_VALID[rows.dtype]
            known[4] = True
        else:
            args.valid_rows = int(rows.reshape(-1)[0])
        if logits.is_cuda:
            args.device = device = logits.device.index
            args.stream = self._current_stream(device)
        return self._call(handle, known[3])

    def _current_stream(self, device):
        get = self._stream
        if get is None:
            import torch
            raw = getattr(getattr(torch, "_C", None), "_cuda_getCurrentRawStream", None)
            get = self._stream = raw or (lambda index: torch.cuda.current_stream(index).cuda_stream)
        return get(device)

    def _layer(self, layer, settings, bias, logits, ids):
        """Declares the layer to liboea at its first call; None (the call
        dropped, counted) where liboea refuses it or its dtypes change."""
        known = self._layers.get(layer)
        ldt = _REC_CODES.get(str(logits.dtype).replace("torch.", ""))
        idt = _REC_CODES.get(str(ids.dtype).replace("torch.", ""))
        if known is not None or self._handle is None or logits.dim() != 2 or ids.dim() != 2 or \
                ldt is None or idt is None or (bias is not None and len(bias) != 4 * logits.shape[1]):
            # one number, one configuration (replay holds a layer to it)
            self._refused += 1
            return None
        entry = dict(settings, bias=None if bias is None else "l%d.bias" % layer)
        experts, columns = logits.shape[1], ids.shape[1]
        handle = self._lib.oea_rec_layer(self._handle, layer,
                                         _json.dumps(entry, separators=(",", ":")).encode(),
                                         bias, experts, columns, ldt, idt)
        if handle < 0:
            self._refused += 1
            return None
        args = self._args(layer=handle, experts=experts, columns=columns, device=-1,
                          logits_row_stride=experts, ids_row_stride=columns, valid_rows=-1)
        known = self._layers[layer] = [args, logits.dtype, ids.dtype, self._addressof(args), False]
        return known

    # ---- what it has done
    def figures(self):
        """calls, recorded, dropped, graph_missed, written, chunks, stopped (None: it has not)."""
        if self._handle is not None:
            self._lib.oea_rec_figures_get(self._handle, self._figures)
        f = self._figures
        out = {name: getattr(f, name) for name in _REC_FIGURES}
        out["dropped"] += self._refused
        out["stopped"] = self._why or f.stopped.decode("utf-8", "replace") or None
        return out

    recorded = property(lambda self: self.figures()["recorded"])
    dropped = property(lambda self: self.figures()["dropped"])
    graph_missed = property(lambda self: self.figures()["graph_missed"])
    written = property(lambda self: self.figures()["written"])
    chunks = property(lambda self: self.figures()["chunks"])
    stopped = property(lambda self: self.figures()["stopped"])

    def close(self, timeout=10.0):
        """Writes what is queued and stops (the process's exit, or a test);
        a writer stuck longer than `timeout` is left behind (exiting anyway)."""
        handle = self._handle
        if handle is None:
            return
        self._handle = None
        if self._lib.oea_rec_close(handle, int(timeout * 1000), self._figures) == 0:
            return
        self._why = self._why or "the writer did not finish within %g s" % timeout


_REC_VALID = {}  # torch dtype -> OEA_DTYPE_* of a valid-rows tensor (filled at first use)


def bias_bytes(bias):
    """The layer's correction bias as the recording keeps it (float32 on the host), or None."""
    if bias is None:
        return None
    import torch
    return bias.detach().reshape(-1).to(device="cpu", dtype=torch.float32).numpy().tobytes()
