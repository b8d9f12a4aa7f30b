"""Admission throughput: proposals admitted-or-rejected per hour, with the mix of rejection reasons.

    python bench/proposer_bench.py --n 500 --jobs 2 --scale 0.25            # the 2-core CPU machine
    python bench/proposer_bench.py --n 1000 --jobs 16 --device cuda          # the H200 host (16 cores)

Draws a pool from the default corpus restricted to APIs the template generator can write, writes one module
per API set with the generator (the no-model Proposer), keeps the first N distinct ones that pass the syntax
stage, and admits them with `jobs` sandboxed children side by side (proposer/admit.py, KernelBench dedup on
when ../shared/data/kernelbench.jsonl is present). `--max-seconds` stops admission early (the rate is then over
the proposals decided so far). Prints one markdown table and writes the decisions to --out.
"""

from __future__ import annotations

import argparse
import datetime
import platform
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path

from kernelzero.proposer.admit import AdmitOptions, admit, check_syntax
from kernelzero.proposer.cooccur import pool_entries
from kernelzero.proposer.corpus import build_catalog
from kernelzero.proposer.generator import SUPPORTED, write_module


class _Stop(Exception):
    pass


def proposals(n: int, seed: int) -> list[dict]:
    """N distinct template proposals that pass the syntax stage."""
    catalog = build_catalog(["default"])
    rows = pool_entries(catalog, pairs=n, triples=n, seed=seed, vocabulary=set(SUPPORTED))
    out = []
    for row in rows:
        code = write_module(row["apis"], seed)
        if code and not check_syntax(code, tuple(row["apis"]), 2)[0]:
            out.append(
                {
                    "id": f"{row['key']}#0",
                    "apis": row["apis"],
                    "code": code,
                    "model": "template",
                    "prompt_version": "template-v1",
                    "origin": row["origin"],
                    "corpus": row["corpus"],
                }
            )
        if len(out) == n:
            return out
    sys.exit(f"only {len(out)} syntax-passing proposals from {len(rows)} API sets")


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--n", type=int, default=500)
    p.add_argument("--jobs", type=int, default=2)
    p.add_argument("--device", default="auto")
    p.add_argument("--scale", type=float)
    p.add_argument("--timeout", type=float, default=180.0)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--max-seconds", type=float, help="stop admission after this long")
    p.add_argument("--out", default="", help="folder for suite.jsonl and admissions.jsonl (default: a temp dir)")
    args = p.parse_args()
    out = Path(args.out or tempfile.mkdtemp(prefix="kz-proposer-bench-"))
    out.mkdir(parents=True, exist_ok=True)
    props = proposals(args.n, args.seed)
    options = AdmitOptions(device=args.device, jobs=args.jobs, timeout_s=args.timeout, scale=args.scale)
    counts: Counter = Counter()
    start = time.monotonic()

    def on_decision(d) -> None:
        counts[d.reason or "admitted"] += 1
        if args.max_seconds and time.monotonic() - start > args.max_seconds:
            raise _Stop

    try:
        summary = admit(props, options, out / "suite.jsonl", out / "admissions.jsonl", on_decision=on_decision)
        device = summary["device"]
    except _Stop:
        device = args.device
    elapsed = time.monotonic() - start
    decided = sum(counts.values())
    print(f"date {datetime.date.today()}, host {platform.node()}, {sys.argv}")
    print(
        f"\n{len(props)} distinct syntax-passing template proposals; {decided} decided in {elapsed:.0f} s "
        f"with {args.jobs} jobs on {device} (scale {args.scale}): **{decided / elapsed * 3600:.0f} per hour**\n"
    )
    print("| outcome | proposals | share |\n|---|---|---|")
    for reason, count in counts.most_common():
        print(f"| {reason} | {count} | {count / max(1, decided):.1%} |")
    print(f"\ndecisions: {out / 'admissions.jsonl'}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
