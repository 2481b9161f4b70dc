"""The minimal SFT step: per-token loss over the global supervised tokens ``G``, with the MoE fix.

    sft_step(model, optimizer, [PackedBatch on device], TrainConfig) -> StepResult

Per micro-batch ``mb`` (``calculate_per_token_loss`` semantics, as Megatron-Core's schedule): forward,
the **sum** of the token losses over its ``v_mb`` target tokens, ``MoEAuxLossAutoScaler.set_loss_scale``
(the aux-loss scale of this micro-batch, read by its backward), backward. After the last micro-batch
every gradient is divided by ``G = Σ v_mb`` (summed over micro-batches and data-parallel ranks), as
``finalize_model_grads`` does, and the optimizer steps.

**The MoE scale** (docs/moe_aux_loss.md). Each router attaches ``aux_mb * P_mb`` (``P_mb``: the
tokens it routed — prompt, media and, unless masked, padding included), so the aux gradient that
survives the final ``1/G`` is ``scale_mb * P_mb / G * ∇aux_mb``:

- ``legacy`` (Megatron): ``scale_mb = 1`` -> weight ``P_mb / G``; the weights sum to ``Σ P_mb / G``, not 1.
- ``supervised`` (the fix): ``scale_mb = v_mb / P_mb`` -> weight ``v_mb / G``; they sum to exactly 1.

Worked example: two micro-batches with ``P = 1000`` routed tokens each and ``v = 100`` and ``20``
targets, so ``G = 120``. Legacy weights ``1000/120`` each: the aux term is ``16.7x`` too strong.
Supervised scales ``0.1`` and ``0.02``; the router multiplies back by 1000 -> ``100`` and ``20``;
after ``1/G``: ``100/120 + 20/120 = 1`` — the supervised-token-weighted mean of the two aux losses.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from dataclasses import dataclass

import torch
import torch.distributed as dist
import torch.nn.functional as F
from megatron.core.transformer.moe.moe_utils import MoEAuxLossAutoScaler

from cook.reader import PackedBatch
from cook.train.config import AuxLossScaling, TrainConfig
from cook.train.model import MoEDecoder


@dataclass(frozen=True)
class StepResult:
    lm_loss: float  # Σ per-token losses / G
    aux_loss: float  # the aux term as trained: Σ_mb weight_mb * aux_mb (weights of the configured scaling)
    aux_loss_supervised: float  # Σ_mb v_mb / G * aux_mb (aux_mb summed over layers)
    aux_loss_legacy: float  # Σ_mb P_mb / G * aux_mb
    global_target_tokens: int  # G
    target_tokens: tuple[int, ...]  # v_mb, this rank
    routed_tokens: tuple[int, ...]  # P_mb, this rank
    tokens: int  # Σ T_mb, padding included, this rank
    grad_norm: float | None = None  # before clipping; None from compute_gradients


def _data_parallel(group: dist.ProcessGroup | None) -> bool:
    return dist.is_available() and dist.is_initialized() and dist.get_world_size(group) > 1


def global_target_tokens(micro_batches: Sequence[PackedBatch], group: dist.ProcessGroup | None = None) -> int:
    """``G``: the label-aligned target tokens of all micro-batches, summed over the data-parallel group."""
    local = sum(mb.target_tokens for mb in micro_batches)
    if not _data_parallel(group):
        return local
    total = torch.tensor(local, dtype=torch.int64, device=micro_batches[0].input_ids.device)
    dist.all_reduce(total, group=group)
    return int(total.item())


def aux_loss_scale(scaling: AuxLossScaling, target_tokens: int, routed_tokens: torch.Tensor) -> torch.Tensor:
    """The value for ``MoEAuxLossAutoScaler.set_loss_scale`` of one micro-batch (float64, 0-dim).

    ``supervised``: ``v_mb / P_mb`` (``local_valid_tokens / padded_tokens``); ``legacy``: 1, Megatron's
    value under ``calculate_per_token_loss`` (no fp16 loss scaler here).
    """
    routed = routed_tokens.to(torch.float64)
    if scaling == "legacy":
        return torch.ones((), dtype=torch.float64, device=routed.device)
    return target_tokens / routed.clamp(min=1.0)


def set_aux_loss_scale(scale: torch.Tensor) -> None:
    """``MoEAuxLossAutoScaler.set_loss_scale(scale)``, as Megatron's schedule calls it per micro-batch.

    ``set_loss_scale`` copies into the tensor it stored first; when that one has another dtype or
    device (e.g. a float32 scale from elsewhere in the process) it is dropped first, so the float64
    scale is not rounded.
    """
    current = MoEAuxLossAutoScaler.main_loss_backward_scale
    if current is not None and (current.dtype, current.device, current.shape) != (scale.dtype, scale.device, ()):
        MoEAuxLossAutoScaler.main_loss_backward_scale = None
    MoEAuxLossAutoScaler.set_loss_scale(scale.detach().clone().reshape(()))


def token_loss_sum(logits: torch.Tensor, batch: PackedBatch) -> torch.Tensor:
    """Σ over target tokens of the cross entropy (labels and mask are label-aligned)."""
    if logits.dtype in (torch.float16, torch.bfloat16):
        logits = logits.float()
    losses = F.cross_entropy(logits, batch.labels[0], reduction="none")  # IGNORE_INDEX -> 0
    return (losses * batch.loss_mask[0].to(losses.dtype)).sum()


def _finalize_gradients(model: torch.nn.Module, global_tokens: int, group: dist.ProcessGroup | None) -> None:
    """Sum gradients over data-parallel ranks, then divide by ``G`` (``finalize_model_grads``)."""
    for param in model.parameters():
        if param.grad is None:
            continue
        if _data_parallel(group):
            dist.all_reduce(param.grad, group=group)
        param.grad.mul_(1.0 / max(global_tokens, 1))


def compute_gradients(
    model: MoEDecoder,
    micro_batches: Sequence[PackedBatch],
    config: TrainConfig,
    group: dist.ProcessGroup | None = None,
) -> StepResult:
    """Zero the gradients, run every micro-batch forward and backward, finalize; no optimizer step."""
    model.train()
    model.zero_grad(set_to_none=True)
    global_tokens = global_target_tokens(micro_batches, group)
    losses, auxes, routed = [], [], []
    for mb in micro_batches:
        out = model.forward_batch(mb, mask_padding_in_router=config.mask_padding_in_router)
        loss = token_loss_sum(out.logits, mb)
        set_aux_loss_scale(aux_loss_scale(config.moe_aux_loss_scaling, mb.target_tokens, out.routed_tokens))
        loss.backward()
        losses.append(loss.detach().double())
        auxes.append(sum((a.detach().double() for a in out.aux_losses), torch.zeros((), device=loss.device)))
        routed.append(out.routed_tokens)
    _finalize_gradients(model, global_tokens, group)
    per_mb = torch.stack([torch.stack(losses), torch.stack(auxes), torch.stack(routed).double()]).cpu()  # one sync
    aux, routed_tokens = per_mb[1], per_mb[2]
    target = torch.tensor([mb.target_tokens for mb in micro_batches], dtype=torch.float64)
    denominator = max(global_tokens, 1)
    supervised = float((aux * target).sum()) / denominator
    legacy = float((aux * routed_tokens).sum()) / denominator
    return StepResult(
        lm_loss=float(per_mb[0].sum()) / denominator,
        aux_loss=supervised if config.moe_aux_loss_scaling == "supervised" else legacy,
        aux_loss_supervised=supervised,
        aux_loss_legacy=legacy,
        global_target_tokens=global_tokens,
        target_tokens=tuple(mb.target_tokens for mb in micro_batches),
        routed_tokens=tuple(int(r) for r in routed_tokens),
        tokens=sum(mb.num_tokens for mb in micro_batches),
    )


def sft_step(
    model: MoEDecoder,
    optimizer: torch.optim.Optimizer,
    micro_batches: Sequence[PackedBatch],
    config: TrainConfig,
    group: dist.ProcessGroup | None = None,
) -> StepResult:
    """One optimizer step over ``micro_batches`` (already on the model's device)."""
    result = compute_gradients(model, micro_batches, config, group)
    params = [p for p in model.parameters() if p.grad is not None]
    max_norm = config.max_grad_norm if config.max_grad_norm is not None else float("inf")
    grad_norm = torch.nn.utils.clip_grad_norm_(params, max_norm)
    optimizer.step()
    return dataclasses.replace(result, grad_norm=float(grad_norm))
