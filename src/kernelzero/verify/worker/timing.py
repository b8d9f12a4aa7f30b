"""Device timing of one function, shared by the candidate worker and the judge's reference timing.

Each timed call: synchronise the device, flush the L2 cache (write a buffer larger than any L2:
256 MB), record a start event, call, record an end event, synchronise the whole device (so work a
candidate hides on other streams lands inside the measured wall time of the call and is waited
for before the next one). The reported time of a call is the larger of the event interval and the
host-measured interval minus the measured overhead of an empty region: work on another stream
that the events on the current stream miss still shows in the host interval. Warm-up calls come
first and are not timed. Calls rotate over several input sets in the order the judge chose.
"""

from __future__ import annotations

import statistics
import time
from collections.abc import Callable

import torch

from kernelzero.types import Timing

FLUSH_BYTES = 256 * 1024 * 1024
_clock = time.perf_counter  # captured at import, before the worker wraps `time`'s clocks (worker/watch.py)
_elapsed = torch.cuda.Event.elapsed_time  # the same for CUDA event intervals


def _host_overhead_ms() -> float:
    """Host time of an empty timed region (sync + events + sync), the floor of the host interval."""
    samples = []
    for _ in range(5):
        torch.cuda.synchronize()
        t0 = _clock()
        torch.cuda.synchronize()
        samples.append((_clock() - t0) * 1e3)
    return min(samples)


def time_calls(
    call: Callable[[int], None],
    order: list[int],
    warmup: int,
    device: str,
    host_check: bool = True,
    prepare: Callable[[int], None] | None = None,
    warmup_keys: list[int] | None = None,
) -> list[float]:
    """Per-call times in ms for `call(i)` over `order`; [] on CPU (no meaningful device time).

    `prepare(i)`, when given, runs before each call outside the timed region (new inputs);
    warm-up calls use `warmup_keys` (default: the first keys of `order`). `host_check=False`
    reports the event interval alone (KernelBench's protocol).
    """
    prepare = prepare or (lambda key: None)
    keys = warmup_keys if warmup_keys is not None else [order[k % len(order)] for k in range(warmup)]
    if not device.startswith("cuda"):
        for i in keys or order[:1]:
            prepare(i)
            call(i)
        return []
    flush = torch.empty(FLUSH_BYTES // 4, dtype=torch.int32, device=device)
    for i in keys:
        prepare(i)
        call(i)
    torch.cuda.synchronize()
    overhead = _host_overhead_ms()
    times = []
    for i in order:
        prepare(i)
        flush.zero_()
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        torch.cuda.synchronize()
        t0 = _clock()
        start.record()
        call(i)
        end.record()
        torch.cuda.synchronize()
        host = (_clock() - t0) * 1e3 - overhead
        event = _elapsed(start, end)
        times.append(max(event, host) if host_check else event)
    return times


def summarise(times_ms: list[float]) -> Timing | None:
    """Median, mean and 10th/90th percentiles of per-call times."""
    if not times_ms:
        return None
    ordered = sorted(times_ms)
    pick = lambda q: ordered[min(len(ordered) - 1, int(q * (len(ordered) - 1) + 0.5))]  # noqa: E731
    return Timing(
        median_ms=statistics.median(ordered),
        mean_ms=statistics.fmean(ordered),
        p10_ms=pick(0.1),
        p90_ms=pick(0.9),
        calls=len(ordered),
    )
