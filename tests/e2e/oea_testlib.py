"""Shared by the end-to-end Python tests: a tiny case runner that prints one
line per case and the closing `N passed, M failed`, and an independent
oracle: liboea's oea_route_host driven through a ctypes mirror of
oea_problem parsed from native/include/oea.h itself (not the binding's copy).
"""

import ctypes
import os
import re
import shutil
import subprocess
import tempfile
import traceback

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
HEADER = os.path.join(ROOT, "native", "include", "oea.h")

RESULTS = []

_TABLES = {}


def settings_table(definition, target, fixture, module, library):
    """{{settings_table}} as oeapatch renders it from the definition's
    [setting:...] sections (src/bindingsettings.c): read from the module the
    CLI writes when it applies `definition` (a patches/ folder) to `fixture`
    laid at `target`, since the table's rules are the definition's and a test
    must not restate them."""
    if definition not in _TABLES:
        cli = os.environ.get("OEAPATCH") or os.path.join(ROOT, "build", "src", "oeapatch")
        work = tempfile.mkdtemp(prefix="oea-table-")
        try:
            path = os.path.join(work, target)
            os.makedirs(os.path.dirname(path))
            shutil.copyfile(fixture, path)
            subprocess.run([cli, "-C", work, "--patch", definition, "apply", "--library",
                            library], check=True, capture_output=True)
            with open(os.path.join(os.path.dirname(path), module + ".py"),
                      encoding="utf-8") as f:
                written = f.read()
        finally:
            shutil.rmtree(work, ignore_errors=True)
        m = re.search(r"^SETTINGS_TABLE = (\(\n.*?^\))$", written, re.S | re.M)
        check(m, "no SETTINGS_TABLE in the module oeapatch wrote for " + definition)
        _TABLES[definition] = m.group(1)
    return _TABLES[definition]


def case(name):
    def deco(fn):
        def run():
            try:
                detail = fn()
                RESULTS.append(True)
                print("PASS %s%s" % (name, (": " + detail) if detail else ""))
            except Exception as exc:  # one failing case must not stop the rest
                RESULTS.append(False)
                print("FAIL %s: %s" % (name, exc))
                if VERBOSE[0]:
                    traceback.print_exc()
        run.__name__ = name
        return run
    return deco


def check(cond, text):
    if not cond:
        raise AssertionError(text)


VERBOSE = [False]  # set by the test's main (-v)
C_TYPES = {
    "uint32_t": ctypes.c_uint32, "int32_t": ctypes.c_int32,
    "int64_t": ctypes.c_int64, "uint64_t": ctypes.c_uint64,
}


def parse_struct(header, name):
    """[(field, ctype)] of `typedef struct name { ... } name;` in oea.h."""
    m = re.search(r"typedef struct %s \{(.*?)\} %s;" % (name, name), header, re.S)
    check(m, "struct %s not found in %s" % (name, HEADER))
    body = re.sub(r"/\*.*?\*/", "", m.group(1), flags=re.S)
    fields = []
    for decl in body.split(";"):
        decl = " ".join(decl.split())
        if not decl:
            continue
        fm = re.match(r"^(?:const )?([A-Za-z_][A-Za-z0-9_]*)\s*(\*?)\s*([A-Za-z_]\w*)"
                      r"(?:\[(\w+)\])?$", decl)
        check(fm, "cannot read field %r of %s" % (decl, name))
        ctype_name, star, field, count = fm.groups()
        if star:
            ctype = ctypes.c_void_p
        else:
            check(ctype_name in C_TYPES, "unknown type %s in %s" % (ctype_name, name))
            ctype = C_TYPES[ctype_name]
        if count and not count.isdigit():  # a length named by a #define (OEA_KEPT_BUCKETS)
            dm = re.search(r"#define %s (\d+)" % count, header)
            check(dm, "array length %s of %s.%s not defined in %s" % (count, name, field, HEADER))
            count = dm.group(1)
        if count:
            ctype = ctype * int(count)
        fields.append((field, ctype))
    return fields


def expected_layout(fields):
    """(offsets, size) by the C rules for these types (natural alignment)."""
    offset, align_max, offsets = 0, 1, []
    for field, ctype in fields:
        base = ctype._type_ if hasattr(ctype, "_length_") else ctype
        size, align = ctypes.sizeof(ctype), ctypes.alignment(base)
        offset = (offset + align - 1) // align * align
        offsets.append((field, offset, size))
        offset += size
        align_max = max(align_max, align)
    size = (offset + align_max - 1) // align_max * align_max
    return offsets, size


def header_constants(header):
    out = {}
    for name in ("OEA_ABI_VERSION", "OEA_MAX_ROWS", "OEA_MAX_EXPERTS", "OEA_MAX_TOPK"):
        m = re.search(r"#define %s (\d+)" % name, header)
        check(m, "%s not in header" % name)
        out[name] = int(m.group(1))
    return out


class Oracle:
    """oea_route_host through this test's own struct (parsed from oea.h)."""

    def __init__(self, library, header):
        problem = type("TestProblem", (ctypes.Structure,),
                       {"_fields_": parse_struct(header, "oea_problem")})
        stats = type("TestStats", (ctypes.Structure,),
                     {"_fields_": parse_struct(header, "oea_stats")})
        self.Problem, self.Stats = problem, stats
        self.lib = ctypes.CDLL(library)
        self.lib.oea_route_host.argtypes = [ctypes.POINTER(problem)]
        self.lib.oea_route_host.restype = ctypes.c_int
        self.lib.oea_status_message.argtypes = [ctypes.c_int]
        self.lib.oea_status_message.restype = ctypes.c_char_p

    def route(self, logits, ids, weights, *, k0, num_shared, scoring, renormalize,
              groups=0, topk_group=0, bias=None, num_valid=None):
        """Route copies (contiguous rows); returns (weights, ids, stats)."""
        import torch

        logits = logits.contiguous()
        ids = ids.clone().contiguous()
        weights = weights.clone().contiguous()
        nv = None
        if num_valid is not None:
            nv = torch.tensor([int(num_valid)], dtype=torch.int32)
        bias32 = bias.float().contiguous() if bias is not None else None
        st = self.Stats()
        p = self.Problem()
        p.struct_size = ctypes.sizeof(self.Problem)
        p.n, p.num_experts = ids.shape[0], logits.shape[1]
        p.top_k, p.num_shared, p.k0 = ids.shape[1], num_shared, k0
        p.scoring = {"softmax": 0, "sigmoid": 1}[scoring]
        p.renormalize = int(renormalize)
        p.num_expert_group, p.topk_group = groups, topk_group
        p.logits_dtype = {torch.float32: 0, torch.bfloat16: 1, torch.float16: 2}[logits.dtype]
        p.logits_row_stride = logits.shape[1]
        p.logits = logits.data_ptr()
        p.correction_bias = bias32.data_ptr() if bias32 is not None else None
        p.ids_dtype = {torch.int32: 3, torch.int64: 4}[ids.dtype]
        p.weights_dtype = 0
        p.ids_row_stride = p.weights_row_stride = ids.shape[1]
        p.ids, p.weights = ids.data_ptr(), weights.data_ptr()
        p.num_valid_rows = nv.data_ptr() if nv is not None else None
        p.stats = ctypes.addressof(st)
        status = self.lib.oea_route_host(ctypes.byref(p))
        check(status == 0, "oracle call failed: %s" % self.lib.oea_status_message(status))
        return weights, ids, st


def distinct(ids, rows, routed):
    s = set()
    for r in range(rows):
        s.update(int(x) for x in ids[r, :routed].tolist())
    return len(s)


def keep_sums(sums, out_dir):
    """Phase on of a release suite: liboea's sums over a fixed pass (the
    binding's stats() of one device), checked to show re-routing and a kept
    weight, written for phase shadow (same_sums). Returns them as text."""
    import json

    check(sums["t_after"] < sums["t_before"] and sums["kept_mean"] is not None,
          "sums %s" % sums)
    with open(os.path.join(out_dir, "on-sums.json"), "w") as f:
        json.dump(sums, f)
    return sums_text(sums)


def same_sums(sums, out_dir):
    """Phase shadow: the same pass's sums equal phase on's (keep_sums)."""
    import json

    with open(os.path.join(out_dir, "on-sums.json")) as f:
        on = json.load(f)
    check(sums == on, "shadow %s\non     %s" % (sums, on))
    return sums_text(sums) + ", as on"


# replay's totals (docs/recording.md): liboea's sums as the binding's stats() holds them
REPLAY_FIELDS = ("calls", "gated", "t_before", "t_after", "valid_rows", "rerouted_rows",
                 "changed_slots", "kept_fx", "kept_undefined")


# The stub sglang package of the torch tests and where its topk.py goes.
SGLANG_TOPK = "python/sglang/srt/layers/moe/topk.py"
SGLANG_PKG = os.path.join(ROOT, "tests", "fixtures", "pkg", "python")


def git(repo, *args):
    """git in `repo` with a fixed identity and no user or system configuration; its stdout."""
    env = dict(os.environ, GIT_AUTHOR_NAME="t", GIT_AUTHOR_EMAIL="t@example.invalid",
               GIT_COMMITTER_NAME="t", GIT_COMMITTER_EMAIL="t@example.invalid",
               GIT_CONFIG_GLOBAL="/dev/null", GIT_CONFIG_NOSYSTEM="1")
    return subprocess.run(["git", "-c", "init.defaultBranch=main", *args], cwd=repo, env=env,
                          check=True, capture_output=True).stdout


def era_checkout(repo, era):
    """A git repository at `repo`: the stub sglang package (tests/fixtures/pkg)
    with tests/fixtures/eras/ERA.py as its topk.py, committed (what the torch
    tests patch with `oeapatch apply`)."""
    shutil.copytree(SGLANG_PKG, os.path.join(repo, "python"),
                    ignore=shutil.ignore_patterns("__pycache__"))
    shutil.copyfile(os.path.join(ROOT, "tests", "fixtures", "eras", era + ".py"),
                    os.path.join(repo, SGLANG_TOPK))
    git(repo, "init", "-q")
    git(repo, "add", "-A")
    git(repo, "commit", "-qm", "upstream " + era)


def recording_calls(path):
    """The calls ({seq, layer, k0}) in the complete chunks of a recording
    (docs/recording.md: safetensors chunks one after the other; a cut last
    chunk is not read)."""
    import json
    import struct

    with open(path, "rb") as f:
        data = f.read()
    at, calls = 0, []
    while at + 8 <= len(data):
        (n,) = struct.unpack_from("<Q", data, at)
        if at + 8 + n > len(data):
            break
        header = json.loads(data[at + 8:at + 8 + n])
        end = max((t["data_offsets"][1] for k, t in header.items() if k != "__metadata__"),
                  default=0)
        if at + 8 + n + end > len(data):
            break
        calls += json.loads(header["__metadata__"]["calls"])
        at += 8 + n + end
    return calls


def replay_totals(path, k0):
    """`oeapatch replay --json --k0 K0 PATH`: (the document, the totals of the
    recorded calls routed at k0)."""
    import json
    import subprocess

    cli = os.environ.get("OEAPATCH") or os.path.join(ROOT, "build", "src", "oeapatch")
    p = subprocess.run([cli, "replay", "--json", "--k0", str(k0), path], capture_output=True,
                       text=True, timeout=600)
    check(p.returncode == 0, "replay of %s failed: %s" % (path, p.stderr[-1500:]))
    doc = json.loads(p.stdout)
    rows = [r for r in doc["results"] if r["batch"] == "recorded" and r["k0"] == k0]
    check(len(rows) == 1, "replay has no row of the recorded calls at k0 %d" % k0)
    return doc, rows[0]["totals"]


def same_as_replay(live, path, k0):
    """Issue 33's exactness: the replay of a recording at the live k0 gives
    liboea's live sums (`live`: the binding's stats() of one device) field for
    field. Returns them as text."""
    doc, got = replay_totals(path, k0)
    for field in REPLAY_FIELDS:
        check(got[field] == live[field], "%s: replay %d, live %d (replay %s, live %s)"
              % (field, got[field], live[field], got, live))
    return "%d calls recorded and replayed: T %d -> %d, kept_fx %d, as live" % (
        doc["calls"], got["t_before"], got["t_after"], got["kept_fx"])


def sums_text(sums):
    return "%d calls, T %d -> %d, kept mean %.3f, p5 %.3f, %.2f slots changed per row" % (
        sums["calls"] - sums["gated"], sums["t_before"], sums["t_after"], sums["kept_mean"],
        sums["kept_p5"], sums["changed_per_row"])


def summary():
    passed = sum(1 for r in RESULTS if r)
    failed = len(RESULTS) - passed
    print("%d passed, %d failed" % (passed, failed))
    return 1 if failed or not RESULTS else 0


def no_torch():
    """True (with the SKIP line printed) when this interpreter has no torch: the
    test's main then exits 77, which ctest reports as skipped."""
    try:
        import torch  # noqa: F401
    except ImportError:
        import sys
        print("SKIP: no torch in %s" % sys.executable)
        return True
    return False


def library_args(description=None):
    """The arguments every Python test takes (ctest passes --library; -v for
    tracebacks), parsed, with VERBOSE set."""
    import argparse

    ap = argparse.ArgumentParser(description=description)
    ap.add_argument("--library", required=True)
    ap.add_argument("-v", action="store_true")
    args = ap.parse_args()
    VERBOSE[0] = args.v
    return args
