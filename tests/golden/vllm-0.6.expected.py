# Fixture written for oeapatch: the shape of vLLM 0.5.5 - 0.8's
# vllm/model_executor/layers/fused_moe/layer.py. Routing is the
# @staticmethod FusedMoE.select_experts; its if/elif/else chain binds
# topk_weights, topk_ids (grouped top-k, fused top-k, or the model's own
# routing function). Not upstream code: names follow upstream's, bodies
# are ours and shorter.
from abc import abstractmethod
from typing import Callable, Optional

import torch

from vllm.logger import init_logger
from vllm.model_executor.custom_op import CustomOp
# >>> oeapatch vllm-oea/1 import sha256:295fb9a4873b6454 >>>
from . import _oeapatch_vllm_oea as _oeapatch_oea
# <<< oeapatch vllm-oea/1 import <<<

logger = init_logger(__name__)


class FusedMoEMethodBase:
    @abstractmethod
    def apply(self, layer: torch.nn.Module, x: torch.Tensor,
              router_logits: torch.Tensor) -> torch.Tensor:
        raise NotImplementedError


class UnquantizedFusedMoEMethod(FusedMoEMethodBase, CustomOp):
    def forward_cuda(self, layer: torch.nn.Module, x: torch.Tensor,
                     router_logits: torch.Tensor) -> torch.Tensor:
        from vllm.model_executor.layers.fused_moe.fused_moe import (
            fused_experts)
        topk_weights, topk_ids = FusedMoE.select_experts(
            hidden_states=x,
            router_logits=router_logits,
            top_k=layer.top_k,
            use_grouped_topk=layer.use_grouped_topk,
            renormalize=layer.renormalize,
            topk_group=layer.topk_group,
            num_expert_group=layer.num_expert_group,
            custom_routing_function=layer.custom_routing_function,
            scoring_func=layer.scoring_func,
            e_score_correction_bias=layer.e_score_correction_bias)
        return fused_experts(x, layer.w13_weight, layer.w2_weight,
                             topk_weights, topk_ids, inplace=True)


class FusedMoE(torch.nn.Module):
    def __init__(self, num_experts: int, top_k: int, hidden_size: int,
                 renormalize: bool = True,
                 use_grouped_topk: bool = False,
                 num_expert_group: Optional[int] = None,
                 topk_group: Optional[int] = None,
                 custom_routing_function: Optional[Callable] = None,
                 scoring_func: str = "softmax",
                 e_score_correction_bias: Optional[torch.Tensor] = None):
        super().__init__()
        self.num_experts = num_experts
        self.top_k = top_k
        self.renormalize = renormalize
        self.use_grouped_topk = use_grouped_topk
        self.num_expert_group = num_expert_group
        self.topk_group = topk_group
        self.custom_routing_function = custom_routing_function
        self.scoring_func = scoring_func
        self.e_score_correction_bias = e_score_correction_bias
        self.quant_method = UnquantizedFusedMoEMethod()

    @staticmethod
    def select_experts(hidden_states: torch.Tensor,
                       router_logits: torch.Tensor,
                       top_k: int,
                       use_grouped_topk: bool,
                       renormalize: bool,
                       topk_group: Optional[int] = None,
                       num_expert_group: Optional[int] = None,
                       custom_routing_function: Optional[Callable] = None,
                       scoring_func: str = "softmax",
                       e_score_correction_bias: Optional[torch.Tensor] = None):
        from vllm.model_executor.layers.fused_moe.fused_moe import (
            fused_topk, grouped_topk)

        # grouped top-k for the DeepSeek family
        if use_grouped_topk:
            assert topk_group is not None
            assert num_expert_group is not None
            topk_weights, topk_ids = grouped_topk(
                hidden_states=hidden_states,
                gating_output=router_logits,
                topk=top_k,
                renormalize=renormalize,
                num_expert_group=num_expert_group,
                topk_group=topk_group,
                scoring_func=scoring_func,
                e_score_correction_bias=e_score_correction_bias)
        elif custom_routing_function is None:
            topk_weights, topk_ids = fused_topk(hidden_states=hidden_states,
                                                gating_output=router_logits,
                                                topk=top_k,
                                                renormalize=renormalize)
        else:
            topk_weights, topk_ids = custom_routing_function(
                hidden_states=hidden_states,
                gating_output=router_logits,
                topk=top_k,
                renormalize=renormalize)
        # >>> oeapatch vllm-oea/1 callsite sha256:ef11a1477c201926 >>>
        if _oeapatch_oea.ENABLED:
            topk_weights, topk_ids = _oeapatch_oea.route(
                router_logits=router_logits,
                topk_weights=topk_weights,
                topk_ids=topk_ids,
                hidden_states=hidden_states,
                top_k=top_k,
                renormalize=renormalize,
                use_grouped_topk=use_grouped_topk,
                num_expert_group=num_expert_group,
                topk_group=topk_group,
                scoring_func=scoring_func,
                e_score_correction_bias=e_score_correction_bias,
                custom_routing_function=custom_routing_function,
            )
        # <<< oeapatch vllm-oea/1 callsite <<<

        return topk_weights, topk_ids

    def forward(self, hidden_states: torch.Tensor,
                router_logits: torch.Tensor) -> torch.Tensor:
        return self.quant_method.forward_cuda(self, hidden_states,
                                              router_logits)
