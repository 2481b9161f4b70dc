"""cook.train: a tiny MoE decoder and the minimal SFT step over ``cook.reader`` batches (SPEC §10).

    sft_step(MoEDecoder, optimizer, [PackedBatch], TrainConfig) -> StepResult

Modules: config.py (ModelConfig, TrainConfig with ``moe_aux_loss_scaling``), attention.py (block-diagonal
causal attention from cu_seqlens), moe.py (top-k MoE MLP around Megatron-Core's
``switch_load_balancing_loss_func`` and ``MoEAuxLossAutoScaler``), model.py (MoEDecoder), step.py
(per-token loss over the global target tokens G, the aux-loss scale, sft_step), gpu_check.py (a script).
The aux-loss fix is derived in docs/moe_aux_loss.md.
"""

from cook.train.config import AUX_LOSS_SCALINGS, AuxLossScaling, ModelConfig, TrainConfig
from cook.train.model import DecoderOutput, MoEDecoder
from cook.train.step import (
    StepResult,
    aux_loss_scale,
    compute_gradients,
    global_target_tokens,
    set_aux_loss_scale,
    sft_step,
    token_loss_sum,
)

__all__ = [
    "AUX_LOSS_SCALINGS",
    "AuxLossScaling",
    "DecoderOutput",
    "MoEDecoder",
    "ModelConfig",
    "StepResult",
    "TrainConfig",
    "aux_loss_scale",
    "compute_gradients",
    "global_target_tokens",
    "set_aux_loss_scale",
    "sft_step",
    "token_loss_sum",
]
