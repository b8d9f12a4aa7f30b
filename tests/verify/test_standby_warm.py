"""A standby judge's warm-up of its two workers (verify/judge/serving.py `_warm`, verify/worker/warm.py): both are asked
before either is awaited, a worker that died is skipped without stopping the other, and on a GPU the reference warms
CUDA alone while the candidate also warms Triton. Real sandboxed worker processes, as the standby starts them."""

from __future__ import annotations

import contextlib

import pytest
import torch

from kernelzero.verify.judge.serving import Held, _warm
from kernelzero.verify.sandbox.box import DEFAULT_UIDS
from kernelzero.verify.sandbox.process import plan_sandbox, scratch_folder
from kernelzero.verify.sandbox.worker_process import kill_all, start_worker

GPU = torch.cuda.is_available()


def _one(folder, role: str, gpu: bool):
    sandbox = plan_sandbox(DEFAULT_UIDS, False)
    return start_worker(
        "", folder, interpret=not gpu and role == "candidate", sandbox=sandbox, host_mem_gb=4, role=role
    )


def _pair(cand_folder, ref_folder, gpu: bool):
    return _one(cand_folder, "candidate", gpu), _one(ref_folder, "reference", gpu)


def _held(started) -> Held:
    return Held(started, contextlib.ExitStack())


def _notes(started) -> list[str]:
    return [n for n in started.plan.notes if n.startswith("standby worker:")]


def test_the_workers_are_warmed_and_a_dead_one_is_skipped():
    with scratch_folder("kz-cand-") as cand, scratch_folder("kz-ref-") as ref:
        try:
            live, reference = _pair(cand, ref, gpu=False)
            dead = _one(cand / "dead", "candidate", gpu=False)
            dead.worker.kill()  # its whole process group: killing the outer process alone left the worker a moment
            _warm(
                [_held(w) for w in (dead, live, reference)], gpu=False
            )  # the dead one first: the others are still warmed
            assert _notes(dead) == []
            for started in (live, reference):
                (note,) = _notes(started)
                assert note.startswith("standby worker: dispatch") and note.endswith("no GPU"), note
        finally:
            kill_all()


@pytest.mark.gpu
@pytest.mark.skipif(not GPU, reason="needs a CUDA GPU")
def test_the_reference_warms_cuda_alone_and_the_candidate_triton_too_gpu():
    with scratch_folder("kz-cand-") as cand, scratch_folder("kz-ref-") as ref:
        try:
            workers = _pair(cand, ref, gpu=True)
            _warm([_held(w) for w in workers], gpu=True)
            (cand_note,) = _notes(workers[0])
            (ref_note,) = _notes(workers[1])
            assert "Triton" in cand_note and "not warmed" not in cand_note and "failed" not in cand_note, cand_note
            assert ref_note.endswith("Triton not warmed") and "failed" not in ref_note, ref_note
        finally:
            kill_all()
