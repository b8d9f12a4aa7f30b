"""The contract check: does a task module satisfy the KernelBench contract, and is it informative?

`check_tasks(tasks)` runs every task in a child process (`tasks/_child.py`: one interpreter per
worker, one fork per task) started by `CheckOptions.launcher`, the verifier's sandbox
(`kernelzero.verify.sandbox.process.task_launcher`: a uid of its own, PID, mount and network namespaces; every
fork dies with the child; `SandboxUnavailable` before anything runs where it cannot be set up), and yields a `TaskCheck` per task as soon as it is known. A task that
hangs, crashes its process or exhausts memory is reported as such; the caller is never affected.

Error kinds (`TaskCheck.error`), in the order the check meets them:

| kind | meaning |
|---|---|
| needs_download | loads a pretrained model at run time (KernelBench Level 4) |
| syntax_error | the source does not parse |
| import_error | the module's top-level code raised |
| missing_model / missing_get_inputs / missing_get_init_inputs | a contract name is absent |
| bad_sizes | a size override names no size global |
| bad_init_inputs | `get_init_inputs()` raised or returned no list |
| init_failed | `Model(*get_init_inputs())` raised |
| bad_inputs | `get_inputs()` raised or returned no list holding tensors |
| forward_failed | `Model.forward` raised |
| oom | the forward ran out of device memory |
| bad_output | the forward returned something other than tensors |
| nonfinite_output | the reference output holds NaN or Inf |
| degenerate | (strict mode only) a trivial answer passes, see `tasks/quality.py` |
| timeout / crash | the check did not finish in time / its process died |
"""

from __future__ import annotations

import json
import subprocess
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager
from dataclasses import dataclass
from queue import Queue
from typing import IO

from kernelzero.tasks.hashing import task_hash
from kernelzero.tasks.sizes import SizeError, check_overrides
from kernelzero.types import Task, TaskCheck

ERROR_KINDS = (
    "needs_download",
    "syntax_error",
    "import_error",
    "missing_model",
    "missing_get_inputs",
    "missing_get_init_inputs",
    "bad_sizes",
    "bad_init_inputs",
    "init_failed",
    "bad_inputs",
    "forward_failed",
    "oom",
    "bad_output",
    "nonfinite_output",
    "degenerate",
    "timeout",
    "crash",
)


@dataclass(frozen=True)
class CheckOptions:
    """How `check_tasks` runs."""

    device: str = "cpu"  # where the reference forward runs: "cpu" or "cuda"
    timeout_s: float = 120.0  # per task, from fork to result
    jobs: int = 1  # worker processes run side by side
    strict: bool = False  # a degenerate task fails instead of only being flagged
    seed: int = 42  # seeds init (seed), and the two input draws (seed + 1, seed + 2)
    time_forward: bool = True  # time one eager forward after the check
    # Starts the child: (request JSON) -> a context of (process, its results file); the verifier's sandbox,
    # `kernelzero.verify.sandbox.process.task_launcher()` (this layer cannot import it). None: check_tasks refuses.
    launcher: Callable[[str], AbstractContextManager[tuple[subprocess.Popen, IO[str]]]] | None = None


def _finish(task: Task, raw: dict, strict: bool) -> TaskCheck:
    raw.pop("name", None)
    degenerate = tuple(raw.pop("degenerate", ()))
    ok = raw.pop("ok")
    error, message = raw.pop("error", ""), raw.pop("message", "")
    if ok and strict and degenerate:
        ok, error, message = False, "degenerate", "; ".join(degenerate)
    return TaskCheck(
        name=task.name,
        ok=ok,
        error=error,
        message=message,
        task_hash=task_hash(task),
        degenerate=degenerate,
        sizes=raw.get("sizes", dict(task.sizes)),
        input_shapes=tuple(raw.get("input_shapes", ())),
        output_shapes=tuple(raw.get("output_shapes", ())),
        seconds=raw.get("seconds", 0.0),
        forward_ms=raw.get("forward_ms"),
    )


def _worker(tasks: list[Task], options: CheckOptions, out: Queue) -> None:
    """Run one child over `tasks`, restarting it past a task that killed it; put raw results on `out`.

    The child is started by `options.launcher` (the verifier's sandbox, `verify.sandbox.process.task_launcher`: a
    uid of its own per start, PID, mount and network namespaces), which lays out its folder with the request and
    opens its results file before it starts."""
    pending = list(tasks)
    while pending:
        request = {
            "options": {
                "device": options.device,
                "timeout_s": options.timeout_s,
                "seed": options.seed,
                "time_forward": options.time_forward,
            },
            "tasks": [{"name": t.name, "source": t.source, "sizes": t.sizes} for t in pending],
        }
        with options.launcher(json.dumps(request)) as (proc, results):
            done = _follow(proc, results, pending, out)
            stderr = proc.stderr.read().decode(errors="replace") if proc.stderr else ""
        pending = pending[done:]
        if pending and proc.returncode != 0:
            # The child itself died (not a task's grandchild): blame the task in flight.
            out.put((pending[0], {"ok": False, "error": "crash", "message": stderr[-400:] or "worker died"}))
            pending = pending[1:]
    out.put(None)


def _follow(proc: subprocess.Popen, fh, pending: list[Task], out: Queue) -> int:
    """Stream result lines of `fh` (the child's results file) to `out` while it runs; return how many finished."""
    done = 0
    while True:
        line = fh.readline()
        if line.endswith("\n"):
            out.put((pending[done], json.loads(line)))
            done += 1
            continue
        if proc.poll() is not None and not line:
            # Drain anything written between the last read and the exit.
            for rest in fh:
                out.put((pending[done], json.loads(rest)))
                done += 1
            return done
        time.sleep(0.05)


def check_tasks(tasks: list[Task], options: CheckOptions = CheckOptions()) -> Iterator[TaskCheck]:
    """Check every task; yield one TaskCheck each, in completion order."""
    runnable = []
    for task in tasks:
        try:
            check_overrides(task.source, task.sizes)
        except SizeError as exc:
            yield TaskCheck(name=task.name, ok=False, error="bad_sizes", message=str(exc), task_hash=task_hash(task))
        except SyntaxError as exc:
            yield TaskCheck(
                name=task.name,
                ok=False,
                error="syntax_error",
                message=f"line {exc.lineno}: {exc.msg}",
                task_hash=task_hash(task),
            )
        else:
            runnable.append(task)
    if options.launcher is None:
        raise ValueError("check_tasks runs task code only in a sandbox: CheckOptions(launcher=task_launcher())")
    jobs = max(1, min(options.jobs, len(runnable)))
    out: Queue = Queue()
    shards = [runnable[i::jobs] for i in range(jobs)]
    threads = [threading.Thread(target=_worker, args=(s, options, out), daemon=True) for s in shards if s]
    for thread in threads:
        thread.start()
    finished = 0
    while finished < len(threads):
        item = out.get()
        if item is None:
            finished += 1
            continue
        task, raw = item
        yield _finish(task, raw, options.strict)
