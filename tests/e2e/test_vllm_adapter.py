#!/usr/bin/env python3
"""The vLLM adapter (patches/vllm-oea/adapter.py) on the shared core, with real torch and liboea.

Usage: /usr/bin/python3 tests/e2e/test_vllm_adapter.py --library PATH/liboea.so [-v]

The module is rendered as oeapatch renders it ([binding] source: the core,
then the adapter; the placeholders from patches/vllm-oea/patch.ini where it
exists, else the values the plan of issue 17 fixes: VLLM_OEA_, "1 true",
"0 false") and imported as vllm.model_executor.layers.fused_moe's module.

One stub, and why: `vllm/forward_context.py` is a one-line module holding the
`_forward_context` global that vLLM's set_forward_context() assigns, because
the real one imports vLLM's configuration (and so most of vLLM). The context
objects put there have the fields of vLLM's own ForwardContext, BatchDescriptor
and per-backend attention metadata (docs/runtime.md, "Decode detection in
vLLM"); the real classes are driven by the real-release suite (tests/vllm/).
Routers and layers are classes named as vLLM names them, since the adapter
goes by those names and their attributes.

Checked: decode batches re-routed exactly as liboea's reference (also from
0.6.6's dynamic_forward_context), micro-batches decided by every part, prefill,
mixed, speculative-verify, piecewise-graph, graph-capture and data-parallel
batches bitwise unchanged and counted by reason, routers and paths OEA cannot
reproduce skipped by name, and a MoE layer whose calls never reach the call
site named in the statistics line, also when no layer reaches it (the idle
line; the model there is a torch module tree with classes named as vLLM names
them, since a real vLLM model needs its distributed state).
"""

import argparse
import configparser
import enum
import importlib
import logging
import os
import sys
import tempfile
import types

import oea_testlib
from oea_testlib import HEADER, RESULTS, VERBOSE, Oracle, case, check, summary

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
DEFINITION = os.path.join(ROOT, "patches", "vllm-oea")
PACKAGE = "vllm.model_executor.layers.fused_moe"
MODULE = "_oeapatch_vllm_oea"
# Where Debian's torch is too old: the torch of the newest SGLang releases of
# tests/sglang (releases.txt), whose environment that suite makes.
MODERN_TORCH = "2.9.1"


def placeholders():
    """(env_prefix, bool_true, bool_false): patch.ini's, else the plan's."""
    ini_path = os.path.join(DEFINITION, "patch.ini")
    if not os.path.exists(ini_path):
        return "VLLM_OEA_", ("1", "true"), ("0", "false")
    ini = configparser.ConfigParser(inline_comment_prefixes=(";",), interpolation=None)
    with open(ini_path, encoding="utf-8") as f:
        ini.read_file(f)
    b = ini["binding"]
    return b["env_prefix"].strip(), tuple(b["bool_true"].split()), tuple(b["bool_false"].split())


def sources():
    """The module's files as patch.ini's [binding] source names them, in order."""
    ini = configparser.ConfigParser(inline_comment_prefixes=(";",), interpolation=None)
    with open(os.path.join(DEFINITION, "patch.ini"), encoding="utf-8") as f:
        ini.read_file(f)
    return [os.path.normpath(os.path.join(DEFINITION, name))
            for name in ini["binding"]["source"].split()]


def render(library):
    prefix, true, false = placeholders()
    table = oea_testlib.settings_table(
        DEFINITION, "vllm/model_executor/layers/fused_moe/router/base_router.py",
        os.path.join(ROOT, "tests", "fixtures", "vllm-0.15-router.py"), MODULE, library)
    text = ""
    for path in sources():
        with open(path, encoding="utf-8") as f:
            part = f.read()
        text += part if part.endswith("\n") else part + "\n"
    for key, value in (("library", repr(library)), ("abi", "3"), ("patch", "vllm-oea"),
                       ("version", "1"), ("env_prefix", prefix), ("framework", "vLLM"),
                       ("bool_true", repr(true)), ("bool_false", repr(false)),
                       ("library_symbols", repr(("oea_abi_version", "oea_status_message",
                                                 "oea_has_cuda", "oea_problem_check",
                                                 "oea_route_host", "oea_route_cuda",
                                                 "oea_rec_open", "oea_rec_layer", "oea_rec_call",
                                                 "oea_rec_figures_get", "oea_rec_close"))),
                       ("problem_size", "144"), ("settings_table", table),
                       ("problem_probe", repr({"num_experts": 1, "top_k": 1, "k0": 1,
                                               "logits_row_stride": 1, "ids_dtype": 3,
                                               "ids_row_stride": 1, "weights_row_stride": 1,
                                               "flags": 2}))):
        text = text.replace("{{%s}}" % key, value)
    check("{{" not in text, "a placeholder is left")
    return prefix, text


def install(tmp, text):
    """tmp/vllm/... as a package: the module beside an (empty) layer.py."""
    moe = os.path.join(tmp, *PACKAGE.split("."))
    os.makedirs(moe)
    d = tmp
    for part in PACKAGE.split("."):
        d = os.path.join(d, part)
        open(os.path.join(d, "__init__.py"), "w").close()
    # The classes the adapter identifies MoE layers by (isinstance), where the
    # release defines them: FusedMoE (layer.py) and 0.33's MoERunnerInterface.
    with open(os.path.join(moe, "layer.py"), "w") as f:
        f.write("import torch\n\n\nclass FusedMoE(torch.nn.Module):\n    pass\n")
    os.makedirs(os.path.join(moe, "runner"))
    open(os.path.join(moe, "runner", "__init__.py"), "w").close()
    with open(os.path.join(moe, "runner", "moe_runner_interface.py"), "w") as f:
        f.write("import torch\n\n\nclass MoERunnerInterface(torch.nn.Module):\n    pass\n")
    # The GPU model runner's capture key (v1/worker/gpu/cudagraph_utils.py)
    gpu = os.path.join(tmp, "vllm", "v1", "worker", "gpu")
    os.makedirs(gpu)
    for d in ("v1", os.path.join("v1", "worker"), os.path.join("v1", "worker", "gpu")):
        open(os.path.join(tmp, "vllm", d, "__init__.py"), "w").close()
    with open(os.path.join(gpu, "cudagraph_utils.py"), "w") as f:
        f.write("import dataclasses\n\n\n@dataclasses.dataclass(frozen=True)\n"
                "class BatchExecutionDescriptor:\n    cg_mode: object\n    num_tokens: int\n"
                "    num_reqs: object\n    uniform_token_count: object = None\n"
                "    max_query_len: object = None\n    num_active_loras: int = 0\n"
                "    num_ubatches: int = 1\n\n\n"
                "@dataclasses.dataclass(frozen=True)\n"
                "class BatchExecutionDescriptor026:  # 0.26's: no max_query_len, no DBO\n"
                "    cg_mode: object\n    num_tokens: int\n    num_reqs: object\n"
                "    uniform_token_count: object = None\n    num_active_loras: int = 0\n")
    with open(os.path.join(moe, MODULE + ".py"), "w", encoding="utf-8") as f:
        f.write(text)
    with open(os.path.join(tmp, "vllm", "forward_context.py"), "w") as f:
        f.write("_forward_context = None  # the stub: see this test's docstring\n")


# vLLM's names for what the adapter reads.
class CUDAGraphMode(enum.Enum):
    NONE = 0
    PIECEWISE = 1
    FULL = 2


def context(prefills=0, query=1, mode=CUDAGraphMode.NONE, dp=None, descriptor=None, layers=None):
    """A ForwardContext as V1 sets it: attention metadata per layer name."""
    meta = types.SimpleNamespace(num_prefills=prefills, max_query_len=query,
                                 num_decode_tokens=8)
    return types.SimpleNamespace(attn_metadata={"model.layers.0.self_attn": meta},
                                 dp_metadata=dp, cudagraph_runtime_mode=mode,
                                 batch_descriptor=descriptor, no_compile_layers=layers or {})


def make_router(name, **attrs):
    return type(name, (), {})() if not attrs else type(name, (), attrs)()


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--library", required=True)
    ap.add_argument("-v", action="store_true")
    args = ap.parse_args()
    VERBOSE[0] = args.v
    logging.basicConfig(level=logging.ERROR)
    import torch

    # vLLM runs on torch >= 2.4 (the custom op): where this interpreter's torch
    # is older (Debian's 1.13), the torch environment of the real-release
    # tests runs this test instead when it is there. Its python exists before
    # its torch does: make_env.sh holds the environment's lock while making it
    # and marks it `ok` last, so this waits on that lock and takes only a
    # finished one (the fast suite, `ctest -LE "sglang|vllm"`, downloads
    # nothing: without that environment the test runs on this torch).
    if not hasattr(torch.library, "custom_op") and \
            not os.environ.get("OEAPATCH_VLLM_ADAPTER_REEXEC"):
        import fcntl

        from release_suite import cache_dir

        cache = cache_dir()
        base = os.path.join(cache, "torch-%s" % MODERN_TORCH)
        lock_path = os.path.join(cache, ".lock-torch-%s" % MODERN_TORCH)
        if os.path.exists(lock_path):
            with open(lock_path) as lock:
                fcntl.flock(lock, fcntl.LOCK_SH)
                ready = os.path.exists(os.path.join(base, "ok"))
            if ready:
                modern = os.path.join(base, "bin", "python")
                os.environ["OEAPATCH_VLLM_ADAPTER_REEXEC"] = "1"
                os.execv(modern, [modern] + sys.argv)
    print("torch %s" % torch.__version__)

    with open(HEADER, encoding="utf-8") as f:
        oracle = Oracle(os.path.abspath(args.library), f.read())
    with tempfile.TemporaryDirectory(prefix="oeapatch-vllm-adapter-") as tmp:
        prefix, text = render(os.path.realpath(args.library))
        install(tmp, text)
        os.environ.update({prefix + "K0": "2", prefix + "STATS": "1",
                           prefix + "STATS_INTERVAL": "100000"})
        sys.path.insert(0, tmp)
        m = importlib.import_module(PACKAGE + "." + MODULE)
        fc = importlib.import_module("vllm.forward_context")
        FusedMoE = importlib.import_module(PACKAGE + ".layer").FusedMoE
        MoERunnerInterface = importlib.import_module(
            PACKAGE + ".runner.moe_runner_interface").MoERunnerInterface
        cg = importlib.import_module("vllm.v1.worker.gpu.cudagraph_utils")
        check(m.ENABLED and m._lib is not None, "OEA is not on: %s" % m.DISABLED_REASON)

        torch.manual_seed(7)
        n, experts, top_k = 16, 32, 6

        def routed(logits, k=top_k, renormalize=True):
            w, ids = logits.softmax(-1).topk(k, dim=-1)
            if renormalize:
                w = w / w.sum(-1, keepdim=True)
            return w.float(), ids.to(torch.int32)

        logits = torch.randn(n, experts)
        w0, ids0 = routed(logits)

        def skipped(reason):
            return m.host_counts()["skipped"][reason]

        def unchanged(label, reason, **kw):
            before = skipped(reason)
            w, ids = m.route(logits, w0.clone(), ids0.clone(), **kw)
            check(torch.equal(w, w0) and torch.equal(ids, ids0), "%s: changed" % label)
            check(skipped(reason) == before + n, "%s: not counted as %s (%s)"
                  % (label, reason, m.host_counts()["skipped"]))

        @case("decode (V1 metadata, no prefill, query length 1): liboea's reference, bitwise")
        def decode():
            fc._forward_context = context()
            w, ids = m.route(logits, w0.clone(), ids0.clone(), top_k=top_k, renormalize=True,
                             use_grouped_topk=False, scoring_func="softmax")
            rw, rids, _ = oracle.route(logits, ids0, w0, k0=2, num_shared=0, scoring="softmax",
                                       renormalize=True)
            check(torch.equal(ids, rids) and torch.equal(w, rw), "differs from the reference")
            check(not torch.equal(ids, ids0), "nothing re-routed: the case proves nothing")
            return "T %d -> %d" % (len(set(ids0.flatten().tolist())), len(set(ids.flatten().tolist())))

        @case("prefill, mixed, speculative verify, no context: bitwise unchanged, by reason")
        def not_decode():
            static = dict(top_k=top_k, renormalize=True)
            fc._forward_context = context(prefills=1, query=40)
            unchanged("prefill", "extend", **static)
            fc._forward_context = context(prefills=0, query=3)
            unchanged("speculative verify", "speculative", **static)
            fc._forward_context = None
            unchanged("no forward context", "no_mode", **static)
            # a backend that reports only max_query_len cannot tell a verify
            # batch from a short prefill
            fc._forward_context = types.SimpleNamespace(
                attn_metadata={"a": types.SimpleNamespace(max_query_len=2)})
            unchanged("query length 2, no prefill count", "extend", **static)

        @case("V0's 0.6.6 context (dynamic_forward_context) and micro-batches: every part decides")
        def v0_and_micro_batches():
            static = dict(top_k=top_k, renormalize=True)
            decode_meta = types.SimpleNamespace(num_prefills=0, max_query_len=1, num_decode_tokens=8)
            prefill_meta = types.SimpleNamespace(num_prefills=1, max_query_len=40, num_decode_tokens=0)
            # 0.6.6.post1: the attention metadata sits in dynamic_forward_context,
            # no attn_metadata field
            fc._forward_context = types.SimpleNamespace(dynamic_forward_context=decode_meta)
            w, ids = m.route(logits, w0.clone(), ids0.clone(), **static)
            check(not torch.equal(ids, ids0), "0.6.6's decode metadata: nothing re-routed")
            fc._forward_context = types.SimpleNamespace(dynamic_forward_context=prefill_meta)
            unchanged("0.6.6's prefill metadata", "extend", **static)
            # dual-batch overlap / micro-batches (0.11 on): a list of per-layer
            # dicts; a decode micro-batch followed by a prefill one is not decode
            fc._forward_context = context()
            fc._forward_context.attn_metadata = [{"a": decode_meta}, {"a": prefill_meta}]
            unchanged("a decode micro-batch, then a prefill one", "extend", **static)
            fc._forward_context.attn_metadata = [{"a": prefill_meta}, {"a": decode_meta}]
            unchanged("a prefill micro-batch, then a decode one", "extend", **static)
            fc._forward_context.attn_metadata = [{"a": decode_meta}, {"b": decode_meta}]
            w, ids = m.route(logits, w0.clone(), ids0.clone(), **static)
            check(not torch.equal(ids, ids0), "two decode micro-batches: nothing re-routed")

        @case("piecewise CUDA graphs and data parallelism: OEA stays off")
        def graphs_and_dp():
            static = dict(top_k=top_k, renormalize=True)
            fc._forward_context = context(mode=CUDAGraphMode.PIECEWISE)
            unchanged("piecewise", "piecewise", **static)
            fc._forward_context = context(dp=types.SimpleNamespace(max_tokens_across_dp_cpu=16))
            unchanged("data parallel", "dp_attention", **static)

        @case("the GPU model runner's FULL captures (mode NONE, no descriptor): decode graphs only")
        def runner_capture():
            # CudaGraphManager.capture's frame holds the graph's key as `desc`
            # while forward_fn(NONE) runs inside torch.cuda.graph(): this
            # function stands for it (the real classes: tests/vllm/).
            full = types.SimpleNamespace(name="FULL")

            def capture(desc):
                return m._captured_verdict("NONE", None)

            D = cg.BatchExecutionDescriptor
            for desc, want in ((D(full, 8, 8, uniform_token_count=1), None),
                               (D(full, 8, 2, uniform_token_count=4), None),
                               (D(full, 8, 8, max_query_len=1), None),
                               (D(full, 8, 8), "cuda_graph"),
                               (D(full, 8, 8, uniform_token_count=1, num_ubatches=2),
                                "cuda_graph"),
                               (D(types.SimpleNamespace(name="PIECEWISE"), 8, None),
                                "cuda_graph")):
                got = capture(desc)
                check(got == want, "%r: %r, not %r" % (desc, got, want))
            check(m._captured_verdict("NONE", None) == "cuda_graph",
                  "a capture with no key in the calling frames is allowed")
            # 0.26: uniform graphs keyed by token count alone (no decode
            # eligibility): one token per request only
            D026 = cg.BatchExecutionDescriptor = cg.BatchExecutionDescriptor026
            try:
                for desc, want in ((D026(full, 8, 8, uniform_token_count=1), None),
                                   (D026(full, 8, 2, uniform_token_count=4), "cuda_graph"),
                                   (D026(full, 8, 8), "cuda_graph")):
                    got = capture(desc)
                    check(got == want, "0.26 %r: %r, not %r" % (desc, got, want))
            finally:
                cg.BatchExecutionDescriptor = D
            # the context as that runner sets it, while capturing (on a CPU the
            # capture probe is the adapter's; it is what a graph capture says)
            probe, m._capturing = m._capturing, lambda: True
            try:
                fc._forward_context = context(mode=CUDAGraphMode.NONE)

                def capture(desc):  # noqa: F811
                    return m.route(logits, w0.clone(), ids0.clone(), top_k=top_k,
                                   renormalize=True, use_grouped_topk=False,
                                   scoring_func="softmax")
                w, ids = capture(D(full, 16, 16, uniform_token_count=1))
                rw, rids, _ = oracle.route(logits, ids0, w0, k0=2, num_shared=0,
                                           scoring="softmax", renormalize=True)
                check(torch.equal(ids, rids) and torch.equal(w, rw),
                      "a uniform decode graph's capture is not re-routed")
                before = skipped("cuda_graph")
                w, ids = capture(D(full, 16, 16))
                check(torch.equal(ids, ids0) and skipped("cuda_graph") == before + n,
                      "a mixed FULL graph's capture is not left alone as cuda_graph")
            finally:
                m._capturing = probe
                fc._forward_context = None

        @case("routers and paths OEA cannot reproduce: skipped by name")
        def paths():
            fc._forward_context = context()
            for router, reason in (("CustomRoutingRouter", "custom_routing"),
                                   ("ZeroExpertRouter", "zero_expert"),
                                   ("RoutingSimulatorRouter", "simulator"),
                                   ("SomeNewRouter", "router")):
                unchanged(router, reason, owner=make_router(router, top_k=top_k))
            unchanged("custom routing function (static era)", "custom_routing", top_k=top_k,
                      custom_routing_function=lambda *a: None)
            unchanged("routed_scaling_factor 2.5", "scaled_weights", top_k=top_k,
                      routed_scaling_factor=2.5)
            layer = FusedMoE()
            layer.top_k, layer.zero_expert_num = top_k, 2
            unchanged("FusedMoE with zero experts (0.12 - 0.14)", "zero_expert", owner=layer)
            # hash routing (DeepSeek-V4): experts from a table by token id
            table = torch.randint(0, experts, (100, top_k), dtype=torch.int32)
            for name in ("FusedTopKBiasRouter", "CPURouter"):
                attr = "_hash_indices_table" if name == "FusedTopKBiasRouter" else \
                    "hash_indices_table"
                unchanged(name + " with a hash table", "hash",
                          owner=make_router(name, top_k=top_k, renormalize=True,
                                            scoring_func="softmax", routed_scaling_factor=1.0,
                                            e_score_correction_bias=None, **{attr: table}))

        @case("router attributes (0.15 on): a grouped router is routed as grouped")
        def grouped():
            fc._forward_context = context()
            router = make_router("GroupedTopKRouter", top_k=top_k, renormalize=True,
                                 num_expert_group=4, topk_group=2, scoring_func="softmax",
                                 e_score_correction_bias=None, routed_scaling_factor=1.0)
            w, ids = m.route(logits, w0.clone(), ids0.clone(), owner=router)
            rw, rids, _ = oracle.route(logits, ids0, w0, k0=2, num_shared=0, scoring="softmax",
                                       renormalize=True, groups=4, topk_group=2)
            check(torch.equal(ids, rids) and torch.equal(w, rw),
                  "differs from the grouped reference")

        @case("the statistics name a MoE layer whose calls never reach OEA")
        def never():
            seen, monolithic = FusedMoE(), FusedMoE()
            seen.top_k = top_k
            # 0.33: MoERunner objects (no class named ...FusedMoE), routed by
            # their router; a class only named like vLLM's is no MoE layer
            runner_seen, runner_mono = MoERunnerInterface(), MoERunnerInterface()
            runner_seen.router = make_router("GroupedTopKRouter", top_k=top_k, renormalize=True,
                                             num_expert_group=4, topk_group=2,
                                             scoring_func="softmax", routed_scaling_factor=1.0,
                                             e_score_correction_bias=None)
            runner_mono.router = make_router("FusedTopKRouter")
            lookalike = type("SharedFusedMoE", (), {})()
            fc._forward_context = context(layers={"model.layers.0.mlp.experts": seen,
                                                  "model.layers.1.mlp.experts": monolithic,
                                                  "model.layers.2.mlp.experts": runner_seen,
                                                  "model.layers.3.mlp.experts": runner_mono,
                                                  "model.layers.4.mlp.experts": lookalike,
                                                  "model.layers.0.self_attn": object()})
            m.route(logits, w0.clone(), ids0.clone(), owner=seen)
            m.route(logits, w0.clone(), ids0.clone(), owner=runner_seen.router)
            expected = ["model.layers.1.mlp.experts", "model.layers.3.mlp.experts"]
            check(m.never_routed() == expected, "never_routed() is %r" % m.never_routed())
            line = m.stats_line()
            check("layers never reaching OEA: 2 (%s)" % ", ".join(expected) in line, line)
            check(m.idle_stats() is None, "an idle line after calls reached OEA")
            return line.split("; ")[-1]

        @case("no layer reaches OEA: the idle statistics line names the model's FusedMoE layers")
        def idle():
            # Before any route() call: the line route() would write never comes.
            fc._forward_context = None
            check(m.host_counts()["calls"] == 0, "a call reached OEA already")
            # a process that runs no model (vLLM's API server imports the
            # binding too) writes no idle line at all
            check(m._idle_tick() is None, "an idle line before any model forward")
            moe = type("MixtralFusedMoE", (FusedMoE,), {"forward": lambda self, x: x})

            class Block(torch.nn.Module):  # routes inside, never calling the call site
                def __init__(self):
                    super().__init__()
                    self.experts = moe()

                def forward(self, x):
                    return self.experts(x)

            class MixtralForCausalLM(torch.nn.Module):
                def __init__(self):
                    super().__init__()
                    self.layers = torch.nn.ModuleList([Block(), Block()])

                def forward(self, x):
                    for layer in self.layers:
                        x = layer(x)
                    return x

            model = MixtralForCausalLM()
            model(torch.zeros(2))  # the first forward: the adapter's hook sees the model
            names = ["layers.0.experts", "layers.1.experts"]
            check(m.never_routed() == names, "never_routed() is %r" % m.never_routed())
            check(m._first_forward_hook is None, "the first-forward hook is still registered")
            line = m._idle_tick()
            check(line is not None and "python calls=0" in line and
                  "layers never reaching OEA: 2 (layers.0.experts, layers.1.experts)" in line,
                  "idle line: %r" % line)
            # A model with no FusedMoE layer at all (one calling fused_moe() itself)
            kept, m._model_layers = m._model_layers, {}
            line = m.idle_stats()
            m._model_layers = kept
            check(line is not None and "no FusedMoE layer in the model" in line, line)
            return line.split("; ")[-1]

        @case("the custom op is this definition's (a process may import SGLang's binding too)")
        def op():
            if not hasattr(torch.library, "custom_op"):
                return "skipped: torch %s has no custom op" % torch.__version__
            check(m._op is not None, "no custom op registered")
            check(hasattr(torch.ops.oeapatch, "vllm_oea_route_abi3"),
                  "torch.ops.oeapatch has no vllm_oea_route_abi3")
            check(not hasattr(torch.ops.oeapatch, "oea_route_abi3"),
                  "an op named for no definition is registered")

        op()
        idle()
        decode()
        not_decode()
        v0_and_micro_batches()
        graphs_and_dp()
        paths()
        runner_capture()
        grouped()
        never()
        fc._forward_context = None
    return summary()


if __name__ == "__main__":
    sys.exit(main())
