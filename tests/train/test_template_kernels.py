"""train/template_kernels.py: the known-good Triton kernels of the template Proposer's elementwise modules, which
the CPU co-evolution round's Coder is warm-started on."""

from __future__ import annotations

from kernelzero.proposer.generator import write_module
from kernelzero.tasks import resize
from kernelzero.train.template_kernels import KERNEL_LINES, template_kernel, template_tasks
from kernelzero.types import Task
from kernelzero.verify import options_for, verify


def test_a_chain_of_every_supported_api_passes_the_verifier():
    source = write_module(tuple(KERNEL_LINES), 0)  # one forward line per API, in the writer's order
    kernel = template_kernel(source)
    assert kernel is not None and kernel.count("x = ") >= len(KERNEL_LINES)
    task = resize(Task(name="all8", source=source), scale=0.0625)
    verdict = verify(task, f"```python\n{kernel}```", "triton", options_for("default", compile_check=False))
    assert verdict.status == "correct", verdict.message
    assert verdict.policy_status["strict"] == "correct"


def test_modules_it_cannot_write_give_none():
    assert template_kernel(write_module(("gelu", "linear"), 0)) is None  # a layer with weights
    assert template_kernel(write_module(("relu", "sum"), 0)) is None  # a reduction
    assert template_kernel("def broken(:") is None
    pool = [{"apis": ["gelu", "linear"]}, {"apis": ["abs", "exp"]}, {"apis": ["relu", "tanh"]}]
    # the Proposer's warm start fits the first two sets the writer writes; the Coder gets the kernels it can write
    assert [t.name for t, _ in template_tasks(pool, 2)] == ["template/abs+exp"]


def test_variants_are_the_writer_s_other_seeds_each_once():
    pool = [{"apis": ["abs", "exp", "silu"]}, {"apis": ["relu", "tanh"]}]
    got = template_tasks(pool, 1, variants=4)
    expected = list(
        dict.fromkeys(write_module(("abs", "exp", "silu"), seed) for seed in range(4))
    )  # distinct, in order
    assert [t.source for t, _ in got] == expected and len(expected) >= 2
    assert [t.name for t, _ in got][:2] == ["template/abs+exp+silu", "template/abs+exp+silu_1"]
    assert all(kernel == template_kernel(t.source) for t, kernel in got)
