"""A backend is one folder and one registry entry: a toy language (tests/verify/testlang_backend/kz_testlang),
registered here, runs through the verifier unchanged: its kernels are recognised by its static rule, counted by
its worker hook, and a candidate that skips them is rejected."""

from __future__ import annotations

import os
import sys
from pathlib import Path

import pytest

from kernelzero.types import Backend, Task
from kernelzero.verify import options_for, verify
from kernelzero.verify.backends import BACKENDS, get_backend, register

HERE = Path(__file__).resolve().parent / "testlang_backend"
TASK = Task(
    name="toy/relu",
    source="""
import torch
import torch.nn as nn

class Model(nn.Module):
    def forward(self, x):
        return torch.relu(x)

def get_inputs():
    return [torch.randn(64, 32)]

def get_init_inputs():
    return []
""",
)
GOOD = """
import torch
import torch.nn as nn
import kz_testlang

@kz_testlang.kernel
def relu(x):
    return x.clamp(min=0)

class ModelNew(nn.Module):
    def forward(self, x):
        return relu(x)
"""
SKIPS_ITS_KERNEL = GOOD.replace("return relu(x)", "return torch.relu(x)")
NO_KERNEL = GOOD.replace("@kz_testlang.kernel\n", "")


@pytest.fixture(scope="module")
def testlang():
    sys.path.insert(0, str(HERE))
    record = Backend(
        name="testlang",
        package="kz_testlang",
        kernel_hint="a testlang candidate must define @kernel functions",
        without_gpu="interpret",
    )
    register(record)
    yield record
    BACKENDS.pop("testlang", None)
    sys.path.remove(str(HERE))


def test_unknown_backend_names_the_known_ones():
    with pytest.raises(ValueError, match="triton"):
        get_backend("fortran")


def test_registered_backend_verifies_correct(testlang):
    verdict = verify(TASK, GOOD, "testlang", options_for(device="cpu", trials=1))
    assert verdict.status == "correct", verdict.message
    assert verdict.backend == "testlang"
    assert "relu" in verdict.own_kernels
    assert any("kz_testlang hook installed" in n for n in verdict.notes)


def test_registered_backend_rejects_a_candidate_that_skips_its_kernel(testlang):
    verdict = verify(TASK, SKIPS_ITS_KERNEL, "testlang", options_for(device="cpu", trials=1))
    assert verdict.status == "no_kernel"


def test_registered_backend_static_rule(testlang):
    verdict = verify(TASK, NO_KERNEL, "testlang", options_for(device="cpu"))
    assert (verdict.status, verdict.stage) == ("no_kernel", "static")
    assert "testlang candidate must define" in verdict.message


def test_a_package_on_the_callers_relative_pythonpath_reaches_the_sandboxed_candidate(testlang, tmp_path, monkeypatch):
    """A library the caller put on PYTHONPATH (the GPU gate installs helion that way, as a relative entry among
    others) is importable by the candidate: the judge and its worker run in other folders, so the entry is made
    absolute. Without it the candidate's `import` fails as the candidate's runtime_error (H200 gate, 2026-12-02)."""
    (tmp_path / "site").mkdir()
    (tmp_path / "site" / "kz_caller_lib.py").write_text("def clamp(x):\n    return x.clamp(min=0)\n")
    for path in (tmp_path / "site", tmp_path):
        path.chmod(0o755)  # the sandbox's uids read it, as scripts/sandbox_access.sh opens the gate's folders
    (tmp_path / "site" / "kz_caller_lib.py").chmod(0o644)
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("PYTHONPATH", os.pathsep.join(["site", os.environ.get("PYTHONPATH", "")]))
    uses_it = GOOD.replace("import kz_testlang", "import kz_testlang\nimport kz_caller_lib").replace(
        "return x.clamp(min=0)", "return kz_caller_lib.clamp(x)"
    )
    verdict = verify(TASK, uses_it, "testlang", options_for(device="cpu", trials=1))
    assert verdict.status == "correct", (verdict.message, verdict.error_log[-600:])
