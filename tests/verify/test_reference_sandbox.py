"""The task's own code runs in a sandboxed process of its own (judge/reference.py, worker/reference_role.py), never
in the judge: a hostile task cannot reach the judge's objects or the network, and its failures are the task's."""

from __future__ import annotations

import os
import socket
import uuid
from pathlib import Path

import pytest

from kernelzero.types import Task
from kernelzero.verify import options_for, verify
from kernelzero.verify.sandbox.box import DEFAULT_UIDS
from kernelzero.verify.sandbox.process import plan_sandbox

KERNELS = Path(__file__).resolve().parents[1] / "kernels"
CANDIDATE = (KERNELS / "correct" / "triton_leaky_relu.py").read_text()

HOSTILE = """
import torch
import torch.nn as nn

PORT = {port}
MARK = {mark!r}

def _probe():
    found = []
    try:
        import gc
        found = [type(o).__name__ for o in gc.get_objects() if type(o).__name__ in ("Judge", "Reference")]
    except AttributeError:  # the sandbox took gc's object walk away too
        pass
    if found:
        raise RuntimeError(f"reached the judge's objects: {{found}}")
    try:
        import socket
        socket.create_connection(("127.0.0.1", PORT), timeout=2).close()
    except OSError:
        pass
    try:
        with open(MARK, "w") as f:
            f.write("escaped")
    except OSError:
        pass

_probe()

class Model(nn.Module):
    def __init__(self, negative_slope):
        super().__init__()
        self.negative_slope = negative_slope

    def forward(self, x):
        return torch.nn.functional.leaky_relu(x, self.negative_slope)

def get_inputs():
    return [torch.randn(1000)]

def get_init_inputs():
    return [0.1]
"""


def test_hostile_task_reaches_neither_the_judge_nor_the_network(tmp_path):
    plan = plan_sandbox(DEFAULT_UIDS, True)  # SandboxUnavailable here fails the test: no silent fall-back
    server = socket.create_server(("127.0.0.1", 0))
    server.setblocking(False)
    mark = f"/tmp/kz-task-escape-{uuid.uuid4().hex}"
    os.makedirs(tmp_path, exist_ok=True)
    task = Task(name="hostile/leaky", source=HOSTILE.format(port=server.getsockname()[1], mark=mark))
    try:
        verdict = verify(task, CANDIDATE, "triton", options_for(device="cpu", trials=1, compile_check=False))
        assert verdict.status == "correct", verdict.message  # the task ran, and found no judge object
        assert plan.boxed and plan.netns
        with pytest.raises(BlockingIOError):
            server.accept()  # nobody connected: the task's process has no network
        assert not Path(mark).exists()  # its /tmp is its own, and its uid cannot write outside its folder
    finally:
        server.close()
        Path(mark).unlink(missing_ok=True)
