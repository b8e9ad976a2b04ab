"""The GPU benchmark's routing is SGLang's: native/bench/moe_bench.py times a
MoE layer with "the framework's own top-k routing" (framework_routing) and
with OEA's; that claim is checked here against the real select_experts of a
real SGLang release, on the CPU, for both of its model layers.

    python3 tests/sglang/bench_routing_check.py [VERSION]

Any python3 may start it: it runs itself again with the interpreter of the
release's cached environment (tests/sglang/make_env.sh; default: the newest
release of releases.txt), with the stubs of run_releases.py on PYTHONPATH.

For Qwen3-30B-A3B (softmax, top-8, renormalised) and DeepSeek-V3 (sigmoid
with correction bias, 8 groups of which 4, top-8, scaling 2.5) at n = 1, 16
and 256 rows: the same expert set per row (column order may differ: OEA
ranks by key, not by column), and weights equal within 1e-5 relative once
SGLang's scaling is accounted for (its torch-native path leaves the
routed_scaling_factor to the MoE layer unless asked to apply it).
Prints one line per case and `N passed, M failed`; exit 1 on failure.
"""

import dataclasses
import inspect
import os
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
sys.path.insert(0, os.path.join(ROOT, "tests", "e2e"))
sys.path.insert(0, os.path.join(ROOT, "native", "bench"))


if os.environ.get("OEAPATCH_BENCH_ROUTING_CHILD") != "1":
    from release_suite import cache_dir, releases, use_inductor_cache

    use_inductor_cache()

    version = sys.argv[1] if len(sys.argv) > 1 else releases(os.path.join(HERE, "releases.txt"))[-1]
    # run_releases.py patches this environment in place (and revert takes the
    # patch out again) under this lock: a topk.py read between its steps may
    # import a binding module that is not there yet. Held until the check ends.
    import fcntl

    cache = cache_dir()
    os.makedirs(cache, exist_ok=True)
    run_lock = open(os.path.join(cache, ".lock-run-%s" % version), "w")
    fcntl.flock(run_lock, fcntl.LOCK_EX)
    made = subprocess.run([os.path.join(HERE, "make_env.sh"), version], capture_output=True,
                          text=True)
    if made.returncode != 0:
        print("FAIL setup: the environment of sglang %s: %s" % (version, made.stderr[-2000:]))
        sys.exit(1)
    python = made.stdout.strip().splitlines()[-1]
    env = dict(os.environ, OEAPATCH_BENCH_ROUTING_CHILD="1",
               PYTHONPATH=os.path.join(HERE, "stubs"))
    sys.exit(subprocess.run([python, os.path.abspath(__file__)], env=env).returncode)

from oea_testlib import case, check, summary  # noqa: E402

import torch  # noqa: E402

import moe_bench  # noqa: E402


def sglang_routing(m, logits, bias):
    """SGLang's select_experts on the CPU (its torch-native path, the one its
    CPU backend takes), with this release's signature."""
    import sglang.srt.layers.moe.topk as topk

    settings = dict(top_k=m["K"], renormalize=True, torch_native=True,
                    use_grouped_topk=bool(m["groups"]))
    if m["groups"]:
        settings.update(num_expert_group=m["groups"], topk_group=m["topk_group"],
                        correction_bias=bias, routed_scaling_factor=m["scale"])
    sig = inspect.signature(topk.select_experts).parameters
    if "topk_config" in sig:
        fields = {f.name for f in dataclasses.fields(topk.TopKConfig)}
        if "scoring_func" in fields:
            settings["scoring_func"] = "sigmoid" if m["sigmoid"] else "softmax"
        kwargs = {"topk_config": topk.TopKConfig(**{k: v for k, v in settings.items()
                                                   if k in fields})}
    else:
        kwargs = {k: v for k, v in settings.items() if k in sig}
    hidden = torch.zeros(logits.shape[0], 64)
    out = topk.select_experts(hidden_states=hidden, router_logits=logits, **kwargs)
    return out[1].to(torch.int32), out[0].float()


def compare(name, n):
    m = moe_bench.MODELS[name]
    g = torch.Generator().manual_seed(1000 + n)
    logits = torch.randn(n, m["E"], generator=g)
    bias = torch.rand(m["E"], generator=g) * 0.1
    ids_b, w_b = moe_bench.framework_routing(m, logits, bias)
    ids_s, w_s = sglang_routing(m, logits, bias)
    check(ids_b.shape == ids_s.shape, "shapes %s vs %s" % (tuple(ids_b.shape),
                                                           tuple(ids_s.shape)))
    order_b, order_s = ids_b.sort(1), ids_s.sort(1)
    check(torch.equal(order_b.values, order_s.values),
          "expert sets differ in %d of %d rows"
          % (int((order_b.values != order_s.values).any(1).sum()), n))
    # Column order may differ (SGLang's grouped path takes an unsorted
    # top-k): OEA ranks a row's experts by its key, never by column.
    wb = w_b.gather(1, order_b.indices)
    ws = w_s.gather(1, order_s.indices)
    ratio = float((wb.sum(1) / ws.sum(1)).mean())
    # SGLang applies routed_scaling_factor later, in the MoE layer, unless
    # told otherwise; the benchmark folds it into the weights. Either is fine.
    scale = m["scale"]
    check(abs(ratio - 1.0) < 1e-5 or abs(ratio - scale) < 1e-5 * scale,
          "weight sums differ by a factor %.6f (neither 1 nor %.2f)" % (ratio, scale))
    wb = wb / (1.0 if abs(ratio - 1.0) < 1e-5 else scale)
    err = float(((wb - ws).abs() / ws.abs().clamp_min(1e-12)).max())
    check(err < 1e-5, "weights differ by up to %.2e relative" % err)
    return "%d rows, weights within %.1e%s" % (n, err,
                                                 "" if abs(ratio - 1) < 1e-5 else
                                                 ", scaling folded in by the benchmark")


def main():
    import sglang

    print("sglang %s from %s" % (getattr(sglang, "__version__", "?"),
                                 os.path.dirname(sglang.__file__)))
    for name in ("qwen3", "dsv3"):
        for n in (1, 16, 256):
            case("moe_bench %s routing equals SGLang's select_experts, n=%d" % (name, n))(
                lambda name=name, n=n: compare(name, n))()
    return summary()


if __name__ == "__main__":
    sys.exit(main())
