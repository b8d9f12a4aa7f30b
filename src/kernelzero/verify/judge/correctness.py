"""The correctness trials of one verification: fresh inputs from the reference for each trial, the candidate's
outputs compared in the judge, its inputs checked for changes, and the task's degeneracy noted (`correctness`).
Functions of the `Judge` (judge.py), kept apart so that each module stays one idea."""

from __future__ import annotations

import time
from typing import TYPE_CHECKING

import torch

from kernelzero.tasks.quality import degenerate_reasons
from kernelzero.types import Verdict
from kernelzero.verify.judge.anticheat import first_filter_verdict
from kernelzero.verify.judge.compare import compare, same_inputs
from kernelzero.verify.judge.lease import let_writers_in

if TYPE_CHECKING:
    from kernelzero.verify.judge.judge import Judge
    from kernelzero.verify.sandbox.worker_process import WorkerProcess


def judge_trial(
    judge: Judge, expected: list, inputs: list, outs: list, after: list, reply: dict, trial: int, passed: int
) -> Verdict | None:
    """The verdict of one correctness trial that ran (outputs, inputs after the call, the output checks)."""
    where = {"trials": trial + 1, "trials_passed": passed}
    failure = compare(
        expected, judge.on_device(outs), judge.atol, judge.rtol, trial, tie_prone=judge.task.tie_prone, inputs=inputs
    )
    if failure is not None:
        message = f"trial {trial}: {failure.message}"
        return judge.verdict(failure.status, "correctness", message, mismatch=failure.mismatch, **where)
    changed = same_inputs([x for x in inputs if isinstance(x, torch.Tensor)], judge.on_device(after))
    if changed:
        return judge.verdict("input_mutated", "correctness", changed, **where)
    if reply.get("output_problem"):
        return judge.verdict("bad_output", "correctness", reply["output_problem"], **where)
    return None


def correctness(judge: Judge, worker: WorkerProcess) -> Verdict | None:
    """Run the correctness trials; the first failing trial's verdict, or None when every trial passed."""
    judge.fields["stage_hint"] = "correctness"
    passed = 0
    draws: list = []
    for trial in range(judge.opts.trials):
        if judge.device == "cuda" and trial:
            waited = let_writers_in()  # a timer waiting for the GPU goes first (lease.py)
            judge.stage_s["gpu_stepped_aside"] = round(judge.stage_s.get("gpu_stepped_aside", 0.0) + waited, 4)
        inputs = judge.ref.input_sets([judge.input_seed + 1 + trial], judge.opts.build_timeout_s)[0]
        t0 = time.perf_counter()
        expected = judge.ref.expected(inputs, judge.run_timeout())
        if judge.device == "cuda":
            torch.cuda.synchronize()
        judge.stage_s["ref_forward_ms"] = max(judge.stage_s.get("ref_forward_ms", 0), (time.perf_counter() - t0) * 1e3)
        start = time.perf_counter()
        worker.send({"cmd": "run", "inputs": inputs})
        reply, tensors = worker.receive(judge.run_timeout(), f"correctness trial {trial}")
        judge.timed("correctness", start)
        if trial == 0:  # Triton's JIT compile happens here
            judge.timed("first_call", start)
        if not reply["ok"]:
            return judge.failed(reply)
        if reply.get("bf16") and "bf16" not in " ".join(judge.notes):
            judge.notes.append("bf16 ran in Triton's interpreter, whose bf16 arithmetic is unreliable")
        rejected = first_filter_verdict(judge, reply, trial, passed)
        if rejected is not None:
            return rejected
        outs, after = tensors[: reply["n_out"]], tensors[reply["n_out"] :]
        if worker.ipc:  # the worker ran on the judge's lent copies: read them where they are
            after = worker.sink.lent
        if trial < 2:
            draws.append((expected, inputs))
        failure = judge_trial(judge, expected, inputs, outs, after, reply, trial, passed)
        if failure is not None:
            return failure
        passed += 1
    judge.fields.update(trials=judge.opts.trials, trials_passed=passed)
    if len(draws) == 2:
        reasons = degenerate_reasons(draws[0][0], draws[1][0], draws[0][1], max(judge.atol, 1e-6))
        if reasons:
            judge.fields["task_degenerate"] = tuple(reasons)
            judge.notes.append("degenerate task, a trivial answer passes: " + "; ".join(reasons))
    return None
