"""The runnable and numerical checks (proposer/checks.py) on the values of hand-written modules, computed here.

The checks run in admission's trusted parent on what the reference process returns; here this test computes the
same values itself (the modules are this test's own), so each check's decision is tested directly and fast,
including the time window that only applies on a GPU by default. The sandboxed path (children.py) is exercised
in test_forged_admission.py and end to end in test_cli_e2e.py.
"""

import time

import pytest
import torch

from kernelzero.proposer.checks import (
    Rejected,
    failure_reason,
    numerical_checks,
    precision_check,
    runnable_checks,
)
from kernelzero.tasks.module import load_reference

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


def _flat(out):
    return [out] if isinstance(out, torch.Tensor) else list(out)


def _decide(tmp_path, body: str, **extra) -> str:
    """The reason the checks give for a module with this forward body ("" when admitted)."""
    job = {"tol": 1e-2, "window_us": None, "ranking": False, **extra}
    ref = load_reference(BASE.replace("BODY", body), {}, tmp_path / "m.py")
    torch.manual_seed(0)
    model = ref.model_cls(*ref.get_init_inputs()).eval()
    draws = []
    for k in range(3):
        torch.manual_seed(1 + k)
        draws.append(list(ref.get_inputs()))
    with torch.no_grad():
        outs = [_flat(model(*d)) for d in draws]
        again = _flat(model(*draws[0]))
        start = time.perf_counter()
        model(*draws[0])
        forward_ms = (time.perf_counter() - start) * 1e3
        model64 = model.double()
        outs64 = [[o.float() for o in _flat(model64(*[x.double() for x in d]))] for d in draws]
    try:
        runnable_checks(job, draws, outs, again, forward_ms)
        numerical_checks(job, draws, outs)
        precision_check(job, outs, outs64)
    except Rejected as exc:
        assert exc.stage in ("runnable", "numerical")
        return exc.reason
    return ""


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
        ("()", {}, "bad_output"),
    ],
)
def test_checks(tmp_path, body, extra, reason):
    assert _decide(tmp_path, body, **extra) == reason


def test_inputs_without_tensors_fail_the_run():
    with pytest.raises(Rejected) as info:
        runnable_checks({"tol": 1e-2}, [[3]], [[torch.ones(2)]] * 3, [torch.ones(2)], 1.0)
    assert info.value.reason == "run_failed"


@pytest.mark.parametrize(
    "message, reason",
    [
        ("the task's reference process failed during the reference forward (timeout): no result within 9 s", "timeout"),
        ("the task's reference process failed during get_inputs (oom): host memory over the limit", "oom"),
        ("the task itself is broken (the reference forward): OutOfMemoryError: CUDA out of memory", "oom"),
        ("the task's reference process failed during importing the task (crash): killed by SIGABRT", "crash"),
        (
            "the task itself is broken (the reference forward): TypeError: the reference returned a dict, not tensors",
            "bad_output",
        ),
        ("the task itself is broken (the reference forward): RuntimeError: mat1 and mat2 shapes", "run_failed"),
        ("the task itself is broken (importing the task): NameError: name 'nn' is not defined", "run_failed"),
    ],
)
def test_reference_failures_map_to_reasons(message, reason):
    assert failure_reason(message) == reason
