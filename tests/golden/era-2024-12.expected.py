# oeapatch fixture, era 2024-12 .. 2025-03: select_experts with ~10 positional
# parameters, plain helper defs, nothing between the routing chain and the
# return.  Written for oeapatch's tests; modelled on the shape of SGLang's
# python/sglang/srt/layers/moe/topk.py of that time, not copied from it.

import os
from typing import Callable, Optional

import torch
import torch.nn.functional as F

from sglang.srt.utils import get_compiler_backend
# >>> oeapatch sglang-oea/2 import sha256:286686e404831fc5 >>>
from . import _oeapatch_sglang_oea as _oeapatch_oea
# <<< oeapatch sglang-oea/2 import <<<


def fused_topk_native(
    hidden_states: torch.Tensor,
    gating_output: torch.Tensor,
    topk: int,
    renormalize: bool,
):
    assert hidden_states.shape[0] == gating_output.shape[0], "token count mismatch"
    probs = F.softmax(gating_output.float(), dim=-1)
    topk_weights, topk_ids = torch.topk(probs, topk, dim=-1)
    if renormalize:
        topk_weights = topk_weights / topk_weights.sum(dim=-1, keepdim=True)
    return topk_weights, topk_ids.to(torch.int32)


def fused_topk(
    hidden_states: torch.Tensor,
    gating_output: torch.Tensor,
    topk: int,
    renormalize: bool,
):
    # Upstream called a fused CUDA kernel here; the fixture computes the same
    # softmax top-k in torch so that it runs on a CPU.
    assert hidden_states.shape[0] == gating_output.shape[0], "token count mismatch"
    probs = torch.softmax(gating_output.float(), dim=-1)
    topk_weights, topk_ids = probs.topk(topk, dim=-1)
    if renormalize:
        topk_weights = topk_weights / topk_weights.sum(dim=-1, keepdim=True)
    return topk_weights, topk_ids.to(torch.int32)


# Used by the DeepSeek V2 family.
@torch.compile(dynamic=True, backend=get_compiler_backend())
def grouped_topk(
    hidden_states: torch.Tensor,
    gating_output: torch.Tensor,
    topk: int,
    renormalize: bool,
    num_expert_group: int = 0,
    topk_group: int = 0,
):
    assert hidden_states.shape[0] == gating_output.shape[0], "token count mismatch"
    probs = torch.softmax(gating_output.float(), dim=-1)
    tokens, experts = probs.shape
    width = experts // num_expert_group
    best = probs.view(tokens, num_expert_group, width).amax(dim=-1)
    chosen = best.topk(topk_group, dim=-1).indices
    keep = torch.zeros_like(best, dtype=torch.bool).scatter_(1, chosen, True)
    keep = keep.unsqueeze(-1).expand(tokens, num_expert_group, width)
    masked = probs.masked_fill(~keep.reshape(tokens, experts), 0.0)
    topk_weights, topk_ids = masked.topk(topk, dim=-1)
    if renormalize:
        topk_weights = topk_weights / topk_weights.sum(dim=-1, keepdim=True)
    return topk_weights.to(torch.float32), topk_ids.to(torch.int32)


@torch.compile(dynamic=True, backend=get_compiler_backend())
def biased_grouped_topk(
    hidden_states: torch.Tensor,
    gating_output: torch.Tensor,
    correction_bias: torch.Tensor,
    topk: int,
    renormalize: bool,
    num_expert_group: int = 0,
    topk_group: int = 0,
):
    assert hidden_states.shape[0] == gating_output.shape[0], "token count mismatch"
    scores = gating_output.float().sigmoid()
    tokens, experts = scores.shape
    width = experts // num_expert_group
    choice = scores + correction_bias.unsqueeze(0)
    best = choice.view(tokens, num_expert_group, width).topk(2, dim=-1).values.sum(-1)
    chosen = best.topk(topk_group, dim=-1).indices
    keep = torch.zeros_like(best, dtype=torch.bool).scatter_(1, chosen, True)
    keep = keep.unsqueeze(-1).expand(tokens, num_expert_group, width)
    choice = choice.masked_fill(~keep.reshape(tokens, experts), float("-inf"))
    topk_ids = choice.topk(topk, dim=-1).indices
    topk_weights = scores.gather(1, topk_ids)
    if renormalize:
        topk_weights = topk_weights / topk_weights.sum(dim=-1, keepdim=True)
    return topk_weights.to(torch.float32), topk_ids.to(torch.int32)


def select_experts(
    hidden_states: torch.Tensor,
    router_logits: torch.Tensor,
    top_k: int,
    use_grouped_topk: bool,
    renormalize: bool,
    topk_group: Optional[int] = None,
    num_expert_group: Optional[int] = None,
    custom_routing_function: Optional[Callable] = None,
    correction_bias: Optional[torch.Tensor] = None,
    torch_native: bool = False,
):
    # DeepSeek V2 uses grouped top-k
    if use_grouped_topk:
        assert topk_group is not None
        assert num_expert_group is not None
        if correction_bias is None:
            topk_weights, topk_ids = grouped_topk(
                hidden_states=hidden_states,
                gating_output=router_logits,
                topk=top_k,
                renormalize=renormalize,
                num_expert_group=num_expert_group,
                topk_group=topk_group,
            )
        else:
            topk_weights, topk_ids = biased_grouped_topk(
                hidden_states=hidden_states,
                gating_output=router_logits,
                correction_bias=correction_bias,
                topk=top_k,
                renormalize=renormalize,
                num_expert_group=num_expert_group,
                topk_group=topk_group,
            )
    elif torch_native and custom_routing_function is None:
        topk_weights, topk_ids = fused_topk_native(
            hidden_states=hidden_states,
            gating_output=router_logits,
            topk=top_k,
            renormalize=renormalize,
        )
    elif custom_routing_function is None:
        topk_weights, topk_ids = fused_topk(
            hidden_states=hidden_states,
            gating_output=router_logits,
            topk=top_k,
            renormalize=renormalize,
        )
    else:
        topk_weights, topk_ids = custom_routing_function(
            hidden_states=hidden_states,
            gating_output=router_logits,
            topk=top_k,
            renormalize=renormalize,
        )
    # >>> oeapatch sglang-oea/2 callsite sha256:77b855a42b5044fb >>>
    if _oeapatch_oea.ENABLED:
        topk_weights, topk_ids = _oeapatch_oea.route(
            router_logits=router_logits,
            topk_weights=topk_weights,
            topk_ids=topk_ids,
            top_k=top_k,
            renormalize=renormalize,
            use_grouped_topk=use_grouped_topk,
            num_expert_group=num_expert_group,
            topk_group=topk_group,
            correction_bias=correction_bias,
            custom_routing_function=custom_routing_function,
        )
    # <<< oeapatch sglang-oea/2 callsite <<<

    return topk_weights, topk_ids
