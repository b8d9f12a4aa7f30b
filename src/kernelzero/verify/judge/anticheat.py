"""How the judge reads the worker's first-filter report (launch counts, PyTorch ops, tampering).

These figures come from inside the candidate's process (`verify/worker/guards.py`), so they can only reject a
candidate, never make one `correct`: a missing launch is `no_kernel`, a replaced harness function `tampered`, and
PyTorch compute ops turn `correct` into `torch_compute` under the strict policy.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from kernelzero.types import POLICIES, Verdict

if TYPE_CHECKING:
    from kernelzero.verify.judge.judge import Judge


def first_filter_verdict(judge: Judge, reply: dict, trial: int, passed: int) -> Verdict | None:
    """The status of a call that ran but broke the rules (see guards.py); None when clean."""
    where = dict(
        trials=trial + 1,
        trials_passed=passed,
        own_kernels=reply.get("launches", {}),
        torch_ops=tuple(reply.get("torch_ops", ())),
    )
    judge.fields["own_kernels"] = where["own_kernels"]
    if reply.get("tampered"):
        return judge.verdict("tampered", "correctness", f"the harness was tampered with ({reply['tampered']})", **where)
    if not reply.get("launches"):
        return judge.verdict(
            "no_kernel",
            "correctness",
            f"trial {trial}: the forward launched none of the candidate's own kernels",
            **where,
        )
    ops = tuple(reply.get("torch_ops", ()))
    if ops:
        judge.fields["torch_ops"] = tuple(sorted(set(judge.fields.get("torch_ops", ())) | set(ops)))
    return None


def policy_result(judge: Judge, status: str, message: str) -> tuple[str, str, dict[str, str]]:
    """(status, message, status per policy) for a run that was otherwise `status`."""
    ops = judge.fields.get("torch_ops", ())
    per = dict.fromkeys(POLICIES, status)
    if ops and status == "correct":
        per["strict"] = "torch_compute"
    final = per[judge.opts.policy]
    if final == "torch_compute":
        message = f"PyTorch compute ops ran inside forward: {', '.join(ops)} (not allowed under the strict policy)"
    return final, message, per
