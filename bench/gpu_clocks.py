"""The GPU's SM clock and power draw, sampled from NVML on a thread while a piece of work runs: a record for the timing
panel (bench/timing_panel_gpu.py), to tell a kernel that is slower under do_bench's sustained 200 ms of calls (the
GPU clocked down at its power limit) from one the harness measures differently. The panel's Triton GEMM at 128x128
tiles read 6.8-10.6% faster in kernelzero's bursts of calls than under do_bench on the H100 (2026-12-05), while a
GEMM at 64x64 tiles agreed within 1%: this says whether the clock differed.

`Clocks.during(side, fn)` runs `fn` and keeps the samples taken meanwhile under `side`; `words()` gives each side's
median SM clock (MHz) and power (W). Without NVML (`pynvml`, from nvidia-ml-py, which the GPU image holds) or a GPU,
nothing is sampled and `words()` says so.
"""

from __future__ import annotations

import statistics
import threading
import time
from collections.abc import Callable
from typing import Any

INTERVAL_S = 0.005


def _nvml_handle(index: int = 0) -> Any:
    """NVML's handle of GPU `index`, or None where NVML cannot be had."""
    try:
        import pynvml

        pynvml.nvmlInit()
        return pynvml.nvmlDeviceGetHandleByIndex(index)
    except Exception:  # no pynvml, no driver, no GPU: no record
        return None


class Clocks:
    """Samples per side (see the module docstring)."""

    def __init__(self, index: int = 0) -> None:
        self.handle = _nvml_handle(index)
        self.samples: dict[str, list[tuple[float, float]]] = {}

    def _sample(self) -> tuple[float, float]:
        import pynvml

        mhz = pynvml.nvmlDeviceGetClockInfo(self.handle, pynvml.NVML_CLOCK_SM)
        return float(mhz), pynvml.nvmlDeviceGetPowerUsage(self.handle) / 1e3

    def during(self, side: str, fn: Callable[[], Any]) -> Any:
        """`fn()`'s result; the samples taken while it ran go to `side`."""
        if self.handle is None:
            return fn()
        stop, got = threading.Event(), self.samples.setdefault(side, [])

        def loop() -> None:
            while not stop.is_set():
                try:
                    got.append(self._sample())
                except Exception:  # a failed read is a missing sample, not a failed case
                    pass
                time.sleep(INTERVAL_S)

        thread = threading.Thread(target=loop, daemon=True)
        thread.start()
        try:
            return fn()
        finally:
            stop.set()
            thread.join()

    def medians(self, side: str) -> tuple[float, float] | None:
        """(median SM MHz, median W) of `side`'s samples, or None without any."""
        got = self.samples.get(side) or []
        if not got:
            return None
        return statistics.median(m for m, _ in got), statistics.median(w for _, w in got)

    def words(self) -> str:
        """Each side's medians, for the panel's output."""
        if self.handle is None:
            return "no clock record (NVML not available)"
        parts = []
        for side in sorted(self.samples):
            got = self.medians(side)
            parts.append(f"{side} {got[0]:.0f} MHz {got[1]:.0f} W" if got else f"{side} no samples")
        return "under do_bench: " + ", ".join(parts)
