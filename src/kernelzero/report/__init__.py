"""Reports of eval runs: markdown and HTML tables and PNG plots, read from a run folder's files.

A run folder (written by `kernelzero eval`) holds `samples.jsonl` (one `Sample` per line),
`verdicts.jsonl` (`{"task", "sample_idx", "level", "verdict", "policies"}` per line) and `run.json`
(the run's config). Metrics are recomputed from the JSONL files with `metrics.summarise`.

    from kernelzero.report import write_report, compare_runs
    write_report("runs/qwen-l1")                       # runs/qwen-l1/report.md + PNGs
    print(compare_runs(["runs/a", "runs/b"]))          # markdown, one table per level
    print_summary(metrics_dict)                         # rich tables on the terminal (kernelzero eval)
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from kernelzero.metrics import DEFAULT_KS, DEFAULT_PS, SPEED_BASELINES, correct_speedups, summarise
from kernelzero.report.html import render_page
from kernelzero.report.markdown import comparison_markdown, run_markdown
from kernelzero.report.plots import matplotlib_available, write_plots, write_turn_plot
from kernelzero.report.tables import LEGEND, comparison_tables, flat_config
from kernelzero.report.terminal import print_summary
from kernelzero.report.turns import after_turns, has_turns, per_turn, turn_table
from kernelzero.types import Sample, from_dict, verdict_from_dict

__all__ = ["compare_runs", "load_run", "print_summary", "run_names", "write_report"]

FORMATS = ("md", "html")


def _jsonl(path: Path) -> list[dict[str, Any]]:
    records = []
    for i, line in enumerate(path.read_text().splitlines(), 1):
        if line.strip():
            try:
                records.append(json.loads(line))
            except json.JSONDecodeError as exc:
                raise ValueError(f"{path}:{i}: not a JSON line ({exc.msg})") from None
    return records


def load_run(run_dir: str | Path) -> tuple[dict[str, Any], list[Sample], list[dict[str, Any]]]:
    """(run.json config, samples, verdict records with `Verdict`s) of a run folder.

    verdicts.jsonl is required; run.json and samples.jsonl are optional (no facts, no token counts).
    """
    config, sample_dicts, raw = _read_run(Path(run_dir))
    return (config, *_as_records(sample_dicts, raw))


def _read_run(run_dir: Path) -> tuple[dict[str, Any], list[dict[str, Any]], list[dict[str, Any]]]:
    """(run.json config, sample lines, verdict lines) of a run folder, as read (samples.jsonl may be absent)."""
    verdicts = run_dir / "verdicts.jsonl"
    if not verdicts.is_file():
        raise FileNotFoundError(f"{run_dir} is not a run folder: no verdicts.jsonl")
    config = json.loads((run_dir / "run.json").read_text()) if (run_dir / "run.json").is_file() else {}
    samples_path = run_dir / "samples.jsonl"
    return config, (_jsonl(samples_path) if samples_path.is_file() else []), _jsonl(verdicts)


def _as_records(
    sample_dicts: list[dict[str, Any]], raw: list[dict[str, Any]]
) -> tuple[list[Sample], list[dict[str, Any]]]:
    """(samples, verdict records with `Verdict`s) from a run's lines; a multi-turn run's episodes as their best
    turns (report/turns.py)."""
    if has_turns(raw):
        samples, raw = after_turns(sample_dicts, raw)
    else:
        samples = [from_dict(Sample, d) for d in sample_dicts]
    return samples, [{**r, "verdict": verdict_from_dict(r["verdict"])} for r in raw]


def _summary(samples: list[Sample], records: list[dict[str, Any]], policy: str | None, speed: str) -> dict[str, Any]:
    return summarise(samples, records, ks=DEFAULT_KS, ps=DEFAULT_PS, speed=speed, policy=policy)


def write_report(run_dir: str | Path, policy: str | None = None, speed: str = "eager") -> Path:
    """Write report.md and its PNG plots into `run_dir` (plots are skipped without matplotlib)."""
    run_dir = Path(run_dir)
    config, sample_dicts, raw = _read_run(run_dir)
    samples, records = _as_records(sample_dicts, raw)
    summary = _summary(samples, records, policy, speed)
    speedups = {b: correct_speedups(samples, records, b, policy) for b in SPEED_BASELINES}
    plots = write_plots(summary, speedups, run_dir)
    extra = []
    if has_turns(raw):  # a multi-turn run: the per-turn table and plot
        rows = per_turn(sample_dicts, raw, policy)
        extra = [turn_table(rows)]
        plots += write_turn_plot(rows, run_dir)
    note = "" if matplotlib_available() else "Plots skipped: matplotlib is not installed (`pip install matplotlib`)."
    title = f"kernelzero eval: {flat_config(config).get('model') or run_dir.name}"
    path = run_dir / "report.md"
    path.write_text(run_markdown(title, config, summary, [p.name for p in plots], note, extra))
    return path


def run_names(run_dirs: Sequence[str | Path]) -> list[str]:
    """A label per run: its folder name, or the path as given when folder names repeat."""
    names = [Path(d).resolve().name for d in run_dirs]
    return names if len(set(names)) == len(names) else [str(d) for d in run_dirs]


def compare_runs(
    run_dirs: Sequence[str | Path], fmt: str = "md", policy: str | None = None, speed: str = "eager"
) -> str:
    """Runs side by side, one table per level, one row per run, as markdown ("md") or an HTML page."""
    if fmt not in FORMATS:
        raise ValueError(f"fmt must be one of {FORMATS}, got {fmt!r}")
    if not run_dirs:
        raise ValueError("no run folder given")
    named = {}
    for name, run_dir in zip(run_names(run_dirs), run_dirs):
        _, samples, records = load_run(run_dir)
        named[name] = _summary(samples, records, policy, speed)
    if fmt == "md":
        return comparison_markdown(named)
    facts = [f"speed vs {speed}", f"status policy: {policy or 'verdict status'}"]
    return render_page("kernelzero runs compared", comparison_tables(named), facts, LEGEND)
