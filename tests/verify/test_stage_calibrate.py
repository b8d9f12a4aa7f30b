"""The hold's calibration in a timing block's stage round trip (`KZ_STAGE_CALIBRATE`, judge/reference.py
`stage_calibrate`; worker/timed_block.py `stage_hold`; worker/hold.py `Hold.calibrate`): the judge asks for it in the
stage command only when the variable says so, the worker calibrates only where a hold runs and for the first call's
hold length, and on a GPU a run calibrated ahead makes no empty calls of its own, while a run not calibrated ahead,
or ahead for another length, calibrates as before."""

from __future__ import annotations

from types import SimpleNamespace

import pytest
import torch

from kernelzero.verify.judge.reference import STAGE_CALIBRATE_ENV, stage_calibrate, staged_time
from kernelzero.verify.worker.timed_block import AUDIT_HOLD_US, hold_mins, plan, stage_hold

GPU = torch.cuda.is_available()


class Wire:
    """The worker's end of the judge's three round trips: records each command, answers each with ok."""

    def __init__(self) -> None:
        self.sent: list[dict] = []

    def send(self, message: dict) -> None:
        self.sent.append(message)

    def receive(self, timeout_s: float, what: str):
        return {"ok": True, "times_ms": [1.0]}, []


def test_the_stage_command_asks_for_the_calibration_only_when_the_variable_is_one(monkeypatch):
    monkeypatch.delenv(STAGE_CALIBRATE_ENV, raising=False)
    assert stage_calibrate() is False  # off by default until the gate has run it
    wire = Wire()
    staged_time(wire, {"sets": [], "warmup": 0}, 5.0, "timing")
    assert [m["cmd"] for m in wire.sent] == ["time_stage", "time_run", "time_fetch"]
    assert wire.sent[0]["calibrate"] is False
    monkeypatch.setenv(STAGE_CALIBRATE_ENV, "1")
    wire = Wire()
    staged_time(wire, {"sets": [], "warmup": 0}, 5.0, "timing")
    assert wire.sent[0]["calibrate"] is True and "calibrate" not in wire.sent[1]
    monkeypatch.setenv(STAGE_CALIBRATE_ENV, "0")
    assert stage_calibrate() is False
    monkeypatch.setenv(STAGE_CALIBRATE_ENV, "yes")
    with pytest.raises(ValueError, match=STAGE_CALIBRATE_ENV):
        staged_time(Wire(), {"sets": []}, 5.0, "timing")


def test_the_first_calls_hold_length_is_the_one_the_block_will_use():
    req = {"hold_us": 200.0, "warmup": 0, "audit": [0]}
    order = plan(3, 0, [0])  # an audit before the first timed call: it runs first
    assert order[0][1] == "audit" and hold_mins(req, order)[0] == AUDIT_HOLD_US
    assert hold_mins({"hold_us": 200.0}, plan(3, 1, [])) == [200.0, 200.0, 200.0]
    assert hold_mins({}, plan(2, 0, [])) == [0.0, 0.0]


class Calls:
    """A hold's stand-in that records what it was asked (the real one needs a GPU: see the GPU test below)."""

    def __init__(self) -> None:
        self.asked: list[float] = []

    def calibrate(self, stream, first_us: float) -> None:
        self.asked.append(first_us)


@pytest.mark.parametrize(
    ("device", "req", "expected"),
    [
        ("cpu", {"calibrate": True, "warmup": 1}, []),  # no hold on the CPU
        ("cuda:0", {"calibrate": False, "warmup": 1}, []),  # not asked
        ("cuda:0", {"calibrate": True, "floor": True, "warmup": 0}, []),  # a floor batch has no hold
        ("cuda:0", {"calibrate": True, "warmup": 1, "hold_us": 100.0}, [100.0]),
        ("cuda:0", {"calibrate": True, "warmup": 0, "audit": [0], "hold_us": 100.0}, [AUDIT_HOLD_US]),
    ],
)
def test_the_worker_calibrates_in_the_stage_only_when_asked_and_where_a_hold_runs(device, req, expected, monkeypatch):
    monkeypatch.setattr(torch.cuda, "current_stream", lambda: None)  # no GPU here: the stand-in takes any stream
    hold = Calls()
    worker = SimpleNamespace(device=device, hold=hold)
    stage_hold(worker, req, 3)
    assert hold.asked == expected


def test_a_worker_without_a_hold_times_the_older_way_after_its_stage():
    worker = SimpleNamespace(device="cuda:0", hold=None)  # Hold.create found none: nothing to calibrate
    stage_hold(worker, {"calibrate": True, "warmup": 1}, 2)
    assert worker.hold is None


@pytest.mark.gpu
@pytest.mark.skipif(not GPU, reason="needs a CUDA GPU")
def test_a_run_calibrated_ahead_makes_no_empty_calls_and_one_not_calibrated_for_its_length_does():
    from kernelzero.verify.worker.hold import CALIBRATE, Hold

    hold = Hold.create("cuda:0")
    assert hold is not None, Hold.unavailable
    stream = torch.cuda.current_stream()

    def one_call() -> None:
        hold.wait()
        end = torch.cuda.Event()
        end.record(stream)
        hold.next(end)
        hold.end()

    hold.calibrate(stream, 100.0)
    gen, base = hold.gen, hold.base_s
    hold.begin(stream, [100.0, 0.0])
    assert hold.gen == gen + 1 and hold.base_s == base  # the first call's hold alone
    one_call()
    gen = hold.gen
    hold.begin(stream, [100.0, 0.0])  # a calibration serves one run: this one calibrates
    # 8 empty calls take 9 holds (the last one armed, then let go empty), then the first call's hold
    assert hold.gen == gen + CALIBRATE + 2
    one_call()
    hold.calibrate(stream, 100.0)
    gen = hold.gen
    hold.begin(stream, [AUDIT_HOLD_US, 0.0])  # calibrated for another length: again
    assert hold.gen == gen + CALIBRATE + 2
    one_call()
