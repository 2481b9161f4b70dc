"""The minimal SFT step: per-token or per-sample loss over the global batch, with the MoE fix.

    sft_step(model, optimizer, [PackedBatch on device], TrainConfig) -> StepResult

Per micro-batch ``mb`` (``calculate_per_token_loss`` semantics, as Megatron-Core's schedule): forward,
the **weighted sum** of its token losses, ``MoEAuxLossAutoScaler.set_loss_scale`` (the aux-loss scale
of this micro-batch, read by its backward), backward. After the last micro-batch every gradient is
divided by the global denominator ``D`` (summed over micro-batches and data-parallel ranks), as
``finalize_model_grads`` does, and the optimizer steps.

``loss_normalization`` sets the token weights, the micro-batch's loss mass ``m_mb`` and ``D = Σ m_mb``:

- ``token``: weight 1 per target token; ``m_mb = v_mb`` (its target tokens), ``D = G``.
- ``sample``: weight ``1 / n_c`` per target token of conversation ``c`` (``n_c`` its targets, from the
  reader's ``sequence_targets``); ``m_mb = s_mb`` (its conversations with targets), ``D = S``: each
  conversation's mean loss, averaged over the conversations of the global batch.

**The MoE scale** (docs/moe_aux_loss.md). Each router attaches ``aux_mb * P_mb`` (``P_mb``: the
tokens it routed — prompt, media and, unless masked, padding included), so the aux gradient that
survives the final ``1/D`` is ``scale_mb * P_mb / D * ∇aux_mb``:

- ``legacy`` (Megatron): ``scale_mb = 1`` -> weight ``P_mb / D``; the weights sum to ``Σ P_mb / D``, not 1.
- ``supervised`` (the fix): ``scale_mb = m_mb / P_mb`` -> weight ``m_mb / D``; they sum to exactly 1.

Worked example (token): two micro-batches with ``P = 1000`` routed tokens each and ``v = 100`` and ``20``
targets, so ``G = 120``. Legacy weights ``1000/120`` each: the aux term is ``16.7x`` too strong.
Supervised scales ``0.1`` and ``0.02``; the router multiplies back by 1000 -> ``100`` and ``20``;
after ``1/G``: ``100/120 + 20/120 = 1`` — the supervised-token-weighted mean of the two aux losses.
Under ``sample`` with 3 and 1 conversations: scales ``3/1000`` and ``1/1000``, weights ``3/4 + 1/4 = 1``.
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
from cook.train.config import AuxLossScaling, LossNormalization, TrainConfig
from cook.train.model import MoEDecoder


@dataclass(frozen=True)
class StepResult:
    lm_loss: float  # Σ weighted token losses / D
    aux_loss: float  # the aux term as trained: Σ_mb weight_mb * aux_mb (weights of the configured scaling)
    aux_loss_supervised: float  # Σ_mb m_mb / D * aux_mb (aux_mb summed over layers)
    aux_loss_legacy: float  # Σ_mb P_mb / D * aux_mb
    global_target_tokens: int  # G
    target_tokens: tuple[int, ...]  # v_mb, this rank
    routed_tokens: tuple[int, ...]  # P_mb, this rank
    tokens: int  # Σ T_mb, padding included, this rank
    grad_norm: float | None = None  # before clipping; None from compute_gradients
    loss_normalization: LossNormalization = "token"
    global_loss_mass: int = 0  # D: G (token) or S, the conversations with targets (sample)
    loss_masses: tuple[int, ...] = ()  # m_mb, this rank
    aux_weight: float = 0.0  # Σ_mb scale_mb * P_mb / D, as trained: the total effective aux weight
    aux_weight_supervised: float = 0.0  # the same with the fix's scales (exactly 1 on one rank)
    aux_weight_legacy: float = 0.0  # the same with Megatron's scale 1: Σ P_mb / D


def _data_parallel(group: dist.ProcessGroup | None) -> bool:
    return dist.is_available() and dist.is_initialized() and dist.get_world_size(group) > 1


def global_target_tokens(micro_batches: Sequence[PackedBatch], group: dist.ProcessGroup | None = None) -> int:
    """``G``: the label-aligned target tokens of all micro-batches, summed over the data-parallel group."""
    return global_loss_mass(micro_batches, "token", group)


def loss_mass(batch: PackedBatch, normalization: LossNormalization) -> int:
    """``m_mb``: the micro-batch's share of the denominator, ``v_mb`` (token) or ``s_mb`` (sample)."""
    if normalization == "token":
        return batch.target_tokens
    return int((batch.sequence_targets > 0).sum())


def global_loss_mass(
    micro_batches: Sequence[PackedBatch], normalization: LossNormalization, group: dist.ProcessGroup | None = None
) -> int:
    """``D = Σ m_mb`` over the micro-batches and the data-parallel group (``G`` under ``token``)."""
    local = sum(loss_mass(mb, normalization) for mb in micro_batches)
    if not _data_parallel(group):
        return local
    total = torch.tensor(local, dtype=torch.int64, device=micro_batches[0].input_ids.device)
    dist.all_reduce(total, group=group)
    return int(total.item())


def token_weights(batch: PackedBatch, normalization: LossNormalization) -> torch.Tensor:
    """``[T]``: the loss mask (token), or the loss mask over each conversation's own target count
    (sample; float64, so a float64 model gets exact weights — ``token_loss_sum`` casts to the loss dtype)."""
    mask = batch.loss_mask[0]
    if normalization == "token":
        return mask
    lengths = batch.cu_seqlens_padded[1:] - batch.cu_seqlens_padded[:-1]
    counts = batch.sequence_targets.to(mask.device, torch.float64).clamp(min=1.0)
    per_token = torch.repeat_interleave(counts, lengths.to(counts.device), output_size=mask.shape[0])
    return mask.double() / per_token


def aux_loss_scale(scaling: AuxLossScaling, loss_mass: int, routed_tokens: torch.Tensor) -> torch.Tensor:
    """The value for ``MoEAuxLossAutoScaler.set_loss_scale`` of one micro-batch (float64, 0-dim).

    ``supervised``: ``m_mb / P_mb`` (``local_valid_tokens / padded_tokens`` under token normalization);
    ``legacy``: 1, Megatron's value under ``calculate_per_token_loss`` (no fp16 loss scaler here).
    """
    routed = routed_tokens.to(torch.float64)
    if scaling == "legacy":
        return torch.ones((), dtype=torch.float64, device=routed.device)
    return loss_mass / routed.clamp(min=1.0)


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


def token_loss_sum(
    logits: torch.Tensor, batch: PackedBatch, normalization: LossNormalization = "token"
) -> torch.Tensor:
    """Σ over target tokens of the cross entropy times ``token_weights`` (labels and mask are label-aligned)."""
    if logits.dtype in (torch.float16, torch.bfloat16):
        logits = logits.float()
    losses = F.cross_entropy(logits, batch.labels[0], reduction="none")  # IGNORE_INDEX -> 0
    return (losses * token_weights(batch, normalization).to(losses.dtype)).sum()


def _finalize_gradients(model: torch.nn.Module, global_tokens: int, group: dist.ProcessGroup | None) -> None:
    """Sum gradients over data-parallel ranks, then divide by ``D`` (``finalize_model_grads``)."""
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
    normalization = config.loss_normalization
    global_tokens = global_target_tokens(micro_batches, group)
    denominator = global_loss_mass(micro_batches, normalization, group)
    masses = [loss_mass(mb, normalization) for mb in micro_batches]
    losses, auxes, routed, scales = [], [], [], []
    for mb, mass in zip(micro_batches, masses, strict=True):
        out = model.forward_batch(mb, mask_padding_in_router=config.mask_padding_in_router)
        loss = token_loss_sum(out.logits, mb, normalization)
        scale = aux_loss_scale(config.moe_aux_loss_scaling, mass, out.routed_tokens)
        set_aux_loss_scale(scale)
        loss.backward()
        losses.append(loss.detach().double())
        auxes.append(sum((a.detach().double() for a in out.aux_losses), torch.zeros((), device=loss.device)))
        routed.append(out.routed_tokens)
        scales.append(scale.to(loss.device))
    _finalize_gradients(model, denominator, group)
    stacked = [torch.stack(losses), torch.stack(auxes), torch.stack(routed).double(), torch.stack(scales)]
    per_mb = torch.stack(stacked).cpu()  # one sync
    aux, routed_tokens, used_scales = per_mb[1], per_mb[2], per_mb[3]
    mass_mb = torch.tensor(masses, dtype=torch.float64)
    d = max(denominator, 1)
    supervised = float((aux * mass_mb).sum()) / d
    legacy = float((aux * routed_tokens).sum()) / d
    return StepResult(
        lm_loss=float(per_mb[0].sum()) / d,
        aux_loss=supervised if config.moe_aux_loss_scaling == "supervised" else legacy,
        aux_loss_supervised=supervised,
        aux_loss_legacy=legacy,
        global_target_tokens=global_tokens,
        target_tokens=tuple(mb.target_tokens for mb in micro_batches),
        routed_tokens=tuple(int(r) for r in routed_tokens),
        tokens=sum(mb.num_tokens for mb in micro_batches),
        loss_normalization=normalization,
        global_loss_mass=denominator,
        loss_masses=tuple(masses),
        aux_weight=float((used_scales * routed_tokens).sum()) / d,
        aux_weight_supervised=float((mass_mb / routed_tokens.clamp(min=1.0) * routed_tokens).sum()) / d,
        aux_weight_legacy=float(routed_tokens.sum()) / d,
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
