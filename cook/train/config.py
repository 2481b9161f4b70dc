"""The two configs of the minimal SFT step: the tiny MoE decoder's shape, and the step itself."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Final, Literal

AuxLossScaling = Literal["supervised", "legacy"]
AUX_LOSS_SCALINGS: Final = ("supervised", "legacy")
LossNormalization = Literal["token", "sample"]
LOSS_NORMALIZATIONS: Final = ("token", "sample")


@dataclass(frozen=True, slots=True)
class ModelConfig:
    """A small MoE decoder. ``max_positions`` bounds ``position_ids`` (they restart per sequence, so
    the pack capacity ``seq_len`` is always enough)."""

    vocab_size: int
    hidden_size: int = 64
    num_layers: int = 2
    num_heads: int = 4
    ffn_hidden_size: int = 128
    num_experts: int = 4
    moe_router_topk: int = 2
    moe_aux_loss_coeff: float = 1e-2
    max_positions: int = 4096

    def __post_init__(self) -> None:
        if self.hidden_size % self.num_heads:
            raise ValueError(f"hidden_size={self.hidden_size} is not a multiple of num_heads={self.num_heads}")
        if not 0 < self.moe_router_topk <= self.num_experts:
            raise ValueError(f"moe_router_topk={self.moe_router_topk} must be in [1, num_experts={self.num_experts}]")


@dataclass(frozen=True, slots=True)
class TrainConfig:
    """The SFT step.

    ``moe_aux_loss_scaling`` (docs/moe_aux_loss.md): ``"supervised"`` (the fix) sets each micro-batch's
    aux-loss scale to ``v_mb / P_mb`` (its target tokens over the tokens its router routed), so after
    the global ``1/G`` the aux losses enter with weights ``v_mb / G``, summing to exactly 1;
    ``"legacy"`` keeps Megatron's scale 1, i.e. weights ``P_mb / G``, inflated by ``Σ P_mb / G``.
    ``mask_padding_in_router`` leaves pad tokens out of the routing statistics (and of ``P_mb``), as
    Megatron's router does when given a padding mask.

    ``loss_normalization`` (``train.loss_normalization``): ``"token"`` divides the summed token losses
    by the global target tokens ``G``; ``"sample"`` averages each conversation (sequence) over its own
    targets, then over the ``S`` conversations with targets in the global batch (Nemotron 3 Super's
    second SFT stage). The aux-loss fix follows the same denominator: each micro-batch's aux weight is
    its share of the loss (``v_mb / G`` or ``s_mb / S``), so the total stays exactly 1.
    """

    lr: float = 1e-3
    weight_decay: float = 0.0
    max_grad_norm: float | None = 1.0
    moe_aux_loss_scaling: AuxLossScaling = "supervised"
    mask_padding_in_router: bool = True
    loss_normalization: LossNormalization = "token"

    def __post_init__(self) -> None:
        for key, valid in (("loss_normalization", LOSS_NORMALIZATIONS), ("moe_aux_loss_scaling", AUX_LOSS_SCALINGS)):
            if (value := getattr(self, key)) not in valid:
                raise ValueError(f"train.{key}={value!r}: expected one of {list(valid)}")
