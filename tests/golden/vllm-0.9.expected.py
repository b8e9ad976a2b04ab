# Fixture written for oeapatch: the shape of vLLM 0.9 - 0.11's
# vllm/model_executor/layers/fused_moe/layer.py. The class is registered
# with a decorator; select_experts is still a @staticmethod, with more
# parameters. One branch of the chain binds a third name, two convert the
# ids' dtype inside the branch, and after the chain EPLB maps the logical
# ids to physical ones and records the load. 0.11 put the routing
# simulator in an `if` of its own before the chain (modelled here): two
# statements bind the pair, and the later one is the one that counts. Not
# upstream code: names follow upstream's, bodies are ours and shorter.
from typing import Callable, Optional

import torch

import vllm.envs as envs
from vllm.model_executor.custom_op import CustomOp
from vllm.model_executor.layers.fused_moe.fused_moe import grouped_topk
from vllm.model_executor.layers.fused_moe.routing_simulator import (
    RoutingSimulator)
# >>> oeapatch vllm-oea/1 import sha256:295fb9a4873b6454 >>>
from . import _oeapatch_vllm_oea as _oeapatch_oea
# <<< oeapatch vllm-oea/1 import <<<


def eplb_map_to_physical_and_record(topk_ids: torch.Tensor,
                                    expert_load_view: torch.Tensor,
                                    logical_to_physical_map: torch.Tensor,
                                    logical_replica_count: torch.Tensor,
                                    indices_type: Optional[torch.dtype] = None
                                    ) -> torch.Tensor:
    # first replica of each logical expert, and one count per routed slot
    physical = logical_to_physical_map[topk_ids.long(), 0]
    expert_load_view.scatter_add_(0, physical.flatten().long(),
                                  torch.ones_like(physical.flatten()))
    if indices_type is not None:
        physical = physical.to(indices_type)
    return physical


@CustomOp.register("fused_moe")
class FusedMoE(CustomOp):

    def __init__(self, num_experts: int, top_k: int, hidden_size: int,
                 renormalize: bool = True, enable_eplb: bool = False):
        super().__init__()
        self.global_num_experts = num_experts
        self.top_k = top_k
        self.renormalize = renormalize
        self.enable_eplb = enable_eplb
        self.expert_load_view: Optional[torch.Tensor] = None
        self.logical_to_physical_map: Optional[torch.Tensor] = None
        self.logical_replica_count: Optional[torch.Tensor] = None

    @staticmethod
    def select_experts(
        hidden_states: torch.Tensor,
        router_logits: torch.Tensor,
        top_k: int,
        use_grouped_topk: bool,
        renormalize: bool,
        topk_group: Optional[int] = None,
        num_expert_group: Optional[int] = None,
        custom_routing_function: Optional[Callable] = None,
        scoring_func: str = "softmax",
        routed_scaling_factor: float = 1.0,
        e_score_correction_bias: Optional[torch.Tensor] = None,
        indices_type: Optional[torch.dtype] = None,
        enable_eplb: bool = False,
        expert_map: Optional[torch.Tensor] = None,
        expert_load_view: Optional[torch.Tensor] = None,
        logical_to_physical_map: Optional[torch.Tensor] = None,
        logical_replica_count: Optional[torch.Tensor] = None,
    ) -> tuple[torch.Tensor, torch.Tensor]:
        from vllm.model_executor.layers.fused_moe.fused_moe import fused_topk

        strategy = envs.VLLM_MOE_ROUTING_SIMULATION_STRATEGY
        if strategy != "":
            topk_weights, topk_ids = RoutingSimulator.simulate_routing(
                hidden_states=hidden_states,
                router_logits=router_logits,
                strategy_name=strategy,
                top_k=top_k,
                indices_type=indices_type)

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
                routed_scaling_factor=routed_scaling_factor,
                e_score_correction_bias=e_score_correction_bias)
            if indices_type is not None:
                topk_ids = topk_ids.to(dtype=indices_type)
        elif custom_routing_function is None:
            # the fused kernel also hands back where each slot came from
            topk_weights, topk_ids, token_expert_indices = fused_topk(
                hidden_states=hidden_states,
                gating_output=router_logits,
                topk=top_k,
                renormalize=renormalize,
                indices_type=indices_type)
        else:
            topk_weights, topk_ids = custom_routing_function(
                hidden_states=hidden_states,
                gating_output=router_logits,
                topk=top_k,
                renormalize=renormalize)
            if indices_type is not None:
                topk_ids = topk_ids.to(dtype=indices_type)
        # >>> oeapatch vllm-oea/1 callsite sha256:f3b47c20d5cf20eb >>>
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
                routed_scaling_factor=routed_scaling_factor,
                indices_type=indices_type,
            )
        # <<< oeapatch vllm-oea/1 callsite <<<

        if enable_eplb:
            assert expert_load_view is not None
            assert logical_to_physical_map is not None
            assert logical_replica_count is not None
            topk_ids = eplb_map_to_physical_and_record(
                topk_ids=topk_ids,
                expert_load_view=expert_load_view,
                logical_to_physical_map=logical_to_physical_map,
                logical_replica_count=logical_replica_count,
                indices_type=indices_type)

        return topk_weights, topk_ids
