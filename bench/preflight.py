"""What a GPU benchmark call needs, said in its first seconds: each need, found or not; stop at once when one is missing.

GPU time is the scarcest thing this project has, and a device call starts on a fresh machine that holds only the
working tree and the folders it carries. So every GPU benchmark (bench/*_session.sh, bench/optimize_gpu.sh,
bench/spread_bench.py, bench/verify_kernelbench.py, bench/env_turns.py, bench/tasks_eager.py) checks what it needs
before it spends anything, prints one line per need, and exits 2 at once, naming what is missing and how to get
it, rather than crash after the budget is spent.

    python3 bench/preflight.py --name gpu_session.sh --gpus 1 --file .gpu/kernelbench.jsonl "KernelBench's dataset"
    python3 bench/preflight.py --gpus 1 --dir bench/out/optimize_gelu "the run of an earlier optimize step"

From Python: `preflight.require(gpus=1, files=[(path, what)])`.
"""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path


def gpu_count() -> int:
    try:
        import torch
    except ImportError:
        return 0
    return torch.cuda.device_count() if torch.cuda.is_available() else 0


def require(
    gpus: int = 0,
    files: list[tuple[str, str]] = (),
    dirs: list[tuple[str, str]] = (),
    cores: int = 0,
    name: str = "",
) -> None:
    """Print each need and whether it is there; exit 2 when one is not (nothing has been spent yet)."""
    name = name or Path(sys.argv[0]).name
    lines, missing = [], []

    def need(ok: bool, text: str) -> None:
        lines.append(f"  {'found  ' if ok else 'MISSING'} {text}")
        if not ok:
            missing.append(text)

    if gpus:
        have = gpu_count()
        need(have >= gpus, f"{gpus} CUDA GPU(s) (this machine: {have})")
    if cores:
        have = os.cpu_count() or 0
        need(have >= cores, f"{cores} CPU cores (this machine: {have})")
    for path, what in files:
        need(Path(path).is_file(), f"{path}: {what}")
    for path, what in dirs:
        need(Path(path).is_dir() and any(Path(path).iterdir()), f"{path}/: {what}")
    print(f"{name}: state this call needs" + ("" if lines else ": nothing beyond the working tree"), flush=True)
    print("\n".join(lines), flush=True)
    if missing:
        print(f"{name}: stopping now, before any work: missing {'; '.join(missing)}", flush=True)
        sys.exit(2)


def main(argv: list[str]) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--name", default="", help="the benchmark's name for the messages")
    p.add_argument("--gpus", type=int, default=0)
    p.add_argument("--cores", type=int, default=0)
    p.add_argument("--file", nargs=2, action="append", default=[], metavar=("PATH", "WHAT"))
    p.add_argument("--dir", nargs=2, action="append", default=[], metavar=("PATH", "WHAT"))
    a = p.parse_args(argv)
    require(gpus=a.gpus, files=a.file, dirs=a.dir, cores=a.cores, name=a.name)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
