#!/usr/bin/python3
"""Benchmark (not a test): the binding's route() per call in its three ways of
running, side by side in ONE process, calls interleaved round by round, so that
the machine's load falls on all of them alike (the ratios are what a shared
machine can report):

    stats off   SGLANG_OEA_K0=3, today's default
    stats on    SGLANG_OEA_STATS=true: liboea adds its totals (T, kept weight,
                changed slots) in the call; the host counts the call
    shadow      SGLANG_OEA_MODE=shadow: the same call with liboea's
                OEA_FLAG_COUNT_ONLY (statistics on; liboea computes and counts,
                writes nothing), the framework's tensors untouched
    record      SGLANG_OEA_RECORD set (stats off): the call's logits and ids
                copied onto the recorder's queue (issue 33), written to a
                temporary folder by its thread; the recorder's figures are
                printed after (a dropped call costs less than a recorded one);
                the next way waits until the writer's queue is empty, so that
                its thread does not run into the others' timings
    record REV  with a third argument REV: the same with the recorder of git
                revision REV (its oea_record.py and record_hook.py in place of
                this tree's: before the recorder moved into liboea, main's
                Python queue and writer thread), so old and new meet one load

    bench/binding_modes.py [BUILD_DIR] [ROUNDS] [REV]

The module is the SGLang binding rendered as tests/e2e/test_binding.py renders
it (BUILD_DIR's CLI and liboea), imported three times; torch on one thread;
Qwen3-30B-A3B's layer (128 experts, top-8) on CPU tensors; each plan prepared
and judged on valid rows first, then every timed row is padding (ids -1) so
that liboea finds no row and the time is the host's; the timed calls' forward
batch is test_binding's sglang_batch (an IntEnum mode, as SGLang's). Printed per token count:
the median of ROUNDS runs of 3,000 calls and each mode's ratio to stats off,
in wall-clock time and in the calling thread's CPU time (time.thread_time:
on a shared machine, the time other processes run between the calls is left
out), and the bare liboea call (the floor) in both.
"""

import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(ROOT, "tests", "e2e"))

import test_binding as tb  # noqa: E402  (its renderer, loader and forward batch)

import torch  # noqa: E402

MODES = (("stats off", {}), ("stats on", {"SGLANG_OEA_STATS": "1"}),
         ("shadow", {"SGLANG_OEA_MODE": "shadow"}), ("record", {"SGLANG_OEA_RECORD_CAP": "1024"}))
CALLS = 3000


def drain(module):
    """Waits until the recorder's writer has taken every queued call."""
    rec = module._recorder()
    if hasattr(rec, "_queue"):  # a revision's Python recorder
        while rec._queue:
            time.sleep(0.01)
        return
    while True:  # liboea's: every call handed over is written or dropped
        f = rec.figures()
        if f["recorded"] + f["dropped"] + f["graph_missed"] >= f["calls"]:
            return
        time.sleep(0.01)


def render_against(library, revision):
    """The module with REV's recorder files in place of this tree's."""
    raw = tb.raw_template

    def older():
        text = raw()
        for name in ("oea_record.py", "record_hook.py"):
            with open(os.path.join(ROOT, "patches", "binding-core", name), "rb") as f:
                mine = f.read()
            theirs = subprocess.run(["git", "-C", ROOT, "show", "%s:patches/binding-core/%s"
                                     % (revision, name)], capture_output=True, check=True).stdout
            if mine not in text:
                raise SystemExit("binding_modes: %s is not in the template as a whole" % name)
            text = text.replace(mine, theirs)
        return text

    tb.raw_template = older
    try:
        return tb.render(library)
    finally:
        tb.raw_template = raw


def main():
    build = sys.argv[1] if len(sys.argv) > 1 else os.path.join(ROOT, "build")
    rounds = int(sys.argv[2]) if len(sys.argv) > 2 else 9
    revision = sys.argv[3] if len(sys.argv) > 3 else None
    os.environ.setdefault("OEAPATCH", os.path.join(build, "src", "oeapatch"))
    library = os.path.realpath(os.path.join(build, "native", "liboea.so"))
    torch.set_num_threads(1)
    folder = tempfile.mkdtemp(prefix="oea-bench-")
    path = tb.write_module(folder, tb.render(library))
    ways = [(name, env, path) for name, env in MODES]
    if revision:
        os.mkdir(os.path.join(folder, "against"))
        ways.append(("record " + revision, MODES[-1][1], tb.write_module(
            os.path.join(folder, "against"), render_against(library, revision))))
    modules = []
    for i, (name, env, module) in enumerate(ways):
        if "SGLANG_OEA_RECORD_CAP" in env:
            env = dict(env, SGLANG_OEA_RECORD=os.path.join(folder, "routing-%d" % i))
        env = dict(env, SGLANG_OEA_K0="3", SGLANG_OEA_MIN_BATCH="1",
                   SGLANG_OEA_STATS_INTERVAL="100000")
        modules.append((name, tb.load(module, "oea_bench_%d" % i, env)))
    print("torch %s, python %s, load %.1f" % (torch.__version__, sys.version.split()[0],
                                             os.getloadavg()[0]))
    recorders = modules[len(MODES) - 1:]
    for rows in (1, 16, 256):
        gen = torch.Generator().manual_seed(rows)
        logits = torch.randn(rows, 128, generator=gen) * 2
        w0, i0 = torch.topk(logits.softmax(-1), 8)
        w0, i0 = w0 / w0.sum(-1, keepdim=True), i0.int()
        padded = torch.full_like(i0, -1)
        kw = dict(router_logits=logits, top_k=8, renormalize=True)
        for _, mod in modules:  # prepare and judge each plan on valid rows
            tb.in_forward("DECODE", mod.route, topk_weights=w0.clone(), topk_ids=i0.clone(), **kw)
        times = {name: [] for name, _ in modules}
        times["bare call"] = []
        plan = [p for p in modules[0][1]._plans.values() if p.problem is not None][-1]
        fn, address = plan.launch
        for _ in range(rounds):
            for name, mod in modules:
                w = w0.clone()

                def run(forward_batch):
                    route = mod.route
                    start = time.perf_counter_ns(), time.thread_time_ns()
                    for _ in range(CALLS):
                        route(topk_weights=w, topk_ids=padded, **kw)
                    return ((time.perf_counter_ns() - start[0]) / CALLS / 1000.0,
                            (time.thread_time_ns() - start[1]) / CALLS / 1000.0)

                times[name].append(run(tb.sglang_batch("DECODE")))
                if name.startswith("record"):
                    drain(mod)
            start = time.perf_counter_ns(), time.thread_time_ns()
            for _ in range(CALLS):
                fn(address)
            times["bare call"].append(((time.perf_counter_ns() - start[0]) / CALLS / 1000.0,
                                       (time.thread_time_ns() - start[1]) / CALLS / 1000.0))
        for c, clock in enumerate(("wall", "cpu")):
            med = {name: statistics.median(v[c] for v in runs) for name, runs in times.items()}
            print("%3d tokens, %s: " % (rows, clock) + "; ".join(
                "%s %.2f us (%.2fx)" % (name, v, v / med["stats off"]) for name, v in med.items()))
        for name, mod in recorders:
            figures = mod.recording()
            print("    %s so far: %d calls recorded, %d dropped (queue full or cap: cheaper), "
                  "%.0f MiB%s" % (name, figures["recorded"], figures["dropped"],
                                  figures["written"] / 2**20,
                                  ", stopped: " + figures["stopped"] if figures["stopped"] else ""))
    for _, mod in recorders:
        mod._recorder().close()
    shutil.rmtree(folder)


if __name__ == "__main__":
    main()
