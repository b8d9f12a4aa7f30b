"""The timed path (worker/timing.py `time_calls`, worker/seal.py `TIMED_CALL`, `Worker._forward`): a timed call's
events and host clock bracket the candidate's forward on the runner thread, with no dispatch mode, function mode or
guard of the worker active and no frame of the worker reachable from the forward. The device is stood in for on the
CPU (torch.cuda's Event and synchronise replaced by host clocks) so the GPU branch's logic runs in CI; its fidelity
on a GPU is the timing panel's (bench/timing_panel.py)."""

from __future__ import annotations

import sys
import threading
import time

import torch
from torch.utils._python_dispatch import _get_current_dispatch_mode_stack

from kernelzero.verify.sandbox.box import source_root
from kernelzero.verify.worker import timing
from kernelzero.verify.worker.seal import TIMED_CALL
from kernelzero.verify.worker.worker import Worker

SOURCE_ROOT = str(source_root() / "kernelzero")  # kernelzero's own files


class HostEvent:
    """torch.cuda.Event on the host clock: `record` notes the time, `elapsed_time` gives ms."""

    recorded_on: list[bool] = []  # per record: on a thread other than the main one (the runner's)

    def __init__(self, enable_timing: bool = False):
        self.at = None

    def record(self) -> None:
        self.at = time.perf_counter()
        HostEvent.recorded_on.append(threading.current_thread() is not threading.main_thread())

    def elapsed_time(self, end: HostEvent) -> float:
        return (end.at - self.at) * 1e3


class Spy(torch.nn.Module):
    """Notes where its forward runs, then takes `ms` of host time."""

    def __init__(self, ms: float):
        super().__init__()
        self.ms, self.seen = ms, []

    def forward(self, x):
        frame, files = sys._getframe(1), []
        while frame is not None:
            files.append(frame.f_code.co_filename)
            frame = frame.f_back
        self.seen.append(
            {
                "runner_thread": threading.current_thread() is not threading.main_thread(),
                "dispatch_modes": list(_get_current_dispatch_mode_stack()),
                "function_modes": list(torch.overrides._get_current_function_mode_stack()),
                "grad": torch.is_grad_enabled(),
                "files": files,
            }
        )
        time.sleep(self.ms / 1e3)
        return x + 1


def _on_host(monkeypatch) -> None:
    monkeypatch.setattr(torch.cuda, "Event", HostEvent)
    monkeypatch.setattr(timing, "_elapsed", HostEvent.elapsed_time)
    monkeypatch.setattr(timing, "_sync", lambda: None)
    monkeypatch.setattr(timing, "_flush_buffer", lambda device: torch.empty(16, dtype=torch.int32))


def test_a_timed_call_runs_alone_on_the_runner_thread_and_is_timed_there(monkeypatch):
    _on_host(monkeypatch)
    worker = Worker(out_fd=-1)
    worker.model = Spy(ms=3.0)
    inputs = [torch.ones(4)]
    times = timing.time_calls(lambda key, probe: worker._forward(inputs, (), probe), [0, 0, 0], 1, "cuda", True)
    assert len(times) == 3 and all(3.0 <= t < 60.0 for t in times), times
    assert len(worker.model.seen) == 4  # one warm-up, three timed
    # the timed calls' events were recorded on the runner thread, around the forward alone (the overhead's empty
    # regions, measured on this thread, come first)
    assert HostEvent.recorded_on[-6:] == [True] * 6, HostEvent.recorded_on
    for seen in worker.model.seen:
        assert seen["runner_thread"] and not seen["grad"]
        assert seen["dispatch_modes"] == [] and seen["function_modes"] == []
        # outward from the forward: the module's call machinery (torch), the runner's own frames, the thread's start;
        # nothing of kernelzero's worker
        assert not [f for f in seen["files"] if f.startswith(SOURCE_ROOT)], seen["files"]
        assert "<kernelzero-runner>" in seen["files"]


def test_the_timed_call_reaches_nothing_of_the_worker():
    assert TIMED_CALL.__globals__ == {} and TIMED_CALL.__closure__ is None
    assert TIMED_CALL.__code__.co_filename == "<kernelzero-runner>"  # the watch never counts it as the candidate's


def test_a_timed_call_that_reports_no_host_time_is_an_error(monkeypatch):
    _on_host(monkeypatch)

    def silent(key, probe):  # never runs the timed call
        return None

    try:
        timing.time_calls(silent, [0], 0, "cuda", True)
    except RuntimeError as exc:
        assert "without its host time" in str(exc)
    else:
        raise AssertionError("a call without its host time was accepted")


def test_every_timed_call_also_reports_its_host_bounded_time(monkeypatch):
    """`held` gets each timed call's host interval minus the empty region's overhead, whatever `host_check`
    says, so the judge can compare it with the event time (judge/timing_checks.py `escaped_work`)."""
    _on_host(monkeypatch)
    worker = Worker(out_fd=-1)
    worker.model = Spy(ms=3.0)
    inputs = [torch.ones(4)]
    held: list[float] = []
    times = timing.time_calls(
        lambda key, probe: worker._forward(inputs, (), probe), [0, 0], 1, "cuda", False, held=held
    )
    assert len(held) == len(times) == 2 and all(h >= t for h, t in zip(held, times, strict=True)), (held, times)
    assert all(3.0 <= h < 60.0 for h in held), held
