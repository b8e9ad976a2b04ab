#!/usr/bin/env python3
"""The unpatched baseline of one real vLLM release (a start of issue 17's
release checks: the parts that need no binding).

Run with a release's interpreter from make_env.sh:
    $(tests/vllm/make_env.sh 0.15.0) tests/vllm/release_check.py [--seed N]

It imports the release's own routing on the CPU, builds the release's own
forward-context objects (vllm.forward_context.set_forward_context with a
VllmConfig for the CPU) for a decode, a prefill and a mixed batch, runs the
routing paths that work without vLLM's compiled ops (grouped top-k in pure
torch, a model's custom routing function) through the routing method the
definition patches, and prints one JSON line per batch and path: the ids and
a digest of the weights' bytes. Nothing is stubbed.

Not yet covered: 0.12 - 0.14, whose routing method is an instance method of
FusedMoE (building a real FusedMoE on the CPU needs vLLM's distributed state
initialised); V0's attention metadata (0.7 and earlier route with
attn_metadata=None here); the patched runs, which need the binding.
"""
import argparse
import hashlib
import inspect
import json
import os
import sys

# grouped_topk is compiled with torch.compile(backend="inductor") when vLLM
# knows no platform; eager runs the same torch operations without a compiler.
os.environ.setdefault("TORCHDYNAMO_DISABLE", "1")

import torch  # noqa: E402


def forward_context_kwargs(set_forward_context, kind, n, reqs):
    """The keyword arguments this release's set_forward_context takes, for a batch
    of n tokens in `reqs` requests (kind: decode, prefill or mixed)."""
    params = inspect.signature(set_forward_context).parameters
    kw = {}
    if "num_tokens" in params:
        kw["num_tokens"] = n
    try:
        from vllm.forward_context import BatchDescriptor
    except ImportError:
        BatchDescriptor = None
    if BatchDescriptor is not None and "batch_descriptor" in params:
        fields = getattr(BatchDescriptor, "_fields", None) or list(
            getattr(BatchDescriptor, "__dataclass_fields__", {}))
        if "uniform" in fields:  # 0.12 on
            kw["batch_descriptor"] = BatchDescriptor(
                num_tokens=n, num_reqs=reqs, uniform=(kind != "mixed"))
        elif "uniform_decode" in fields:  # 0.10, 0.11
            kw["batch_descriptor"] = BatchDescriptor(num_tokens=n, uniform_decode=(kind == "decode"))
    if "cudagraph_runtime_mode" in params:
        from vllm.config import CUDAGraphMode
        kw["cudagraph_runtime_mode"] = CUDAGraphMode.NONE
    return kw


def custom_routing(hidden_states, gating_output, topk, renormalize):
    # a model's own routing function (the shape Mixtral-style models pass)
    weights, ids = torch.topk(torch.softmax(gating_output.float(), dim=-1), topk, dim=-1)
    if renormalize:
        weights = weights / weights.sum(dim=-1, keepdim=True)
    return weights, ids.to(torch.int32)


def routers(cfg, experts, top_k):
    """(name, callable(hidden, logits)) for the routing paths that run on a CPU."""
    base = "vllm.model_executor.layers.fused_moe.router.base_router"
    try:
        __import__(base)
    except ModuleNotFoundError:
        base = None
    if base:  # 0.15 on: the router classes
        from vllm.config import set_current_vllm_config
        from vllm.distributed.eplb.eplb_state import EplbLayerState
        from vllm.model_executor.layers.fused_moe.router.custom_routing_router import (
            CustomRoutingRouter)
        from vllm.model_executor.layers.fused_moe.router.grouped_topk_router import (
            GroupedTopKRouter)
        # EPLB off: up to about 0.2x an empty state and enable_eplb=False,
        # later no state at all (a state there means EPLB is on)
        takes_flag = "enable_eplb" in inspect.signature(GroupedTopKRouter).parameters
        with set_current_vllm_config(cfg):
            grouped = GroupedTopKRouter(top_k=top_k, global_num_experts=experts,
                                        eplb_state=EplbLayerState() if takes_flag else None,
                                        num_expert_group=8, topk_group=3)
            custom = CustomRoutingRouter(top_k=top_k, global_num_experts=experts,
                                         eplb_state=EplbLayerState() if takes_flag else None,
                                         custom_routing_function=custom_routing)
        route = "_select_experts" if hasattr(grouped, "_select_experts") else "select_experts"
        return [("grouped", getattr(grouped, route)), ("custom", getattr(custom, route))]
    from vllm.model_executor.layers.fused_moe.layer import FusedMoE
    if not isinstance(inspect.getattr_static(FusedMoE, "select_experts", None), staticmethod):
        sys.exit("release_check: the instance-method era (0.12 - 0.14) is not covered yet")
    params = inspect.signature(FusedMoE.select_experts).parameters

    def static(**kw):
        kw = {k: v for k, v in kw.items() if k in params}
        return lambda h, logits: FusedMoE.select_experts(
            hidden_states=h, router_logits=logits, top_k=top_k, renormalize=True, **kw)
    paths = [("grouped", static(use_grouped_topk=True, num_expert_group=8, topk_group=3))]
    if "custom_routing_function" in params:
        paths.append(("custom", static(use_grouped_topk=False,
                                       custom_routing_function=custom_routing)))
    return paths


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--seed", type=int, default=0)
    args = ap.parse_args()
    import vllm
    from vllm.config import DeviceConfig, VllmConfig
    from vllm.forward_context import set_forward_context
    # No GPU: vLLM cannot infer a platform, hence the CPU device.
    cfg = VllmConfig(device_config=DeviceConfig(device="cpu"))
    experts, top_k, hidden = 64, 6, 16
    paths = routers(cfg, experts, top_k)
    # decode: one token per request; prefill: one request; mixed: both kinds
    batches = [("decode", 8, 8), ("prefill", 8, 1), ("mixed", 8, 5)]
    gen = torch.Generator().manual_seed(args.seed)
    for kind, n, reqs in batches:
        h = torch.randn(n, hidden, generator=gen)
        logits = torch.randn(n, experts, generator=gen)
        kw = forward_context_kwargs(set_forward_context, kind, n, reqs)
        ctx_args = inspect.signature(set_forward_context).parameters
        first = "attn_metadata" if "attn_metadata" in ctx_args else next(iter(ctx_args))
        with set_forward_context(**{first: None}, vllm_config=cfg, **kw):
            for name, route in paths:
                weights, ids = route(h, logits)[:2]
                print(json.dumps({
                    "vllm": vllm.__version__ if hasattr(vllm, "__version__") else "?",
                    "batch": kind, "path": name, "ids": ids.tolist(),
                    "ids_dtype": str(ids.dtype),
                    "weights_sha256": hashlib.sha256(
                        weights.float().contiguous().numpy().tobytes()).hexdigest()[:16],
                }))


if __name__ == "__main__":
    main()
