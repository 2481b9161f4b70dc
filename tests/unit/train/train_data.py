"""Tiny float64 models and hand-built micro-batches for the training-side tests."""

from __future__ import annotations

import dataclasses

import numpy as np
import torch

from cook.reader import PackedBatch, collate_packs, decode_pack
from cook.train import ModelConfig, MoEDecoder, TrainConfig, compute_gradients
from tests.unit.reader.reader_data import crude_pack

VOCAB = 64
CONFIG = ModelConfig(
    vocab_size=VOCAB,
    hidden_size=16,
    num_layers=2,
    num_heads=2,
    ffn_hidden_size=32,
    num_experts=4,
    moe_router_topk=2,
    moe_aux_loss_coeff=0.1,
    max_positions=128,
)

Sequence = tuple[list[int], list[int]]


def model(config: ModelConfig = CONFIG, seed: int = 0) -> MoEDecoder:
    torch.manual_seed(seed)
    return MoEDecoder(config).double()


def sequences(seed: int, lengths: list[int], target_share: float = 0.5) -> list[Sequence]:
    """Random token ids; the last ``target_share`` of each sequence are targets (never the first token)."""
    rng = np.random.default_rng(seed)
    out = []
    for length in lengths:
        targets = min(round(length * target_share), length - 1)
        out.append((rng.integers(1, VOCAB, length).tolist(), [0] * (length - targets) + [1] * targets))
    return out


def batch(packs: list[list[Sequence]], pad_multiple: int = 8) -> PackedBatch:
    samples = [decode_pack(crude_pack(seqs, pad_multiple, key=f"pack-{i:09d}")) for i, seqs in enumerate(packs)]
    return collate_packs(samples)


def with_mask(sequences_: list[Sequence], target_share: float) -> list[Sequence]:
    """The same token ids with another share of targets (prompt/media tokens are the non-targets)."""
    return [(ids, sequences(0, [len(ids)], target_share)[0][1]) for ids, _ in sequences_]


def gradients(
    net: MoEDecoder, micro_batches: list[PackedBatch], config: TrainConfig
) -> tuple[dict[str, torch.Tensor], object]:
    result = compute_gradients(net, micro_batches, config)
    return {n: p.grad.clone() for n, p in net.named_parameters() if p.grad is not None}, result


def aux_gradients(
    net: MoEDecoder, micro_batches: list[PackedBatch], config: TrainConfig
) -> tuple[dict[str, torch.Tensor], object]:
    """The aux term's share of the gradient: gradients with the aux loss minus gradients without it.

    The forward is the same either way (``MoEAuxLossAutoScaler`` is the identity forward), so the LM
    part cancels exactly up to float64 rounding.
    """
    with_aux, result = gradients(net, micro_batches, config)
    without = MoEDecoder(dataclasses.replace(net.config, moe_aux_loss_coeff=0.0)).double()
    without.load_state_dict(net.state_dict())
    lm_only, _ = gradients(without, micro_batches, config)
    return {name: grad - lm_only[name] for name, grad in with_aux.items()}, result


def autograd_gradients(net: MoEDecoder, objective: torch.Tensor) -> dict[str, torch.Tensor]:
    named = list(net.named_parameters())
    grads = torch.autograd.grad(objective, [p for _, p in named], allow_unused=True)
    return {name: torch.zeros_like(p) if g is None else g for (name, p), g in zip(named, grads, strict=True)}


def micro_batch_aux(net: MoEDecoder, micro_batch: PackedBatch, mask_padding: bool = True) -> torch.Tensor:
    """aux_mb: the micro-batch's load-balancing losses summed over layers, with its autograd graph.

    In eval mode the routers compute the aux losses but do not attach ``MoEAuxLossAutoScaler``: were it
    attached, differentiating layer 2's aux (which depends on layer 1's gates) would run layer 1's
    autoscaler backward and add layer 1's aux gradient a second time.
    """
    net.eval()
    out = net.forward_batch(micro_batch, mask_padding_in_router=mask_padding)
    return torch.stack(out.aux_losses).sum()
