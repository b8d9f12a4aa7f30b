"""bench/gpu_clocks.py: the timing panel's SM clock record. Without NVML it samples nothing and says so; with a
source of samples, each side keeps what was sampled while its work ran, and a failed read is a missing sample."""

from __future__ import annotations

import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "bench"))

import gpu_clocks  # noqa: E402


def test_without_nvml_the_work_runs_and_nothing_is_recorded(monkeypatch):
    monkeypatch.setattr(gpu_clocks, "_nvml_handle", lambda index=0: None)
    clocks = gpu_clocks.Clocks()
    assert clocks.during("cand", lambda: 42) == 42
    assert clocks.medians("cand") is None and clocks.words() == "no clock record (NVML not available)"


def test_each_side_keeps_the_samples_taken_while_it_ran(monkeypatch):
    monkeypatch.setattr(gpu_clocks, "_nvml_handle", lambda index=0: object())
    readings = iter([(1980.0, 500.0), RuntimeError("busy"), (1755.0, 690.0)] + [(1755.0, 700.0)] * 10_000)

    class Fake(gpu_clocks.Clocks):
        def _sample(self):
            got = next(readings)
            if isinstance(got, Exception):
                raise got
            return got

    clocks = Fake()
    assert clocks.during("cand", lambda: time.sleep(0.05) or "done") == "done"
    mhz, watts = clocks.medians("cand")
    assert mhz == 1755.0 and watts >= 690.0 and len(clocks.samples["cand"]) >= 3
    assert clocks.words().startswith("under do_bench: cand 1755 MHz")
