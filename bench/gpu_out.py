"""Where bench/train_gpu.py's calls put their results ($OUT on a device machine, else --out or bench_out/) and the
markdown tables they print."""

from __future__ import annotations

import argparse
import os
from pathlib import Path


def out_dir(args: argparse.Namespace) -> Path:
    """The call's output folder, made if missing."""
    out = Path(args.out or os.environ.get("OUT") or "bench_out")
    out.mkdir(parents=True, exist_ok=True)
    return out


def table(rows: list[dict], keys: list[str]) -> str:
    """`rows` as a markdown table of `keys` (floats to 3 places)."""
    lines = ["| " + " | ".join(keys) + " |", "|" + "---|" * len(keys)]
    for r in rows:
        lines.append(
            "| " + " | ".join(f"{r.get(k):.3f}" if isinstance(r.get(k), float) else str(r.get(k)) for k in keys) + " |"
        )
    return "\n".join(lines)
