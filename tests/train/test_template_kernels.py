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
    assert [t.name for t, _ in template_tasks(pool, 1)] == ["template/abs+exp"]  # the first writable set
