"""optimize/inputs.py and optimize/sizes.py: the user's file as a task, with clear errors, and its size variants.

Run: `.venv/bin/python -m pytest -q -p no:xdist tests/optimize/test_inputs.py`
Everything here reads syntax trees, except one contract check that runs an adapted module in a child process.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from kernelzero.optimize.inputs import ADAPTER_MARK, ModuleInputError, load_module
from kernelzero.optimize.sizes import root_sizes, size_variants
from kernelzero.tasks import CheckOptions, check_tasks
from kernelzero.types import Task
from kernelzero.verify.sandbox.process import task_launcher

ROOT = Path(__file__).resolve().parents[2]
GELU = ROOT / "src/kernelzero/tasks/suites/kz_basic/level1/21_GELU.py"

BLOCK = """import torch
import torch.nn as nn

dim = 64
tokens = 32


class Block(nn.Module):
    def __init__(self, dim, scale=2.0):
        super().__init__()
        self.proj = nn.Linear(dim, dim)
        self.scale = scale

    def forward(self, x):
        return torch.relu(self.proj(x)) * self.scale


def example_inputs():
    return torch.randn(tokens, dim)


def block_args():
    return [dim]
"""


def _write(tmp_path: Path, text: str, name: str = "block.py") -> Path:
    path = tmp_path / name
    path.write_text(text)
    return path


def test_a_task_format_file_is_taken_as_it_is():
    task = load_module(GELU)
    assert task.source == GELU.read_text() and task.name == "21_GELU" and task.suite == "optimize"


def test_an_nn_module_file_with_an_inputs_function_gets_an_adapter_that_runs(tmp_path):
    path = _write(tmp_path, BLOCK)
    task = load_module(path, inputs="example_inputs", init_inputs="block_args")
    assert task.source.startswith(BLOCK), "the user's code is unchanged"
    assert ADAPTER_MARK in task.source and "Model = Block" in task.source
    [check] = list(check_tasks([task], CheckOptions(launcher=task_launcher())))
    assert check.ok, check.message
    assert check.input_shapes == ("float32[32, 64]",) and check.output_shapes == ("float32[32, 64]",)


@pytest.mark.parametrize(
    ("text", "kwargs", "message"),
    [
        (BLOCK, {}, r"defines no get_inputs\(\).*--inputs FUNC.*block_args, example_inputs"),
        (BLOCK, {"inputs": "example_inputs"}, r"Block.__init__ takes dim .*get_init_inputs.*--init-inputs"),
        (BLOCK, {"inputs": "make"}, r"no function 'make' \(the forward inputs\)"),
        (BLOCK, {"model": "Missing", "inputs": "example_inputs"}, r"no class 'Missing'.*Block"),
        (BLOCK.replace("nn.Module", "object"), {}, r"defines no nn.Module class"),
        (BLOCK + "\n\nclass Other(nn.Module):\n    pass\n", {}, r"2 nn.Module classes \(Block, Other\).*--model-class"),
        ("def broken(:\n", {}, r"not valid Python \(line 1"),
    ],
    ids=["no-inputs", "no-init-args", "unknown-inputs", "unknown-class", "no-module", "two-modules", "syntax"],
)
def test_what_is_missing_is_named_with_the_flag_that_supplies_it(tmp_path, text, kwargs, message):
    with pytest.raises(ModuleInputError, match=message):
        load_module(_write(tmp_path, text), **kwargs)


def test_files_that_are_not_python_modules_are_refused(tmp_path):
    with pytest.raises(ModuleInputError, match="no such file"):
        load_module(tmp_path / "absent.py")
    with pytest.raises(ModuleInputError, match=r"expected a Python file"):
        load_module(_write(tmp_path, BLOCK, "block.txt"))


def test_sizes_halve_and_double_the_constant_globals_and_derived_ones_follow():
    source = "a = 256\nb = a * 4\nk = 3\nshape = (32, 8)\nodd = 48\n"
    task = Task(name="t", source=source, sizes={"a": 64})
    assert root_sizes(task) == {"a": 64, "k": 3, "shape": (32, 8), "odd": 48}
    variants, notes = size_variants(task)
    sizes = {name: t.sizes for name, t in variants}
    assert sizes["half"] == {"a": 32, "shape": (16, 8), "odd": 24} and notes == []
    assert sizes["double"] == {"a": 128, "shape": (64, 8), "odd": 96}
    assert [t.name for _, t in variants] == ["t@half", "t@double"]


def test_a_module_without_sizes_is_verified_at_its_own_sizes_only():
    variants, notes = size_variants(Task(name="t", source="import torch\nk = 3\n"))
    assert variants == [] and "no size global of 16 or more" in notes[0]
    variants, notes = size_variants(Task(name="t", source="n = 16\n"))
    assert [name for name, _ in variants] == ["double"] and notes == [
        "half: every size global is at the floor of 16; nothing to halve"
    ]
