"""`kernelzero report RUN [RUN ...]`: metrics tables of eval runs, side by side.

Each RUN is a folder written by `kernelzero eval` (verdicts.jsonl, samples.jsonl, run.json). The
comparison (one table per level, one row per run) is printed as markdown, or written with --md/--html.

    kernelzero report runs/qwen-l1
    kernelzero report runs/base runs/round4 --policy kernelbench --html compare.html
    kernelzero report runs/round4 --write          # also runs/round4/report.md and its plots
"""

from __future__ import annotations

import argparse
from pathlib import Path

from kernelzero.metrics import POLICIES, SPEED_BASELINES
from kernelzero.report import compare_runs, write_report


def add_parser(sub: argparse._SubParsersAction, name: str) -> None:
    parser = sub.add_parser(name, help="metrics tables of eval runs, side by side")
    parser.add_argument("runs", nargs="+", metavar="RUN", help="run folders written by kernelzero eval")
    parser.add_argument("--md", metavar="OUT.md", help="write the markdown comparison here instead of stdout")
    parser.add_argument("--html", metavar="OUT.html", help="write the comparison as a self-contained HTML page")
    parser.add_argument(
        "--policy",
        choices=POLICIES,
        help="count a sample correct by this policy's status (default: the verdict's own status)",
    )
    parser.add_argument("--speed", choices=SPEED_BASELINES, default="eager", help="baseline of fast_p and fast_p@k")
    parser.add_argument("--write", action="store_true", help="also write report.md and plots into each RUN")
    parser.set_defaults(run=run)


def run(args: argparse.Namespace) -> int:
    if args.write:
        for run_dir in args.runs:
            print(f"wrote {write_report(run_dir, policy=args.policy, speed=args.speed)}")
    text = compare_runs(args.runs, "md", policy=args.policy, speed=args.speed)
    if args.md:
        Path(args.md).write_text(text)
        print(f"wrote {args.md}")
    if args.html:
        Path(args.html).write_text(compare_runs(args.runs, "html", policy=args.policy, speed=args.speed))
        print(f"wrote {args.html}")
    if not (args.md or args.html):
        print(text, end="")
    return 0
