"""Device timing of one function, shared by the candidate worker and the judge's reference timing.

Each timed call: flush the L2 cache (write a buffer larger than any L2: 256 MB), then, on the thread that runs the
forward (`seal.TIMED_CALL`: the candidate's runner thread): synchronise the device, read the host clock, record a
start event, call, record an end event, synchronise the whole device (so work a candidate hides on other streams
lands inside the measured wall time of the call and is waited for before the next one), read the host clock. The
hand-off between the worker's thread and the runner's, the modes' entry and the worker's bookkeeping are outside
both intervals (they were inside until 2026-12-02: about 0.13 ms a call on the H200, the whole time of a small
kernel). The reported time of a call is the larger of the event interval and the host interval minus the measured
overhead of an empty region (sync, events, sync): work on another stream that the events on the current stream
miss still shows in the host interval. Warm-up calls come first and are not timed. Calls rotate over several input
sets in the order the judge chose.

`call(key, probe)` runs one call: `probe` is None for a warm-up, else `(start, end, host)`, which the call passes to
`seal.TIMED_CALL` (it records the events and appends the host seconds to `host`).
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
_sync = torch.cuda.synchronize  # and the device-wide synchronise the timed call runs


def sync_and_clock() -> tuple[Callable[[], None], Callable[[], float]]:
    """The synchronise and the clock a timed call uses (captured at import: a candidate's patch reaches neither)."""
    return _sync, _clock


def _flush_buffer(device: str) -> torch.Tensor:
    """What each timed call writes first to flush the L2 cache."""
    return torch.empty(FLUSH_BYTES // 4, dtype=torch.int32, device=device)


def _host_overhead_ms() -> float:
    """Host time of an empty timed region (sync, events, sync), the floor of the host interval."""
    samples = []
    for _ in range(5):
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        _sync()
        t0 = _clock()
        start.record()
        end.record()
        _sync()
        samples.append((_clock() - t0) * 1e3)
    return min(samples)


def time_calls(
    call: Callable[[int, tuple | None], None],
    order: list[int],
    warmup: int,
    device: str,
    host_check: bool = True,
    prepare: Callable[[int], None] | None = None,
    warmup_keys: list[int] | None = None,
    held: list[float] | None = None,
) -> list[float]:
    """Per-call times in ms for `call(i)` over `order`; [] on CPU (no meaningful device time).

    `prepare(i)`, when given, runs before each call outside the timed region (new inputs);
    warm-up calls use `warmup_keys` (default: the first keys of `order`). `host_check=False`
    reports the event interval alone (KernelBench's protocol). `held`, when given, gets each timed call's
    host-bounded time (the larger of the event interval and the host interval minus the empty region's overhead)
    whatever `host_check` says: the judge compares the two series to find work that outlives the timed stream.
    """
    prepare = prepare or (lambda key: None)
    keys = warmup_keys if warmup_keys is not None else [order[k % len(order)] for k in range(warmup)]
    if not device.startswith("cuda"):
        for i in keys or order[:1]:
            prepare(i)
            call(i, None)
        return []
    flush = _flush_buffer(device)
    for i in keys:
        prepare(i)
        call(i, None)
    _sync()
    overhead = _host_overhead_ms()
    times = []
    for i in order:
        prepare(i)
        flush.zero_()
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        host: list[float] = []
        call(i, (start, end, host))
        if not host:
            raise RuntimeError("a timed call came back without its host time")
        event = _elapsed(start, end)
        bounded = max(event, host[-1] * 1e3 - overhead)
        times.append(bounded if host_check else event)
        if held is not None:
            held.append(bounded)
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
