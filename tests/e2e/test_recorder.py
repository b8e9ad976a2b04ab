#!/usr/bin/env python3
"""The binding's routing recorder (patches/binding-core/oea_record.py) and
`oeapatch replay` together.

- Exactness: calls routed live by liboea (through this test's own ctypes
  mirror of oea.h, totals included) while the recorder records them; the
  replay of the recording at the live k0 gives liboea's live sums field for
  field (T before/after, rows, changed slots, kept_fx, gated calls), over two
  layers with padding rows, bf16 and fp32 logits, int32 and int64 ids, a
  bias with sigmoid and groups, and a fused shared column.
- Faults: a full disk (/dev/full: ENOSPC on every write), a folder nobody
  may create files in, the size cap, a full queue (a writer blocked on a
  pipe nobody reads), a writer killed with SIGKILL mid-recording: record()
  never raises nor waits, what was not recorded is counted, and what is on
  disk replays.

The recorder is the module's own code and liboea's (native/src/oea_record.c),
run on their own (the module's part names no other part of the binding);
the forward's side is exercised with torch CPU tensors (the CUDA path's
copies need a GPU).
"""
import ctypes
import json
import os
import signal
import subprocess
import sys
import tempfile
import threading
import xml.etree.ElementTree as ET

import oea_testlib as tl
from oea_testlib import case, check

CLI = os.environ.get("OEAPATCH") or os.path.join(tl.ROOT, "build", "src", "oeapatch")
RECORDER = os.path.join(tl.ROOT, "patches", "binding-core", "oea_record.py")


def recorder_module():
    ns = {"__name__": "oea_record"}
    with open(RECORDER, encoding="utf-8") as f:
        exec(compile(f.read(), RECORDER, "exec"), ns)
    return ns


REC = recorder_module()
LIB = [None]


class Live:
    """liboea's host path with running totals, as the binding calls it."""

    def __init__(self, library):
        with open(tl.HEADER, encoding="utf-8") as f:
            header = f.read()
        self.Problem = type("P", (ctypes.Structure,), {"_fields_": tl.parse_struct(header, "oea_problem")})
        self.Totals = type("T", (ctypes.Structure,), {"_fields_": tl.parse_struct(header, "oea_totals")})
        self.lib = ctypes.CDLL(library)
        self.lib.oea_route_host.argtypes = [ctypes.POINTER(self.Problem)]
        self.totals = self.Totals()

    def route(self, logits, ids, k0, s, bias, valid):
        import torch
        ids = ids.clone()
        weights = torch.zeros(ids.shape, dtype=torch.float32)
        nv = torch.tensor([valid], dtype=torch.int32)
        p = self.Problem()
        p.struct_size = ctypes.sizeof(self.Problem)
        p.n, p.num_experts, p.top_k, p.num_shared, p.k0 = ids.shape[0], logits.shape[1], ids.shape[1], \
            s["shared"], k0
        p.scoring = {"softmax": 0, "sigmoid": 1}[s["scoring"]]
        p.renormalize = int(s["renormalize"])
        p.num_expert_group, p.topk_group = s["groups"], s["topk_group"]
        p.logits_dtype = {torch.float32: 0, torch.bfloat16: 1, torch.float16: 2}[logits.dtype]
        p.logits_row_stride = logits.shape[1]
        p.logits = logits.data_ptr()
        p.correction_bias = bias.data_ptr() if bias is not None else None
        p.ids_dtype = {torch.int32: 3, torch.int64: 4}[ids.dtype]
        p.ids_row_stride = p.weights_row_stride = ids.shape[1]
        p.ids, p.weights = ids.data_ptr(), weights.data_ptr()
        p.num_valid_rows = nv.data_ptr()
        p.min_valid_rows = s["min_batch"]
        p.totals = ctypes.addressof(self.totals)
        check(self.lib.oea_route_host(ctypes.byref(p)) == 0, "liboea refused a live call")


def replay(*args):
    out = subprocess.run([CLI, "replay", "--json"] + list(args), capture_output=True, text=True)
    return out.returncode, json.loads(out.stdout) if out.stdout.strip() else None, out.stderr


LAYERS = {
    5: dict(experts=64, top_k=8, shared=0, scoring="softmax", renormalize=True, groups=0, topk_group=0,
            min_batch=4),
    9: dict(experts=32, top_k=7, shared=1, scoring="sigmoid", renormalize=False, groups=4, topk_group=2,
            min_batch=1),
}


def traffic(steps, seed=1):
    """(layer, logits, ids, bias, valid rows) of a decode loop: random batch sizes with padding rows."""
    import torch
    g = torch.Generator().manual_seed(seed)
    bias9 = torch.rand(32, generator=g) * 0.1
    for step in range(steps):
        n = int(torch.randint(1, 48, (1,), generator=g))
        valid = max(1, n - int(torch.randint(0, 4, (1,), generator=g)))
        for layer, s in LAYERS.items():
            E, K, S = s["experts"], s["top_k"], s["shared"]
            logits = torch.randn(n, E, generator=g) * 2
            if layer == 5:
                logits = logits.to(torch.bfloat16)
                ids = torch.topk(logits.float(), K, dim=1).indices.to(torch.int32)
                bias = None
            else:
                score = torch.sigmoid(logits) + bias9
                routed = torch.topk(score, K - S, dim=1).indices
                ids = torch.cat([routed, torch.full((n, S), E)], dim=1).to(torch.int64)
                bias = bias9
            ids[valid:] = -1  # padding rows, as a CUDA-graph bucket has them
            yield layer, logits, ids, bias, valid


@case("replay of a recording = liboea's live sums (recorded calls, live k0)")
def exact():
    with tempfile.TemporaryDirectory() as d:
        live = Live(LIB[0])
        rec = REC["Recorder"](os.path.join(d, "routing.safetensors"), 3, 0, "sglang", "SGLANG_OEA_",
                              LIB[0], chunk_bytes=1 << 15)
        biases = {}
        for layer, logits, ids, bias, valid in traffic(150):
            if layer not in biases:
                biases[layer] = REC["bias_bytes"](bias)
            rec.record(layer, LAYERS[layer], 3, logits, ids, biases[layer], rows=valid)
            live.route(logits, ids, 3, LAYERS[layer], bias, valid)
        rec.close()
        check(rec.stopped is None and rec.dropped == 0, "recorder: %s, %d dropped" % (rec.stopped, rec.dropped))
        check(os.path.basename(rec.path).startswith("routing-rank3-"), rec.path)
        rc, doc, err = replay(rec.path, "--k0", "3", "--batch", "8")
        check(rc == 0, err)
        got = [r for r in doc["results"] if r["batch"] == "recorded" and r["k0"] == 3][0]["totals"]
        t = live.totals
        for field in got:
            check(got[field] == getattr(t, field), "%s: replay %d, live %d" % (field, got[field], getattr(t, field)))
        check(t.rerouted_rows > 0 and t.gated > 0, "the traffic must re-route rows and hit the gate")
        return "%d calls, T %d -> %d, kept_fx %d, %d chunks" % (t.calls, t.t_before, t.t_after, t.kept_fx,
                                                              doc["files"][0]["chunks"])


def small_run(rec, calls=20):
    for i, (layer, logits, ids, bias, valid) in enumerate(traffic(calls // 2, seed=7)):
        rec.record(layer, LAYERS[layer], 0, logits, ids, REC["bias_bytes"](bias), rows=valid)


@case("a full disk stops the recorder, counted; record() goes on")
def full_disk():
    with tempfile.TemporaryDirectory() as d:
        rec = REC["Recorder"](os.path.join(d, "r.safetensors"), 0, 0, "sglang", "SGLANG_OEA_", LIB[0],
                              chunk_bytes=1, opener=lambda p: os.open("/dev/full", os.O_WRONLY | os.O_APPEND))
        small_run(rec)
        rec.close()
        check(rec.stopped and "No space left" in rec.stopped, str(rec.stopped))
        check(rec.recorded == 0 and rec.dropped == 20, "%d recorded, %d dropped" % (rec.recorded, rec.dropped))
        return rec.stopped


@case("a folder that takes no file: stopped with the reason, nothing raised")
def readonly_folder():
    with tempfile.TemporaryDirectory() as d:
        if os.geteuid() == 0:
            folder = "/sys"  # root may write any mode; sysfs takes no new file from anyone
        else:
            folder = os.path.join(d, "ro")
            os.mkdir(folder, 0o555)
        rec = REC["Recorder"](os.path.join(folder, "r.safetensors"), 0, 0, "sglang", "SGLANG_OEA_", LIB[0],
                              chunk_bytes=1)
        small_run(rec)
        rec.close()
        check(rec.stopped and "cannot write" in rec.stopped, str(rec.stopped))
        check(rec.dropped == 20 and not os.path.exists(rec.path), "dropped %d" % rec.dropped)
        return rec.stopped


@case("the size cap: the file stays under it and replays; the rest is counted")
def cap():
    with tempfile.TemporaryDirectory() as d:
        rec = REC["Recorder"](os.path.join(d, "r.safetensors"), 0, 40000, "vllm", "VLLM_OEA_", LIB[0], chunk_bytes=1)
        small_run(rec, 60)
        rec.close()
        size = os.path.getsize(rec.path)
        check(rec.stopped and "cap" in rec.stopped and size <= 40000, "%s, %d bytes" % (rec.stopped, size))
        check(rec.recorded + rec.dropped == 60 and rec.dropped > 0, "%d + %d" % (rec.recorded, rec.dropped))
        svg = os.path.join(d, "chart.svg")
        rc, doc, err = replay(rec.path, "--k0", "2,3", "--recommend", "--svg", svg)
        check(rc == 0 and doc["calls"] == rec.recorded, err)
        lines = ET.parse(svg).getroot().findall("{http://www.w3.org/2000/svg}polyline")
        check(len(lines) == 2, "%d lines in the chart for two k0 values" % len(lines))
        check(doc["recommendation"]["settings"].startswith("VLLM_OEA_K0="), doc["recommendation"]["settings"])
        return "%d bytes, %d calls recorded, %d dropped" % (size, rec.recorded, rec.dropped)


@case("a full queue drops and counts; record() never waits for the writer")
def full_queue():
    with tempfile.TemporaryDirectory() as d:
        # The file is a pipe nobody reads yet: the writer blocks in its first
        # write once the pipe's buffer is full, and the 1 MiB ring fills behind it.
        read_end, write_end = os.pipe()
        rec = REC["Recorder"](os.path.join(d, "r.safetensors"), 0, 0, "sglang", "SGLANG_OEA_", LIB[0],
                              ring_bytes=1 << 20, chunk_bytes=1, opener=lambda p: write_end)
        small_run(rec, 1200)  # returns although the writer is held: the forward never waits
        dropped_while_held = rec.dropped
        out = os.path.join(d, "drained.safetensors")

        def drain():
            with open(out, "wb") as f:
                while True:
                    data = os.read(read_end, 1 << 16)
                    if not data:
                        break
                    f.write(data)

        reader = threading.Thread(target=drain)
        reader.start()
        rec.close()
        reader.join()
        os.close(read_end)
        check(dropped_while_held > 0, "nothing dropped with the writer held")
        check(rec.recorded + rec.dropped == 1200 and rec.dropped == dropped_while_held,
              "%d + %d (%d while held)" % (rec.recorded, rec.dropped, dropped_while_held))
        rc, doc, err = replay(out)
        check(rc == 0 and doc["calls"] == rec.recorded, err)
        check(doc["files"][0]["dropped"] >= 1, str(doc["files"][0]))
        return "%d recorded, %d dropped" % (rec.recorded, rec.dropped)


@case("a fork: the child drops its calls on the inherited recorder without its lock or writer, "
      "and records to its own file; the parent's file is its own")
def forked():
    import torch
    with tempfile.TemporaryDirectory() as d:
        rec = REC["Recorder"](os.path.join(d, "r.safetensors"), 0, 0, "sglang", "SGLANG_OEA_", LIB[0],
                              chunk_bytes=1)
        small_run(rec, 20)
        # liboea's own guard, with no Python hook in between: a recorder this
        # side will not let go of in the child (its handle kept out of sight)
        raw = REC["Recorder"](os.path.join(d, "raw.safetensors"), 0, 0, "sglang", "SGLANG_OEA_", LIB[0])
        small_run(raw, 2)
        lib, handle, block = raw._lib, raw._handle, raw._layers[5][3]
        raw._handle = None
        err_r, err_w = os.pipe()
        pid = os.fork()
        if pid == 0:  # the child: every failure written to the pipe, then a plain exit
            os.close(err_r)
            problems = []
            try:
                got = lib.oea_rec_call(handle, block)
                if got != 1:
                    problems.append("liboea queued a call on the inherited recorder (%d)" % got)
                figures = type(raw._figures)()
                lib.oea_rec_figures_get(handle, ctypes.byref(figures))
                if figures.calls != 2:
                    problems.append("the inherited figures count %d calls, not the fork's 2"
                                    % figures.calls)
                if lib.oea_rec_close(handle, 0, None) != 0:
                    problems.append("closing the inherited recorder did not free it at once")
                if rec.record(5, LAYERS[5], 0, torch.zeros(4, 64), torch.zeros(4, 8, dtype=torch.int32),
                              None) != 1 or "inherited by a forked process" not in (rec.stopped or ""):
                    problems.append("the Recorder kept the parent's handle: %s" % rec.stopped)
                mine = REC["Recorder"](os.path.join(d, "child.safetensors"), 0, 0, "sglang",
                                       "SGLANG_OEA_", LIB[0], chunk_bytes=1)
                small_run(mine, 10)
                mine.close()
                if mine.recorded != 10:
                    problems.append("the child's own recorder recorded %d of 10" % mine.recorded)
            except BaseException as exc:  # noqa: BLE001 (the child must exit, whatever happened)
                problems.append(repr(exc))
            os.write(err_w, "; ".join(problems).encode())
            os._exit(1 if problems else 0)
        os.close(err_w)
        with os.fdopen(err_r, "rb") as f:  # until the child exits (or dies: EOF either way)
            said = f.read().decode()
        _, status = os.waitpid(pid, 0)
        check(status == 0 and not said, "child (wait status %d): %s" % (status, said))
        small_run(rec, 20)
        rec.close()
        raw._handle = handle
        raw.close()
        got = (replay(rec.path)[1]["calls"], replay(raw.path)[1]["calls"])
        child = os.path.join(d, "child-rank0-%d.safetensors" % pid)
        check(rec.recorded == 40 and got == (40, 2), "parent recorded %d; replayed %s"
              % (rec.recorded, got))
        check(os.path.exists(child) and replay(child)[1]["calls"] == 10, str(os.listdir(d)))
        return "parent 40 + 2 calls, child 10 in its own file; the inherited call dropped"


KILLED = r"""
import os, signal, sys, torch
ns = {"__name__": "oea_record"}
exec(compile(open(sys.argv[1]).read(), sys.argv[1], "exec"), ns)
rec = ns["Recorder"](sys.argv[2], 0, 0, "sglang", "SGLANG_OEA_", sys.argv[3], chunk_bytes=1 << 12)
s = dict(experts=128, top_k=8, shared=0, scoring="softmax", renormalize=True, groups=0, topk_group=0,
         min_batch=1)
g = torch.Generator().manual_seed(3)
for i in range(100000):
    logits = torch.randn(32, 128, generator=g)
    rec.record(0, s, 0, logits, torch.topk(logits, 8, dim=1).indices.to(torch.int32), None)
    if rec.chunks >= 20:
        os.kill(os.getpid(), signal.SIGKILL)  # while the writer is busy with the next chunks
"""


@case("a writer killed with SIGKILL leaves a file that replays")
def killed():
    with tempfile.TemporaryDirectory() as d:
        p = subprocess.run([sys.executable, "-c", KILLED, RECORDER, os.path.join(d, "k.safetensors"), LIB[0]],
                           capture_output=True, text=True)
        check(p.returncode == -signal.SIGKILL, "exit %s: %s" % (p.returncode, p.stderr[-400:]))
        files = os.listdir(d)
        check(len(files) == 1, str(files))
        rc, doc, err = replay(os.path.join(d, files[0]), "--k0", "4", "--batch", "32")
        check(rc == 0 and doc["files"][0]["chunks"] >= 20, err)
        return "%d chunks, %d calls, cut tail %d bytes" % (doc["files"][0]["chunks"], doc["calls"],
                                                          doc["files"][0]["cut_bytes"])


def main():
    args = tl.library_args(__doc__)
    LIB[0] = args.library
    if tl.no_torch():
        return 77
    for t in (exact, full_disk, readonly_folder, cap, full_queue, forked, killed):
        t()
    return tl.summary()


if __name__ == "__main__":
    sys.exit(main())
