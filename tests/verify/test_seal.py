"""The worker's own state is out of the candidate's reach by the plain Python routes (worker/seal.py), and what
the reference's process sends back is rebuilt from JSON and raw bytes only (values.pack_values)."""

from __future__ import annotations

import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
import torch

from kernelzero.types import Task
from kernelzero.verify import options_for, verify
from kernelzero.verify.sandbox.channel import ChannelError
from kernelzero.verify.sandbox.values import pack_values, unpack_values
from kernelzero.verify.worker.seal import CleanRunner

SRC = Path(__file__).resolve().parents[2] / "src"


def test_pack_values_round_trip():
    x, y = torch.arange(6.0).reshape(2, 3), torch.ones(2, dtype=torch.int64)
    structure, tensors = pack_values({"a": [x, 3, ("s", y)], "b": None})
    assert tensors == [x, y]
    back = unpack_values(structure, tensors)
    assert back["a"][0] is x and back["a"][1] == 3 and back["a"][2] == ("s", y) and back["b"] is None


@pytest.mark.parametrize("bad", [{"_t": 5}, {"_t": "0"}, {"_tuple": 1}, {"x": 1}, {"_dict": 3}])
def test_unpack_refuses_malformed_structures(bad):
    with pytest.raises(ChannelError):
        unpack_values(bad, [torch.zeros(1)])


def test_pack_refuses_objects_it_cannot_rebuild():
    with pytest.raises(TypeError, match="cannot send"):
        pack_values([object()])


class Marker:
    """Stands for the worker's state: held in the caller's frame only."""


def walk_for_markers() -> int:
    """Markers seen in the frames above this one (locals and globals), as a candidate's forward would look."""
    found, frame = 0, sys._getframe().f_back
    while frame is not None:
        found += sum(isinstance(v, Marker) for v in frame.f_locals.values())
        frame = frame.f_back
    return found


def test_clean_runner_frames_do_not_reach_the_caller():
    state = Marker()  # noqa: F841 - a local of this frame, as the worker's state is of the worker's frames
    assert walk_for_markers() == 1  # called from here, the walk finds it
    assert CleanRunner().run(walk_for_markers) == 0  # on the runner's thread it does not


def test_clean_runner_passes_results_and_exceptions():
    runner = CleanRunner()
    assert runner.run(lambda a, b: a + b, 2, 3) == 5
    with pytest.raises(ZeroDivisionError):
        runner.run(lambda: 1 / 0)


def test_seal_takes_kernelzero_main_and_gc_walks_away():
    code = textwrap.dedent(
        """
        import gc, sys
        import kernelzero.verify.sandbox.channel as live
        from kernelzero.verify.worker.seal import seal
        seal()
        import kernelzero.verify.sandbox.channel as fresh
        import __main__
        print(fresh is not live, hasattr(gc, "get_objects"), hasattr(gc, "get_referrers"),
              hasattr(__main__, "live"), hasattr(sys, "_current_frames"))
        """
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=SRC, check=True)
    assert out.stdout.split() == ["True", "False", "False", "False", "False"]


TASK = Task(
    name="toy/relu",
    source="""
import torch
import torch.nn as nn

class Model(nn.Module):
    def forward(self, x):
        return torch.relu(x)

def get_inputs():
    return [torch.randn(256)]

def get_init_inputs():
    return []
""",
)

# Computes with PyTorch and launches none of its kernels (honest status: no_kernel), and tries to forge the
# worker's report through each plain route; a route that worked would turn the verdict `correct`.
FORGER = """
import sys
import torch
import torch.nn as nn
import triton
import triton.language as tl

@triton.jit
def unused_kernel(x_ptr, n, BLOCK: tl.constexpr):
    pass

def forged_send(fd, header, tensors=()):
    if "launches" in header:
        header = {**header, "launches": {"unused_kernel": 1}, "torch_ops": []}
    return ORIGINAL(fd, header, tensors)

try:  # route 1: the channel module
    import kernelzero.verify.sandbox.channel as channel
    ORIGINAL = channel.send_msg
    channel.send_msg = forged_send
    import kernelzero.verify.worker.worker as worker_module
    worker_module.send_msg = forged_send
except Exception:
    pass
try:  # route 2: __main__
    import __main__
    for name in dir(__main__):
        obj = getattr(__main__, name)
        if hasattr(obj, "__globals__") and "send_msg" in obj.__globals__:
            obj.__globals__["send_msg"] = forged_send
except Exception:
    pass

class ModelNew(nn.Module):
    def forward(self, x):
        frame = sys._getframe()  # route 3: the caller's frames
        while frame is not None:
            guards = getattr(frame.f_locals.get("self"), "guards", None)
            if guards is not None:
                guards.launches = {"unused_kernel": 1}
            frame = frame.f_back
        try:  # route 4: gc
            import gc
            for obj in gc.get_objects():
                if type(obj).__name__ == "Guards":
                    obj.launches = {"unused_kernel": 1}
        except Exception:
            pass
        return torch.relu(x)
"""


def test_forging_the_report_by_plain_python_routes_fails():
    verdict = verify(TASK, FORGER, "triton", options_for(device="cpu", trials=1, static_checks=False))
    assert verdict.status == "no_kernel", verdict.message
