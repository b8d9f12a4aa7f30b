"""The stricter second verification of a speedup over the cap (`speedup_cap`, 10x by default): the same candidate
verified again in a fresh worker, with more trials and timed calls, a secret seed and a fresh input set for every
call (`confirming_options`); the first verdict stands only if the second is correct with at least half its speedup
(`confirm_speedup`). Called from the timing stage (judge/timing_stage.py), inside the first verification's leases."""

from __future__ import annotations

from dataclasses import replace
from typing import TYPE_CHECKING

from kernelzero.types import SKIPPED_STATUSES, Verdict
from kernelzero.verify.options import VerifyOptions

if TYPE_CHECKING:
    from kernelzero.verify.judge.judge import Judge


def confirming_options(opts: VerifyOptions) -> VerifyOptions:
    """The stricter second verification's options: more trials and timed calls, a secret seed, and a fresh input
    set for every call whatever the profile (under KernelBench's one set for all calls, a kernel that memoises its
    answer by the input's content would have its speedup confirmed by the same trick)."""
    return replace(
        opts,
        confirming=True,
        trials=max(10, opts.trials),
        timed_calls=100,
        timing_budget_s=max(1.0, opts.timing_budget_s),
        seed=None,
        input_sets=0,
    )


def confirm_speedup(judge: Judge, speedup: float) -> Verdict | None:
    """Re-verify an implausible speedup in a fresh worker with more trials, sets and timed calls.

    None when the second run is correct and its speedup is at least half the first; else a verdict
    `unconfirmed_speedup` saying what the second run found. It runs inside the first's leases (re-entrant).
    """
    second = type(judge)(judge.task, judge.source, judge.backend, confirming_options(judge.opts)).run()
    if second.status in SKIPPED_STATUSES:  # the machine or the task failed the second run: not the candidate's
        return second
    if second.status == "correct" and (second.speedup_eager or 0) >= speedup / 2:
        judge.notes.append(
            f"speedup {speedup:.1f}x over the {judge.opts.speedup_cap:g}x cap confirmed by a stricter "
            f"second verification ({second.speedup_eager:.1f}x)"
        )
        return None
    found = second.message or f"{second.status}, {second.speedup_eager or 0:.2f}x"
    return judge.verdict(
        "unconfirmed_speedup",
        "timing",
        f"{speedup:.1f}x over eager was not confirmed by a stricter second verification: {found}",
    )
