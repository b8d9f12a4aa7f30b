"""Exact and near-duplicate keys (proposer/dedup.py): a pair that must match, pairs that must not."""

from pathlib import Path

import pytest

from kernelzero.proposer.dedup import BenchmarkIndex, api_sequence, exact_key, near_key

HERE = Path(__file__).parent
A = """import torch
import torch.nn as nn
import torch.nn.functional as F


class Model(nn.Module):
    def __init__(self, d, n):
        super().__init__()
        self.fc = nn.Linear(d, n)
        self.norm = nn.LayerNorm(n)

    def forward(self, x):
        return F.gelu(self.norm(self.fc(x))) * 2.0


d = 1024
n = 4096


def get_inputs():
    return [torch.randn(128, d)]


def get_init_inputs():
    return [d, n]
"""
# Renamed, resized, re-spelt (torch.nn.functional vs method vs module), other glue and a docstring: a near-duplicate.
B = '''import torch
from torch import nn


class Model(nn.Module):
    """Projection, normalisation, GELU."""

    def __init__(self, inp, out):
        super(Model, self).__init__()
        self.proj = nn.Sequential(nn.Linear(inp, out), nn.LayerNorm(out))
        self.act = nn.GELU()

    def forward(self, tokens):
        h = self.proj(tokens).view(-1, 64)
        return self.act(h + 1.0)


inp = 256
out = 512


def get_inputs():
    return [torch.rand(32, inp)]


def get_init_inputs():
    return [inp, out]
'''


def test_near_duplicate_pair_matches():
    assert api_sequence(A) == api_sequence(B) == ("linear", "layer_norm", "gelu")
    assert near_key(A) == near_key(B)
    assert exact_key(A) != exact_key(B)


def test_another_api_order_or_input_count_is_not_a_duplicate():
    swapped = A.replace("F.gelu(self.norm(self.fc(x)))", "self.norm(F.gelu(self.fc(x)))")
    other_op = A.replace("F.gelu", "F.silu")
    two_inputs = A.replace("def forward(self, x):", "def forward(self, x, y):")
    for variant in (swapped, other_op, two_inputs):
        assert near_key(variant) != near_key(A)


def test_exact_key_ignores_comments_docstrings_and_layout():
    commented = A.replace("class Model(nn.Module):\n", 'class Model(nn.Module):\n    """Doc."""  # comment\n')
    assert exact_key(commented.replace("return F.gelu(", "return   F.gelu(")) == exact_key(A)


def test_benchmark_index_finds_near_duplicates():
    index = BenchmarkIndex()
    assert index.add_suite(HERE / "bench_fixture.jsonl") == 1
    relu = A.replace("F.gelu(self.norm(self.fc(x))) * 2.0", "torch.relu(self.fc(x))")
    assert "7_Linear_ReLU" in index.match(exact_key(relu), near_key(relu))
    assert index.match(exact_key(A), near_key(A)) is None


def test_no_model_forward_has_no_near_key():
    assert near_key("x = 1\n") is None
    with pytest.raises(SyntaxError):
        exact_key("def (")
