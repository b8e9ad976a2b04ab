# Fixture written for oeapatch: the shape of vLLM 0.15 and later's
# vllm/model_executor/layers/fused_moe/router/base_router.py. BaseRouter
# is a template: _select_experts binds topk_weights, topk_ids in one
# statement (the subclass's _compute_routing), then captures the logical
# ids, maps them for EPLB and converts their dtype. Settings such as
# renormalize live on the subclasses. Not upstream code: names follow
# upstream's, bodies are ours and shorter.
from abc import abstractmethod
from collections.abc import Callable

import torch

from vllm.distributed.eplb.eplb_state import EplbLayerState
from vllm.model_executor.layers.fused_moe.router.fused_moe_router import (
    FusedMoERouter,
)
# >>> oeapatch vllm-oea/1 import sha256:295fb9a4873b6454 >>>
from . import _oeapatch_vllm_oea as _oeapatch_oea
# <<< oeapatch vllm-oea/1 import <<<


def eplb_map_to_physical_and_record(
    topk_ids: torch.Tensor,
    logical_to_physical_map: torch.Tensor,
    expert_load_view: torch.Tensor,
) -> torch.Tensor:
    physical = logical_to_physical_map[topk_ids.long(), 0]
    expert_load_view.scatter_add_(
        0, physical.flatten().long(), torch.ones_like(physical.flatten())
    )
    return physical


class BaseRouter(FusedMoERouter):
    """The steps every router shares around its own _compute_routing()."""

    def __init__(
        self,
        top_k: int,
        global_num_experts: int,
        eplb_state: EplbLayerState | None = None,
    ):
        super().__init__()
        self.top_k = top_k
        self.global_num_experts = global_num_experts
        self.eplb_state = eplb_state
        self.capture_fn: Callable[[torch.Tensor], None] | None = None

    def set_capture_fn(self, capture_fn: Callable[[torch.Tensor], None] | None):
        self.capture_fn = capture_fn

    def _apply_eplb_mapping(self, topk_ids: torch.Tensor) -> torch.Tensor:
        if self.eplb_state is None:
            return topk_ids
        return eplb_map_to_physical_and_record(
            topk_ids=topk_ids,
            logical_to_physical_map=self.eplb_state.logical_to_physical_map,
            expert_load_view=self.eplb_state.expert_load_view,
        )

    def _convert_indices_dtype(
        self, topk_ids: torch.Tensor, indices_type: torch.dtype | None
    ) -> torch.Tensor:
        if indices_type is not None and topk_ids.dtype != indices_type:
            topk_ids = topk_ids.to(dtype=indices_type)
        return topk_ids

    @abstractmethod
    def _compute_routing(
        self,
        hidden_states: torch.Tensor,
        router_logits: torch.Tensor,
        indices_type: torch.dtype | None,
    ) -> tuple[torch.Tensor, torch.Tensor]:
        raise NotImplementedError

    def _select_experts(
        self,
        hidden_states: torch.Tensor,
        router_logits: torch.Tensor,
        topk_indices_dtype: torch.dtype | None = None,
    ) -> tuple[torch.Tensor, torch.Tensor]:
        # the subclass decides; everything below works on its logical ids
        topk_weights, topk_ids = self._compute_routing(
            hidden_states, router_logits, topk_indices_dtype
        )
        # >>> oeapatch vllm-oea/1 callsite sha256:11f48c818a96facb >>>
        if _oeapatch_oea.ENABLED:
            topk_weights, topk_ids = _oeapatch_oea.route(
                router_logits=router_logits,
                topk_weights=topk_weights,
                topk_ids=topk_ids,
                hidden_states=hidden_states,
                owner=self,
                top_k=self.top_k,
                indices_type=topk_indices_dtype,
            )
        # <<< oeapatch vllm-oea/1 callsite <<<

        if self.capture_fn is not None:
            self.capture_fn(topk_ids)

        topk_ids = self._apply_eplb_mapping(topk_ids)

        topk_ids = self._convert_indices_dtype(topk_ids, topk_indices_dtype)

        return topk_weights, topk_ids


class GroupedTopKRouter(BaseRouter):
    """Grouped top-k (the DeepSeek family): the settings are its own."""

    def __init__(
        self,
        top_k: int,
        global_num_experts: int,
        num_expert_group: int,
        topk_group: int,
        renormalize: bool = True,
        scoring_func: str = "softmax",
        routed_scaling_factor: float = 1.0,
        e_score_correction_bias: torch.Tensor | None = None,
        eplb_state: EplbLayerState | None = None,
    ):
        super().__init__(top_k, global_num_experts, eplb_state)
        self.num_expert_group = num_expert_group
        self.topk_group = topk_group
        self.renormalize = renormalize
        self.scoring_func = scoring_func
        self.routed_scaling_factor = routed_scaling_factor
        self.e_score_correction_bias = e_score_correction_bias

    def _compute_routing(self, hidden_states, router_logits, indices_type):
        from vllm.model_executor.layers.fused_moe.router.grouped_topk_router import (
            grouped_topk,
        )

        return grouped_topk(
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
