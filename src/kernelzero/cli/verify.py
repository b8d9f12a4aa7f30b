"""`kernelzero verify TASK CANDIDATE --backend {cuda,triton}`: verify one candidate.

TASK is a task file (`level1/19_ReLU.py`), or SUITE:NAME (`kz-basic:level1/24_LeakyReLU`,
`path/to/kernelbench.jsonl:level1/19_ReLU`). CANDIDATE is a Python file or a saved model completion
(the last fenced python block is used). Exit code 0 when the verdict is `correct` (or `compiled`
on a machine without a GPU), 1 otherwise.

    kernelzero verify kz-basic:level1/1_Square_Matmul tests/kernels/correct/triton_matmul.py \
        --backend triton --preset smoke
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

from rich.console import Console

from kernelzero.tasks import load_suite, resize, select
from kernelzero.tasks.sizes import parse_sizes
from kernelzero.types import PRECISIONS, PROFILES, Task, to_dict
from kernelzero.verify import options_for, verify
from kernelzero.verify.backends import BACKENDS

UNSAFE_HELP = (
    "UNSAFE, trusted local use only: run the candidate and the task's code without the sandbox (as this user, no "
    "namespaces); every verdict says so. Without it, verification refuses where the sandbox cannot be set up"
)


def add_parser(sub: argparse._SubParsersAction, name: str) -> None:
    p = sub.add_parser(name, help="verify one candidate kernel against a task")
    p.add_argument("task", help="a task .py file, or SUITE:NAME")
    p.add_argument("candidate", type=Path, help="candidate .py file or a saved completion")
    p.add_argument("--backend", choices=tuple(BACKENDS), required=True)
    p.add_argument("--profile", choices=tuple(PROFILES), default="default")
    p.add_argument("--precision", choices=PRECISIONS, default="fp32")
    p.add_argument("--trials", type=int, help="correctness trials (default 5)")
    p.add_argument("--atol", type=float)
    p.add_argument("--rtol", type=float)
    p.add_argument("--device", choices=("auto", "cuda", "cpu"), default="auto")
    p.add_argument("--compile-baseline", action="store_true", help="also time the reference under torch.compile")
    p.add_argument("--unsafe-no-sandbox", action="store_true", help=UNSAFE_HELP)
    p.add_argument("--baselines", help="folder caching reference timings per GPU (e.g. bench/baselines)")
    p.add_argument("--preset", help="named size set, e.g. smoke")
    p.add_argument("--scale", type=float, help="multiply size globals >= 16 by F")
    p.add_argument("--size", nargs="+", default=[], metavar="NAME=VALUE")
    p.add_argument("--json", action="store_true", help="print the verdict as JSON")
    p.set_defaults(run=run)


def load_task(spec: str) -> Task:
    """A task from a .py path or SUITE:NAME."""
    if spec.endswith(".py") and Path(spec).exists():
        return load_suite(spec).tasks[0]
    suite, sep, name = spec.rpartition(":")
    if not sep:
        raise ValueError(f"task {spec!r}: give a .py file or SUITE:NAME")
    matches = select(load_suite(suite).tasks, names=[name])
    if len(matches) != 1:
        raise ValueError(f"task {name!r} matches {len(matches)} tasks of {suite}")
    return matches[0]


def run(args: argparse.Namespace) -> int:
    task = load_task(args.task)
    task = resize(task, sizes=parse_sizes(args.size) or None, scale=args.scale, preset=args.preset)
    opts = options_for(
        args.profile,
        precision=args.precision,
        trials=args.trials,
        atol=args.atol,
        rtol=args.rtol,
        device=args.device,
        compile_baseline=args.compile_baseline,
        baselines_dir=args.baselines,
        unsafe_no_sandbox=args.unsafe_no_sandbox,
    )
    verdict = verify(task, args.candidate.read_text(), args.backend, opts)
    if args.json:
        print(json.dumps(to_dict(verdict), indent=1))
    else:
        print_verdict(verdict, Console(soft_wrap=True))
    return 0 if verdict.status in ("correct", "compiled") else 1


def print_verdict(v, console: Console) -> None:
    colour = "green" if v.status in ("correct", "compiled") else "red"
    console.print(f"[bold {colour}]{v.status}[/]  {v.task}  backend={v.backend} device={v.device} profile={v.profile}")
    if v.message:
        console.print(v.message, highlight=False)
    if v.timing:
        console.print(
            f"time {v.timing.median_ms:.4f} ms (p10 {v.timing.p10_ms:.4f}, p90 {v.timing.p90_ms:.4f}, "
            f"{v.timing.calls} calls)"
        )
    if v.speedup_eager is not None:
        extra = f", {v.speedup_compile:.2f}x torch.compile" if v.speedup_compile else ""
        console.print(f"speedup {v.speedup_eager:.2f}x eager{extra}")
    if v.timing_note:
        console.print(f"[dim]timing: {v.timing_note}[/]")
    for note in v.notes:
        console.print(f"[dim]note: {note}[/]", highlight=False)
    if v.status not in ("correct", "compiled") and v.error_log:
        console.print(v.error_log[-1500:], highlight=False, markup=False)
    console.print(f"[dim]stages: {v.stage_seconds}[/]")
