#!/usr/bin/python3
"""The GPU check, pre-flown on the CPU: a lent GPU machine has minutes, not
hours, so every part of native/scripts/gpu-check.sh that can run without a
GPU runs here first.

Usage: /usr/bin/python3 tests/e2e/test_gpu_preflight.py --library PATH/liboea.so

  - gpu-check.sh --dry-run prints its plan and exits 0;
  - on a machine without a GPU, a real run exits 2, says NOT RUN in
    summary.txt (never PASS) and leaves at most 8 files in $OUT, as a lent
    machine requires (skipped where a GPU is present: the device runs it);
  - oea_torch.py --check: the vectorised torch OEA (the yardstick of the
    torch step) against liboea's host path, ids exact;
  - moe_bench.py --device cpu --smoke: the MoE step's whole code path with
    tiny layers, including its checks on OEA's ids; and those checks catch
    a lost top-k0 expert (by OEA's key, not column order), a repeated id in a row (spec
    version 3: fillers too are distinct) and stats that disagree with the ids.
Prints one line per case and `N passed, M failed`; exit 1 on failure.
"""

import argparse
import os
import shutil
import subprocess
import sys
import tempfile

from oea_testlib import RESULTS, ROOT, VERBOSE, case, check, summary

SCRIPT = os.path.join(ROOT, "native", "scripts", "gpu-check.sh")
BENCH = os.path.join(ROOT, "native", "bench")
LIB = [None]


def run(cmd, env=None, timeout=240):
    p = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout,
                       env=dict(os.environ, **(env or {})))
    return p.returncode, p.stdout, p.stderr


def gpu_here():
    return shutil.which("nvidia-smi") is not None and \
        "GPU " in run(["nvidia-smi", "-L"])[1]


@case("gpu-check.sh --dry-run prints the plan and runs nothing")
def dry_run():
    rc, out, err = run(["bash", SCRIPT, "--dry-run"])
    check(rc == 0, "exit %d: %s" % (rc, err[-500:]))
    check("gpu-check plan (deadline" in out, "no plan line in: %s" % out[:500])
    for step in ("build:", "correctness:", "memcheck:", "latency:", "torch:", "moe:"):
        check(step in out, "plan lacks step %s" % step)


@case("gpu-check.sh without a GPU: exit 2, NOT RUN, at most 8 files")
def no_gpu():
    if gpu_here():
        return "skipped here: this machine has a GPU (the device run covers it)"
    out_dir = tempfile.mkdtemp(prefix="oea-gpucheck-")
    try:
        rc, out, err = run(["bash", SCRIPT], env={"OUT": out_dir, "OEA_GPU_DEADLINE": "60"})
        check(rc == 2, "exit %d (expected 2): %s" % (rc, err[-500:]))
        files = [os.path.join(d, f) for d, _, fs in os.walk(out_dir) for f in fs]
        check(0 < len(files) <= 8, "%d files in OUT: %s" % (len(files), files))
        with open(os.path.join(out_dir, "summary.txt")) as f:
            text = f.read()
        check("overall: NOT RUN" in text, "summary.txt does not say NOT RUN:\n" + text)
        check("PASS" not in text, "summary.txt says PASS without a GPU:\n" + text)
        check("commit: " in text, "summary.txt names no commit:\n" + text)
        return "%d files" % len(files)
    finally:
        shutil.rmtree(out_dir, ignore_errors=True)


@case("oea_torch.py --check: vectorised torch OEA equals liboea (CPU)")
def torch_check():
    rc, out, err = run([sys.executable, os.path.join(BENCH, "oea_torch.py"), "--check",
                        "--device", "cpu", "--lib", LIB[0], "--cases", "300"])
    check(rc == 0, "exit %d: %s%s" % (rc, out[-800:], err[-800:]))
    check("all match" in out, out[-500:])


@case("moe_bench.py --device cpu --smoke: every table row, checks passed")
def moe_smoke():
    rc, out, err = run([sys.executable, os.path.join(BENCH, "moe_bench.py"), "--device", "cpu",
                        "--smoke", "--lib", LIB[0]])
    check(rc == 0, "exit %d: %s%s" % (rc, out[-800:], err[-800:]))
    rows = [line for line in out.splitlines() if line.startswith("| ") and line[2].isdigit()]
    check(len(rows) == 6, "%d table rows, expected 6 (2 models x 3 batches):\n%s"
          % (len(rows), out))
    for line in rows:
        cells = [c.strip() for c in line.strip("|").split("|")]
        check(int(cells[3]) <= int(cells[2]), "T after > T before in: " + line)


@case("moe_bench.py's checks on OEA's ids catch broken ids")
def moe_checks_fail():
    sys.path.insert(0, BENCH)
    import torch
    import moe_bench

    m = moe_bench.MODELS["qwen3"]
    # softmax: the key is the logit; each row's best three are 5, 6, 7 and 1, 2, 3
    logits = torch.zeros(2, m["E"])
    for r, best in enumerate(([5, 6, 7], [1, 2, 3])):
        logits[r, best] = torch.tensor([3.0, 2.0, 1.0])
    ids = torch.tensor([[12, 5, 11, 6, 10, 7, 9, 8], [1, 2, 3, 4, 13, 14, 15, 16]])
    # U = {1, 2, 3, 5, 6, 7}: each row takes all of it, then (spec 3) two
    # distinct fillers from outside U, lowest first: 0 and 4.
    good = torch.tensor([[5, 6, 7, 1, 2, 3, 0, 4], [1, 2, 3, 5, 6, 7, 0, 4]])
    w = torch.tensor([[.3, .2, .1, .1, .1, .1, 0., 0.], [.3, .2, .1, .1, .1, .1, 0., 0.]])
    check(moe_bench.check_oea_ids(m, logits, None, ids, good, w, 3, 16, 8) == [], "a valid result flagged: %s"
          % moe_bench.check_oea_ids(m, logits, None, ids, good, w, 3, 16, 8))
    dropped = good.clone()
    dropped[0, 2] = 9  # 7 is lost (and 9 is new: T after is 9)
    check(any("lost" in p for p in moe_bench.check_oea_ids(m, logits, None, ids, dropped, w, 3, 16, 9)),
          "a dropped top-k0 expert passed")
    dup = good.clone()
    dup[1, 4] = 2  # a repeat with a non-zero weight
    check(any("distinct" in p for p in moe_bench.check_oea_ids(m, logits, None, ids, dup, w, 3, 16, 8)),
          "a duplicate expert passed")
    old = good.clone()
    old[:, 6:] = old[:, :1]  # spec 2's fillers: the best expert again, weight 0
    check(any("distinct" in p for p in moe_bench.check_oea_ids(m, logits, None, ids, old, w, 3, 16, 6)),
          "a zero-weight repeated filler passed")
    check(any("stats" in p for p in moe_bench.check_oea_ids(m, logits, None, ids, good, w, 3, 16, 5)),
          "stats that disagree with the ids passed")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--library", required=True)
    ap.add_argument("-v", action="store_true")
    a = ap.parse_args()
    VERBOSE[0] = a.v
    LIB[0] = a.library
    try:
        import torch  # noqa: F401
    except ImportError:
        print("FAIL setup: torch is not importable by %s (scripts/setup-deps.sh test "
              "installs Debian's python3-torch)" % sys.executable)
        return 1
    for fn in (dry_run, no_gpu, torch_check, moe_smoke, moe_checks_fail):
        fn()
    return summary()


if __name__ == "__main__":
    sys.exit(main())
