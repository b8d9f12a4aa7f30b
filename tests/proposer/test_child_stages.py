"""The child's runnable and numerical checks, run in this test process on hand-written modules (admit_child.run_job).

The sandboxed path (children.py) is exercised end to end in test_cli_e2e.py; here each check's decision is tested
directly and fast, including the time window that only applies on a GPU by default.
"""

import pytest

from kernelzero.proposer.admit_child import run_job

BASE = """import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x):
        return BODY


n = 64


def get_inputs():
    return [torch.randn(n, n)]


def get_init_inputs():
    return []
"""


def _job(body: str, **extra) -> dict:
    return {
        "source": BASE.replace("BODY", body),
        "sizes": {},
        "device": "cpu",
        "seed": 0,
        "tol": 1e-2,
        "window_us": None,
        "ranking": False,
        **extra,
    }


@pytest.mark.parametrize(
    "body, extra, reason",
    [
        ("torch.tanh(x)", {}, ""),
        ("torch.tanh(x)", {"window_us": [1e9, 2e9]}, "too_fast"),
        ("torch.tanh(x)", {"window_us": [0.0, 1e-3]}, "too_slow"),
        ("torch.tanh(x) + torch.rand_like(x)", {}, "nondeterministic"),
        ("torch.log(x)", {}, "nonfinite"),
        ("torch.tanh(x) * 1e-5", {}, "degenerate"),
        ("x + 0.0", {}, "degenerate"),
        ("torch.sin((x + 1e5) * 100.0)", {}, "precision_sensitive"),
        ("torch.argmax(x, dim=-1)", {"ranking": True}, "tie_prone"),
        ("x.sum().item()", {}, "bad_output"),
        ("torch.mm(x, x[:3])", {}, "run_failed"),
    ],
)
def test_child_checks(tmp_path, body, extra, reason):
    result = run_job(_job(body, **extra), tmp_path)
    assert result["reason"] == reason, result["message"]
    assert result["ok"] is (reason == "")


def test_sizes_are_applied_before_running(tmp_path):
    result = run_job(_job("torch.tanh(x)", sizes={"n": 16}), tmp_path)
    assert result["ok"] and result["input_shapes"] == ["float32[16, 16]"]
