"""Faults blamed right: which failures are the candidate's, the task's, or the machine's.

A GPU is shared: pool lanes, other pools, the service, a training job. A failure that another tenant may have
caused (CUDA out of memory, a process killed from outside, a CUDA context that cannot be made) is not a verdict on
the candidate or on the task. The rules:

1. First run, on a GPU: such a fault raises `RetryAlone`; the judge's caller (judge/run.py) runs the whole
   verification once more with `gpu_alone` (its memory lease waits until it is alone on the GPU: judge/memory.py).
   A judge process that dies is retried the same way.
2. Alone, the same fault is the candidate's when it is the candidate's process (`oom`, `crash`), and the machine's
   (`infra_error`) when it is the verifier's own (a judge that dies again, a CUDA context that cannot be made).
3. The task's reference failing (an exception, a death, no reply, out of memory) is checked in a clean retry: the
   candidate's process is killed, a fresh reference process builds the task, draws an input set and runs it, with
   no candidate running (`reference_alone`). Failing there too, the task is `task_broken` (or `infra_error` when it
   ran out of GPU memory that other programs hold). Passing there, the candidate interfered with the reference:
   `oom` if it starved it of memory, else `tampered` (killed, stopped, rewrote its files).

Statuses `infra_error` and `task_broken` are skipped by rewards and metrics (types.SKIPPED_STATUSES).
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

from kernelzero.verify.judge.lease import exclusive_gpu
from kernelzero.verify.judge.memory import foreign_starved
from kernelzero.verify.judge.reference import Reference
from kernelzero.verify.judge.task_source import TaskBroken
from kernelzero.verify.sandbox.process import scratch_folder

if TYPE_CHECKING:
    from kernelzero.types import Verdict
    from kernelzero.verify.judge.judge import Judge

OOM_MARKERS = ("out of memory", "outofmemoryerror", "cublas_status_alloc_failed", "cudaerrormemoryallocation")


class RetryAlone(Exception):
    """A fault another tenant of the GPU may have caused: verify again, alone on the GPU (the message says why)."""


def looks_oom(text: str) -> bool:
    """Whether an error text is an out-of-memory error of the GPU (host-memory limits say "host memory")."""
    low = text.lower()
    return any(marker in low for marker in OOM_MARKERS) and "host memory" not in low


def shared_gpu(judge: Judge) -> bool:
    """A first run on a GPU: another tenant may be to blame for a fault."""
    return judge.device == "cuda" and not judge.opts.gpu_alone


def blame_candidate_fault(judge: Judge, status: str, stage: str, message: str, exit_signal: str = "") -> Verdict | None:
    """After the candidate's process failed: raise RetryAlone on a first run on a GPU when another tenant may be to
    blame; alone, the `infra_error` verdict when it was the machine's doing (no CUDA context could be made before any
    candidate code ran, or other programs held the memory this verification needs); else None (the candidate's)."""
    context = stage == "context" and not judge.candidate_ran  # a "context" reply after that may be forged
    external = context or (status == "oom" and looks_oom(message)) or exit_signal == "SIGKILL"
    if not external or judge.device != "cuda":
        return None
    if shared_gpu(judge):
        raise RetryAlone(f"the candidate's process: {status} at {stage}: {message[:300]}")
    if context:
        return judge.verdict("infra_error", "gpu_memory", f"no CUDA context for the candidate's process: {message}")
    if status == "oom" and foreign_starved(judge.stage_s):
        foreign = judge.stage_s["gpu_foreign_gib"]
        return judge.verdict(
            "infra_error", "gpu_memory", f"out of GPU memory while other programs held {foreign:.1f} GiB: {message}"
        )
    return None


def reference_alone(judge: Judge) -> str | None:
    """Build the task in a fresh reference process with no candidate running, draw one input set, run it: None when
    all of it works, else the failure's message."""
    with scratch_folder("kz-ref-") as folder:
        try:
            ref, started = Reference.start(judge.task, judge.opts, judge.device, Path(folder))
        except TaskBroken as exc:
            return str(exc)
        try:
            ref.build(started.cand_path, judge.init_seed)
            inputs = ref.input_sets([judge.input_seed + 1], judge.opts.build_timeout_s)[0]
            ref.expected(inputs, judge.run_timeout())
            return None
        except TaskBroken as exc:
            return str(exc)
        finally:
            ref.close()


def reference_failed(judge: Judge, exc: TaskBroken, candidate) -> Verdict:
    """The verdict after the task's reference failed (`candidate`: the candidate's WorkerProcess, killed first)."""
    text = str(exc)
    died = text.startswith("the task's reference process failed")
    if shared_gpu(judge) and (died or looks_oom(text)):
        raise RetryAlone(f"the task's reference: {text[:300]}")
    if candidate is not None:
        candidate.kill()  # the clean retry runs with no candidate alive
    if judge.device == "cuda":
        with exclusive_gpu():  # the clean retry has the GPU to itself
            alone = reference_alone(judge)
    else:
        alone = reference_alone(judge)
    if alone is not None:
        if judge.device == "cuda" and looks_oom(alone) and foreign_starved(judge.stage_s):
            return judge.verdict(
                "infra_error",
                "gpu_memory",
                f"the task's reference ran out of GPU memory that other programs hold: {alone[:400]}",
            )
        return judge.verdict(
            "task_broken", "reference", f"{alone[:420]} (again in a clean retry, no candidate running)"
        )
    if not judge.candidate_ran:  # it failed before any candidate code ran, and works alone: the machine's doing
        return judge.verdict("infra_error", "reference", f"the task's reference failed once, then worked: {text[:400]}")
    status = "oom" if looks_oom(text) else "tampered"
    how = "starved it of GPU memory" if status == "oom" else "interfered with it"
    return judge.verdict(
        status,
        "reference",
        f"the task's reference failed while the candidate ran and works alone: the candidate {how} ({text[:400]})",
    )
