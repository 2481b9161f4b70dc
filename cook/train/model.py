"""A small MoE decoder over one packed THD stream, in plain torch.

    input_ids [1, T], position_ids [1, T], cu_seqlens_padded [N+1] -> DecoderOutput(logits [T, V], aux losses)

Token + learned position embeddings (positions restart in every sequence), ``num_layers`` pre-norm
blocks (packed attention that never crosses a sequence, then a top-k MoE MLP), a final norm and an
untied LM head. The decoder is text-only: media placeholder tokens (``<image>``, ``<so_embedding>``)
are embedded like any other token, and, like prompt tokens, are routed and counted in ``P``.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
from torch import nn

from cook.reader import PackedBatch
from cook.train.attention import PackedAttention
from cook.train.config import ModelConfig
from cook.train.moe import MoEMLP, MoEOutput


@dataclass(frozen=True)
class DecoderOutput:
    logits: torch.Tensor  # [T, V]
    aux_losses: tuple[torch.Tensor, ...]  # one per layer (empty when moe_aux_loss_coeff == 0), unscaled
    routed_tokens: torch.Tensor  # 0-dim int64: P, the tokens each router counted (the same in every layer)


class DecoderBlock(nn.Module):
    def __init__(self, config: ModelConfig) -> None:
        super().__init__()
        self.attention_norm = nn.RMSNorm(config.hidden_size)
        self.attention = PackedAttention(config.hidden_size, config.num_heads)
        self.mlp_norm = nn.RMSNorm(config.hidden_size)
        self.mlp = MoEMLP(
            config.hidden_size,
            config.ffn_hidden_size,
            config.num_experts,
            config.moe_router_topk,
            config.moe_aux_loss_coeff,
        )

    def forward(
        self, x: torch.Tensor, cu_seqlens_padded: torch.Tensor, max_seqlen: int, padding_mask: torch.Tensor | None
    ) -> tuple[torch.Tensor, MoEOutput]:
        x = x + self.attention(self.attention_norm(x), cu_seqlens_padded, max_seqlen)
        moe = self.mlp(self.mlp_norm(x), padding_mask)
        return x + moe.hidden, moe


class MoEDecoder(nn.Module):
    def __init__(self, config: ModelConfig) -> None:
        super().__init__()
        self.config = config
        self.embed_tokens = nn.Embedding(config.vocab_size, config.hidden_size)
        self.embed_positions = nn.Embedding(config.max_positions, config.hidden_size)
        self.layers = nn.ModuleList(DecoderBlock(config) for _ in range(config.num_layers))
        self.norm = nn.RMSNorm(config.hidden_size)
        self.lm_head = nn.Linear(config.hidden_size, config.vocab_size, bias=False)

    def forward(
        self,
        input_ids: torch.Tensor,
        position_ids: torch.Tensor,
        cu_seqlens_padded: torch.Tensor,
        max_seqlen: int,
        padding_mask: torch.Tensor | None = None,
    ) -> DecoderOutput:
        """``padding_mask`` (bool ``[1, T]``, True at padding) keeps pad tokens out of the routing statistics."""
        x = self.embed_tokens(input_ids[0]) + self.embed_positions(position_ids[0])  # [T, H]
        pad = None if padding_mask is None else padding_mask[0]
        aux_losses: list[torch.Tensor] = []
        routed = torch.tensor(x.shape[0], device=x.device)
        for layer in self.layers:
            x, moe = layer(x, cu_seqlens_padded, max_seqlen, pad)
            routed = moe.routed_tokens
            if moe.aux_loss is not None:
                aux_losses.append(moe.aux_loss)
        return DecoderOutput(self.lm_head(self.norm(x)), tuple(aux_losses), routed)

    def forward_batch(self, batch: PackedBatch, *, mask_padding_in_router: bool = True) -> DecoderOutput:
        return self(
            batch.input_ids,
            batch.position_ids,
            batch.cu_seqlens_padded,
            batch.max_seqlen,
            batch.padding_mask if mask_padding_in_router else None,
        )
