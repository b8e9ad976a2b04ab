# Fixture written for oeapatch: the shape of vLLM 0.12 - 0.14's
# vllm/model_executor/layers/fused_moe/layer.py. Routing became an
# instance method (_select_experts from 0.14) that reads its settings from
# self; a router object of another class delegates to it under the public
# name. After the chain: EPLB mapping, the index dtype conversion and the
# capture of routed experts. Not upstream code: names follow upstream's,
# bodies are ours and shorter.
from collections.abc import Callable

import torch

import vllm.envs as envs
from vllm.model_executor.custom_op import CustomOp
from vllm.model_executor.layers.fused_moe.fused_moe import (
    eplb_map_to_physical_and_record,
    fused_topk_bias,
    grouped_topk,
)
from vllm.model_executor.layers.fused_moe.routed_experts_capturer import (
    RoutedExpertsCapturer,
)
from vllm.model_executor.layers.fused_moe.routing_simulator import RoutingSimulator
# >>> oeapatch vllm-oea/1 import sha256:295fb9a4873b6454 >>>
from . import _oeapatch_vllm_oea as _oeapatch_oea
# <<< oeapatch vllm-oea/1 import <<<


class FusedMoERouterImpl:
    """Hands select_experts on to the layer that owns the settings."""

    def __init__(self, layer: "FusedMoE"):
        self.layer = layer

    def select_experts(
        self, hidden_states: torch.Tensor, router_logits: torch.Tensor
    ) -> tuple[torch.Tensor, torch.Tensor]:
        return self.layer._select_experts(hidden_states, router_logits)


@CustomOp.register("fused_moe")
class FusedMoE(CustomOp):
    def __init__(
        self,
        num_experts: int,
        top_k: int,
        hidden_size: int,
        renormalize: bool = True,
        use_grouped_topk: bool = False,
        num_expert_group: int | None = None,
        topk_group: int | None = None,
        custom_routing_function: Callable | None = None,
        scoring_func: str = "softmax",
        routed_scaling_factor: float = 1.0,
        e_score_correction_bias: torch.Tensor | None = None,
        enable_eplb: bool = False,
        layer_id: int = 0,
    ):
        super().__init__()
        self.global_num_experts = num_experts
        self.top_k = top_k
        self.renormalize = renormalize
        self.use_grouped_topk = use_grouped_topk
        self.num_expert_group = num_expert_group
        self.topk_group = topk_group
        self.custom_routing_function = custom_routing_function
        self.scoring_func = scoring_func
        self.routed_scaling_factor = routed_scaling_factor
        self.e_score_correction_bias = e_score_correction_bias
        self.enable_eplb = enable_eplb
        self.layer_id = layer_id
        self.topk_indices_dtype: torch.dtype | None = None
        self.router = FusedMoERouterImpl(self)

    def _select_experts(
        self,
        hidden_states: torch.Tensor,
        router_logits: torch.Tensor,
    ) -> tuple[torch.Tensor, torch.Tensor]:
        from vllm.model_executor.layers.fused_moe.fused_moe import fused_topk

        def group_count_fits() -> bool:
            # a helper of the method's own: its statements are not the routing
            experts = router_logits.shape[-1]
            return experts > self.num_expert_group and (
                experts % self.num_expert_group == 0
            )

        indices_type = self.topk_indices_dtype

        strategy = envs.VLLM_MOE_ROUTING_SIMULATION_STRATEGY
        if strategy != "":
            topk_weights, topk_ids = RoutingSimulator.simulate_routing(
                hidden_states=hidden_states,
                router_logits=router_logits,
                strategy_name=strategy,
                top_k=self.top_k,
                indices_type=indices_type,
            )
        elif self.use_grouped_topk and group_count_fits():
            topk_weights, topk_ids = grouped_topk(
                hidden_states=hidden_states,
                gating_output=router_logits,
                topk=self.top_k,
                renormalize=self.renormalize,
                num_expert_group=self.num_expert_group,
                topk_group=self.topk_group,
                scoring_func=self.scoring_func,
                routed_scaling_factor=self.routed_scaling_factor,
                e_score_correction_bias=self.e_score_correction_bias,
            )
        elif self.e_score_correction_bias is not None:
            topk_weights, topk_ids = fused_topk_bias(
                hidden_states=hidden_states,
                gating_output=router_logits,
                e_score_correction_bias=self.e_score_correction_bias.data,
                topk=self.top_k,
                renormalize=self.renormalize,
            )
            if self.routed_scaling_factor != 1.0:
                topk_weights *= self.routed_scaling_factor
        elif self.custom_routing_function is None:
            topk_weights, topk_ids, token_expert_indices = fused_topk(
                hidden_states=hidden_states,
                gating_output=router_logits,
                topk=self.top_k,
                renormalize=self.renormalize,
                indices_type=indices_type,
            )
        else:
            topk_weights, topk_ids = self.custom_routing_function(
                hidden_states=hidden_states,
                gating_output=router_logits,
                topk=self.top_k,
                renormalize=self.renormalize,
            )
        # >>> oeapatch vllm-oea/1 callsite sha256:47e3a9c08d58235d >>>
        if _oeapatch_oea.ENABLED:
            topk_weights, topk_ids = _oeapatch_oea.route(
                router_logits=router_logits,
                topk_weights=topk_weights,
                topk_ids=topk_ids,
                hidden_states=hidden_states,
                owner=self,
                top_k=self.top_k,
                indices_type=indices_type,
            )
        # <<< oeapatch vllm-oea/1 callsite <<<

        if self.enable_eplb:
            topk_ids = eplb_map_to_physical_and_record(
                topk_ids=topk_ids,
                expert_load_view=self.expert_load_view,
                logical_to_physical_map=self.logical_to_physical_map,
                logical_replica_count=self.logical_replica_count,
            )

        if (indices_type is not None) and topk_ids.dtype != indices_type:
            topk_ids = topk_ids.to(dtype=indices_type)

        capturer = RoutedExpertsCapturer.get_instance()
        if capturer is not None:
            capturer.capture(layer_id=self.layer_id, topk_ids=topk_ids)

        return topk_weights, topk_ids
