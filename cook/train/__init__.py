"""cook.train: a tiny MoE decoder and the minimal SFT step over ``cook.reader`` batches (SPEC §10).

    sft_step(MoEDecoder, optimizer, [PackedBatch], TrainConfig) -> StepResult

Modules: config.py (ModelConfig, TrainConfig with ``moe_aux_loss_scaling`` and ``loss_normalization``
token | sample), attention.py (block-diagonal
causal attention from cu_seqlens), moe.py (top-k MoE MLP around Megatron-Core's
``switch_load_balancing_loss_func`` and ``MoEAuxLossAutoScaler``), model.py (MoEDecoder), step.py
(per-token or per-sample loss, the aux-loss scale, sft_step), gpu_check.py and demo.py (scripts:
``python -m cook.train.gpu_check DIR``, ``python -m cook.train.demo`` = ``make train-demo``).
The aux-loss fix is derived in docs/moe_aux_loss.md.

Importing megatron.core (cook.reader does, first) warns four times that Transformer Engine and Apex are
not installed and that it falls back to its local and Torch implementations; cook.train uses neither
their fused kernels nor Megatron's optimizers, so exactly those warnings are filtered while this package imports it.
"""

import warnings

with warnings.catch_warnings():
    warnings.filterwarnings(
        "ignore", "Transformer Engine and Apex are not installed. Falling back to", UserWarning, r"megatron\.core\."
    )
    from cook.train.config import (
        AUX_LOSS_SCALINGS,
        LOSS_NORMALIZATIONS,
        AuxLossScaling,
        LossNormalization,
        ModelConfig,
        TrainConfig,
    )
    from cook.train.model import DecoderOutput, MoEDecoder
    from cook.train.step import (
        StepResult,
        aux_loss_scale,
        compute_gradients,
        global_loss_mass,
        global_target_tokens,
        loss_mass,
        set_aux_loss_scale,
        sft_step,
        token_loss_sum,
        token_weights,
    )

__all__ = [
    "AUX_LOSS_SCALINGS",
    "LOSS_NORMALIZATIONS",
    "AuxLossScaling",
    "DecoderOutput",
    "LossNormalization",
    "MoEDecoder",
    "ModelConfig",
    "StepResult",
    "TrainConfig",
    "aux_loss_scale",
    "compute_gradients",
    "global_loss_mass",
    "global_target_tokens",
    "loss_mass",
    "set_aux_loss_scale",
    "sft_step",
    "token_loss_sum",
    "token_weights",
]
