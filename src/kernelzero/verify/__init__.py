"""The verifier: the only code in kernelzero that runs generated code.

    from kernelzero.verify import verify, options_for
    verdict = verify(task, completion_or_source, "triton", options_for("default"))

`verify()` extracts the code, rejects what is not a Python module defining `ModelNew`, then runs a
trusted *judge* process (`judge.py`) that builds the reference, draws inputs from a secret seed and
keeps the expected outputs, and an untrusted *worker* process (`worker.py`) in a sandbox
(`sandbox.py`) that imports the candidate and runs it. Without a GPU, Triton candidates run through
Triton's interpreter with bounds checks (`triton_interp.py`) and are then compiled for sm_90
(`gpu_check.py`); CUDA candidates get a compile check of their sources with nvcc
(`cuda_source.py`) and the status `compiled`.

Statuses (a closed set, `kernelzero.types.STATUSES`) and what maps to them:

| status | when |
|---|---|
| format_error | no code in the completion; not valid Python; no `class ModelNew(nn.Module)` |
| compile_error | `load_inline` build failed; a Triton kernel failed to compile (on the GPU, or for sm_90 on CPU); nvcc rejected the CUDA source (CPU) |
| runtime_error | an exception importing the module, constructing ModelNew or in forward; an out-of-bounds access caught by the interpreter's bounds check |
| timeout | no reply within the limit (build: `build_timeout_s`; a call: max(floor, scale x reference time)) |
| crash | the worker died: a signal (SIGSEGV ...), an illegal memory access / CUDA launch failure, an exit without a result (`os._exit(0)` included); stage `runner`: the verifier's own judge died twice, or no healthy GPU is left (service/pool.py); stage `gpu_health`: the GPU failed its health probe before the sample ran (verify/lease.py) |
| oom | CUDA out of memory, or the worker's resident memory passed `host_mem_gb` |
| shape_mismatch | wrong number or type of outputs, or a wrong shape |
| dtype_mismatch | an output's dtype differs from the reference's |
| nan_or_inf | NaN/Inf where the reference is finite |
| mismatch | values outside atol + rtol * abs(expected), in a correctness trial or in a timed call |
| input_mutated | an input tensor differs after the call |
| compiled | no GPU: the CUDA source compiled for the target GPU; nothing ran |
| static_violation | a static check found a forbidden construct (verify/static.py: introspection, monkeypatching, threads, processes, file writes, the reference `Model`, try/except fallbacks to PyTorch, native threads/streams in CUDA) |
| no_kernel | no kernel construct in the source, or a forward call (correctness or timed) launched none of the candidate's own kernels |
| torch_compute | policy `strict`: a PyTorch compute op ran inside forward (allocation, copies and views are allowed) |
| bad_output | an output is a tensor subclass, has a zero stride, or shares memory with an input or another output |
| tampered | a function the harness relies on (timers, events, synchronise, comparison, the result channel) was replaced |
| unconfirmed_speedup | a speedup above `speedup_cap` was not confirmed by a stricter second verification |
| correct | all trials matched (and, on a GPU, the timed calls' outputs too) |

Threat model (what is and is not protected) is in README.md, "The verifier's trust model".
"""

from __future__ import annotations

import ast
import json
import os
import select
import subprocess
import sys
import tempfile
import threading
import time
from dataclasses import asdict, replace
from pathlib import Path
from typing import TYPE_CHECKING

from kernelzero.tasks.hashing import task_hash
from kernelzero.types import Task, Verdict, to_dict, verdict_from_dict
from kernelzero.verify.extract import extract_code
from kernelzero.verify.feedback import feedback_for
from kernelzero.verify.options import BACKENDS, VerifyOptions, options_for, tolerances

if TYPE_CHECKING:
    from kernelzero.service.standby import Standby

__all__ = ["Verdict", "VerifyOptions", "extract_code", "options_for", "verdict_from_dict", "verify"]


def _early(
    task: Task, source: str, backend: str, opts: VerifyOptions, status: str, stage: str, message: str, **extra
) -> Verdict:
    from kernelzero.verify.judge import candidate_hash

    atol, rtol = tolerances(opts, task.atol, task.rtol)
    v = Verdict(
        status=status,
        task=task.name,
        task_hash=task_hash(task),
        candidate_hash=candidate_hash(source),
        backend=backend,
        profile=opts.profile,
        device=extra.pop("device", "cpu"),
        stage=stage,
        message=message,
        atol=atol,
        rtol=rtol,
        precision=opts.precision,
        **extra,
    )
    return replace(v, feedback=feedback_for(v))


def format_problem(source: str) -> str:
    """'' if `source` parses and defines a class ModelNew at top level, else what is wrong."""
    if not source.strip():
        return "no code found in the completion"
    try:
        tree = ast.parse(source)
    except SyntaxError as exc:
        return f"not valid Python: line {exc.lineno}: {exc.msg}"
    if not any(isinstance(n, ast.ClassDef) and n.name == "ModelNew" for n in tree.body):
        return "the code defines no top-level `class ModelNew`"
    return ""


def _gpu_available() -> bool:
    import torch

    return torch.cuda.is_available()


def verify(
    task: Task, candidate: str, backend: str, options: VerifyOptions | None = None, *, standby: Standby | None = None
) -> Verdict:
    """Verify one candidate (a completion or a source) for `task`; never raises for candidate faults.

    `standby`: judges started ahead of requests (service/standby.py); one is used when ready.
    """
    opts = options or options_for()
    if backend not in BACKENDS:
        raise ValueError(f"unknown backend {backend!r}; choose one of {', '.join(BACKENDS)}")
    source = extract_code(candidate)
    problem = format_problem(source)
    if problem:
        return _early(task, source, backend, opts, "format_error", "extract", problem)
    if opts.static_checks:
        from kernelzero.verify.static import check_candidate

        violations = check_candidate(source, backend)
        if violations:
            status = "no_kernel" if all(v.rule == "no-kernel" for v in violations) else "static_violation"
            found = [v for v in violations if status == "no_kernel" or v.rule != "no-kernel"]
            message = "; ".join(f"line {v.line}: {v.message}" if v.line else v.message for v in found[:3])
            return _early(task, source, backend, opts, status, "static", message)
    gpu = _gpu_available() and opts.device != "cpu"
    if backend == "cuda" and not gpu:
        from kernelzero.verify.cpu_cuda import verify_cuda_without_gpu

        return verify_cuda_without_gpu(task, source, opts)
    return _run_judge(task, source, backend, opts, standby)


def _physical_gpu(index: int) -> str:
    """The CUDA_VISIBLE_DEVICES entry of this process's visible GPU `index`."""
    visible = os.environ.get("CUDA_VISIBLE_DEVICES")
    if visible is None or visible.strip() == "":
        return str(index)
    entries = [e.strip() for e in visible.split(",") if e.strip()]
    if index >= len(entries):
        raise ValueError(f"gpu_index {index} asked for, but CUDA_VISIBLE_DEVICES={visible!r} shows {len(entries)}")
    return entries[index]


def _standby_judge(
    standby: Standby | None, env: dict[str, str], opts: VerifyOptions, request: Path, result: Path
) -> subprocess.Popen | None:
    """A ready judge from `standby`, given this request; None when there is none (or it just died)."""
    from kernelzero.verify.launch import on_gpu

    proc = standby.take(env, opts, on_gpu(opts)) if standby is not None else None
    if proc is None:
        return None
    try:
        proc.stdin.write(f"{request}\n{result}\n".encode())
        proc.stdin.close()
        proc.stdin = None  # closed: communicate() must not flush it
    except OSError:  # it died between the check and now
        if proc.poll() is None:
            os.killpg(proc.pid, 9)
        proc.wait()
        return None
    return proc


def _judge_output(proc: subprocess.Popen, timeout_s: float, limit: int = 1 << 20) -> bytes:
    """The judge's output until it closes it (launch.py does so once its result is written); the last `limit`
    bytes. Raises TimeoutExpired after `timeout_s`."""
    deadline = time.monotonic() + timeout_s
    fd, out = proc.stdout.fileno(), b""
    while True:
        left = deadline - time.monotonic()
        if left <= 0:
            raise subprocess.TimeoutExpired(proc.args, timeout_s)
        if select.select([fd], [], [], left)[0]:
            data = os.read(fd, 1 << 16)
            if not data:
                proc.stdout.close()
                return out
            out = (out + data)[-limit:]


def _run_judge(task: Task, source: str, backend: str, opts: VerifyOptions, standby: Standby | None = None) -> Verdict:
    budget = opts.build_timeout_s + (opts.trials + 6) * opts.timeout_floor_s + 300
    with tempfile.TemporaryDirectory(prefix="kz-verify-") as tmp:
        request, result = Path(tmp, "request.json"), Path(tmp, "result.json")
        request.write_text(
            json.dumps({"task": to_dict(task), "source": source, "backend": backend, "options": asdict(opts)})
        )
        env = {**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parents[2])}
        if opts.gpu_index is not None:
            env["CUDA_VISIBLE_DEVICES"] = _physical_gpu(opts.gpu_index)
        from kernelzero.verify.build_cache import default_cache_dir

        env["KZ_BUILD_CACHE"] = opts.build_cache or str(default_cache_dir())  # any backend: one standby kind per lane
        start = time.monotonic()
        proc = _standby_judge(standby, env, opts, request, result)
        if proc is None:
            proc = subprocess.Popen(
                [sys.executable, "-m", "kernelzero.verify.launch", str(request), str(result)],
                stdin=subprocess.DEVNULL,
                stdout=subprocess.PIPE,
                stderr=subprocess.STDOUT,
                start_new_session=True,
                env=env,
            )
        try:
            out = _judge_output(proc, budget)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, 9)
            proc.communicate()
            return _early(task, source, backend, opts, "timeout", "judge", f"verification took over {budget:.0f} s")
        if result.exists():  # the judge closed its output after writing it: its own teardown is not waited for
            threading.Thread(target=proc.wait, daemon=True).start()
        else:
            try:
                proc.wait(timeout=30)
            except subprocess.TimeoutExpired:
                os.killpg(proc.pid, 9)
                proc.wait()
            tail = out.decode(errors="replace")[-1500:]
            return _early(
                task,
                source,
                backend,
                opts,
                "crash",
                "judge",
                f"the verifier's judge process died (exit {proc.returncode})",
                error_log=tail,
            )
        payload = json.loads(result.read_text())
    if "error" in payload:
        raise ValueError(payload["error"])
    verdict = verdict_from_dict(payload["verdict"])
    return replace(verdict, stage_seconds={**verdict.stage_seconds, "total": round(time.monotonic() - start, 3)})
