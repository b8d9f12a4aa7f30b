"""The observation after a turn: what the verifier found, written for the model that made the attempt.

    text = observation(verdict, profile=None)      # the verdict's feedback, timing, kernels, profile (or why none)

Parts, in order, each present only when it applies:

1. the verdict's own feedback (verify/feedback.py: status and message, the compiler's error lines, the worst
   mismatch, a hint), or the verdict's status and message when it carries none;
2. the timing against the reference: the candidate's median time, PyTorch eager's and torch.compile's, and the
   speedups (only correct candidates on a GPU are timed; otherwise the verdict's reason for no timing);
3. the candidate's own kernels and how often each launched in one forward call;
4. which kernels dominate the time, from a separate profiled run (`Profiler`), or a line saying that no profile
   was taken and why (on CPU: no GPU timing; on a GPU: no profiler given).

A `Profiler` is any callable taking [(task, code, backend)] and returning, per item, a list of `KernelTime` or
None. The environment calls it only for verdicts with a GPU timing. It must run the candidate through the
verifier's sandbox (the candidate is untrusted): `kernelzero.verify.profile.profiler()` is one (a sandboxed run of
the candidate under torch.profiler, holding the GPU alone while it profiles).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

from kernelzero.types import KernelTime, Task, Timing, Verdict
from kernelzero.verify.feedback import feedback_for

PROFILE_ROWS = 6  # kernels listed in a profile, the most expensive first
LIMIT = 2000  # characters of observation at most


Profiler = Callable[[Sequence[tuple[Task, str, str]]], Sequence[Sequence[KernelTime] | None]]


def _ms(t: Timing | None) -> str:
    return "-" if t is None else f"{t.median_ms:.4g} ms"


def timing_text(verdict: Verdict) -> str:
    """One or two lines on the candidate's time against the reference, or why there is none."""
    if verdict.timing is None:
        return f"Timing: none ({verdict.timing_note})." if verdict.timing_note else ""
    line = f"Timing (median): your ModelNew {_ms(verdict.timing)}, PyTorch eager {_ms(verdict.ref_eager)}"
    if verdict.speedup_eager is not None:
        line += f" ({verdict.speedup_eager:.2f}x eager"
        if verdict.speedup_ci is not None:
            line += f", 95% interval {verdict.speedup_ci[0]:.2f}-{verdict.speedup_ci[1]:.2f}"
        line += ")"
    if verdict.ref_compile is not None:
        line += f"; torch.compile {_ms(verdict.ref_compile)}"
        if verdict.speedup_compile is not None:
            line += f" ({verdict.speedup_compile:.2f}x compile)"
    return line + "."


def kernels_text(verdict: Verdict) -> str:
    """The candidate's kernels launched in one forward, e.g. `Your kernels per forward: gelu_kernel x1.`"""
    if not verdict.own_kernels:
        return ""
    parts = ", ".join(f"{name} x{n}" for name, n in sorted(verdict.own_kernels.items(), key=lambda kv: -kv[1]))
    return f"Your kernels launched per forward call: {parts}."


def profile_text(verdict: Verdict, profile: Sequence[KernelTime] | None, have_profiler: bool) -> str:
    """Where the device time goes, or a line saying why no profile was taken."""
    if verdict.timing is None:
        return "No profile was taken (the kernel was not timed on a GPU)."
    if profile is None:
        reason = "the profiled run failed" if have_profiler else "no profiler is configured"
        return f"No profile was taken ({reason})."
    rows = sorted(profile, key=lambda k: -k.ms)
    total = sum(k.ms for k in rows) or 1.0
    lines = ["Device time by kernel (profiled forward call):"]
    for k in rows[:PROFILE_ROWS]:
        lines.append(f"  {k.ms:.4g} ms  {100 * k.ms / total:4.1f}%  {k.name} (x{k.calls})")
    if len(rows) > PROFILE_ROWS:
        rest = sum(k.ms for k in rows[PROFILE_ROWS:])
        lines.append(f"  {rest:.4g} ms  {100 * rest / total:4.1f}%  {len(rows) - PROFILE_ROWS} other kernel(s)")
    return "\n".join(lines)


def observation(verdict: Verdict, profile: Sequence[KernelTime] | None = None, have_profiler: bool = False) -> str:
    """The text shown to the model after a turn (see the module docstring), at most LIMIT characters."""
    feedback = verdict.feedback.strip() or feedback_for(verdict)
    parts = [feedback, timing_text(verdict), kernels_text(verdict), profile_text(verdict, profile, have_profiler)]
    text = "\n".join(p for p in parts if p)
    return text if len(text) <= LIMIT else text[: LIMIT - 3] + "..."


def budget_text(budget: int) -> str:
    """The observation of a completion that was not verified because the sample budget was spent."""
    return f"Not verified: the sample budget of {budget} verified completions is spent."
