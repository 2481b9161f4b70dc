"""A top-k MoE MLP whose load-balancing loss is Megatron-Core's own.

    x [N, H], padding_mask [N] | None -> MoEOutput(y [N, H], aux_loss, routed_tokens P)

Megatron-Core's ``MoELayer`` forces CUDA in its router, so this layer is built around the two pieces
that matter for the loss, used exactly as ``megatron/core/transformer/moe/router.py`` uses them:

- ``switch_load_balancing_loss_func(probs, tokens_per_expert, total_num_tokens, topk, num_experts,
  moe_aux_loss_coeff)`` computes ``aux = coeff * E / (topk * P^2) * Σ_e (Σ_x probs[x, e]) * tokens_per_expert[e]``
  over the ``P`` routed tokens;
- under ``calculate_per_token_loss`` (always the case in SFT) the router attaches ``aux * P`` to the
  routing probabilities with ``MoEAuxLossAutoScaler.apply(probs, aux * P)``: the forward is the identity,
  and the backward feeds ``d(aux * P) = main_loss_backward_scale``, a class-wide scale the training
  step sets per micro-batch with ``MoEAuxLossAutoScaler.set_loss_scale`` (see ``cook.train.step``).

Routing follows Megatron's defaults: top-k on the logits, softmax over the chosen k (the gates). The
aux-loss scores are a softmax over all experts, as in ``compute_routing_scores_for_aux_loss`` but in
the logits' dtype (that helper forces float32; the gradient checks run in float64). With a padding
mask, pad tokens are left out of the scores, of ``tokens_per_expert`` and of ``P`` — they are still
dispatched to experts, as in Megatron. In eval mode (or without grad) the aux loss is computed and
returned but not attached, as in Megatron's router.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
from megatron.core.transformer.moe.moe_utils import MoEAuxLossAutoScaler, switch_load_balancing_loss_func
from torch import nn


@dataclass(frozen=True)
class MoEOutput:
    hidden: torch.Tensor  # [N, H]
    aux_loss: torch.Tensor | None  # 0-dim: switch_load_balancing_loss_func's value (coeff included), unscaled
    routed_tokens: torch.Tensor  # 0-dim int64: P, the tokens in the routing statistics


class MoEMLP(nn.Module):
    def __init__(self, hidden_size: int, ffn_hidden_size: int, num_experts: int, topk: int, aux_loss_coeff: float):
        super().__init__()
        self.topk = topk
        self.num_experts = num_experts
        self.aux_loss_coeff = aux_loss_coeff
        self.router = nn.Linear(hidden_size, num_experts, bias=False)
        self.experts = nn.ModuleList(
            nn.Sequential(nn.Linear(hidden_size, ffn_hidden_size), nn.GELU(), nn.Linear(ffn_hidden_size, hidden_size))
            for _ in range(num_experts)
        )

    def load_balancing_loss(
        self, logits: torch.Tensor, padding_mask: torch.Tensor | None
    ) -> tuple[torch.Tensor, torch.Tensor]:
        """``(aux, P)`` for router logits ``[N, E]``; pad tokens (``padding_mask`` True) are left out."""
        valid = torch.ones_like(logits[:, 0], dtype=torch.bool) if padding_mask is None else ~padding_mask
        scores = torch.softmax(logits, dim=-1) * valid[:, None]
        routing_map = torch.zeros_like(scores, dtype=torch.bool).scatter(1, scores.topk(self.topk, dim=1).indices, True)
        routing_map &= valid[:, None]
        routed = valid.sum()
        aux = switch_load_balancing_loss_func(
            probs=scores,
            tokens_per_expert=routing_map.sum(dim=0),
            total_num_tokens=routed.clamp(min=1),  # a tensor, as Megatron passes it
            topk=self.topk,
            num_experts=self.num_experts,
            moe_aux_loss_coeff=self.aux_loss_coeff,
        )
        return aux, routed

    def forward(self, x: torch.Tensor, padding_mask: torch.Tensor | None = None) -> MoEOutput:
        logits = self.router(x)  # [N, E]
        top_logits, top_experts = logits.topk(self.topk, dim=1)  # [N, k]
        gates = torch.softmax(top_logits, dim=-1)  # [N, k]; float32 under autocast
        probs = gates.new_zeros(logits.shape).scatter(1, top_experts, gates)  # [N, E]
        aux: torch.Tensor | None = None
        routed = torch.tensor(x.shape[0], device=x.device) if padding_mask is None else (~padding_mask).sum()
        if self.aux_loss_coeff > 0:
            aux, routed = self.load_balancing_loss(logits, padding_mask)
            if self.training and torch.is_grad_enabled():
                # router.py, calculate_per_token_loss branch: scale the aux loss by the tokens routed.
                probs = MoEAuxLossAutoScaler.apply(probs, aux * routed)
        out = torch.zeros_like(x)
        for expert_index, expert in enumerate(self.experts):
            rows = (top_experts == expert_index).any(dim=1).nonzero(as_tuple=True)[0]
            out = out.index_add(0, rows, (probs[rows, expert_index, None] * expert(x[rows])).to(out.dtype))
        return MoEOutput(hidden=out, aux_loss=aux, routed_tokens=routed)
