"""Where a timed call's *outlive* comes from (issue 26 item 2): the host's wake-up, or work on the GPU.

Under the default profile every timed call is charged its run's outlive (worker/hold.py: the host's wait from a
call's end event to an idle device, less that of an empty call measured at the run's start). On the H200 at 15b821c
it was 0.3-34 us a call for honest kernels, varying from process to process, while their event intervals agreed with
`triton.testing.do_bench` to 2-3% (bench/verify.md, twelfth session). This probe times one honest elementwise kernel
through the worker's own hold (`Hold`, the same calls as worker/timed_block.py) in fresh processes, with the host idle
and with every core busy, and prints per process: the empty call's gap (`base`), the calls' median gap, the outlive,
the event interval and the gaps' spread. If the outlive follows the host's load and not the kernel, it is the host's
wake-up and belongs in no kernel's time; the judge's clock (judge/timing_checks.py `check_clock`) is then what must
bound work left on other streams.

    PYTHONPATH=src python3 bench/outlive_probe.py --processes 4 --out $OUT/outlive_probe.md     # on a GPU: ~60 s
"""

from __future__ import annotations

import argparse
import json
import multiprocessing
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

CHILD = r"""
import json, statistics, sys, time
import torch
from kernelzero.verify.worker.hold import Hold, outlive_ms
from kernelzero.verify.worker.seal import TIMED_BATCH, CleanRunner

runs, calls, numel = int(sys.argv[1]), int(sys.argv[2]), int(sys.argv[3])
hold_us, path = float(sys.argv[4]), sys.argv[5]
hold = Hold.create("cuda")
if hold is None:
    print(json.dumps({"error": Hold.unavailable})); sys.exit(0)
x = torch.randn(numel, device="cuda")
stream = torch.cuda.current_stream()
model = torch.nn.GELU()
runner = CleanRunner() if path == "runner" else None
for _ in range(3):
    model(x)
torch.cuda.synchronize()
rows = []
for _ in range(runs):
    starts = [torch.cuda.Event(enable_timing=True) for _ in range(calls)]
    ends = [torch.cuda.Event(enable_timing=True) for _ in range(calls)]
    hold.begin(stream, [hold_us] * calls + [0.0])
    if runner is None:  # the calls on this thread, as the hold's own protocol (no copies)
        for k in range(calls):
            hold.wait()
            starts[k].record(stream)
            model(x)
            ends[k].record(stream)
            hold.next(ends[k])
    else:  # the worker's own batch (seal.TIMED_BATCH) on its runner thread, copies of the outputs included
        depths = (torch._C._len_torch_function_stack, torch._C._len_torch_dispatch_stack)
        runner.run(TIMED_BATCH, model, [((x,), ())] * calls, starts, ends, stream, hold, time.perf_counter, [], [],
                   lambda: 0, [], torch.Tensor, torch.Tensor.clone, depths, modes=(torch.no_grad(),))
    gaps = list(hold.outlive)
    out, _ = hold.end()
    events = [s.elapsed_time(e) for s, e in zip(starts, ends)]
    q = statistics.quantiles([g * 1e6 for g in gaps], n=10)
    rows.append({"base_us": hold.base_s * 1e6, "gap_us": statistics.median(gaps) * 1e6, "outlive_us": out[0] * 1e3,
                 "event_us": statistics.median(events) * 1e3, "gap_p10_us": q[0], "gap_p90_us": q[-1]})
print(json.dumps({"rows": rows}))
"""


def _spin(stop_at: float) -> None:
    while time.monotonic() < stop_at:
        pass


def _one(runs: int, calls: int, numel: int, hold_us: float = 0.0, path: str = "main") -> dict:
    env = {
        **os.environ,
        "PYTHONPATH": os.pathsep.join(
            [str(Path(__file__).resolve().parents[1] / "src"), os.environ.get("PYTHONPATH", "")]
        ),
    }
    done = subprocess.run(
        [sys.executable, "-c", CHILD, str(runs), str(calls), str(numel), str(hold_us), path],
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    try:
        return json.loads(done.stdout.strip().splitlines()[-1])
    except (ValueError, IndexError):
        return {"error": (done.stdout + done.stderr)[-500:]}


def _conditions(text: str) -> list[tuple[str, float, str]]:
    """`load:hold_us:path` items, comma-separated: load idle or busy, path main (the hold's own calls on the
    process's thread) or runner (the worker's TIMED_BATCH on its runner thread, the outputs copied after each call)."""
    found = []
    for item in text.split(","):
        parts = item.split(":")
        load, hold_us, path = parts if len(parts) == 3 else ("", "0", "")
        if load not in ("idle", "busy") or path not in ("main", "runner"):
            raise SystemExit(f"--conditions: {item!r} is not load:hold_us:path (idle|busy, a number, main|runner)")
        found.append((load, float(hold_us), path))
    return found


def _busy(on: bool) -> list:
    """Every core spinning, as a loaded pool's host is (nothing when `on` is false)."""
    if not on:
        return []
    stop_at = time.monotonic() + 600
    spinners = [multiprocessing.Process(target=_spin, args=(stop_at,), daemon=True) for _ in range(os.cpu_count() or 2)]
    for proc in spinners:
        proc.start()
    return spinners


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--processes", type=int, default=4, help="fresh processes per condition")
    parser.add_argument("--runs", type=int, default=3, help="runs (hold calibrations) per process")
    parser.add_argument("--calls", type=int, default=50, help="timed calls per run")
    parser.add_argument("--numel", type=int, default=1 << 23, help="elements of the GELU's input (8M: ~21 us)")
    parser.add_argument(
        "--conditions",
        default="idle:0:main,busy:0:main",
        help="load:hold_us:path items (path main: the hold's own calls; runner: the worker's batch on its thread)",
    )
    parser.add_argument("--out", default="outlive_probe.md")
    args = parser.parse_args(argv)
    conditions = _conditions(args.conditions)
    import torch

    if not torch.cuda.is_available():
        print("outlive_probe.py needs a CUDA GPU; stopping before any work")
        return 2
    lines = [
        f"# outlive probe: GELU on {args.numel} floats, {args.calls} calls a run, {torch.cuda.get_device_name()}",
        "",
        "| host | hold us | path | process | run | base us | median gap us | outlive us | event us | gap p10-p90 us |",
        "|---|---|---|---|---|---|---|---|---|---|",
    ]
    outlives: dict[str, list[float]] = {}
    for load, hold_us, path in conditions:
        name = f"{load}, hold {hold_us:g} us, {path}"
        spinners = _busy(load == "busy")
        try:
            for p in range(args.processes):
                got = _one(args.runs, args.calls, args.numel, hold_us, path)
                if "error" in got:
                    lines.append(f"| {load} | {hold_us:g} | {path} | {p} | - | {got['error'][:200]} |||||")
                    continue
                for r, row in enumerate(got["rows"]):
                    outlives.setdefault(name, []).append(row["outlive_us"])
                    lines.append(
                        f"| {load} | {hold_us:g} | {path} | {p} | {r} | {row['base_us']:.1f} | {row['gap_us']:.1f} | "
                        f"{row['outlive_us']:.1f} | {row['event_us']:.1f} | {row['gap_p10_us']:.1f}-{row['gap_p90_us']:.1f} |"
                    )
                Path(args.out).write_text("\n".join(lines) + "\n")  # as it goes
        finally:
            for proc in spinners:
                proc.terminate()
    for name, values in outlives.items():
        lines.append(
            f"\n{name}: outlive median {statistics.median(values):.1f} us, range {min(values):.1f}-{max(values):.1f} us"
        )
    Path(args.out).write_text("\n".join(lines) + "\n")
    print("\n".join(lines))
    return 0


if __name__ == "__main__":
    sys.exit(main())
