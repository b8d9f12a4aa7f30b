"""What `kernelzero optimize` writes at the end: report.md and the chosen kernel as an importable module.

    write_outputs(out, Outcome(...))       # out/report.md and out/<module>_optimized.py (when a kernel was chosen)

The report gives the result first (the chosen kernel's times and speedups over PyTorch eager and torch.compile with
their spread: the 95% interval of the speedup over eager, and the 10th-90th percentile of each time), then the
re-verification of each finalist at every size, then the history of attempts (one row per verified turn). The
kernel file is the candidate's source exactly as verified, below a comment header saying where it came from; it
defines `ModelNew`, built and called like the original module.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from kernelzero.optimize.choose import ORIGINAL, Candidate
from kernelzero.report.markdown import render_table
from kernelzero.report.tables import NA, Table
from kernelzero.rewards import is_correct
from kernelzero.types import Timing, Verdict


@dataclass
class Outcome:
    """Everything the report shows."""

    module: str  # the input file as given
    task_name: str  # the task's name (the file's stem)
    facts: list[str]  # "name: value" lines: model, backend, budget, turns, sizes ...
    sizes: dict[str, str]  # variant -> its sizes, e.g. {"original": "rows=256, cols=512", "half": ...}
    chosen: Candidate | None  # the kernel picked (None: no candidate passed)
    finalists: list[Candidate] = field(default_factory=list)  # re-verified, in ranking order
    results: dict[str, dict[str, Verdict]] = field(default_factory=dict)  # hash -> variant -> verdict
    history: list[dict[str, Any]] = field(default_factory=list)  # verdicts.jsonl records of the search
    tokens: dict[tuple[int, int], int | None] = field(default_factory=dict)  # (episode, turn) -> output tokens
    notes: list[str] = field(default_factory=list)  # why the search stopped, sizes left out, ...


def _ms(t: Timing | None) -> str:
    return NA if t is None else f"{t.median_ms:.4g} ms"


def _spread(t: Timing | None) -> str:
    return NA if t is None else f"{t.p10_ms:.4g}-{t.p90_ms:.4g} ms"


def compile_range(v: Verdict) -> str:
    """The speedup over torch.compile from the 10th/90th percentiles: slowest-compile/fastest-kernel bounds."""
    if v.timing is None or v.ref_compile is None or v.timing.p10_ms <= 0 or v.timing.p90_ms <= 0:
        return NA
    return f"{v.ref_compile.p10_ms / v.timing.p90_ms:.2f}-{v.ref_compile.p90_ms / v.timing.p10_ms:.2f}x"


def speed_table(v: Verdict) -> Table:
    """Times of the chosen kernel and of the two baselines, and the speedups with their spread."""
    ci = f"{v.speedup_ci[0]:.2f}-{v.speedup_ci[1]:.2f}x (95% interval)" if v.speedup_ci else NA
    eager = NA if v.speedup_eager is None else f"{v.speedup_eager:.2f}x"
    comp = NA if v.speedup_compile is None else f"{v.speedup_compile:.2f}x"
    rows = (
        ("ModelNew (chosen kernel)", _ms(v.timing), _spread(v.timing), "", ""),
        ("PyTorch eager", _ms(v.ref_eager), _spread(v.ref_eager), eager, ci),
        ("torch.compile", _ms(v.ref_compile), _spread(v.ref_compile), comp, f"{compile_range(v)} (p10/p90)"),
    )
    header = ("", "median time", "p10-p90", "speedup of ModelNew", "spread of the speedup")
    return Table(f"Speed at the original sizes ({v.device})", header, rows)


def _cell(v: Verdict | None) -> str:
    if v is None:
        return "not run"
    status = v.policy_status.get("strict", v.status)
    return f"{status} ({v.trials_passed}/{v.trials} trials)" if status == "correct" else f"{status}: {v.message[:100]}"


def finalist_table(o: Outcome) -> Table:
    variants = list(o.sizes)
    rows = []
    for c in o.finalists:
        got = o.results.get(c.hash, {})
        final = got.get(ORIGINAL)
        speed = NA if final is None or final.speedup_eager is None else f"{final.speedup_eager:.2f}x"
        search = NA if c.speedup is None else f"{c.speedup:.2f}x"
        mark = "chosen" if o.chosen is not None and c.hash == o.chosen.hash else ""
        row = (c.hash, f"{c.episode}/{c.turn}", str(c.order), search, *(_cell(got.get(v)) for v in variants), speed)
        rows.append((*row, mark))
    header = ("candidate", "episode/turn", "found #", "search speedup", *variants, "re-verified speedup", "")
    return Table("Finalists, re-verified (strict policy)", header, tuple(rows))


def history_table(o: Outcome) -> Table:
    rows = []
    for n, rec in enumerate(o.history, 1):
        v = rec["verdict"]
        status = (v.get("policy_status") or {}).get("strict", v["status"])
        speed = NA if v.get("speedup_eager") is None else f"{v['speedup_eager']:.2f}x"
        tokens = o.tokens.get((rec["sample_idx"], rec["turn"]))
        message = (v.get("message") or "").splitlines()[0][:80] if v.get("message") else ""
        rows.append(
            (str(n), str(rec["sample_idx"]), str(rec["turn"]), status, speed, NA if tokens is None else str(tokens))
            + (v["candidate_hash"], message)
        )
    header = ("#", "episode", "turn", "status (strict)", "speedup vs eager", "output tokens", "candidate", "message")
    return Table("History of attempts", header, tuple(rows))


def kernel_file_name(task_name: str) -> str:
    return f"{task_name}_optimized.py"


def kernel_source(o: Outcome) -> str:
    """The chosen kernel's source under a comment header (comments only: the code is as verified)."""
    c = o.chosen
    if c is None:
        raise ValueError("no kernel was chosen")
    final = o.results[c.hash][ORIGINAL]
    speed = "not timed (no GPU)" if final.speedup_eager is None else f"{final.speedup_eager:.2f}x PyTorch eager"
    header = [
        f"# ModelNew for {o.module}, written by `kernelzero optimize`.",
        f"# Candidate {c.hash} (episode {c.episode}, turn {c.turn}); speed at the original sizes: {speed}.",
        f"# Verified correct (strict policy) at: {'; '.join(f'{k} ({v})' for k, v in o.sizes.items())}.",
        "# Use: from this module import ModelNew; ModelNew(*init_args) replaces the original module.",
        "",
    ]
    return "\n".join(header) + c.code.rstrip("\n") + "\n"


def report_markdown(o: Outcome, kernel_file: str | None) -> str:
    parts = [f"# kernelzero optimize: {o.module}", "", *(f"- {f}" for f in o.facts)]
    parts += [f"- sizes {k}: {v}" for k, v in o.sizes.items()] + [f"- note: {n}" for n in o.notes] + [""]
    parts += ["## Result", ""]
    if o.chosen is None:
        parts += ["No candidate passed the strict policy at every size: nothing was written.", ""]
    else:
        final = o.results[o.chosen.hash][ORIGINAL]
        parts += [f"Chosen: candidate {o.chosen.hash} (episode {o.chosen.episode}, turn {o.chosen.turn}), "]
        parts[-1] += f"written to `{kernel_file}`."
        if final.timing is not None:
            parts += ["", render_table(speed_table(final))]
        else:
            parts += [
                "",
                f"No timings ({final.timing_note or 'no GPU'}): the kernel was chosen by the tie-break, the "
                "earliest-found candidate that passed at every size.",
                "",
            ]
    parts += [render_table(finalist_table(o)), render_table(history_table(o))]
    return "\n".join(parts)


def write_outputs(out: Path, o: Outcome) -> tuple[Path, Path | None]:
    """Write report.md and, when a kernel was chosen, its module; return both paths (None: no kernel)."""
    kernel = None
    if o.chosen is not None:
        kernel = out / kernel_file_name(o.task_name)
        kernel.write_text(kernel_source(o))
    report = out / "report.md"
    report.write_text(report_markdown(o, kernel.name if kernel else None))
    return report, kernel


def status_counts(history: Sequence[dict[str, Any]]) -> dict[str, int]:
    """Attempts per strict status, for the summary line."""
    counts: dict[str, int] = {}
    for rec in history:
        v = rec["verdict"]
        key = "correct" if is_correct(v, "strict") else (v.get("policy_status") or {}).get("strict", v["status"])
        counts[key] = counts.get(key, 0) + 1
    return counts
