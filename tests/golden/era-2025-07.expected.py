# oeapatch fixture, era 2025-07 .. 2025-08: everything after `top_k` is
# keyword-only (`*`); select_experts is annotated `-> TopKOutput` and returns
# StandardTopKOutput(topk_weights, topk_ids, router_logits); a TopK op class
# calls it.  Recorder before the return; helpers still map and mask ids
# themselves.  Imports moved to sglang.srt.eplb.  No logger yet.  Written for
# oeapatch's tests; modelled on SGLang's topk.py of that time, not copied.

from __future__ import annotations

import math
from enum import Enum, auto
from typing import Callable, NamedTuple, Optional, Protocol, runtime_checkable

import torch
import torch.nn.functional as F

from sglang.srt.custom_op import CustomOp
from sglang.srt.eplb import expert_location_dispatch
from sglang.srt.eplb.expert_distribution import get_global_expert_distribution_recorder
from sglang.srt.eplb.expert_location_dispatch import (
    ExpertLocationDispatchInfo,
    topk_ids_logical_to_physical,
)
from sglang.srt.managers.schedule_batch import global_server_args_dict
from sglang.srt.utils import (
    cpu_has_amx_support,
    get_bool_env_var,
    get_compiler_backend,
    is_cpu,
    is_cuda,
    is_hip,
    is_npu,
)
# >>> oeapatch sglang-oea/2 import sha256:286686e404831fc5 >>>
from . import _oeapatch_sglang_oea as _oeapatch_oea
# <<< oeapatch sglang-oea/2 import <<<

try:
    from triton_kernels.routing import GatherIndx, RoutingData, ScatterIndx, routing
except ImportError:
    pass


_is_cuda = is_cuda()
_is_hip = is_hip()
_is_cpu = is_cpu()
_is_cpu_amx_available = cpu_has_amx_support()
_is_npu = is_npu()
_use_aiter = get_bool_env_var("SGLANG_USE_AITER") and _is_hip

if _is_cuda:
    from sgl_kernel import moe_fused_gate

if _is_cuda or _is_hip:
    from sgl_kernel import topk_softmax


# -------------------------------- TopKOutput ---------------------------------------


class TopKOutputFormat(Enum):
    STANDARD = auto()
    TRITON_KERNEL = auto()

    def is_standard(self) -> bool:
        return self == TopKOutputFormat.STANDARD

    def is_triton_kernel(self) -> bool:
        return self == TopKOutputFormat.TRITON_KERNEL


@runtime_checkable
class TopKOutput(Protocol):
    """What every top-k output offers."""

    @property
    def format(self) -> TopKOutputFormat:
        ...


class StandardTopKOutput(NamedTuple):
    """Weights, ids and the logits they came from."""

    topk_weights: torch.Tensor
    topk_ids: torch.Tensor
    router_logits: torch.Tensor

    @property
    def format(self) -> TopKOutputFormat:
        return TopKOutputFormat.STANDARD


class TritonKernelTopKOutput(NamedTuple):
    """Routing data for the triton_kernels MoE path."""

    routing_data: RoutingData
    gather_indx: GatherIndx
    scatter_indx: ScatterIndx

    @property
    def format(self) -> TopKOutputFormat:
        return TopKOutputFormat.TRITON_KERNEL


# -------------------------------- TopK ---------------------------------------


class TopK(CustomOp):

    def __init__(
        self,
        top_k: int,
        *,
        use_grouped_topk: bool = False,
        topk_group: Optional[int] = None,
        num_expert_group: Optional[int] = None,
        renormalize: bool = True,
        num_fused_shared_experts: int = 0,
        custom_routing_function: Optional[Callable] = None,
        scoring_func: str = "softmax",
        correction_bias: Optional[torch.Tensor] = None,
        routed_scaling_factor: Optional[float] = None,
    ):
        super().__init__()
        if use_grouped_topk:
            assert num_expert_group is not None and topk_group is not None
        self.top_k = top_k
        self.use_grouped_topk = use_grouped_topk
        self.renormalize = renormalize
        self.topk_group = topk_group
        self.num_expert_group = num_expert_group
        self.num_fused_shared_experts = num_fused_shared_experts
        self.custom_routing_function = custom_routing_function
        self.correction_bias = correction_bias
        self.routed_scaling_factor = routed_scaling_factor

    def _select(self, hidden_states, router_logits, torch_native, **kwargs):
        return select_experts(
            hidden_states=hidden_states,
            router_logits=router_logits,
            top_k=self.top_k,
            use_grouped_topk=self.use_grouped_topk,
            renormalize=self.renormalize,
            topk_group=self.topk_group,
            num_expert_group=self.num_expert_group,
            num_fused_shared_experts=self.num_fused_shared_experts,
            custom_routing_function=self.custom_routing_function,
            correction_bias=self.correction_bias,
            torch_native=torch_native,
            routed_scaling_factor=self.routed_scaling_factor,
            **kwargs,
        )

    def forward_native(
        self,
        hidden_states: torch.Tensor,
        router_logits: torch.Tensor,
        *,
        num_token_non_padded: Optional[torch.Tensor] = None,
        expert_location_dispatch_info: Optional[ExpertLocationDispatchInfo] = None,
    ) -> TopKOutput:
        return self._select(
            hidden_states,
            router_logits,
            True,
            num_token_non_padded=num_token_non_padded,
            expert_location_dispatch_info=expert_location_dispatch_info,
        )

    def forward_cpu(
        self,
        hidden_states: torch.Tensor,
        router_logits: torch.Tensor,
        *,
        num_token_non_padded: Optional[torch.Tensor] = None,
        expert_location_dispatch_info: Optional[ExpertLocationDispatchInfo] = None,
    ) -> TopKOutput:
        return self._select(
            hidden_states,
            router_logits,
            False,
            num_token_non_padded=num_token_non_padded,
            expert_location_dispatch_info=expert_location_dispatch_info,
        )


# ------------------------------- TopK implementation -------------------------------------


def _mask_topk_ids_padded_region(
    topk_ids: torch.Tensor,
    num_token_non_padded: Optional[torch.Tensor] = None,
):
    if num_token_non_padded is None:
        return
    rows = torch.arange(topk_ids.shape[0], device=topk_ids.device)
    topk_ids[rows >= num_token_non_padded, :] = -1


def _finish_ids(topk_ids, expert_location_dispatch_info, num_token_non_padded):
    # In this era the helpers themselves map logical ids to physical ones and
    # blank padded rows, so the routing chain already sees the final ids.
    topk_ids = topk_ids_logical_to_physical(
        topk_ids.to(torch.int32), expert_location_dispatch_info
    )
    _mask_topk_ids_padded_region(topk_ids, num_token_non_padded)
    return topk_ids


def _append_shared_experts(topk_weights, topk_ids, num_experts, count, scale):
    # Fused shared experts are extra top-k columns numbered after the routed
    # experts; each gets the routed weight mass divided by the scaling factor.
    if count == 0:
        return topk_weights, topk_ids
    tokens = topk_ids.shape[0]
    ids = torch.arange(num_experts, num_experts + count, device=topk_ids.device)
    share = topk_weights.sum(dim=-1, keepdim=True) / (scale or 1.0)
    topk_ids = torch.cat([topk_ids, ids.to(topk_ids.dtype).expand(tokens, count)], -1)
    topk_weights = torch.cat([topk_weights, share.expand(tokens, count)], -1)
    return topk_weights, topk_ids


def _group_mask(scores, num_expert_group, topk_group, pick):
    tokens, experts = scores.shape
    width = experts // num_expert_group
    best = pick(scores.view(tokens, num_expert_group, width))
    chosen = best.topk(topk_group, dim=-1).indices
    keep = torch.zeros_like(best, dtype=torch.bool).scatter_(1, chosen, True)
    return keep.unsqueeze(-1).expand(tokens, num_expert_group, width).reshape(
        tokens, experts
    )


def fused_topk_torch_native(
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


def fused_topk_cpu(
    hidden_states: torch.Tensor,
    gating_output: torch.Tensor,
    topk: int,
    renormalize: bool,
    num_token_non_padded: Optional[torch.Tensor] = None,
    expert_location_dispatch_info: Optional[ExpertLocationDispatchInfo] = None,
):
    topk_weights, topk_ids = torch.ops.sgl_kernel.topk_softmax_cpu(
        hidden_states=hidden_states,
        gating_output=gating_output,
        topk=topk,
        renormalize=renormalize,
    )
    return topk_weights, _finish_ids(
        topk_ids, expert_location_dispatch_info, num_token_non_padded
    )


def fused_topk(
    hidden_states: torch.Tensor,
    gating_output: torch.Tensor,
    topk: int,
    renormalize: bool,
    num_token_non_padded: Optional[torch.Tensor] = None,
    expert_location_dispatch_info: Optional[ExpertLocationDispatchInfo] = None,
):
    # Upstream: sgl_kernel.topk_softmax on CUDA/HIP.  Fixture: plain torch.
    assert hidden_states.shape[0] == gating_output.shape[0], "token count mismatch"
    probs = torch.softmax(gating_output.float(), dim=-1)
    topk_weights, topk_ids = probs.topk(topk, dim=-1)
    if renormalize:
        topk_weights = topk_weights / topk_weights.sum(dim=-1, keepdim=True)
    return topk_weights, _finish_ids(
        topk_ids, expert_location_dispatch_info, num_token_non_padded
    )


# Used by the DeepSeek V2/V3/R1 family.
@torch.compile(dynamic=True, backend=get_compiler_backend())
def grouped_topk_gpu(
    hidden_states: torch.Tensor,
    gating_output: torch.Tensor,
    topk: int,
    renormalize: bool,
    num_expert_group: int = 0,
    topk_group: int = 0,
    num_fused_shared_experts: int = 0,
    routed_scaling_factor: Optional[float] = None,
    num_token_non_padded: Optional[torch.Tensor] = None,
    expert_location_dispatch_info: Optional[ExpertLocationDispatchInfo] = None,
):
    assert hidden_states.shape[0] == gating_output.shape[0], "token count mismatch"
    probs = torch.softmax(gating_output.float(), dim=-1)
    keep = _group_mask(
        probs, num_expert_group, topk_group, lambda g: g.amax(dim=-1)
    )
    masked = probs.masked_fill(~keep, 0.0)
    topk_weights, topk_ids = masked.topk(topk - num_fused_shared_experts, dim=-1)
    if renormalize:
        topk_weights = topk_weights / topk_weights.sum(dim=-1, keepdim=True)
    topk_weights, topk_ids = _append_shared_experts(
        topk_weights,
        topk_ids,
        probs.shape[1],
        num_fused_shared_experts,
        routed_scaling_factor,
    )
    topk_ids = _finish_ids(topk_ids, expert_location_dispatch_info, num_token_non_padded)
    return topk_weights.to(torch.float32), topk_ids


def grouped_topk_cpu(
    hidden_states: torch.Tensor,
    gating_output: torch.Tensor,
    topk: int,
    renormalize: bool,
    num_expert_group: int = 0,
    topk_group: int = 0,
    num_fused_shared_experts: int = 0,
    routed_scaling_factor: Optional[float] = None,
    num_token_non_padded: Optional[torch.Tensor] = None,
    expert_location_dispatch_info: Optional[ExpertLocationDispatchInfo] = None,
):
    assert expert_location_dispatch_info is None
    return torch.ops.sgl_kernel.grouped_topk_cpu(
        hidden_states,
        gating_output,
        topk,
        renormalize,
        num_expert_group,
        topk_group,
        num_fused_shared_experts,
        routed_scaling_factor,
        num_token_non_padded,
    )


@torch.compile(dynamic=True, backend=get_compiler_backend())
def biased_grouped_topk_impl(
    hidden_states: torch.Tensor,
    gating_output: torch.Tensor,
    correction_bias: torch.Tensor,
    topk: int,
    renormalize: bool,
    num_expert_group: int = 0,
    topk_group: int = 0,
    num_fused_shared_experts: int = 0,
    routed_scaling_factor: Optional[float] = None,
    num_token_non_padded: Optional[torch.Tensor] = None,
    expert_location_dispatch_info: Optional[ExpertLocationDispatchInfo] = None,
):
    assert hidden_states.shape[0] == gating_output.shape[0], "token count mismatch"
    scores = gating_output.float().sigmoid()
    choice = scores + correction_bias.unsqueeze(0)
    keep = _group_mask(
        choice, num_expert_group, topk_group, lambda g: g.topk(2, dim=-1).values.sum(-1)
    )
    choice = choice.masked_fill(~keep, float("-inf"))
    topk_ids = choice.topk(topk - num_fused_shared_experts, dim=-1).indices
    topk_weights = scores.gather(1, topk_ids)
    if renormalize:
        topk_weights = topk_weights / topk_weights.sum(dim=-1, keepdim=True)
    topk_weights, topk_ids = _append_shared_experts(
        topk_weights,
        topk_ids,
        scores.shape[1],
        num_fused_shared_experts,
        routed_scaling_factor,
    )
    topk_ids = _finish_ids(topk_ids, expert_location_dispatch_info, num_token_non_padded)
    return topk_weights.to(torch.float32), topk_ids


def is_power_of_two(n):
    return n > 0 and math.log2(n).is_integer()


def biased_grouped_topk_gpu(
    hidden_states: torch.Tensor,
    gating_output: torch.Tensor,
    correction_bias: torch.Tensor,
    topk: int,
    renormalize: bool,
    num_expert_group: int = 0,
    topk_group: int = 0,
    num_fused_shared_experts: int = 0,
    routed_scaling_factor: Optional[float] = None,
    num_token_non_padded: Optional[torch.Tensor] = None,
    expert_location_dispatch_info: Optional[ExpertLocationDispatchInfo] = None,
):
    if _is_cuda and is_power_of_two(correction_bias.shape[0]):
        topk_weights, topk_ids = moe_fused_gate(
            gating_output.to(dtype=torch.float32),
            correction_bias,
            num_expert_group,
            topk_group,
            topk,
            num_fused_shared_experts,
            routed_scaling_factor,
        )
        topk_ids = _finish_ids(
            topk_ids, expert_location_dispatch_info, num_token_non_padded
        )
        return topk_weights, topk_ids
    return biased_grouped_topk_impl(
        hidden_states,
        gating_output,
        correction_bias,
        topk,
        renormalize,
        num_expert_group,
        topk_group,
        num_fused_shared_experts=num_fused_shared_experts,
        routed_scaling_factor=routed_scaling_factor,
        num_token_non_padded=num_token_non_padded,
        expert_location_dispatch_info=expert_location_dispatch_info,
    )


def biased_grouped_topk_cpu(
    hidden_states: torch.Tensor,
    gating_output: torch.Tensor,
    correction_bias: torch.Tensor,
    topk: int,
    renormalize: bool,
    num_expert_group: int = 0,
    topk_group: int = 0,
    compiled: bool = True,
    num_fused_shared_experts: int = 0,
    routed_scaling_factor: Optional[float] = None,
    num_token_non_padded: Optional[torch.Tensor] = None,
    expert_location_dispatch_info: Optional[ExpertLocationDispatchInfo] = None,
):
    assert expert_location_dispatch_info is None
    return torch.ops.sgl_kernel.biased_grouped_topk_cpu(
        hidden_states,
        gating_output,
        correction_bias,
        topk,
        renormalize,
        num_expert_group,
        topk_group,
        num_fused_shared_experts,
        routed_scaling_factor,
        num_token_non_padded,
    )


if _is_cpu and _is_cpu_amx_available:
    biased_grouped_topk = biased_grouped_topk_cpu
    grouped_topk = grouped_topk_cpu
    fused_topk_native = fused_topk_cpu
    fused_topk = fused_topk_cpu
else:
    biased_grouped_topk = biased_grouped_topk_gpu
    grouped_topk = grouped_topk_gpu
    fused_topk_native = fused_topk_torch_native


def select_experts(
    hidden_states: torch.Tensor,
    router_logits: torch.Tensor,
    top_k: int,
    *,
    use_grouped_topk: bool = False,
    renormalize: bool = False,
    topk_group: Optional[int] = None,
    num_expert_group: Optional[int] = None,
    num_fused_shared_experts: int = 0,
    custom_routing_function: Optional[Callable] = None,
    correction_bias: Optional[torch.Tensor] = None,
    torch_native: bool = False,
    routed_scaling_factor: Optional[float] = None,
    num_token_non_padded: Optional[torch.Tensor] = None,
    expert_location_dispatch_info: Optional[ExpertLocationDispatchInfo] = None,
) -> TopKOutput:
    router_logits, correction_bias = (
        expert_location_dispatch.transform_select_experts_inputs(
            router_logits=router_logits,
            correction_bias=correction_bias,
            info=expert_location_dispatch_info,
        )
    )

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
                num_fused_shared_experts=num_fused_shared_experts,
                routed_scaling_factor=routed_scaling_factor,
                num_token_non_padded=num_token_non_padded,
                expert_location_dispatch_info=expert_location_dispatch_info,
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
                num_fused_shared_experts=num_fused_shared_experts,
                routed_scaling_factor=routed_scaling_factor,
                num_token_non_padded=num_token_non_padded,
                expert_location_dispatch_info=expert_location_dispatch_info,
            )
    elif torch_native and custom_routing_function is None:
        assert num_token_non_padded is None, "no padding mask in the native path"
        assert expert_location_dispatch_info is None
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
            num_token_non_padded=num_token_non_padded,
            expert_location_dispatch_info=expert_location_dispatch_info,
        )
    else:
        assert num_token_non_padded is None, "no padding mask for custom routing"
        assert expert_location_dispatch_info is None
        topk_weights, topk_ids = custom_routing_function(
            hidden_states=hidden_states,
            gating_output=router_logits,
            topk=top_k,
            renormalize=renormalize,
        )
    # >>> oeapatch sglang-oea/2 callsite sha256:f79b9557a7b4dc55 >>>
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
            num_fused_shared_experts=num_fused_shared_experts,
            num_token_non_padded=num_token_non_padded,
            expert_location_dispatch_info=expert_location_dispatch_info,
        )
    # <<< oeapatch sglang-oea/2 callsite <<<

    get_global_expert_distribution_recorder().on_select_experts(topk_ids=topk_ids)

    return StandardTopKOutput(topk_weights, topk_ids, router_logits)
