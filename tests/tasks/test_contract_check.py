"""The contract check: one test per error kind, run in child processes; the caller survives all."""

from pathlib import Path

import pytest

from kernelzero.tasks import CheckOptions, check_tasks, load_suite, resize
from kernelzero.types import Task
from kernelzero.verify.sandbox.process import task_launcher

LAUNCH = task_launcher()  # task code runs only in the verifier's sandbox

FIXTURES = Path(__file__).parent.parent / "fixtures" / "kb"

GOOD_TAIL = """
def get_inputs():
    return [torch.randn(8, 16)]


def get_init_inputs():
    return []
"""

MODEL = """
import torch
import torch.nn as nn


class Model(nn.Module):
    def forward(self, x):
        return x * 2 + 1
"""

BROKEN = {
    "syntax_error": "def broken(:\n",
    "import_error": "import torch\nraise RuntimeError('boom at import')\n",
    "missing_model": "import torch\n" + GOOD_TAIL,
    "missing_get_inputs": MODEL + "\ndef get_init_inputs():\n    return []\n",
    "missing_get_init_inputs": MODEL + "\ndef get_inputs():\n    return [torch.randn(4)]\n",
    "bad_init_inputs": MODEL
    + "\ndef get_inputs():\n    return [torch.randn(4)]\n\ndef get_init_inputs():\n    return 3\n",
    "init_failed": MODEL.replace(
        "class Model(nn.Module):",
        "class Model(nn.Module):\n    def __init__(self):\n"
        "        super().__init__()\n        raise ValueError('no')\n",
    )
    + GOOD_TAIL,
    "bad_inputs": MODEL + "\ndef get_inputs():\n    return [1, 2]\n\ndef get_init_inputs():\n    return []\n",
    "forward_failed": MODEL.replace("x * 2 + 1", "x @ x") + GOOD_TAIL,
    "bad_output": MODEL.replace("x * 2 + 1", "'not a tensor'") + GOOD_TAIL,
    "nonfinite_output": MODEL.replace("x * 2 + 1", "x / 0") + GOOD_TAIL,
    "timeout": MODEL.replace("return x * 2 + 1", "while True:\n            pass") + GOOD_TAIL,
    "crash": MODEL.replace("return x * 2 + 1", "import os\n        os._exit(0)") + GOOD_TAIL,
    "needs_download": MODEL.replace("x * 2 + 1", "AutoModel.from_pretrained('gpt2')") + GOOD_TAIL,
}


@pytest.fixture(scope="module")
def broken_results():
    tasks = [Task(kind, source) for kind, source in BROKEN.items()]
    tasks.append(
        Task("segfault", MODEL.replace("return x * 2 + 1", "import ctypes\n        ctypes.string_at(0)") + GOOD_TAIL)
    )
    tasks.append(Task("good", MODEL + GOOD_TAIL))
    return {r.name: r for r in check_tasks(tasks, CheckOptions(launcher=LAUNCH, timeout_s=8, jobs=2))}


@pytest.mark.parametrize("kind", sorted(BROKEN))
def test_each_error_kind_is_named(broken_results, kind):
    result = broken_results[kind]
    assert not result.ok
    assert result.error == kind, result.message
    assert result.message


def test_segfault_is_a_crash_naming_the_signal(broken_results):
    result = broken_results["segfault"]
    assert (result.ok, result.error) == (False, "crash")
    assert "SIGSEGV" in result.message


def test_good_task_after_bad_ones_passes_with_shapes(broken_results):
    good = broken_results["good"]
    assert good.ok and good.error == ""
    assert good.input_shapes == ("float32[8, 16]",) and good.output_shapes == ("float32[8, 16]",)
    assert good.forward_ms is not None and good.task_hash


def test_bad_size_override_is_reported_not_raised():
    task = Task("t", MODEL + GOOD_TAIL, sizes={"nope": 3})
    (result,) = check_tasks([task], CheckOptions(launcher=LAUNCH))
    assert result.error == "bad_sizes" and "nope" in result.message


def test_fixture_suite_passes_and_sizes_apply():
    tasks = [resize(t, sizes={"rows": 4}) if "Scaled_Add" in t.name else t for t in load_suite(FIXTURES).tasks]
    results = {r.name: r for r in check_tasks(tasks, CheckOptions(launcher=LAUNCH, strict=True))}
    assert all(r.ok for r in results.values()), results
    add = results["level1/1_Scaled_Add"]
    assert add.sizes["rows"] == 4 and add.output_shapes == ("float32[4, 128]",)


def test_degenerate_task_flagged_and_failed_in_strict_mode():
    identity = Task(
        "identity",
        MODEL.replace("x * 2 + 1", "torch.relu(x)").replace("torch.randn", "torch.rand")
        + GOOD_TAIL.replace("randn", "rand"),
    )
    (loose,) = check_tasks([identity], CheckOptions(launcher=LAUNCH))
    assert loose.ok and any("input 0" in r for r in loose.degenerate)
    (strict,) = check_tasks([identity], CheckOptions(launcher=LAUNCH, strict=True))
    assert not strict.ok and strict.error == "degenerate"


def test_scaled_task_that_no_longer_runs_is_reported():
    source = (
        MODEL.replace("x * 2 + 1", "x.view(-1, 512)")
        + GOOD_TAIL.replace("torch.randn(8, 16)", "torch.randn(rows, 16)")
        + "\nrows = 32\n"
    )
    task = Task("shrinks-badly", source)
    (ok,) = check_tasks([task], CheckOptions(launcher=LAUNCH))
    assert ok.ok
    (bad,) = check_tasks([resize(task, scale=0.1)], CheckOptions(launcher=LAUNCH))
    assert not bad.ok and bad.error == "forward_failed"
