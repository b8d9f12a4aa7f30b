"""Tables of metrics (from `metrics.summarise`) as plain strings, rendered by `markdown.py` and `html.py`.

One place decides what is shown and how numbers read: rates in percent with one decimal, speedups as
"1.23x", "n/a" for a speed metric of a run without timings, "–" for a k above the samples per task. Skipped
samples (`infra_error`, `task_broken`: not the candidate's verdict, left out of every metric) have a column of
their own in the metric tables and one per status, marked "(skipped)", in the status table.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from kernelzero.metrics import SPEED_BASELINES, p_key
from kernelzero.types import SKIPPED_STATUSES

REPORT_PS = (0.0, 1.0, 1.5)  # fast_p thresholds shown in tables (all of them are in metrics.json)
NA = "n/a"  # no timings: a CPU run, or no correct sample to time
NOT_ESTIMATED = "–"  # k above some task's samples
LEGEND = (
    "Rates in %. pass@k: unbiased estimator (Chen et al. 2021), averaged over tasks. fast_p: KernelBench's, "
    "share of tasks whose first sample is correct and more than p times as fast as the baseline. fast_p@k: "
    "pass@k counting samples that are correct and faster than p. Geomean: over correct samples. Skipped: samples "
    "without a verdict on the candidate (infra_error, task_broken), left out of n and of every rate. "
    f"{NA}: no timings (CPU run) or nothing to time; {NOT_ESTIMATED}: not estimated (k above samples per task)."
)


@dataclass(frozen=True)
class Table:
    """A titled table of strings; the first column names the rows."""

    title: str
    header: tuple[str, ...]
    rows: tuple[tuple[str, ...], ...]


def pct(x: float | None) -> str:
    """0.3 -> "30.0"; None -> "n/a"."""
    return NA if x is None else f"{100 * x:.1f}"


def times(x: float | None) -> str:
    """1.234 -> "1.23x"; None -> "n/a"."""
    return NA if x is None else f"{x:.2f}x"


def tokens(x: float | None) -> str:
    return NA if x is None else f"{x:.0f}"


def per_task(group: dict[str, Any]) -> str:
    """Samples per task: "10", or "8-10" when tasks have different numbers."""
    n = group["samples_per_task"]
    if n is None:
        return "0"
    return str(n["min"]) if n["min"] == n["max"] else f"{n['min']}-{n['max']}"


def group_label(key: str) -> str:
    return {"overall": "all", "unknown": "level ?"}.get(key, f"level {key}")


def groups(summary: dict[str, Any]) -> list[tuple[str, dict[str, Any]]]:
    """(key, metrics) for each level, then "overall" when there is more than one level."""
    levels = list(summary["levels"].items())
    return levels if len(levels) == 1 else levels + [("overall", summary["overall"])]


def _shown_ps(summaries: Sequence[dict[str, Any]]) -> list[float]:
    ps = {p for s in summaries for p in s["ps"]}
    return [p for p in REPORT_PS if p in ps]


def _ks(summaries: Sequence[dict[str, Any]]) -> list[int]:
    return sorted({k for s in summaries for k in s["ks"]})


def _at_k(values: dict[str, float] | None, k: int) -> str:
    """A pass@k / fast_p@k cell: n/a without timings, "–" when k was not estimated."""
    if values is None:
        return NA
    return pct(values[str(k)]) if str(k) in values else NOT_ESTIMATED


def skipped_count(group: dict[str, Any]) -> int:
    """Samples of a group left out of its metrics (`infra_error`, `task_broken`); 0 for summaries without them."""
    return sum((group.get("skipped") or {}).values())


def _fast(group: dict[str, Any], p: float) -> str:
    return NA if group["fast_p"] is None else pct(group["fast_p"][p_key(p)])


def _fast_lower(group: dict[str, Any]) -> str:
    """fast_1 on the lower bound of the speedup's 95% interval (n/a without intervals)."""
    lower = group.get("fast_p_lower")
    return NA if not lower or p_key(1.0) not in lower else pct(lower[p_key(1.0)])


def _fast1_ks(summaries: Sequence[dict[str, Any]], with_fast_at_k: bool) -> list[int]:
    """The k of the fast_1@k columns: all k when asked and every run has p = 1 among its thresholds."""
    return _ks(summaries) if with_fast_at_k and all(1.0 in s["ps"] for s in summaries) else []


def _metric_header(summaries: Sequence[dict[str, Any]], with_fast_at_k: bool = True) -> tuple[str, ...]:
    ks, fast_ks = _ks(summaries), _fast1_ks(summaries, with_fast_at_k)
    return (
        "tasks",
        "n",
        *(f"pass@{k}" for k in ks),
        *(f"fast_1@{k}" for k in fast_ks),
        *(f"fast_{p_key(p)}" for p in _shown_ps(summaries)),
        "fast_1 (lower CI)",
        *(f"geomean vs {b}" for b in SPEED_BASELINES),
        "avg tokens",
        "correct",
        "skipped",
    )


def _metric_cells(
    group: dict[str, Any], summaries: Sequence[dict[str, Any]], with_fast_at_k: bool = True
) -> tuple[str, ...]:
    """The cells under `_metric_header`, for one level of one run."""
    ks, fast_ks = _ks(summaries), _fast1_ks(summaries, with_fast_at_k)
    fast1 = (group["fast_p@k"] or {}).get(p_key(1.0))  # None (n/a) without timings
    return (
        str(group["tasks"]),
        per_task(group),
        *(_at_k(group["pass@k"], k) for k in ks),
        *(_at_k(fast1, k) for k in fast_ks),
        *(_fast(group, p) for p in _shown_ps(summaries)),
        _fast_lower(group),
        *(times(group["geomean_speedup"][b]) for b in SPEED_BASELINES),
        tokens(group["avg_output_tokens"]),
        f"{group['correct']}/{group['samples']}",
        str(skipped_count(group)),
    )


def summary_table(summary: dict[str, Any]) -> Table:
    """One row per level (and "all"): counts, pass@k, fast_p, geomeans, tokens (fast_p@k has its own table)."""
    rows = tuple((group_label(key), *_metric_cells(g, [summary], False)) for key, g in groups(summary))
    return Table(f"Metrics (speed vs {summary['speed']})", ("level", *_metric_header([summary], False)), rows)


def fast_at_k_table(summary: dict[str, Any]) -> Table:
    """fast_p@k for the shown thresholds: one row per (level, p), one column per k."""
    ks = _ks([summary])
    rows = []
    for key, g in groups(summary):
        for p in _shown_ps([summary]):
            values = None if g["fast_p@k"] is None else g["fast_p@k"].get(p_key(p))
            rows.append((group_label(key), p_key(p), *(_at_k(values, k) for k in ks)))
    header = ("level", "p", *(f"fast_p@{k}" for k in ks))
    return Table(f"fast_p@k (correct and speedup vs {summary['speed']} > p)", header, tuple(rows))


def status_table(summary: dict[str, Any]) -> Table:
    """Verdict statuses per level: counts of samples ("total": those with a real verdict), then the skipped ones
    per status (only statuses that occur)."""
    pairs = groups(summary)
    statuses = list(dict.fromkeys(s for _, g in pairs for s in g["statuses"]))
    skipped = [s for s in SKIPPED_STATUSES if any((g.get("skipped") or {}).get(s) for _, g in pairs)]
    rows = tuple(
        (
            group_label(key),
            *(str(g["statuses"].get(s, 0)) for s in statuses),
            str(g["samples"]),
            *(str(g["skipped"].get(s, 0)) for s in skipped),
        )
        for key, g in pairs
    )
    header = ("level", *statuses, "total", *(f"{s} (skipped)" for s in skipped))
    return Table("Statuses (samples)", header, rows)


def run_tables(summary: dict[str, Any]) -> list[Table]:
    """The tables of one run's report (fast_p@k only when the run has timings)."""
    timed = summary["overall"]["fast_p@k"] is not None
    return [summary_table(summary), *([fast_at_k_table(summary)] if timed else []), status_table(summary)]


def comparison_tables(named: dict[str, dict[str, Any]]) -> list[Table]:
    """One table per level (then "all" when there are several levels), one row per run that has the level."""
    summaries = list(named.values())
    keys = list(dict.fromkeys(k for s in summaries for k in s["levels"]))
    keys += ["overall"] if len(keys) != 1 else []
    tables = []
    for key in keys:
        rows = tuple(
            (name, *_metric_cells(s["overall"] if key == "overall" else s["levels"][key], summaries))
            for name, s in named.items()
            if key == "overall" or key in s["levels"]
        )
        tables.append(Table(group_label(key), ("run", *_metric_header(summaries)), rows))
    return tables


def flat_config(run_json: dict[str, Any]) -> dict[str, Any]:
    """run.json's settings in one dict: its "config" (the eval config) merged with the top-level keys."""
    nested = run_json.get("config")
    return {**(nested if isinstance(nested, dict) else {}), **{k: v for k, v in run_json.items() if k != "config"}}


def run_facts(run_json: dict[str, Any], summary: dict[str, Any]) -> list[str]:
    """Short "name: value" lines about a run, from run.json and the summary."""
    config = flat_config(run_json)
    keys = ("model", "backend", "suite", "samples", "n", "turns", "preset", "profile", "prompt_version", "device")
    keys += ("date",)
    facts = [f"{k}: {config[k]}" for k in keys if config.get(k) not in (None, "", [], {})]
    if isinstance(config.get("versions"), dict) and config["versions"]:
        facts.append("versions: " + ", ".join(f"{k} {v}" for k, v in config["versions"].items()))
    if config.get("unsafe_no_sandbox"):
        facts.insert(0, "UNSAFE: verified without the sandbox (--unsafe-no-sandbox): trusted local use only")
    facts.append(f"status policy: {summary['policy'] or 'verdict status'}")
    if not any(summary["timed"].values()):
        facts.append("no timings in this run (CPU): speed metrics are n/a")
    if summary["unverified_samples"]:
        facts.append(f"samples without a verdict (left out): {summary['unverified_samples']}")
    skipped = {s: n for s, n in (summary["overall"].get("skipped") or {}).items() if n}
    if skipped:
        listed = ", ".join(f"{s} {n}" for s, n in skipped.items())
        facts.append(f"skipped samples, not the candidate's verdict (left out of every metric): {listed}")
    return facts
