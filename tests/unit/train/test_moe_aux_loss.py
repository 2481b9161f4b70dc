"""The MoE aux-loss scaling (SPEC §10, docs/moe_aux_loss.md), checked on gradients in float64.

Notation: micro-batch mb has v_mb target tokens (label-aligned loss mask), routes P_mb tokens (all its
non-pad tokens: prompt, media and targets), and has load-balancing loss aux_mb (summed over layers);
G = Σ v_mb. "aux gradient" = gradient with the aux loss minus gradient without it (same forward).

(a) supervised:  aux gradient == ∇ Σ_mb (v_mb / G) aux_mb                (autograd, any micro-batches)
(b) supervised, equal aux_mb (same token ids, any masks/padding/media):  aux gradient == ∇ aux_1
    i.e. total weight Σ v_mb / G == 1; and with pads masked, adding padding changes no gradient.
(c) legacy:      aux gradient == ∇ Σ_mb (P_mb / G) aux_mb                 (autograd, any micro-batches)
    legacy, equal aux_mb:  aux gradient == (Σ_mb P_mb / G) · supervised aux gradient
"""

from __future__ import annotations

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st
from megatron.core.transformer.moe.moe_utils import MoEAuxLossAutoScaler

from cook.train import TrainConfig, aux_loss_scale, set_aux_loss_scale

from .train_data import (
    autograd_gradients,
    aux_gradients,
    batch,
    gradients,
    micro_batch_aux,
    model,
    sequences,
    with_mask,
)

SUPERVISED = TrainConfig(moe_aux_loss_scaling="supervised")
LEGACY = TrainConfig(moe_aux_loss_scaling="legacy")
IMAGE_ID = 63  # a stand-in media placeholder token: routed, never a target


def _mixed_micro_batches():
    """Three micro-batches of different composition: packs, lengths, target shares, padding."""
    return [
        batch([sequences(1, [7, 12], 0.5)], pad_multiple=8),
        batch([sequences(2, [5, 9], 0.2), sequences(3, [14], 0.3)], pad_multiple=8),
        batch([sequences(4, [20, 3], 0.8)], pad_multiple=16),
    ]


def _assert_same(actual: dict[str, torch.Tensor], expected: dict[str, torch.Tensor]) -> None:
    assert actual.keys() == expected.keys()
    for name in expected:
        torch.testing.assert_close(actual[name], expected[name], rtol=1e-9, atol=1e-12, msg=name)


def _router_moves(grads: dict[str, torch.Tensor]) -> bool:
    return all(grads[n].abs().max() > 1e-8 for n in grads if n.endswith("router.weight"))


def test_a_fix_is_the_supervised_token_weighted_mean() -> None:
    net, micro_batches = model(), _mixed_micro_batches()
    aux_grads, result = aux_gradients(net, micro_batches, SUPERVISED)
    total = sum(mb.target_tokens for mb in micro_batches)
    assert result.global_target_tokens == total
    objective = sum(mb.target_tokens / total * micro_batch_aux(net, mb) for mb in micro_batches)
    _assert_same(aux_grads, autograd_gradients(net, objective))
    assert _router_moves(aux_grads)


def test_c_legacy_weights_by_routed_tokens() -> None:
    net, micro_batches = model(), _mixed_micro_batches()
    aux_grads, result = aux_gradients(net, micro_batches, LEGACY)
    total = result.global_target_tokens
    routed = [mb.num_tokens - int(mb.padding_mask.sum()) for mb in micro_batches]
    assert list(result.routed_tokens) == routed
    objective = sum(p / total * micro_batch_aux(net, mb) for p, mb in zip(routed, micro_batches, strict=True))
    _assert_same(aux_grads, autograd_gradients(net, objective))


# (target share, pad_multiple) per micro-batch: prompt-heavy, target-heavy, padding-heavy, single.
COMPOSITIONS = [
    [(0.05, 8), (0.5, 8), (0.95, 32)],
    [(0.1, 1), (0.1, 64)],
    [(0.05, 8)],
    [(0.9, 16)],
]


@pytest.mark.parametrize("media_tokens", [0, 24])
@pytest.mark.parametrize("composition", COMPOSITIONS)
def test_b_c_total_weight_is_one_and_legacy_inflates(composition: list, media_tokens: int) -> None:
    base = sequences(5, [9, 14, 6])
    base[0] = ([IMAGE_ID] * media_tokens + base[0][0], [0] * media_tokens + base[0][1])
    micro_batches = [batch([with_mask(base, share)], pad_multiple=pad) for share, pad in composition]
    net = model()
    aux_values = [micro_batch_aux(net, mb) for mb in micro_batches]
    for value in aux_values[1:]:  # the same tokens route the same way whatever the masks and padding
        torch.testing.assert_close(value, aux_values[0], rtol=1e-12, atol=0.0)
    one_aux = autograd_gradients(net, aux_values[0])

    fixed, fixed_result = aux_gradients(net, micro_batches, SUPERVISED)
    _assert_same(fixed, one_aux)  # total weight Σ v_mb / G == 1

    legacy, legacy_result = aux_gradients(net, micro_batches, LEGACY)
    inflation = sum(legacy_result.routed_tokens) / legacy_result.global_target_tokens
    assert inflation > 1.0  # P_mb > v_mb: a sequence's first token is never a target
    _assert_same(legacy, {name: inflation * grad for name, grad in fixed.items()})
    assert legacy_result.aux_loss_legacy == pytest.approx(inflation * fixed_result.aux_loss_supervised, rel=1e-12)
    assert fixed_result.aux_loss_supervised == pytest.approx(float(aux_values[0]), rel=1e-12)


@pytest.mark.parametrize("config", [SUPERVISED, LEGACY], ids=["supervised", "legacy"])
def test_b_padding_masked_out_of_routing_changes_nothing(config: TrainConfig) -> None:
    seqs = sequences(6, [9, 14, 6], 0.4)
    net = model()
    tight, tight_result = gradients(net, [batch([seqs], pad_multiple=1)], config)
    padded, padded_result = gradients(net, [batch([seqs], pad_multiple=32)], config)
    assert padded_result.tokens == 96 > tight_result.tokens == 29
    assert padded_result.routed_tokens == tight_result.routed_tokens == (29,)
    _assert_same(padded, tight)


def test_padding_routed_without_a_mask_inflates_legacy() -> None:
    seqs = sequences(6, [9, 14, 6], 0.4)
    net = model()
    unmasked = TrainConfig(moe_aux_loss_scaling="legacy", mask_padding_in_router=False)
    tight, _ = aux_gradients(net, [batch([seqs], pad_multiple=1)], unmasked)
    padded, result = aux_gradients(net, [batch([seqs], pad_multiple=32)], unmasked)
    assert result.routed_tokens == (96,)
    assert any(not torch.allclose(padded[n], tight[n], rtol=1e-3) for n in tight)


@settings(max_examples=200, deadline=None)
@given(st.lists(st.tuples(st.integers(1, 10_000), st.floats(0.0, 1.0)), min_size=1, max_size=8))
def test_scales_sum_to_one(micro_batches: list[tuple[int, float]]) -> None:
    routed = [p for p, _ in micro_batches]
    targets = [int(p * share) for p, share in micro_batches]
    total = sum(targets)
    if total == 0:
        return
    supervised = sum(
        float(aux_loss_scale("supervised", v, torch.tensor(p))) * p for v, p in zip(targets, routed, strict=True)
    )
    legacy = sum(float(aux_loss_scale("legacy", v, torch.tensor(p))) * p for v, p in zip(targets, routed, strict=True))
    assert supervised / total == pytest.approx(1.0, rel=1e-12)
    assert legacy / total == pytest.approx(sum(routed) / total, rel=1e-12)


def test_set_aux_loss_scale_keeps_float64(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(MoEAuxLossAutoScaler, "main_loss_backward_scale", torch.ones(1))  # as Megatron leaves it
    set_aux_loss_scale(torch.tensor(1 / 3, dtype=torch.float64))
    stored = MoEAuxLossAutoScaler.main_loss_backward_scale
    assert stored is not None and stored.dtype == torch.float64 and float(stored) == 1 / 3
    set_aux_loss_scale(torch.tensor(0.25, dtype=torch.float64))
    assert MoEAuxLossAutoScaler.main_loss_backward_scale is stored and float(stored) == 0.25
