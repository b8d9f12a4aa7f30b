"""`kernelzero tasks list|show|check SUITE`: inspect and check task suites.

SUITE is a built-in suite (`kz-basic`), a KernelBench checkout or folder, a `.py` file, or a
`.jsonl` / `.parquet` file in the public KernelBench dataset's columns.

    kernelzero tasks list kz-basic
    kernelzero tasks show kz-basic level1/1_Square_Matmul --preset smoke
    kernelzero tasks check path/to/KernelBench --level 1 2 --scale 0.1 --jobs 2
"""

from __future__ import annotations

import argparse
import json
import time
from dataclasses import replace

from rich.console import Console
from rich.table import Table

from kernelzero.tasks import CheckOptions, check_tasks, load_suite, resize, select, size_globals, task_hash
from kernelzero.tasks.sizes import parse_sizes
from kernelzero.types import Task, to_dict
from kernelzero.verify.sandbox.process import task_launcher


def add_selection_args(parser: argparse.ArgumentParser) -> None:
    """Suite, level, name filter and size arguments shared by commands that take a suite."""
    parser.add_argument("suite", help="kz-basic, a KernelBench folder, a .py file, or a .jsonl/.parquet dataset file")
    parser.add_argument("--level", type=int, nargs="+", help="only these levels")
    parser.add_argument("--task", nargs="+", metavar="PATTERN", help="only tasks whose name or id matches a glob")
    parser.add_argument("--preset", help="named size set of the suite, e.g. smoke")
    parser.add_argument("--scale", type=float, help="multiply size globals >= 16 by F (0 < F <= 1)")
    parser.add_argument("--size", nargs="+", default=[], metavar="NAME=VALUE", help="set size globals")


def selected_tasks(args: argparse.Namespace, console: Console | None = None) -> list[Task]:
    """Load, filter and resize the tasks named by `add_selection_args` arguments."""
    suite = load_suite(args.suite)
    for note in suite.notes:
        (console or Console(stderr=True)).print(f"[yellow]note:[/] {note}")
    tasks = select(suite.tasks, args.level, args.task)
    if not tasks:
        raise ValueError(f"no task of {args.suite} matches the selection")
    sizes = parse_sizes(args.size)
    return [resize(t, sizes=sizes if sizes else None, scale=args.scale, preset=args.preset) for t in tasks]


def add_parser(sub: argparse._SubParsersAction, name: str) -> None:
    parser = sub.add_parser(name, help="list, show and check task suites")
    actions = parser.add_subparsers(dest="action", required=True)
    p_list = actions.add_parser("list", help="one line per task")
    add_selection_args(p_list)
    p_list.add_argument("--json", action="store_true", help="print JSON lines")
    p_show = actions.add_parser("show", help="print a task's source and sizes")
    add_selection_args(p_show)
    p_check = actions.add_parser("check", help="run the contract check; exits 1 if any task fails")
    add_selection_args(p_check)
    p_check.add_argument("--device", default="cpu", help="cpu or cuda")
    p_check.add_argument("--jobs", type=int, default=1, help="tasks checked side by side")
    p_check.add_argument("--timeout", type=float, default=120.0, help="seconds per task")
    p_check.add_argument("--strict", action="store_true", help="fail tasks on which a trivial answer passes")
    p_check.add_argument("--unsafe-no-sandbox", action="store_true", help="UNSAFE: run task code without the sandbox")
    p_check.add_argument("--json", action="store_true", help="print one JSON record per task")
    parser.set_defaults(run=run)


def run(args: argparse.Namespace) -> int:
    console = Console(soft_wrap=True)
    tasks = selected_tasks(args, console)
    if args.action == "list":
        return _list(tasks, args.json, console)
    if args.action == "show":
        for task in tasks:
            sizes = {**size_globals(task.source), **task.sizes}
            console.rule(f"{task.name}  ({task_hash(task)})")
            console.print(f"sizes: {sizes}", highlight=False)
            print(task.source)
        return 0
    return _check(tasks, args, console)


def _list(tasks: list[Task], as_json: bool, console: Console) -> int:
    if as_json:
        for task in tasks:
            print(
                json.dumps(
                    {
                        "name": task.name,
                        "level": task.level,
                        "problem_id": task.problem_id,
                        "hash": task_hash(task),
                        "sizes": task.sizes,
                    }
                )
            )
        return 0
    table = Table("task", "level", "hash", "size overrides")
    for task in tasks:
        table.add_row(
            task.name, str(task.level or ""), task_hash(task), " ".join(f"{k}={v}" for k, v in task.sizes.items())
        )
    console.print(table)
    console.print(f"{len(tasks)} tasks")
    return 0


SHRINK_FAILURES = {"import_error", "bad_init_inputs", "init_failed", "bad_inputs", "forward_failed", "bad_output"}


def _scale_ladder(scale: float) -> list[float]:
    """Milder scales to retry a task that broke when shrunk: F, sqrt(F), F^(1/4), 1."""
    return [round(scale**p, 4) for p in (0.5, 0.25)] + [1.0]


def checks_with_fallback(tasks: list[Task], args: argparse.Namespace, options: CheckOptions):
    """check_tasks, retrying tasks that broke under --scale at milder scales; the retry is reported."""
    pending = {t.name: t for t in tasks}
    broken: dict[str, str] = {}
    for result in check_tasks(tasks, options):
        if args.scale and args.scale < 1 and not result.ok and result.error in SHRINK_FAILURES:
            broken[result.name] = f"scale {args.scale}: {result.error}"
            continue
        yield result
    for scale in _scale_ladder(args.scale) if broken else []:
        originals = [
            resize(replace(pending[n], sizes={}), sizes=parse_sizes(args.size) or None, scale=scale, preset=args.preset)
            for n in broken
        ]
        retry = {}
        for result in check_tasks(originals, options):
            note = f"shrunk task broke ({broken[result.name]}); checked at scale {scale}"
            if not result.ok and result.error in SHRINK_FAILURES and scale < 1:
                retry[result.name] = broken[result.name]
                continue
            yield replace(result, message=(result.message + "; " if result.message else "") + note)
        broken = retry


def _check(tasks: list[Task], args: argparse.Namespace, console: Console) -> int:
    options = CheckOptions(
        device=args.device,
        timeout_s=args.timeout,
        jobs=args.jobs,
        strict=args.strict,
        launcher=task_launcher(args.unsafe_no_sandbox),  # SandboxUnavailable here: no task runs
    )
    start = time.monotonic()
    failed = flagged = 0
    for i, result in enumerate(checks_with_fallback(tasks, args, options), 1):
        failed += not result.ok
        flagged += bool(result.degenerate)
        if args.json:
            print(json.dumps(to_dict(result)), flush=True)
            continue
        mark = "[green]ok  [/]" if result.ok else f"[red]FAIL[/] {result.error}:"
        detail = (
            result.message
            if not result.ok
            else " ".join(result.output_shapes) + (f"  [yellow]{result.message}[/]" if result.message else "")
        )
        if result.ok and result.degenerate:
            detail += f"  [yellow](degenerate: {'; '.join(result.degenerate)})[/]"
        timing = f"{result.seconds:5.1f}s"
        console.print(f"[{i}/{len(tasks)}] {mark} {result.name} {detail} [dim]{timing}[/]", highlight=False)
    elapsed = time.monotonic() - start
    summary = f"{len(tasks) - failed} passed, {failed} failed, {flagged} flagged degenerate in {elapsed:.1f} s"
    (print if args.json else console.print)(summary)
    return 1 if failed else 0
