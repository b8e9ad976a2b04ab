# oeapatch fixture, era 2025-03 .. 2025-05: positional select_experts plus
# routed_scaling_factor and num_token_non_padded; the shared-expert fusion
# count is read from global_server_args_dict in an `if` *before* the routing
# chain; `expert_distribution_recorder.record_new_token(topk_ids)` sits between
# the chain and the tuple return.  Padding masks run inside the helpers, so at
# the anchor padded rows may already hold -1.  Written for oeapatch's tests;
# modelled on SGLang's topk.py of that time, not copied from it.

import os
from typing import Callable, Optional

import torch
import torch.nn.functional as F

from sglang.srt.managers.expert_distribution import ExpertDistributionRecorder
from sglang.srt.managers.schedule_batch import global_server_args_dict
from sglang.srt.utils import get_compiler_backend, is_cuda, is_hip
# >>> oeapatch sglang-oea/2 import sha256:286686e404831fc5 >>>
from . import _oeapatch_sglang_oea as _oeapatch_oea
# <<< oeapatch sglang-oea/2 import <<<

_is_cuda = is_cuda()
_is_hip = is_hip()


expert_distribution_recorder = ExpertDistributionRecorder()


def _mask_topk_ids_padded_region(
    topk_ids: torch.Tensor,
    num_token_non_padded: Optional[torch.Tensor] = None,
):
    if num_token_non_padded is None:
        return
    rows = torch.arange(topk_ids.shape[0], device=topk_ids.device)
    topk_ids[rows >= num_token_non_padded, :] = -1


def _append_shared_experts(topk_weights, topk_ids, num_experts, count, scale):
    # Fused shared experts ride along as extra top-k columns whose ids start
    # right after the routed experts.
    if count == 0:
        return topk_weights, topk_ids
    tokens = topk_ids.shape[0]
    ids = torch.arange(num_experts, num_experts + count, device=topk_ids.device)
    extra_ids = ids.to(topk_ids.dtype).expand(tokens, count)
    share = topk_weights.sum(dim=-1, keepdim=True) / (scale or 1.0)
    extra_weights = share.expand(tokens, count)
    topk_ids = torch.cat([topk_ids, extra_ids], dim=-1)
    topk_weights = torch.cat([topk_weights, extra_weights], dim=-1)
    return topk_weights, topk_ids


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
    # A fused kernel upstream (sgl_kernel on CUDA/HIP); plain torch here.
    assert hidden_states.shape[0] == gating_output.shape[0], "token count mismatch"
    probs = torch.softmax(gating_output.float(), dim=-1)
    topk_weights, topk_ids = probs.topk(topk, dim=-1)
    if renormalize:
        topk_weights = topk_weights / topk_weights.sum(dim=-1, keepdim=True)
    return topk_weights, topk_ids.to(torch.int32)


# Used by the DeepSeek V2/V3/R1 family.
@torch.compile(dynamic=True, backend=get_compiler_backend())
def grouped_topk(
    hidden_states: torch.Tensor,
    gating_output: torch.Tensor,
    topk: int,
    renormalize: bool,
    num_expert_group: int = 0,
    topk_group: int = 0,
    n_share_experts_fusion: int = 0,
    routed_scaling_factor: Optional[float] = None,
    num_token_non_padded: Optional[torch.Tensor] = None,
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
    topk_weights, topk_ids = masked.topk(topk - n_share_experts_fusion, dim=-1)
    if renormalize:
        topk_weights = topk_weights / topk_weights.sum(dim=-1, keepdim=True)
    topk_weights, topk_ids = _append_shared_experts(
        topk_weights, topk_ids, experts, n_share_experts_fusion, routed_scaling_factor
    )
    topk_ids = topk_ids.to(torch.int32)
    _mask_topk_ids_padded_region(topk_ids, num_token_non_padded)
    return topk_weights.to(torch.float32), topk_ids


def biased_grouped_topk_impl(
    hidden_states: torch.Tensor,
    gating_output: torch.Tensor,
    correction_bias: torch.Tensor,
    topk: int,
    renormalize: bool,
    num_expert_group: int = 0,
    topk_group: int = 0,
    n_share_experts_fusion: int = 0,
    routed_scaling_factor: Optional[float] = None,
    num_token_non_padded: Optional[torch.Tensor] = None,
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
    topk_ids = choice.topk(topk - n_share_experts_fusion, dim=-1).indices
    topk_weights = scores.gather(1, topk_ids)
    if renormalize:
        topk_weights = topk_weights / topk_weights.sum(dim=-1, keepdim=True)
    topk_weights, topk_ids = _append_shared_experts(
        topk_weights, topk_ids, experts, n_share_experts_fusion, routed_scaling_factor
    )
    topk_ids = topk_ids.to(torch.int32)
    _mask_topk_ids_padded_region(topk_ids, num_token_non_padded)
    return topk_weights.to(torch.float32), topk_ids


def biased_grouped_topk(
    hidden_states: torch.Tensor,
    gating_output: torch.Tensor,
    correction_bias: torch.Tensor,
    topk: int,
    renormalize: bool,
    num_expert_group: int = 0,
    topk_group: int = 0,
    compiled: bool = True,
    n_share_experts_fusion: int = 0,
    routed_scaling_factor: Optional[float] = None,
    num_token_non_padded: Optional[torch.Tensor] = None,
):
    impl = biased_grouped_topk_impl
    if compiled:
        impl = torch.compile(impl, dynamic=True, backend=get_compiler_backend())
    return impl(
        hidden_states,
        gating_output,
        correction_bias,
        topk,
        renormalize,
        num_expert_group,
        topk_group,
        n_share_experts_fusion=n_share_experts_fusion,
        routed_scaling_factor=routed_scaling_factor,
        num_token_non_padded=num_token_non_padded,
    )


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
    routed_scaling_factor: Optional[float] = None,
    num_token_non_padded: Optional[torch.Tensor] = None,
):
    n_share_experts_fusion = 0
    if global_server_args_dict["n_share_experts_fusion"] is not None:
        n_share_experts_fusion = global_server_args_dict["n_share_experts_fusion"]
    # DeepSeek V2/V3/R1 use grouped top-k
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
                n_share_experts_fusion=n_share_experts_fusion,
                routed_scaling_factor=routed_scaling_factor,
                num_token_non_padded=num_token_non_padded,
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
                n_share_experts_fusion=n_share_experts_fusion,
                routed_scaling_factor=routed_scaling_factor,
                num_token_non_padded=num_token_non_padded,
            )
    elif torch_native and custom_routing_function is None:
        assert num_token_non_padded is None, "padding mask needs the grouped path"
        topk_weights, topk_ids = fused_topk_native(
            hidden_states=hidden_states,
            gating_output=router_logits,
            topk=top_k,
            renormalize=renormalize,
        )
    elif custom_routing_function is None:
        assert num_token_non_padded is None, "padding mask needs the grouped path"
        topk_weights, topk_ids = fused_topk(
            hidden_states=hidden_states,
            gating_output=router_logits,
            topk=top_k,
            renormalize=renormalize,
        )
    else:
        assert num_token_non_padded is None, "padding mask needs the grouped path"
        topk_weights, topk_ids = custom_routing_function(
            hidden_states=hidden_states,
            gating_output=router_logits,
            topk=top_k,
            renormalize=renormalize,
        )
    # >>> oeapatch sglang-oea/2 callsite sha256:e858617b8ff6ce5c >>>
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
            routed_scaling_factor=routed_scaling_factor,
            n_share_experts_fusion=n_share_experts_fusion,
            num_token_non_padded=num_token_non_padded,
        )
    # <<< oeapatch sglang-oea/2 callsite <<<

    expert_distribution_recorder.record_new_token(topk_ids)

    return topk_weights, topk_ids
