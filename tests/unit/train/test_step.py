"""The SFT step: attention stays inside each sequence, the per-token loss is normalized by the global
target tokens G, and sft_step updates the model."""

from __future__ import annotations

import dataclasses

import pytest
import torch
import torch.nn.functional as F

from cook.reader import IGNORE_INDEX
from cook.train import ModelConfig, TrainConfig, compute_gradients, sft_step
from cook.train.attention import PackedAttention, block_causal_mask

from .train_data import CONFIG, batch, model, sequences


def test_block_causal_mask_example() -> None:
    mask = block_causal_mask(torch.tensor([0, 3, 5], dtype=torch.int32), 5).int().tolist()
    assert mask == [[1, 0, 0, 0, 0], [1, 1, 0, 0, 0], [1, 1, 1, 0, 0], [0, 0, 0, 1, 0], [0, 0, 0, 1, 1]]


def test_attention_equals_masked_sdpa_and_never_crosses_sequences() -> None:
    torch.manual_seed(0)
    attention = PackedAttention(16, 2).double()
    cu = torch.tensor([0, 8, 12, 28], dtype=torch.int32)
    x = torch.randn(28, 16, dtype=torch.float64)
    out = attention(x, cu, 16)
    q, k, v = attention.qkv(x).view(28, 3, 2, 8).unbind(1)
    mask = block_causal_mask(cu, 28)
    reference = F.scaled_dot_product_attention(q.transpose(0, 1), k.transpose(0, 1), v.transpose(0, 1), attn_mask=mask)
    torch.testing.assert_close(out, attention.out(reference.transpose(0, 1).reshape(28, 16)))
    changed = x.clone()
    changed[8:12] = torch.randn(4, 16, dtype=torch.float64)
    after = attention(changed, cu, 16)
    assert torch.equal(after[:8], out[:8]) and torch.equal(after[12:], out[12:])


def test_loss_is_per_token_over_global_targets() -> None:
    net = model()
    micro_batches = [batch([sequences(1, [7, 12], 0.5)]), batch([sequences(2, [5, 20], 0.2)], pad_multiple=16)]
    result = compute_gradients(net, micro_batches, TrainConfig())
    total = sum(mb.target_tokens for mb in micro_batches)
    assert result.global_target_tokens == total
    assert result.target_tokens == tuple(m.target_tokens for m in micro_batches)
    losses = []
    with torch.no_grad():
        for mb in micro_batches:
            logits = net.forward_batch(mb).logits
            targets = mb.loss_mask[0].bool()
            assert (mb.labels[0][targets] != IGNORE_INDEX).all()
            losses.append(F.cross_entropy(logits[targets], mb.labels[0][targets], reduction="sum"))
    assert result.lm_loss == pytest.approx(float(sum(losses)) / total, rel=1e-10)
    assert result.tokens == sum(mb.num_tokens for mb in micro_batches)


def test_sft_step_updates_the_model() -> None:
    net = model()
    before = {n: p.detach().clone() for n, p in net.named_parameters()}
    optimizer = torch.optim.AdamW(net.parameters(), lr=1e-2)
    result = sft_step(net, optimizer, [batch([sequences(3, [9, 14], 0.5)])], TrainConfig(max_grad_norm=0.5))
    assert result.grad_norm is not None and result.grad_norm > 0
    assert torch.isfinite(torch.tensor([result.lm_loss, result.aux_loss])).all()
    changed = [n for n, p in net.named_parameters() if not torch.equal(p, before[n])]
    assert "layers.0.mlp.router.weight" in changed and "lm_head.weight" in changed


def test_configs_refuse_bad_values() -> None:
    with pytest.raises(ValueError, match="moe_aux_loss_scaling='median'"):
        TrainConfig(moe_aux_loss_scaling="median")  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="moe_router_topk=5"):
        dataclasses.replace(CONFIG, moe_router_topk=5)
    with pytest.raises(ValueError, match="num_heads=3"):
        ModelConfig(vocab_size=8, hidden_size=16, num_heads=3)
