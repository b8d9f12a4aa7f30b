"""The timed path behind the GPU hold (worker/hold.py, worker/timed_block.py, seal.TIMED_BATCH) and the judge's
side of it (judge/timing_checks.py `next_hold_us`, `same_hold`), on the CPU.

What runs here: the block's order of calls (warm-ups, timed calls, audits slipped in), one hand-off for the whole
block, no dispatch mode on timed calls and the op recorder on audits alone, the events around the forward alone with
the hold waited for before and released after, the reply's times (event, or event plus outlive), and the hold kernel
compiled for sm_90 within the registers that let two 1024-thread blocks share an SM. What needs the GPU (the hold
keeping other streams off the SMs, the times it gives) is in the GPU gate and the timing panel (bench/timing_panel.py).
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest
import torch
from deferring import Deferring

from kernelzero.verify.judge.timing_checks import HOLD_STEPS_US, next_hold_us, same_hold
from kernelzero.verify.worker import hold
from kernelzero.verify.worker.seal import TIMED_BATCH
from kernelzero.verify.worker.timed_block import _IDLE, AUDIT_HOLD_US, plan

SRC = Path(__file__).resolve().parents[2] / "src"
DEPTHS = (torch._C._len_torch_function_stack, torch._C._len_torch_dispatch_stack)


def test_the_block_runs_warm_ups_then_timed_calls_with_each_audit_before_its_position():
    # 2 warm-ups (sets 0, 1), timed positions 2..5 (sets 2..5), audits (sets 6, 7) before positions 3 and 5
    assert plan(8, 2, [3, 5]) == [
        (0, "warm"),
        (1, "warm"),
        (2, "timed"),
        (6, "audit"),
        (3, "timed"),
        (4, "timed"),
        (7, "audit"),
        (5, "timed"),
    ]
    assert plan(3, 1, []) == [(0, "warm"), (1, "timed"), (2, "timed")]


def test_the_batch_reaches_nothing_of_the_worker():
    assert TIMED_BATCH.__globals__ == {} and TIMED_BATCH.__closure__ is None
    assert TIMED_BATCH.__code__.co_filename == "<kernelzero-runner>"


def test_the_hold_grows_by_steps_to_cover_the_longer_launch_path_and_never_shrinks():
    assert next_hold_us(0.0, [{"launch_ms": 0.03}, {"launch_ms": 0.02}]) == 100.0  # 1.25 x 30 us
    assert next_hold_us(0.0, [{"launch_ms": 0.2}, {"launch_ms": 0.01}]) == 400.0  # 250 us -> the 400 us step
    assert next_hold_us(400.0, [{"launch_ms": 0.01}, {"launch_ms": 0.01}]) == 400.0
    assert next_hold_us(0.0, [{"launch_ms": 50.0}, {}]) == HOLD_STEPS_US[-1]  # a forged path: the last step
    assert next_hold_us(0.0, [{"launch_ms": float("inf")}, {"launch_ms": None}]) == HOLD_STEPS_US[-1]
    assert next_hold_us(0.0, [{}, {}]) == 0.0


def test_only_blocks_at_the_last_hold_length_are_compared():
    sides = {
        "ref": {"overheads": [0.5, 0.1, 0.11], "holds": [0.0, 200.0, 200.0]},
        "cand": {"overheads": [0.9, 0.12, 0.1], "holds": [0.0, 200.0, 200.0]},
    }
    same_hold(sides)
    assert sides["ref"]["overheads"] == [0.1, 0.11] and sides["cand"]["overheads"] == [0.12, 0.1]
    # one block at the last length: no noise estimate from it alone, so every block stays
    one = {
        "ref": {"overheads": [0.5, 0.1], "holds": [0.0, 200.0]},
        "cand": {"overheads": [0.9, 0.1], "holds": [0.0, 200.0]},
    }
    same_hold(one)
    assert one["ref"]["overheads"] == [0.5, 0.1]


@pytest.mark.skipif(shutil.which("nvcc") is None, reason="needs nvcc")
def test_the_hold_kernel_fits_two_1024_thread_blocks_on_every_hopper_sm(tmp_path):
    """Two blocks of 1024 threads per SM take all 2048 thread slots only if both fit the 64K-register file at once:
    at most 32 registers a thread (the kernel's `__launch_bounds__`). Compiled with nvcc for sm_90, as NVRTC does."""
    source = hold.kernel_source(1024, 2)
    (tmp_path / "hold.cu").write_text(source)
    out = subprocess.run(
        ["nvcc", "-arch=sm_90", "-cubin", "--resource-usage", "-o", str(tmp_path / "hold.cubin"), "hold.cu"],
        capture_output=True,
        text=True,
        cwd=tmp_path,
        timeout=300,
    )
    assert out.returncode == 0, out.stderr[-2000:]
    registers = int(re.search(r"Used (\d+) registers", out.stdout + out.stderr).group(1))
    assert registers <= 32, out.stdout + out.stderr
    assert "0 bytes spill" in out.stdout + out.stderr


class _Props:
    def __init__(self, per_sm: int):
        self.max_threads_per_multi_processor = per_sm


def test_the_grid_shape_fills_each_sm_thread_slots_exactly():
    assert hold._shape(_Props(2048)) == (1024, 2)  # Hopper, Ampere A100
    assert hold._shape(_Props(1536)) == (768, 2)  # Ampere GA10x, Ada
    assert hold._shape(_Props(1024)) == (1024, 1)  # Turing


USER = """
import threading, time
import torch
from torch.utils._python_dispatch import _get_current_dispatch_mode_stack

LOG = []

class Spy(torch.nn.Module):
    def forward(self, x):
        LOG.append({"value": float(x[0]), "modes": len(_get_current_dispatch_mode_stack()),
                    "runner": threading.current_thread() is not threading.main_thread(),
                    "grad": torch.is_grad_enabled()})
        time.sleep(0.002)
        return x + 1
"""

DRIVER = """
import json, os, time
import torch
from kernelzero.verify.worker import timed_block
from kernelzero.verify.worker.guards import Guards
from kernelzero.verify.worker.worker import Worker
import user

order = []

class HostEvent:
    def __init__(self, enable_timing=False):
        self.at = None
    def record(self, stream=None):
        self.at = time.perf_counter()
        order.append("record")
    def elapsed_time(self, end):
        return (end.at - self.at) * 1e3

class HostHold:
    def begin(self, stream, mins):
        self.mins = list(mins)
        order.append("begin")
    def wait(self):
        order.append("wait")
    def settle(self, end):
        assert isinstance(end, HostEvent)
        order.append("settle")
    def arm(self):
        order.append("arm")
    def end(self):
        order.append("end")
        return [0.5] * (len(self.mins) - 1), 1

worker = Worker(out_fd=-1)
worker.guards = Guards(warm=False)
worker.model = user.Spy()
sets = [[torch.full((4,), float(i))] for i in range(5)]  # warm-up 0, timed 1-3, audit 4 before position 2
req = {"warmup": 1, "host_check": True, "audit": [2], "hold_us": 100.0}
cpu, cpu_t = timed_block.time_block(worker, req, sets, None)
cpu_log = list(user.LOG)
user.LOG.clear()

class Forward(user.Spy):
    def forward(self, x):
        order.append("forward")
        return super().forward(x)

worker.model = Forward()
torch.cuda.Event = HostEvent
torch.cuda.current_stream = lambda: None
timed_block._elapsed = HostEvent.elapsed_time
stand_in = HostHold()
gpu, _ = timed_block.time_block(worker, req, sets, stand_in)
events_only, _ = timed_block.time_block(worker, {**req, "host_check": False}, sets, HostHold())
print(json.dumps({"cpu": cpu, "cpu_out": [t.tolist() for t in cpu_t], "cpu_log": cpu_log, "gpu": gpu,
                  "events_only": events_only, "order": order, "mins": stand_in.mins}))
"""


def test_a_block_is_one_hand_off_with_the_recorder_on_audits_alone_and_events_around_the_forward_alone(tmp_path):
    (tmp_path / "user.py").write_text(textwrap.dedent(USER))
    (tmp_path / "driver.py").write_text(textwrap.dedent(DRIVER))
    out = subprocess.run(
        [sys.executable, "driver.py"],
        capture_output=True,
        text=True,
        cwd=tmp_path,
        env={**os.environ, "PYTHONPATH": f"{SRC}:{tmp_path}"},
        timeout=300,
    )
    assert out.returncode == 0, out.stderr[-3000:]
    got = json.loads(out.stdout.strip().splitlines()[-1])
    cpu, log = got["cpu"], got["cpu_log"]
    # CPU: every call ran, in the block's order, on the runner thread without grad; only the audit had a mode
    assert [c["value"] for c in log] == [0.0, 1.0, 4.0, 2.0, 3.0]
    assert [c["modes"] for c in log] == [0, 0, 1, 0, 0]
    assert all(c["runner"] and not c["grad"] for c in log)
    assert cpu["ok"] and cpu["times_ms"] == [] and cpu["protocol"] == "cpu" and cpu["n_out"] == 1
    assert got["cpu_out"] == [[v + 1.0] * 4 for v in (1.0, 2.0, 3.0, 4.0)]  # timed calls' outputs, then the audit's
    assert cpu["calls_without_kernel"] == 4  # nothing launched a kernel of the candidate's (no backend here)
    # the GPU branch with stand-ins: per call the hold is waited for, the events bracket the forward, the hold goes on
    per_call = ["wait", "record", "forward", "record", "settle", "arm"]
    assert got["order"][: 2 + 5 * 6] == ["begin", *per_call * 5, "end"]
    assert got["mins"] == [100.0, 100.0, AUDIT_HOLD_US, 100.0, 100.0, 0.0]  # audits' hold at least AUDIT_HOLD_US
    gpu = got["gpu"]
    assert gpu["protocol"] == "hold" and gpu["capped"] == 1 and len(gpu["times_ms"]) == 3
    assert all(2.0 <= t < 60.0 for t in gpu["times_ms"])  # the forward's 2 ms sleep, and the outlive's 0.5 ms
    assert gpu["times_ms"] == gpu["held_ms"]  # host_check: the outlive counts
    assert gpu["launch_ms"] >= 2.0
    # every call's numbers in the order they ran, for the record (judge/block_trace.py)
    trace = gpu["calls_trace"]
    assert trace["kinds"] == ["warm", "timed", "audit", "timed", "timed"]
    assert len(trace["events_ms"]) == len(trace["spent_ms"]) == 5 and trace["outlive_ms"] == [0.5]
    assert [trace["events_ms"][k] for k in (1, 3, 4)] == gpu["events_ms"]
    assert cpu["calls_trace"]["kinds"] == trace["kinds"] and cpu["calls_trace"]["events_ms"] == []
    begin_ms, calls_ms, end_ms = trace["phases_ms"]  # the worker's clock: hold begin, the calls, hold end
    assert calls_ms >= 5 * 2.0 and begin_ms >= 0.0 and end_ms >= 0.0  # five forwards of a 2 ms sleep each
    assert cpu["calls_trace"]["phases_ms"][0] == 0.0 and cpu["calls_trace"]["phases_ms"][1] > 0.0
    events = got["events_only"]
    assert [round(h - t, 6) for h, t in zip(events["held_ms"], events["times_ms"], strict=True)] == [0.5] * 3


def test_a_runs_outlive_is_its_median_gap_beyond_its_empty_calls():
    """Host wake-up tails on a minority of calls add nothing; work left behind by every call counts by its length."""
    from kernelzero.verify.worker.hold import outlive_ms

    base = 5e-6
    assert outlive_ms([5e-6] * 7 + [40e-6] * 3, base) == 0.0
    assert abs(outlive_ms([base + 230e-6 + j * 1e-6 for j in range(10)], base) - 0.235) < 1e-9
    assert outlive_ms([2e-6] * 5, base) == 0.0
    assert outlive_ms([], base) == 0.0


def test_a_calls_launch_path_ends_at_the_holds_release():
    """The launch path a block reports (`launch_ms`, which sizes the next block's hold) is the host's time from the
    hold's start to its release: the wait for the call's GPU work after the release is not in it (it was, and each
    block's hold lengthened the next one's to the last step on the H200)."""
    import time

    class SlowRelease:  # the GPU hold's stand-in: its release waits 30 ms for the call's work
        def wait(self) -> None:
            pass

        def settle(self, end=None) -> None:
            time.sleep(0.03)

        def arm(self) -> None:
            pass

    class Event:
        def record(self, stream=None) -> None:
            pass

    spent, marks, snaps = [], [], []
    calls = [((1.0,), ())] * 3
    values = TIMED_BATCH(
        lambda x: x * 2, calls, [Event()] * 3, [Event()] * 3, None, SlowRelease(), time.perf_counter, spent, marks,
        lambda: len(marks), snaps, torch.Tensor, torch.Tensor.clone, DEPTHS,
    )  # fmt: skip
    assert values == [2.0] * 3 and marks == [0, 1, 2]  # not tensors: kept for the reply's words
    assert snaps == [[None]] * 3  # and nothing copied
    assert len(spent) == 3 and max(spent) < 0.01


def test_a_blocks_outputs_are_copied_as_each_call_left_them():
    sets = [torch.rand(8) + 0.5 for _ in range(4)]  # positive: a deferred call's empty copy never equals its ReLU
    calls = [((x,), ()) for x in sets]
    snaps: list = []
    values = TIMED_BATCH(
        Deferring(), calls, [_IDLE] * 4, [_IDLE] * 4, None, _IDLE, time.perf_counter, [], [], lambda: 0, snaps,
        torch.Tensor, torch.Tensor.clone, DEPTHS,
    )  # fmt: skip
    assert values == [None] * 4  # every output copied: the raw ones are not held
    # the deferred calls' outputs were right by the block's end, but the copies the judge checks show them empty
    assert [torch.equal(c[0], torch.relu(x)) for c, x in zip(snaps, sets, strict=True)] == [False, True, False, True]


def test_each_calls_outputs_are_copied_while_no_hold_runs():
    """The copies are taken between the hold's `settle` (the call's work done) and `arm` (the next hold queued): a
    copy's allocation may wait for the device, which an armed hold (waiting for the host) would stall to its cap."""
    log: list = []

    class Hold:
        armed = True

        def wait(self) -> None:
            log.append("wait")

        def settle(self, end=None) -> None:
            self.armed = False
            log.append("settle")

        def arm(self) -> None:
            self.armed = True
            log.append("arm")

    hold = Hold()

    def copy(t):
        log.append("copy" if not hold.armed else "copy while armed")
        return t.clone()

    calls = [((torch.randn(4),), ())] * 3
    TIMED_BATCH(
        torch.relu, calls, [_IDLE] * 3, [_IDLE] * 3, None, hold, time.perf_counter, [], [], lambda: 0, [],
        torch.Tensor, copy, DEPTHS,
    )  # fmt: skip
    assert log == ["wait", "settle", "copy", "arm"] * 3
