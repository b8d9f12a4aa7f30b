"""Faults blamed right (verify/judge/faults.py, judge/run.py), on CPU with real judges and sandboxes: a task that
fails alone is `task_broken` (a verdict, never an exception); a judge killed from outside is verified again, and a second death is `infra_error`, never `crash`. The rules
for faults another GPU tenant may cause (a retry alone on the GPU) are checked on their decisions here and on the
H200 by the GPU suite."""

from __future__ import annotations

import os
import signal
import threading
import time
from pathlib import Path
from types import SimpleNamespace

import pytest
from judges import judge_pids

from kernelzero.types import Task
from kernelzero.verify import options_for, verify
from kernelzero.verify.judge.faults import RetryAlone, blame_candidate_fault, looks_oom

KERNELS = Path(__file__).resolve().parents[1] / "kernels"
CANDIDATE = (KERNELS / "correct" / "triton_leaky_relu.py").read_text()
TASK = """
import torch
import torch.nn as nn

class Model(nn.Module):
    def __init__(self, negative_slope):
        super().__init__()
        self.negative_slope = negative_slope

    def forward(self, x):
        {body}
        return torch.nn.functional.leaky_relu(x, self.negative_slope)

def get_inputs():
    return [torch.randn(1000)]

def get_init_inputs():
    return [0.1]
"""
OPTS = options_for(device="cpu", trials=2, compile_check=False)


def test_a_task_that_fails_alone_is_task_broken_not_an_exception():
    task = Task(name="broken/forward", source=TASK.format(body="raise RuntimeError('the task forward fails')"))
    verdict = verify(task, CANDIDATE, "triton", OPTS)
    assert verdict.status == "task_broken", verdict.message
    assert "the task itself is broken" in verdict.message and "clean retry" in verdict.message


def test_a_task_whose_source_cannot_run_is_task_broken():
    task = Task(name="broken/import", source="raise RuntimeError('task import fails')\n")
    verdict = verify(task, CANDIDATE, "triton", OPTS)
    assert verdict.status == "task_broken" and "task import fails" in verdict.message


def _kill_judges(count: int, earlier: set[int], stop: threading.Event, killed: list[int]) -> None:
    """SIGKILL the first `count` judge processes started after `earlier` was taken, each once it runs."""
    while len(killed) < count and not stop.is_set():
        for pid in sorted(judge_pids() - earlier - set(killed)):
            time.sleep(0.5)  # let it start its workers first
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                continue
            killed.append(pid)
            break
        time.sleep(0.05)


@pytest.mark.parametrize("deaths", [1, 2])
def test_a_judge_killed_from_outside_is_verified_again_and_twice_is_infra_error(deaths):
    task = Task(name="fine/leaky", source=TASK.format(body="pass"))
    stop, killed = threading.Event(), []
    earlier = judge_pids()  # judges of earlier tests may still be tearing down: not ours to kill
    killer = threading.Thread(target=_kill_judges, args=(deaths, earlier, stop, killed), daemon=True)
    killer.start()
    try:
        verdict = verify(task, CANDIDATE, "triton", OPTS)
    finally:
        stop.set()
        killer.join(10)
    assert len(killed) == deaths
    if deaths == 1:
        assert verdict.status == "correct", verdict.message
        assert any("verified again alone" in n for n in verdict.notes), verdict.notes
    else:
        assert verdict.status == "infra_error" and verdict.stage == "judge", (verdict.status, verdict.message)
        assert "died" in verdict.message


def _judge(device: str, alone: bool = False, candidate_ran: bool = False, **stage_s) -> SimpleNamespace:
    """What blame_candidate_fault reads of a Judge: its device, options, measured stage values and verdict maker."""
    return SimpleNamespace(
        device=device,
        candidate_ran=candidate_ran,
        opts=SimpleNamespace(gpu_alone=alone),
        stage_s=stage_s,
        verdict=lambda status, stage, message: (status, stage),
    )


def test_faults_another_gpu_tenant_may_cause_are_retried_alone_once():
    first, cpu = _judge("cuda"), _judge("cpu")
    cuda_oom = "OutOfMemoryError: CUDA out of memory. Tried to allocate 20.00 GiB"
    for status, stage, message, signal_name in (
        ("oom", "correctness", cuda_oom, ""),
        ("crash", "correctness", "killed by SIGKILL", "SIGKILL"),
        ("oom", "context", "CUDA error: out of memory", ""),
    ):
        with pytest.raises(RetryAlone):
            blame_candidate_fault(first, status, stage, message, signal_name)
    assert blame_candidate_fault(cpu, "oom", "correctness", cuda_oom) is None  # no GPU shared here
    host = "host memory over the limit (40.1 GiB) during trial 0"
    assert blame_candidate_fault(first, "oom", "correctness", host) is None  # the candidate's own limit
    assert blame_candidate_fault(first, "crash", "correctness", "an illegal memory access was encountered") is None
    assert blame_candidate_fault(first, "crash", "correctness", "killed by SIGSEGV", "SIGSEGV") is None
    assert looks_oom("RuntimeError: CUBLAS_STATUS_ALLOC_FAILED when calling cublasCreate")
    assert not looks_oom("host memory over the limit (33.0 GiB) during the reference forward: out of memory")


def test_alone_on_the_gpu_an_out_of_memory_is_the_candidates_unless_other_programs_held_the_memory():
    roomy = _judge("cuda", alone=True, gpu_foreign_gib=2.0, gpu_need_gib=20.0, gpu_total_gib=139.8)
    crowded = _judge("cuda", alone=True, gpu_foreign_gib=125.0, gpu_need_gib=20.0, gpu_total_gib=139.8)
    cuda_oom = "OutOfMemoryError: CUDA out of memory. Tried to allocate 20.00 GiB"
    assert blame_candidate_fault(roomy, "oom", "correctness", cuda_oom) is None  # the candidate's `oom`
    assert blame_candidate_fault(crowded, "oom", "correctness", cuda_oom) == ("infra_error", "gpu_memory")
    assert blame_candidate_fault(roomy, "oom", "context", "CUDA error: out of memory") == ("infra_error", "gpu_memory")


def test_a_context_failure_is_the_machines_only_before_any_candidate_code_ran():
    """After the candidate's import, a reply saying "context" may be forged by the candidate: its own verdict."""
    forged = _judge("cuda", alone=True, candidate_ran=True, gpu_foreign_gib=0.0, gpu_need_gib=2.0, gpu_total_gib=139.8)
    assert blame_candidate_fault(forged, "crash", "context", "CUDA error: no device") is None
    first = _judge("cuda", candidate_ran=True)
    assert blame_candidate_fault(first, "crash", "context", "CUDA error: no device") is None  # no retry either
