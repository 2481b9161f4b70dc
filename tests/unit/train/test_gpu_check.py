"""gpu_check's CPU-side logic: one line and exit 0 where there is no CUDA; the attention check."""

from __future__ import annotations

import pytest
import torch

from cook.train import gpu_check
from cook.train.attention import uses_varlen

from .train_data import batch, model, sequences


def test_without_cuda_one_line_and_exit_zero(monkeypatch: pytest.MonkeyPatch, capsys, tmp_path) -> None:
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    assert gpu_check.main([str(tmp_path / "not-read")]) == 0
    captured = capsys.readouterr()
    assert captured.out.count("\n") == 1 and captured.out.startswith("gpu_check: no CUDA device") and not captured.err


@pytest.mark.parametrize("bf16", [False, True])
def test_attention_check_on_cpu_is_the_reference(bf16: bool) -> None:
    net = model().float()
    mb = batch([sequences(1, [9, 14], 0.5), sequences(2, [6], 0.5)])
    path, difference = gpu_check.attention_check(net, mb, bf16)
    assert path == "sdpa" and difference == 0.0
    assert not uses_varlen(torch.zeros(2, 2, dtype=torch.bfloat16))
