"""``train.loss_normalization: sample`` and the MoE aux weight under both normalizations, in float64.

Notation as in test_moe_aux_loss.py, plus: conversation c has n_c label-aligned targets; s_mb is the
number of conversations with targets in micro-batch mb, S = Σ s_mb. Sample loss = (1/S) Σ_c (1/n_c)
Σ_{t in c} loss_t. The fix's aux weights are m_mb / D with (m, D) = (v, G) for token and (s, S) for
sample: they sum to exactly 1.

(d) sample LM loss == the mean over conversations of each conversation's mean token loss
(e) sample LM gradient == autograd of that objective
(f) sample, supervised: aux gradient == ∇ Σ_mb (s_mb / S) aux_mb
(g) sample, equal aux_mb: aux gradient == ∇ aux_1 (total weight 1); legacy == (Σ P_mb / S) x that
(h) the reported total effective aux weight is 1 under both normalizations, legacy Σ P_mb / D
"""

from __future__ import annotations

import dataclasses
import itertools

import pytest
import torch
import torch.nn.functional as F
from hypothesis import given, settings
from hypothesis import strategies as st

from cook.train import TrainConfig, compute_gradients
from cook.train.step import loss_mass, token_weights

from .train_data import CONFIG, autograd_gradients, aux_gradients, batch, micro_batch_aux, model, sequences, with_mask

SAMPLE = TrainConfig(loss_normalization="sample")
SAMPLE_LEGACY = TrainConfig(loss_normalization="sample", moe_aux_loss_scaling="legacy")


def _micro_batches():
    """Conversations of different lengths and target counts, one without targets (share 0)."""
    return [
        batch([sequences(1, [7, 12], 0.5), sequences(7, [9], 0.0)], pad_multiple=8),
        batch([sequences(2, [5, 30], 0.2)], pad_multiple=16),
        batch([sequences(3, [14, 4, 11], 0.7)], pad_multiple=8),
    ]


def _sample_objective(net, micro_batches, grad: bool) -> tuple[torch.Tensor, int]:
    """(1/S) Σ_c mean_c, one conversation at a time from cu_seqlens_padded (not through token_weights)."""
    means = []
    with torch.set_grad_enabled(grad):
        for mb in micro_batches:
            net.eval()
            logits = net.forward_batch(mb).logits
            bounds = mb.cu_seqlens_padded.tolist()
            for start, end in itertools.pairwise(bounds):
                targets = mb.loss_mask[0, start:end].bool()
                if targets.any():
                    labels = mb.labels[0, start:end][targets]
                    means.append(F.cross_entropy(logits[start:end][targets], labels, reduction="mean"))
    return torch.stack(means).sum() / len(means), len(means)


def test_d_sample_loss_is_the_mean_of_conversation_means() -> None:
    net, micro_batches = model(), _micro_batches()
    expected, conversations = _sample_objective(net, micro_batches, grad=False)
    result = compute_gradients(net, micro_batches, SAMPLE)
    assert conversations == 7 and result.global_loss_mass == 7  # 8 sequences, one without targets
    assert result.loss_masses == (2, 2, 3) == tuple(loss_mass(m, "sample") for m in micro_batches)
    assert result.lm_loss == pytest.approx(float(expected), rel=1e-10)
    token = compute_gradients(net, micro_batches, TrainConfig())
    assert token.global_loss_mass == token.global_target_tokens == sum(m.target_tokens for m in micro_batches)
    assert token.lm_loss != pytest.approx(result.lm_loss, rel=1e-3)  # a different average


def test_e_sample_lm_gradient_is_autograd_of_the_objective() -> None:
    net = model(dataclasses.replace(CONFIG, moe_aux_loss_coeff=0.0))
    micro_batches = _micro_batches()
    result = compute_gradients(net, micro_batches, SAMPLE)
    grads = {n: p.grad.clone() for n, p in net.named_parameters() if p.grad is not None}
    objective, _ = _sample_objective(net, micro_batches, grad=True)
    expected = autograd_gradients(net, objective)
    assert result.aux_loss == 0.0
    for name, grad in grads.items():
        torch.testing.assert_close(grad, expected[name], rtol=1e-9, atol=1e-12, msg=name)


def test_f_sample_fix_is_the_conversation_weighted_mean() -> None:
    net, micro_batches = model(), _micro_batches()
    aux_grads, result = aux_gradients(net, micro_batches, SAMPLE)
    total = result.global_loss_mass
    objective = sum(loss_mass(mb, "sample") / total * micro_batch_aux(net, mb) for mb in micro_batches)
    expected = autograd_gradients(net, objective)
    for name, grad in aux_grads.items():
        torch.testing.assert_close(grad, expected[name], rtol=1e-9, atol=1e-12, msg=name)
    assert all(aux_grads[n].abs().max() > 1e-8 for n in aux_grads if n.endswith("router.weight"))


@pytest.mark.parametrize("composition", [[(0.05, 8), (0.5, 8), (0.95, 32)], [(0.3, 1)], [(0.1, 16), (0.9, 64)]])
def test_g_sample_total_aux_weight_is_one(composition: list) -> None:
    base = sequences(5, [9, 14, 6])
    micro_batches = [batch([with_mask(base, share)], pad_multiple=pad) for share, pad in composition]
    net = model()
    one_aux = autograd_gradients(net, micro_batch_aux(net, micro_batches[0]))
    fixed, _fixed_result = aux_gradients(net, micro_batches, SAMPLE)
    for name, grad in fixed.items():
        torch.testing.assert_close(grad, one_aux[name], rtol=1e-9, atol=1e-12, msg=name)
    legacy, legacy_result = aux_gradients(net, micro_batches, SAMPLE_LEGACY)
    inflation = sum(legacy_result.routed_tokens) / legacy_result.global_loss_mass
    assert inflation > 1.0
    for name, grad in legacy.items():
        torch.testing.assert_close(grad, inflation * fixed[name], rtol=1e-9, atol=1e-12, msg=name)
    assert legacy_result.aux_weight == pytest.approx(inflation, rel=1e-12)


@pytest.mark.parametrize("normalization", ["token", "sample"])
def test_h_reported_aux_weights(normalization: str) -> None:
    net, micro_batches = model(), _micro_batches()
    for scaling in ("supervised", "legacy"):
        config = TrainConfig(loss_normalization=normalization, moe_aux_loss_scaling=scaling)  # type: ignore[arg-type]
        result = compute_gradients(net, micro_batches, config)
        legacy = sum(result.routed_tokens) / result.global_loss_mass
        assert result.aux_weight_supervised == pytest.approx(1.0, abs=1e-15)
        assert f"{result.aux_weight_supervised:.6f}" == "1.000000"
        assert result.aux_weight_legacy == pytest.approx(legacy, rel=1e-15)
        assert result.aux_weight == pytest.approx(1.0 if scaling == "supervised" else legacy, rel=1e-12)


def test_bad_normalization_is_refused() -> None:
    with pytest.raises(ValueError, match=r"train\.loss_normalization='conversation'"):
        TrainConfig(loss_normalization="conversation")  # type: ignore[arg-type]


@settings(max_examples=60, deadline=None)
@given(
    st.lists(
        st.lists(st.tuples(st.integers(2, 24), st.sampled_from([0.0, 0.1, 0.5, 1.0])), min_size=1, max_size=4),
        min_size=1,
        max_size=3,
    ),
    st.sampled_from([1, 4, 8]),
)
def test_sample_weights_give_each_conversation_weight_one(packs: list, pad_multiple: int) -> None:
    seeds = iter(range(1000))
    built = [[sequences(next(seeds), [n], share)[0] for n, share in pack] for pack in packs]
    mb = batch(built, pad_multiple=pad_multiple)
    weights = token_weights(mb, "sample")
    bounds = mb.cu_seqlens_padded.tolist()
    per_sequence = [float(weights[s:e].sum()) for s, e in itertools.pairwise(bounds)]
    expected = [1.0 if n > 0 else 0.0 for n in mb.sequence_targets.tolist()]
    assert per_sequence == pytest.approx(expected, abs=1e-12)
    assert loss_mass(mb, "sample") == sum(expected) and loss_mass(mb, "token") == int(token_weights(mb, "token").sum())
