"""How long CUDA contexts take to create when many processes create theirs at once (issue 26 item 3).

A verification starts three processes with a CUDA context each (the judge, the reference, the candidate), and in a
GRPO step's burst on the H200 (2026-12-04, bench/service.md) a standby worker's context took a median 3.7 s, where
one alone takes a fraction of a second. If the driver creates contexts one after another, a step's contexts are a
floor under its time whatever the CPU count; if not, more lanes help. This measures it: for each count N, N fresh
processes import torch, wait at a common start, then each creates its context (and synchronises) and reports the
seconds it took; the table gives the median and the longest per N, and contexts per second over the batch.

    PYTHONPATH=src python3 bench/cuda_contexts.py --counts 1 4 16 32 --out $OUT    # on a GPU host: about 30 s
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import time
from pathlib import Path

CHILD = """
import sys, time
import torch
print("ready", flush=True)
sys.stdin.readline()
start = time.perf_counter()
torch.zeros(1, device="cuda")
torch.cuda.synchronize()
print(time.perf_counter() - start, flush=True)
"""


def _seconds(proc: subprocess.Popen, timeout_s: float) -> float:
    line = proc.stdout.readline().strip()
    try:
        return float(line)
    except ValueError:
        _, err = proc.communicate(timeout=timeout_s)
        last = (err.strip().splitlines() or ["no error output"])[-1]
        raise RuntimeError(f"a child created no CUDA context (exit {proc.returncode}): {last}") from None


def one_batch(count: int, timeout_s: float = 120.0) -> dict:
    """Start `count` processes, release them at once, and collect each one's context time (s)."""
    procs = [
        subprocess.Popen(
            [sys.executable, "-c", CHILD],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        for _ in range(count)
    ]
    try:
        for proc in procs:
            if proc.stdout.readline().strip() != "ready":
                raise RuntimeError(f"a child did not start (exit {proc.wait(timeout_s)})")
        start = time.perf_counter()
        for proc in procs:
            proc.stdin.write("go\n")
            proc.stdin.flush()
        took = [_seconds(proc, timeout_s) for proc in procs]
        wall = time.perf_counter() - start
    finally:
        for proc in procs:
            proc.kill()
            proc.wait()
    return {
        "processes": count,
        "median_s": round(statistics.median(took), 3),
        "max_s": round(max(took), 3),
        "batch_wall_s": round(wall, 3),
        "contexts_per_s": round(count / wall, 2),
    }


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--counts", type=int, nargs="+", default=[1, 4, 16, 32])
    p.add_argument("--out", default=None, help="folder for cuda_contexts.jsonl (default: print only)")
    args = p.parse_args(argv)
    if any(n < 1 for n in args.counts):
        p.error("--counts must be at least 1")
    import torch

    if not torch.cuda.is_available():
        print("cuda_contexts: needs a CUDA GPU", file=sys.stderr)
        return 2
    print("| processes | median s | longest s | batch wall s | contexts/s |\n|---|---|---|---|---|", flush=True)
    for count in args.counts:
        row = one_batch(count)
        print(f"| {count} | {row['median_s']} | {row['max_s']} | {row['batch_wall_s']} | {row['contexts_per_s']} |")
        if args.out:
            Path(args.out).mkdir(parents=True, exist_ok=True)
            with (Path(args.out) / "cuda_contexts.jsonl").open("a") as f:
                f.write(json.dumps(row) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
