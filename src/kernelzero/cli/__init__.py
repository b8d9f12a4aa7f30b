"""The `kernelzero` command. Each subcommand lives in its own module with `add_parser` and `run`.

kernelzero tasks list|show|check SUITE ...
kernelzero verify TASK CANDIDATE.py --backend {cuda,triton}
"""

from __future__ import annotations

import argparse
import sys

from kernelzero.cli import eval as eval_cmd
from kernelzero.cli import optimize as optimize_cmd
from kernelzero.cli import proposer as proposer_cmd
from kernelzero.cli import report as report_cmd
from kernelzero.cli import serve as serve_cmd
from kernelzero.cli import tasks as tasks_cmd
from kernelzero.cli import train as train_cmd
from kernelzero.cli import verify as verify_cmd
from kernelzero.verify.sandbox.box import SandboxUnavailable

COMMANDS = {
    "tasks": tasks_cmd,
    "verify": verify_cmd,
    "eval": eval_cmd,
    "optimize": optimize_cmd,
    "report": report_cmd,
    "serve": serve_cmd,
    "train": train_cmd,
    "proposer": proposer_cmd,
}


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="kernelzero", description="Train and evaluate LLMs that write GPU kernels.")
    sub = parser.add_subparsers(dest="command", required=True)
    for name, module in COMMANDS.items():
        module.add_parser(sub, name)
    return parser


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    try:
        return int(args.run(args) or 0)
    except KeyboardInterrupt:
        print("interrupted", file=sys.stderr)
        return 130
    except SandboxUnavailable as exc:  # refused before anything ran: one clear line
        print(f"kernelzero {args.command}: refused: {exc}", file=sys.stderr)
        return 3
    except (ValueError, FileNotFoundError) as exc:  # bad input: one clear line, no traceback
        print(f"kernelzero {args.command}: error: {exc}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
