"""`verify()`, `precheck()` and `format_problem()`: the verifier's entry points (re-exported by `kernelzero.verify`)."""

from __future__ import annotations

import ast
import atexit
import json
import os
import threading
from dataclasses import replace

from kernelzero.extract import extract_code
from kernelzero.types import Task, Verdict, to_dict
from kernelzero.verify.backends import backend_module, get_backend
from kernelzero.verify.judge.run import run_judge
from kernelzero.verify.judge.standby import Standby
from kernelzero.verify.options import VerifyOptions, options_for
from kernelzero.verify.sandbox.process import UNSAFE_NOTE, plan_for
from kernelzero.verify.static import check_candidate, parse
from kernelzero.verify.verdicts import early_verdict


def format_problem(source: str) -> str:
    """'' if `source` parses and defines a class ModelNew at top level, else what is wrong."""
    if not source.strip():
        return "no code found in the completion"
    try:
        tree = parse(source)
    except SyntaxError as exc:
        return f"not valid Python: line {exc.lineno}: {exc.msg}"
    if not any(isinstance(n, ast.ClassDef) and n.name == "ModelNew" for n in tree.body):
        return "the code defines no top-level `class ModelNew`"
    return ""


def precheck(task: Task, source: str, backend: str, opts: VerifyOptions) -> Verdict | None:
    """The checks that need no process: the format and, unless switched off, the static checks.

    A verdict when the candidate is rejected, else None. `verify()` and both pools run this before anything is
    built or started, so a rejected candidate never costs a build.
    """
    problem = format_problem(source)
    if problem:
        return early_verdict(task, source, backend, opts, "format_error", "extract", problem)
    if not opts.static_checks:
        return None
    violations = check_candidate(source, get_backend(backend))
    if not violations:
        return None
    status = "no_kernel" if all(v.rule == "no-kernel" for v in violations) else "static_violation"
    found = [v for v in violations if status == "no_kernel" or v.rule != "no-kernel"]
    message = "; ".join(f"line {v.line}: {v.message}" if v.line else v.message for v in found[:3])
    return early_verdict(task, source, backend, opts, status, "static", message)


def _gpu_available() -> bool:
    import torch

    return torch.cuda.is_available()


def verify(
    task: Task, candidate: str, backend: str, options: VerifyOptions | None = None, *, standby: Standby | None = None
) -> Verdict:
    """Verify one candidate (a completion or a source) for `task`; never raises for candidate faults.

    `backend`: a name in `BACKENDS`. `standby`: judges started ahead of requests (judge/standby.py); one is used
    when ready (None: the process's own, `own_standby`, when KZ_STANDBY is set; `standby.NONE`: a cold judge). Raises `SandboxUnavailable` (nothing ran) where the sandbox cannot be set up as configured; with
    `unsafe_no_sandbox` every verdict's notes start with `UNSAFE_NOTE`.
    """
    opts = options or options_for()
    plan_for(opts)  # box.SandboxUnavailable before anything runs, where the sandbox cannot be set up as configured
    standby = standby if standby is not None else own_standby()
    return _logged(unsafe_marked(_verify(task, candidate, backend, opts, standby), opts))


_own: dict[int, Standby] = {}  # this process's own standby judges (KZ_STANDBY), by pid (a forked child makes its own)
_own_lock = threading.Lock()


def own_standby() -> Standby | None:
    """This process's standby judges when KZ_STANDBY (a count) is set, for `verify()` calls without a `standby` of
    their own: a caller that verifies one sample after another (a test worker, a script, a reward function) then
    pays the judge's and its worker's start, torch imports, CUDA contexts and IPC check while its previous sample
    runs, not in line (judge/standby.py; the GPU gate sets it). Each serves up to 8 requests in turn (`KZ_STANDBY_SERVES`,
    judge/serving.py); the first request of a kind starts them cold. They end when the process exits."""
    raw = os.environ.get("KZ_STANDBY", "").strip()
    if not raw:
        return None
    try:
        count = int(raw)
    except ValueError:
        raise ValueError(f"KZ_STANDBY must be a whole number of standby judges, got {raw!r}") from None
    if count <= 0:
        return None
    with _own_lock:
        standby = _own.get(os.getpid())
        if standby is None or standby.count != count:
            if standby is not None:
                standby.close()
            standby = _own[os.getpid()] = Standby(count)
            atexit.register(standby.close)
    return standby


def unsafe_marked(verdict: Verdict, opts: VerifyOptions) -> Verdict:
    """The verdict, with the unsafe mode's note first when it ran without the sandbox (once)."""
    if not opts.unsafe_no_sandbox or UNSAFE_NOTE in verdict.notes:
        return verdict
    return replace(verdict, notes=(UNSAFE_NOTE, *verdict.notes))


def _verify(task: Task, candidate: str, backend: str, opts: VerifyOptions, standby: Standby | None) -> Verdict:
    record = get_backend(backend)
    source = extract_code(candidate)
    rejected = precheck(task, source, backend, opts)
    if rejected is not None:
        return rejected
    gpu = _gpu_available() and opts.device != "cpu"
    if not gpu and record.without_gpu == "compile":
        return backend_module(record, "without_gpu").verify_without_gpu(task, source, record, opts)
    return run_judge(task, source, record, opts, standby)


def _logged(verdict: Verdict) -> Verdict:
    """With KZ_VERDICT_LOG set (a file path), append the verdict as one JSON line (its logs cut to 2,000
    characters): the GPU gate keeps every verification's stage times and memory this way (scripts/gpu_tests.sh).
    A log that cannot be written never costs the verdict."""
    path = os.environ.get("KZ_VERDICT_LOG")
    if path:
        record = to_dict(verdict)
        record.update(error_log=record.get("error_log", "")[-2000:], feedback=record.get("feedback", "")[:2000])
        try:
            with open(path, "a", encoding="utf-8") as log:
                log.write(json.dumps(record) + "\n")
        except OSError:
            pass
    return verdict
