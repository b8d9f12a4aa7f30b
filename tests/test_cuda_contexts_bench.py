"""The CUDA-context bench (bench/cuda_contexts.py) on a machine without a GPU: it says so instead of timing, and a
batch whose children create no context raises with their exit, not a parse error."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest
import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "bench"))

import cuda_contexts  # noqa: E402

pytestmark = pytest.mark.skipif(torch.cuda.is_available(), reason="the GPU host times contexts instead")


def test_without_a_gpu_the_bench_says_so(capsys):
    assert cuda_contexts.main(["--counts", "1"]) == 2
    assert "needs a CUDA GPU" in capsys.readouterr().err
    with pytest.raises(SystemExit):
        cuda_contexts.main(["--counts", "0"])


def test_children_without_a_context_are_an_error_not_a_number():
    with pytest.raises(RuntimeError, match="created no CUDA context"):
        cuda_contexts.one_batch(1)
