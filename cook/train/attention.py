"""Self-attention over a packed THD stream that never crosses a sequence boundary.

    x [T, H], cu_seqlens_padded [N+1] -> [T, H]

Sequence ``i`` owns positions ``[cu_seqlens_padded[i], cu_seqlens_padded[i+1])`` (its real tokens,
then its padding). A token attends to the earlier tokens of its own sequence only: a block-diagonal
causal mask. Padding sits after the real tokens, so no real token ever attends to padding. Example,
``cu_seqlens_padded = [0, 3, 5]`` (``1`` = may attend)::

    q\\k  0 1 2 3 4
    0     1 . . . .
    1     1 1 . . .
    2     1 1 1 . .
    3     . . . 1 .
    4     . . . 1 1

``block_causal_mask`` builds that mask (the definition, and the reference the tests compare with);
the forward never materializes it: on CUDA in bf16/fp16 torch's flash ``varlen_attn`` takes the
boundaries directly (when this torch has it), elsewhere each sequence is one causal SDPA call on its
own slice — the same result without a ``T x T`` mask (``T`` is ~8k for a micro-batch of two 4k packs).
"""

from __future__ import annotations

from collections.abc import Callable
from itertools import pairwise
from typing import Any

import torch
import torch.nn.functional as F
from torch import nn

try:  # torch >= 2.9 on CUDA: flash attention over cu_seqlens
    from torch.nn.attention.varlen import varlen_attn as _varlen_attn

    varlen_attn: Callable[..., Any] | None = _varlen_attn
except ImportError:  # pragma: no cover - depends on the torch build
    varlen_attn = None


def block_causal_mask(cu_seqlens_padded: torch.Tensor, num_tokens: int) -> torch.Tensor:
    """bool ``[T, T]``: ``mask[q, k]`` is True when ``k <= q`` and both are in the same sequence."""
    lengths = cu_seqlens_padded[1:] - cu_seqlens_padded[:-1]
    device = cu_seqlens_padded.device
    sequence = torch.repeat_interleave(torch.arange(len(lengths), device=device), lengths, output_size=num_tokens)
    position = torch.arange(num_tokens, device=device)
    return (sequence[:, None] == sequence[None, :]) & (position[None, :] <= position[:, None])


def uses_varlen(x: torch.Tensor) -> bool:
    """Whether ``PackedAttention`` takes torch's flash ``varlen_attn`` for input ``x``."""
    return varlen_attn is not None and x.is_cuda and x.dtype in (torch.bfloat16, torch.float16)


class PackedAttention(nn.Module):
    def __init__(self, hidden_size: int, num_heads: int) -> None:
        super().__init__()
        self.num_heads = num_heads
        self.qkv = nn.Linear(hidden_size, 3 * hidden_size, bias=False)
        self.out = nn.Linear(hidden_size, hidden_size, bias=False)

    def forward(self, x: torch.Tensor, cu_seqlens_padded: torch.Tensor, max_seqlen: int) -> torch.Tensor:
        tokens, hidden = x.shape
        q, k, v = self.qkv(x).view(tokens, 3, self.num_heads, hidden // self.num_heads).unbind(1)  # [T, h, d]
        if uses_varlen(x):
            assert varlen_attn is not None
            cu = cu_seqlens_padded.to(torch.int32)
            out = varlen_attn(q, k, v, cu, cu, max_seqlen, max_seqlen, window_size=(-1, 0))
            assert isinstance(out, torch.Tensor)
        else:
            out = sequence_attention(q, k, v, cu_seqlens_padded)
        return self.out(out.reshape(tokens, hidden))


def sequence_attention(
    q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, cu_seqlens_padded: torch.Tensor
) -> torch.Tensor:
    """The reference path: one causal SDPA call per sequence, ``[T, h, d]`` each."""
    bounds = cu_seqlens_padded.tolist()
    return torch.cat([_causal(q[s:e], k[s:e], v[s:e]) for s, e in pairwise(bounds)])


def _causal(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor) -> torch.Tensor:
    """Causal SDPA over one sequence, ``[L, h, d]`` each."""
    out = F.scaled_dot_product_attention(q.transpose(0, 1), k.transpose(0, 1), v.transpose(0, 1), is_causal=True)
    return out.transpose(0, 1)
