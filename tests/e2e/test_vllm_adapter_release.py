#!/usr/bin/env python3
"""The vLLM adapter's decode detection on real releases of vLLM: V0's (0.6.6.post1:
its own vllm.forward_context, VllmConfig and AttentionMetadata) and V1's
context classes (0.10.2, 0.12.0, 0.33.0).

Usage: /usr/bin/python3 tests/e2e/test_vllm_adapter_release.py --library PATH/liboea.so [-v]

Each release runs in its environment from tests/vllm/make_env.sh VERSION
(~/.cache/oeapatch/vllm-VERSION, built once, under make_env.sh's lock, so
vllm.releases building the same one at the same time is waited for, never
half-seen); every release here is one of tests/vllm/releases.txt. Where
make_env.sh cannot build one (no network and no cache), that release is
skipped with the reason (exit 77 when all are).

V0 releases: a copy of the release's vllm/ is patched by `oeapatch apply`
(OEAPATCH, else build/src/oeapatch) and imported before the environment's own
files, so the binding is the one oeapatch wrote and the routing is the
release's own FusedMoE.select_experts with its call site (grouped top-k, pure
torch, eager under TORCHDYNAMO_DISABLE=1). Real: vllm.forward_context's
set_forward_context with the release's VllmConfig for the CPU, the release's
AttentionMetadata dataclass (vllm/attention/backends/abstract.py, the fields
every V0 backend's metadata has) for decode and prefill batches. Not real, and
why: select_experts is called from plain functions standing for V0's decoder
layer (a local named attn_metadata, as MixtralDecoderLayer.forward has), its
MoE block and FusedMoE.forward, not from a model, because building a V0 model
needs vLLM's distributed state and compiled ops. 0.5.5 and 0.6.0 (no
forward_context.py) have no cached environment (they pin torch 2.4); the
"no forward context" case stands for them on 0.6.6.post1.

V1 releases: the binding is rendered as oeapatch renders it
(test_vllm_adapter.render) and loaded as the fused_moe package's module from a
temporary file, so it imports the release's own forward context.

Checked (issue 17, V0 decode detection): decode batches re-routed exactly as
liboea's reference and prefill batches bitwise unchanged ("extend") when the
metadata is in the forward context (0.6.6's dynamic_forward_context, 0.7's
attn_metadata), when the context carries none and the decoder layer's frame
holds it, and with no forward context at all (0.5.5 - 0.6.5 have none); with
neither, OEA stays off ("no_mode"). On V1 releases, with the release's own
ForwardContext (set_forward_context), CUDAGraphMode, BatchDescriptor and
DPMetadata: a piecewise graph is "piecewise", a context with two ranks' token
counts is "dp_attention" (the DPMetadata is set on the context by the test:
DPMetadata.make all-reduces across a real data-parallel group), and the capture
rule admits a FULL graph of a uniform decode batch only. (No capture runs on
a CPU, so the capture rule is called with the release's descriptors.)
"""

import argparse
import fcntl
import dataclasses
import importlib.util
import inspect
import shutil
import os
import subprocess
import sys
import tempfile

from oea_testlib import HEADER, VERBOSE, Oracle, case, check, summary
from release_suite import cache_dir

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
# V0 releases (attention metadata passed down the model), then V1 releases
# whose ForwardContext, BatchDescriptor, CUDAGraphMode and DPMetadata differ:
# uniform_decode (0.10), uniform with num_reqs (0.12 on).
RELEASES = ("0.6.6.post1", "0.10.2", "0.12.0", "0.33.0")
CACHE = cache_dir()
NAME = "vllm.model_executor.layers.fused_moe._oeapatch_vllm_oea"


def child(library, tree):
    os.environ.setdefault("TORCHDYNAMO_DISABLE", "1")
    os.environ.update({"VLLM_OEA_K0": "2", "VLLM_OEA_STATS": "1",
                       "VLLM_OEA_STATS_INTERVAL": "100000"})
    if tree:  # the copy oeapatch patched, before the environment's own checkout
        sys.path.insert(0, tree)
    import torch
    import vllm
    import vllm.forward_context as fc
    try:  # V0's (0.5.5 - 0.10); V1 has per-backend classes
        from vllm.attention.backends.abstract import AttentionMetadata
    except ImportError:
        AttentionMetadata = None
    from vllm.config import DeviceConfig, VllmConfig
    import test_vllm_adapter

    print("vllm %s, torch %s" % (vllm.__version__, torch.__version__))
    with open(HEADER, encoding="utf-8") as f:
        oracle = Oracle(os.path.abspath(library), f.read())
    if tree:
        check(os.path.realpath(vllm.__file__).startswith(os.path.realpath(tree)),
              "vllm imported from %s, not the patched copy" % vllm.__file__)
        from vllm.model_executor.layers.fused_moe.layer import FusedMoE
        m = sys.modules[NAME]  # the binding oeapatch wrote, imported by layer.py
    else:
        prefix, text = test_vllm_adapter.render(os.path.realpath(library))
        check(prefix == "VLLM_OEA_", "the settings' prefix is %s" % prefix)
        with tempfile.TemporaryDirectory(prefix="oeapatch-vllm-v1-") as tmp:
            path = os.path.join(tmp, "_oeapatch_vllm_oea.py")
            with open(path, "w", encoding="utf-8") as f:
                f.write(text)
            spec = importlib.util.spec_from_file_location(NAME, path)
            m = importlib.util.module_from_spec(spec)
            sys.modules[NAME] = m
            spec.loader.exec_module(m)
    check(m.ENABLED and m._lib is not None, "OEA is not on: %s" % m.DISABLED_REASON)
    cfg = VllmConfig(device_config=DeviceConfig(device="cpu"))

    def metadata(prefills, prefill_tokens, decode_tokens):
        values = {"num_prefills": prefills, "num_prefill_tokens": prefill_tokens,
                  "num_decode_tokens": decode_tokens,
                  "slot_mapping": torch.arange(prefill_tokens + decode_tokens)}
        kw = {}
        for field in dataclasses.fields(AttentionMetadata):
            if field.name in values:
                kw[field.name] = values[field.name]
            elif field.default is dataclasses.MISSING and \
                    field.default_factory is dataclasses.MISSING:
                kw[field.name] = None  # multi-modal maps: none in a text batch
        return AttentionMetadata(**kw)

    era = "v0" if tree else "v1"
    torch.manual_seed(11)
    n, experts, top_k, groups, topk_group = 16, 32, 6, 4, 2
    logits = torch.randn(n, experts)
    hidden = torch.randn(n, 8)
    if era == "v0":
        decode, prefill = metadata(0, 0, n), metadata(1, n, 0)
        kw = dict(hidden_states=hidden, router_logits=logits, top_k=top_k,
                  use_grouped_topk=True, renormalize=True, topk_group=topk_group,
                  num_expert_group=groups, custom_routing_function=None,
                  scoring_func="softmax", e_score_correction_bias=None)
        params = inspect.signature(FusedMoE.select_experts).parameters
        kw = {k: v for k, v in kw.items() if k in params}

        def select_experts():  # the release's own, patched: grouped top-k in torch
            return FusedMoE.select_experts(**kw)

        # No context, no metadata in any frame: the release's routing, untouched
        check(fc._forward_context is None, "a forward context is set")
        before = m.host_counts()["skipped"]["no_mode"]
        w0, ids0 = select_experts()
        check(m.host_counts()["skipped"]["no_mode"] == before + n,
              "the baseline call was not left alone")
        rw, rids, _ = oracle.route(logits, ids0, w0, k0=2, num_shared=0, scoring="softmax",
                                   renormalize=True, groups=groups, topk_group=topk_group)
    else:  # V1 has per-backend metadata: the V1 cases need none
        decode = prefill = None
        w0, ids0 = logits.softmax(-1).topk(top_k, dim=-1)
        w0, ids0 = (w0 / w0.sum(-1, keepdim=True)).float(), ids0.to(torch.int32)
        rw, rids, _ = oracle.route(logits, ids0, w0, k0=2, num_shared=0, scoring="softmax",
                                   renormalize=True)

        def select_experts():
            return m.route(logits, w0.clone(), ids0.clone(), top_k=top_k, renormalize=True,
                           use_grouped_topk=False, scoring_func="softmax")
    check(not torch.equal(rids, ids0), "the reference re-routes nothing: the test proves nothing")

    def moe_block(hidden_states):  # MixtralMoE.forward -> FusedMoE -> quant method
        return select_experts()

    def decoder_layer(hidden_states, attn_metadata):  # V0's decoder layer forward
        return moe_block(hidden_states)

    def expect(label, call, rerouted, reason=None):
        before = skipped(reason) if reason else 0
        w, ids = call()
        if rerouted:
            check(torch.equal(ids, rids) and torch.equal(w, rw),
                  "%s: not liboea's reference (skipped: %s)" % (label, m.host_counts()["skipped"]))
        else:
            check(torch.equal(w, w0) and torch.equal(ids, ids0), "%s: changed" % label)
            after = m.host_counts()["skipped"][reason]
            check(after == before + n, "%s: not counted as %s (%s)"
                  % (label, reason, m.host_counts()["skipped"]))

    def skipped(reason):
        return m.host_counts()["skipped"][reason]

    @case("the forward context carries the release's metadata")
    def in_context():
        with fc.set_forward_context(decode, cfg):
            expect("decode", select_experts, True)
        with fc.set_forward_context(prefill, cfg):
            expect("prefill", select_experts, False, "extend")

    @case("a forward context without metadata: the decoder layer's attn_metadata")
    def context_without_metadata():
        with fc.set_forward_context(None, cfg):
            expect("decode", lambda: decoder_layer(None, decode), True)
            expect("prefill", lambda: decoder_layer(None, prefill), False, "extend")
            expect("no metadata anywhere", lambda: moe_block(None), False, "no_mode")

    @case("no forward context at all (0.5.5 - 0.6.5): the decoder layer's attn_metadata")
    def no_context():
        check(fc._forward_context is None, "a forward context is left set")
        expect("decode", lambda: decoder_layer(None, decode), True)
        expect("prefill", lambda: decoder_layer(None, prefill), False, "extend")
        expect("no metadata anywhere", lambda: moe_block(None), False, "no_mode")

    @case("V1's real context classes: piecewise graphs, data parallelism, full decode graphs")
    def v1_classes():
        from vllm.config import CUDAGraphMode
        from vllm.forward_context import BatchDescriptor, DPMetadata

        fields = getattr(BatchDescriptor, "_fields", None) or list(
            getattr(BatchDescriptor, "__dataclass_fields__", {}))

        def desc(tokens, reqs, uniform):
            if "uniform" in fields:  # 0.12 on
                return BatchDescriptor(num_tokens=tokens, num_reqs=reqs, uniform=uniform)
            return BatchDescriptor(num_tokens=tokens, uniform_decode=uniform)

        with fc.set_forward_context(None, cfg, num_tokens=n,
                                    cudagraph_runtime_mode=CUDAGraphMode.PIECEWISE,
                                    batch_descriptor=desc(n, n, True)):
            ctx = fc._forward_context
            check(m._context_verdict(ctx) == "piecewise",
                  "piecewise: %r" % m._context_verdict(ctx))
        with fc.set_forward_context(None, cfg, num_tokens=n,
                                    cudagraph_runtime_mode=CUDAGraphMode.NONE,
                                    batch_descriptor=desc(n, n, True)):
            ctx = fc._forward_context
            check(ctx.dp_metadata is None, "data parallelism with data_parallel_size 1")
            # Two ranks' token counts, as the release's DPMetadata holds them
            # (set here: make() all-reduces across a real DP group).
            dp = DPMetadata(**{f.name: torch.tensor([n, n])
                               for f in dataclasses.fields(DPMetadata)
                               if f.default is dataclasses.MISSING})
            ctx.dp_metadata = dp
            before = skipped("dp_attention")
            w, ids = select_experts()
            check(torch.equal(ids, ids0) and skipped("dp_attention") == before + n,
                  "data parallel: not left alone as dp_attention")
        # A capture: what the release's descriptors say (CPU: no capture runs)
        full = CUDAGraphMode.FULL.name
        check(m._captured_verdict(full, desc(n, n, True)) is None,
              "a FULL graph of a uniform decode batch is refused")
        check(m._captured_verdict(full, desc(n, 3, False)) == "cuda_graph",
              "a FULL graph of a mixed batch is allowed")
        check(m._captured_verdict(CUDAGraphMode.PIECEWISE.name, desc(n, n, True)) == "cuda_graph",
              "a piecewise capture is allowed")
        check(m._captured_verdict(full, BatchDescriptor(num_tokens=n)) == "cuda_graph",
              "a FULL graph without a decode descriptor is allowed")
        return "%s, %s" % (type(ctx).__name__, ", ".join(fields))

    if era == "v0":
        in_context()
        context_without_metadata()
        no_context()
    else:
        v1_classes()
    return summary()


V0 = ("0.6.6.post1",)  # patched for real: apply -C on a copy of their files


def patched_copy(oeapatch, env, library, tmp):
    """A copy of the release's vllm/ (its Python files) patched by oeapatch."""
    tree = os.path.join(tmp, "tree")
    shutil.copytree(os.path.join(env, "checkout", "vllm"), os.path.join(tree, "vllm"))
    out = subprocess.run([oeapatch, "apply", "-C", tree, "--patch", "vllm-oea", "--library",
                          os.path.realpath(library)], capture_output=True, text=True)
    check(out.returncode == 0, "oeapatch apply: %s%s" % (out.stdout, out.stderr))
    return tree


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--library", required=True)
    ap.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    ap.add_argument("--tree", default="", help=argparse.SUPPRESS)
    ap.add_argument("-v", action="store_true")
    args = ap.parse_args()
    VERBOSE[0] = args.v
    if args.child:
        return child(args.library, args.tree)
    oeapatch = os.environ.get("OEAPATCH") or os.path.join(ROOT, "build", "src", "oeapatch")
    ran, failed = 0, 0
    for version in RELEASES:
        env = os.path.join(CACHE, "vllm-" + version)
        made = subprocess.run(["bash", os.path.join(ROOT, "tests", "vllm", "make_env.sh"), version],
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        python = made.stdout.strip().splitlines()[-1] if made.stdout.strip() else ""
        if made.returncode != 0 or not os.path.exists(python):
            print("SKIP vllm %s: tests/vllm/make_env.sh %s could not build its environment "
                  "(exit %d): %s" % (version, version, made.returncode,
                                     made.stderr.strip().splitlines()[-1:] or ""))
            continue
        if version in V0 and not os.access(oeapatch, os.X_OK):
            print("SKIP vllm %s: no oeapatch at %s (set OEAPATCH)" % (version, oeapatch))
            continue
        print("== vllm %s" % version)
        sys.stdout.flush()
        # tests/vllm/run_releases.py patches this environment in place under
        # this lock: its files are copied and imported only between its runs.
        run_lock = open(os.path.join(CACHE, ".lock-run-vllm-%s" % version), "w")
        fcntl.flock(run_lock, fcntl.LOCK_EX)
        with run_lock, tempfile.TemporaryDirectory(prefix="oeapatch-vllm-release-") as tmp:
            tree = patched_copy(oeapatch, env, args.library, tmp) if version in V0 else ""
            rc = subprocess.call([python, os.path.abspath(__file__), "--child", "--library",
                                  args.library, "--tree", tree] + (["-v"] if args.v else []),
                                 env=dict(os.environ, PYTHONPATH=HERE))
        ran += 1
        failed += rc != 0
    if not ran:
        print("SKIP: no cached vLLM environment")
        return 77
    print("%d releases, %d failed" % (ran, failed))
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
