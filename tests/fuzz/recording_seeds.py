"""Writes the seed recordings of fuzz_recording into DIR (nothing generated is
committed): chunks laid out as docs/recording.md specifies (encode_chunk
below, which bench/replay_bench.py also writes its synthetic recordings
with; the server's recorder is liboea's, native/src/oea_record.c), one per
shape the reader knows: F32/BF16/F16 logits, I32/I64 ids, a bias, groups,
shared columns, several chunks, a cut tail and invalid ids. Plain Python: the
seeds and their bad variants (invalid ids) need no torch and no liboea.

    python3 tests/fuzz/recording_seeds.py DIR
"""

import json
import os
import random
import struct
import sys


def encode_chunk(meta, layers, calls, tensors):
    """One self-contained safetensors chunk (docs/recording.md, format 1):
    meta (str -> str) plus the format fields, layers ({layer: settings}),
    calls ([{seq, layer, k0}]) and tensors [(name, dtype, shape, bytes)]
    laid out in that order."""
    md = {"format": "oeapatch-routing", "version": "1"}
    md.update(meta)
    md["layers"] = json.dumps({str(k): v for k, v in layers.items()}, separators=(",", ":"))
    md["calls"] = json.dumps(calls, separators=(",", ":"))
    header = {"__metadata__": md}
    at = 0
    for name, dtype, shape, data in tensors:
        header[name] = {"dtype": dtype, "shape": list(shape), "data_offsets": [at, at + len(data)]}
        at += len(data)
    text = json.dumps(header, separators=(",", ":")).encode("utf-8")
    text += b" " * (-(len(text) + 8) % 8)  # the data starts 8-aligned, as safetensors writes it
    return b"".join([struct.pack("<Q", len(text)), text] + [t[3] for t in tensors])


def call_tensors(rng, seq, rows, experts, top_k, ldt, idt, bad_ids=False):
    size = {"F32": 4, "BF16": 2, "F16": 2}[ldt]
    logits = bytes(rng.getrandbits(8) for _ in range(rows * experts * size))
    ids = []
    for _ in range(rows):
        row = rng.sample(range(experts), top_k)
        if bad_ids:
            row[0] = rng.choice([-1, experts, row[-1]])
        ids.extend(row)
    fmt = "<%d%s" % (len(ids), "i" if idt == "I32" else "q")
    return [("c%d.logits" % seq, ldt, [rows, experts], logits),
            ("c%d.ids" % seq, idt, [rows, top_k], struct.pack(fmt, *ids))]


def chunk(encode, rng, seq0, calls, experts=16, top_k=4, shared=0, ldt="F32", idt="I32",
          bias=False, groups=0, bad_ids=False, chunk_no=0):
    layer = {"experts": experts, "top_k": top_k, "shared": shared, "scoring": "softmax",
             "renormalize": True, "groups": groups, "topk_group": 2 if groups else 0,
             "min_batch": 1, "bias": None}
    tensors = []
    if bias:
        layer["bias"] = "l7.bias"
        layer["scoring"] = "sigmoid"
        tensors.append(("l7.bias", "F32", [experts], struct.pack("<%df" % experts,
                                                                 *[rng.random() for _ in range(experts)])))
    entries = []
    for i in range(calls):
        seq = seq0 + i
        entries.append({"seq": seq, "layer": 7, "k0": 2})
        tensors += call_tensors(rng, seq, 1 + rng.randrange(6), experts, top_k, ldt, idt, bad_ids)
    meta = {"framework": "sglang", "prefix": "SGLANG_OEA_", "rank": "0", "chunk": str(chunk_no),
            "dropped": "0", "graph_missed": "0"}
    return encode(meta, {7: layer}, entries, tensors)


def main():
    out = sys.argv[1]
    os.makedirs(out, exist_ok=True)
    encode = encode_chunk
    rng = random.Random(33)
    seeds = {
        "f32": chunk(encode, rng, 0, 3),
        "bf16-i64": chunk(encode, rng, 0, 2, ldt="BF16", idt="I64"),
        "f16-bias-groups": chunk(encode, rng, 0, 2, experts=32, top_k=6, ldt="F16", bias=True, groups=4),
        "shared": chunk(encode, rng, 0, 2, top_k=5, shared=1),
        "bad-ids": chunk(encode, rng, 0, 3, bad_ids=True),
    }
    two = chunk(encode, rng, 0, 2) + chunk(encode, rng, 2, 2, chunk_no=1)
    seeds["two-chunks"] = two
    seeds["cut"] = two[:len(two) - 7]
    for name, data in seeds.items():
        with open(os.path.join(out, "recording-%s.safetensors" % name), "wb") as f:
            f.write(data)


if __name__ == "__main__":
    main()
