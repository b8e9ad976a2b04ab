#!/usr/bin/env python3
"""How fast `oeapatch replay` is, against liboea's CPU reference's own speed
(issue 33: a 1 GiB recording, 7 k0 values x 8 batch sizes, on one core, in
minutes).

    /usr/bin/python3 bench/replay_bench.py [--size MIB] [--build DIR] [--keep FILE]
                                           [--against REV] [--record-only]

Writes a synthetic recording of about MIB MiB (default 128; --size 1024 for
the goal's 1 GiB) with tests/fuzz/recording_seeds.py's encoder: a Qwen3-30B-A3B-shaped
layer stack (128 experts, top-8, bf16 logits, int32 ids, 48 layers), decode
batches of 1..64 rows, skewed routing (expert popularity ~ 1/rank, as real
traffic is). Then replays it pinned to one core (taskset, when there is one)
with --k0 1-7 and --batch 1,2,4,8,16,32,64,128 and prints: rows routed, wall
time, the replay's rows/s and the reference's (the time inside
oea_route_host, measured by the replay itself), and the time a 1 GiB
recording would take at this rate. First it times the recorder's side of
the forward: Recorder.record() on CPU tensors of a batch of 32 (one ctypes
call into liboea's recorder: a copy into its ring; liboea's writer thread
runs beside it), median of many calls, 48 layers a step with 2 ms between
steps (the writer drains meanwhile); with --against REV, that revision's
recorder too, in the same run (REV's oea_record.py: the Python recorder
before it moved into liboea). A measure, not a test.

    /usr/bin/python3 bench/replay_bench.py --record-only --against main
"""
import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def encoder():
    sys.path.insert(0, os.path.join(ROOT, "tests", "fuzz"))
    from recording_seeds import encode_chunk
    return encode_chunk


def write_recording(path, mib, experts=128, top_k=8, layers=48, seed=33):
    import torch
    encode = encoder()
    g = torch.Generator().manual_seed(seed)
    popularity = torch.log(1.0 / torch.arange(1, experts + 1, dtype=torch.float32))
    settings = {"experts": experts, "top_k": top_k, "shared": 0, "scoring": "softmax",
                "renormalize": True, "groups": 0, "topk_group": 0, "min_batch": 1, "bias": None}
    seq, chunk_no, written, rows = 0, 0, 0, 0
    with open(path, "wb") as f:
        while written < mib << 20:
            calls, tensors = [], []
            n = int(torch.randint(1, 65, (1,), generator=g))
            for layer in range(layers):  # one decode step: every layer sees the batch
                perm = torch.randperm(experts, generator=g)
                logits = (torch.randn(n, experts, generator=g) + popularity[perm]).to(torch.bfloat16)
                ids = torch.topk(logits.float(), top_k, dim=1).indices.to(torch.int32)
                calls.append({"seq": seq, "layer": layer, "k0": 0})
                tensors.append(("c%d.logits" % seq, "BF16", [n, experts],
                                logits.view(torch.int16).numpy().tobytes()))
                tensors.append(("c%d.ids" % seq, "I32", [n, top_k], ids.numpy().tobytes()))
                seq += 1
                rows += n
            data = encode({"framework": "sglang", "prefix": "SGLANG_OEA_", "rank": "0",
                           "chunk": str(chunk_no), "dropped": "0", "graph_missed": "0"},
                          {l: settings for l in range(layers)}, calls, tensors)
            f.write(data)
            written += len(data)
            chunk_no += 1
    return written, rows, seq


def recorder_module(revision=None):
    """oea_record.py's namespace: this tree's, or the one of a git revision
    (--against: the recorder before it moved into liboea, timed in the same run)."""
    path = os.path.join(ROOT, "patches", "binding-core", "oea_record.py")
    if revision:
        text = subprocess.run(["git", "-C", ROOT, "show", "%s:patches/binding-core/oea_record.py"
                               % revision], capture_output=True, text=True, check=True).stdout
    else:
        text = open(path, encoding="utf-8").read()
    ns = {"__name__": "oea_record"}
    exec(compile(text, path, "exec"), ns)
    return ns


def time_record(library, revision=None, calls=20000):
    """Median and p99 microseconds of Recorder.record() for a 32 x 128 bf16
    batch (CPU tensors), 48 layers a step with 2 ms between steps (the writer
    drains meanwhile), and the calls dropped. revision: time that revision's
    Python recorder instead (its own queue and writer thread)."""
    import torch
    ns = recorder_module(revision)
    work = tempfile.mkdtemp(prefix="oea-record-bench-")
    try:
        path = os.path.join(work, "r.safetensors")
        if revision:
            rec = ns["Recorder"](path, 0, 0, "sglang", "SGLANG_OEA_", max_queue=1 << 20)
        else:
            rec = ns["Recorder"](path, 0, 0, "sglang", "SGLANG_OEA_", library)
        s = {"experts": 128, "top_k": 8, "shared": 0, "scoring": "softmax", "renormalize": True,
             "groups": 0, "topk_group": 0, "min_batch": 1}
        logits = torch.randn(32, 128).to(torch.bfloat16)
        ids = torch.topk(logits.float(), 8, dim=1).indices.to(torch.int32)
        times = []
        for i in range(calls):
            t0 = time.perf_counter()
            rec.record(i % 48, s, 0, logits, ids, None)
            times.append(time.perf_counter() - t0)
            if i % 48 == 47:
                time.sleep(0.002)  # a decode step's other work: the writer drains meanwhile
        rec.close(60)
        times.sort()
        return times[len(times) // 2] * 1e6, times[int(len(times) * 0.99)] * 1e6, rec.dropped
    finally:
        shutil.rmtree(work, ignore_errors=True)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--size", type=int, default=128, help="MiB of recording (default 128)")
    ap.add_argument("--build", default=os.path.join(ROOT, "build"))
    ap.add_argument("--keep", help="write the recording here and keep it")
    ap.add_argument("--against", metavar="REV",
                    help="also time the recorder of git revision REV (before liboea's), alternating")
    ap.add_argument("--record-only", action="store_true", help="time record() and stop")
    a = ap.parse_args()
    cli = os.path.join(a.build, "src", "oeapatch")
    library = os.path.realpath(os.path.join(a.build, "native", "liboea.so"))
    ways = [("liboea's recorder", None)] + ([("%s's recorder" % a.against, a.against)]
                                            if a.against else [])
    runs = {name: [] for name, _ in ways}
    for _ in range(3):  # alternating, so that the machine's load falls on both alike
        for name, revision in ways:
            runs[name].append(time_record(library, revision))
    for name, got in runs.items():
        med = sorted(r[0] for r in got)[1]
        p99 = sorted(r[1] for r in got)[1]
        print("Recorder.record(), %s, 32 x 128 bf16 CPU tensors: median %.2f us, p99 %.1f us per "
              "call (medians of 3 runs; %s of 20000 dropped)"
              % (name, med, p99, "/".join(str(r[2]) for r in got)))
    if a.record_only:
        return 0
    work = tempfile.mkdtemp(prefix="oea-replay-bench-")
    try:
        path = a.keep or os.path.join(work, "bench.safetensors")
        t0 = time.time()
        size, rows, calls = write_recording(path, a.size)
        print("recording: %.1f MiB, %d calls, %d rows (written in %.1f s)"
              % (size / 1048576, calls, rows, time.time() - t0))
        cmd = [cli, "replay", "--json", "--k0", "1-7", "--batch", "1,2,4,8,16,32,64,128", path]
        if shutil.which("taskset"):
            cmd = ["taskset", "-c", "0"] + cmd
        t0 = time.time()
        p = subprocess.run(cmd, capture_output=True, text=True)
        wall = time.time() - t0
        if p.returncode:
            print(p.stderr, file=sys.stderr)
            return 1
        sp = json.loads(p.stdout)["speed"]
        print("replay, one core, 7 k0 x (recorded + 8 batch sizes): %d rows routed in %.1f s wall"
              % (sp["routed_rows"], wall))
        print("  replay:                %10.0f rows/s" % (sp["routed_rows"] / wall))
        print("  liboea's CPU reference: %9.0f rows/s (inside oea_route_host: %.1f s of %.1f s)"
              % (sp["reference_rows_per_second"], sp["reference_seconds"], sp["seconds"]))
        print("  replay / reference:    %10.2f" % (sp["routed_rows"] / wall / sp["reference_rows_per_second"]))
        print("  a 1 GiB recording at this rate: %.1f minutes" % (wall * 1024.0 / (size / 1048576) / 60))
    finally:
        shutil.rmtree(work, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
