"""How the judge reads the worker's first-filter report (launch counts, PyTorch ops, tampering).

These figures come from inside the candidate's process (`verify/worker/guards.py`, `worker/watch.py`), so they can
only reject a candidate, never make one `correct`: a missing launch is `no_kernel`, a replaced harness function or a
probe of the watch state `tampered`, and PyTorch or host compute (`host:...` entries: numpy, ctypes, copies to the
host) turns `correct` into `torch_compute` under the strict policy. They arrive in authenticated replies
(`sandbox/channel.py`), so no process between the worker and the judge can rewrite them.
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
    if reply.get("probes"):
        return judge.verdict("tampered", "correctness", probed_message(reply["probes"]), **where)
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


def probed_message(probes: list) -> str:
    """The message of a candidate whose code inspected what tells a watched call from a timed one."""
    names = ", ".join(str(p) for p in probes[:8])
    return f"the candidate's code probed the harness's watch state or the clock ({names}): watched and timed calls must not be told apart"


def policy_result(judge: Judge, status: str, message: str) -> tuple[str, str, dict[str, str]]:
    """(status, message, status per policy) for a run that was otherwise `status`."""
    ops = judge.fields.get("torch_ops", ())
    per = dict.fromkeys(POLICIES, status)
    if ops and status == "correct":
        per["strict"] = "torch_compute"
    final = per[judge.opts.policy]
    if final == "torch_compute":
        what = "PyTorch or host compute" if any(op.startswith("host:") for op in ops) else "PyTorch compute ops"
        message = f"{what} ran inside forward: {', '.join(ops)} (not allowed under the strict policy)"
    return final, message, per
