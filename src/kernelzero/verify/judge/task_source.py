"""The task's source as the reference's process imports it, and the exception for a task whose own code fails.

Torch-free: the judge's launcher starts the reference's process with it before the judge imports torch.
"""

from __future__ import annotations

import ast
from pathlib import Path

from kernelzero.tasks.module import needs_download
from kernelzero.tasks.sizes import apply_sizes
from kernelzero.types import Task
from kernelzero.verify.options import VerifyOptions
from kernelzero.verify.sandbox.process import plan_for
from kernelzero.verify.sandbox.worker_process import StartedWorker, start_worker


class TaskBroken(ValueError):
    """The task's own code failed (import, init inputs, inputs or forward)."""


def sized_source(task: Task) -> str:
    """The task's source with its size overrides written into the module (what the reference process imports)."""
    if needs_download(task.source):
        raise TaskBroken("the task itself is broken (needs_download): it loads a pretrained model at run time")
    if not task.sizes:
        return task.source
    try:
        tree = ast.parse(task.source)
    except SyntaxError as exc:
        raise TaskBroken(f"the task itself is broken (syntax_error): line {exc.lineno}: {exc.msg}") from None
    return ast.unparse(apply_sizes(tree, task.sizes))


def start_reference(task: Task, opts: VerifyOptions, folder: Path) -> StartedWorker:
    """Start the task's reference process in the sandbox (worker/reference_role.py), with the sized source."""
    return start_worker(
        sized_source(task),
        folder,
        interpret=False,
        sandbox=plan_for(opts),
        host_mem_gb=opts.host_mem_gb,
        role="reference",
    )
