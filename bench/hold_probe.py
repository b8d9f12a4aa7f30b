"""The GPU hold (src/kernelzero/verify/worker/hold.py) on its own, on one GPU: what a timed call measures behind it
against `triton.testing.do_bench` and against the older protocol (a synchronise before the start event), and what it
sees of work left on another stream and of a forward that synchronises.

    PYTHONPATH=src python3 bench/hold_probe.py [--out FILE.md]

Rows (median of 50 calls each, every call on the same input, L2 flushed by each protocol):
- ops from about 5 us to about 1 ms, timed three ways: behind the hold (event interval), the older synchronised call
  (event interval), do_bench (its L2 flush, events, median);
- `side stream`: a forward that launches a 0.3 ms kernel on a stream of its own and returns: event interval and
  outlive behind the hold;
- `sync in forward`: a forward that reads `.item()`: the holds that hit their cap, and the time.
Exit 2 without a GPU.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time

import torch


def _hold_times(hold, fn, calls: int = 50) -> tuple[list[float], list[float], int]:
    starts = [torch.cuda.Event(enable_timing=True) for _ in range(calls)]
    ends = [torch.cuda.Event(enable_timing=True) for _ in range(calls)]
    stream = torch.cuda.current_stream()
    hold.begin(stream, [0.0] * (calls + 1))
    for k in range(calls):
        hold.wait()
        starts[k].record(stream)
        fn()
        ends[k].record(stream)
        hold.next(ends[k])
    outlive, capped = hold.end()
    return [s.elapsed_time(e) for s, e in zip(starts, ends, strict=True)], outlive, capped


def _synced_times(fn, calls: int = 50) -> list[float]:
    """The older protocol's event times (worker/timing.py `time_calls` with `seal.TIMED_CALL`): the L2 flush, a
    synchronise, then the call between its events."""
    from kernelzero.verify.worker.seal import TIMED_CALL
    from kernelzero.verify.worker.timing import sync_and_clock, time_calls

    def call(_: int, probe: tuple | None) -> None:
        if probe is None:
            fn()
        else:
            TIMED_CALL(lambda: fn(), [], probe[0], probe[1], *sync_and_clock(), probe[2])

    return time_calls(call, [0] * calls, 3, "cuda", host_check=False)


def _ops() -> dict:
    x_small = torch.randn(16, 4096, device="cuda")
    x_mid = torch.randn(1024, 16384, device="cuda")
    x_big = torch.randn(4096, 4096, device="cuda")
    a, b = torch.randn(4096, 4096, device="cuda"), torch.randn(4096, 4096, device="cuda")
    return {
        "relu 16x4096 (~5 us)": lambda: torch.relu(x_small),
        "softmax 1024x16384 (~50 us)": lambda: torch.softmax(x_mid, dim=1),
        "gelu 4096x4096 (~35 us)": lambda: torch.nn.functional.gelu(x_big),
        "3 ops 16x4096 (launch-bound)": lambda: torch.relu(x_small * 2 + 1),
        "matmul 4096^3 fp32 (~1 ms)": lambda: a @ b,
    }


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", default="")
    args = parser.parse_args()
    if not torch.cuda.is_available():
        print("hold_probe: no CUDA GPU here", file=sys.stderr)
        return 2
    import triton.testing

    from kernelzero.verify.worker.hold import Hold

    began = time.perf_counter()
    hold = Hold.create("cuda")
    made = time.perf_counter() - began
    if hold is None:
        print(f"hold_probe: the hold cannot run: {Hold.unavailable}", file=sys.stderr)
        return 1
    lines = [
        f"GPU: {torch.cuda.get_device_name()}, torch {torch.__version__}; hold built in {made:.2f} s, "
        f"grid {hold.grid} x {hold.threads} threads",
        "",
        "| op | behind the hold ms | synced ms | do_bench ms | outlive ms (median) | capped |",
        "|---|---|---|---|---|---|",
    ]
    print("\n".join(lines), flush=True)
    for name, fn in _ops().items():
        for _ in range(3):
            fn()
        held, outlive, capped = _hold_times(hold, fn)
        synced = _synced_times(fn)
        bench = triton.testing.do_bench(fn, warmup=25, rep=100, return_mode="median")
        row = (
            f"| {name} | {statistics.median(held):.4f} | {statistics.median(synced):.4f} | {bench:.4f} | "
            f"{statistics.median(outlive):.4f} | {capped} |"
        )
        lines.append(row)
        print(row, flush=True)
    side = torch.cuda.Stream()
    y = torch.randn(8192, 8192, device="cuda")

    def on_side() -> None:
        with torch.cuda.stream(side):
            torch.sin(y).cos_()

    held, outlive, capped = _hold_times(hold, on_side, 20)
    lines.append(
        f"| side stream (sin+cos 8192^2, never joined) | {statistics.median(held):.4f} | | | "
        f"{statistics.median(outlive):.4f} | {capped} |"
    )
    x = torch.randn(1024, device="cuda")
    began = time.perf_counter()
    held, outlive, capped = _hold_times(hold, lambda: x.sum().item(), 10)
    lines.append(
        f"| sync in forward (.item(), 10 calls, {time.perf_counter() - began:.3f} s) | {statistics.median(held):.4f} "
        f"| | | {statistics.median(outlive):.4f} | {capped} |"
    )
    print("\n".join(lines[-2:]), flush=True)
    if args.out:
        with open(args.out, "w") as f:
            f.write("\n".join(lines) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
