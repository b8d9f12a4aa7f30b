"""Markdown rendering of report tables: a run's report.md and the side-by-side comparison of runs."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from kernelzero.report.tables import LEGEND, Table, comparison_tables, run_facts, run_tables


def _cell(text: str) -> str:
    return text.replace("|", "\\|").replace("\n", " ")


def render_table(table: Table, level: int = 3) -> str:
    """A titled GitHub-flavoured markdown table; numeric columns are right-aligned."""
    lines = [f"{'#' * level} {table.title}", ""]
    lines.append("| " + " | ".join(_cell(h) for h in table.header) + " |")
    lines.append("|" + "|".join([":---"] + ["---:"] * (len(table.header) - 1)) + "|")
    lines += ["| " + " | ".join(_cell(c) for c in row) + " |" for row in table.rows]
    return "\n".join(lines) + "\n"


def render_tables(tables: Sequence[Table], level: int = 3) -> str:
    return "\n".join(render_table(t, level) for t in tables)


def run_markdown(
    title: str,
    config: dict[str, Any],
    summary: dict[str, Any],
    plots: Sequence[str],
    plots_note: str = "",
    extra: Sequence[Table] = (),
) -> str:
    """The text of a run's report.md: facts, the tables (then `extra` ones), and the plots (file names next to it)."""
    parts = [f"# {title}", "", *(f"- {fact}" for fact in run_facts(config, summary)), ""]
    parts += [render_tables(run_tables(summary)), LEGEND, ""]
    if extra:
        parts += [render_tables(extra), ""]
    if plots or plots_note:
        parts += ["### Plots", ""]
    parts += [f"![{name}]({name})\n" for name in plots]
    if plots_note:
        parts += [plots_note, ""]
    return "\n".join(parts)


def comparison_markdown(named: dict[str, dict[str, Any]]) -> str:
    """Runs side by side: one table per level, one row per run."""
    speeds = sorted({s["speed"] for s in named.values()})
    policies = sorted({s["policy"] or "verdict status" for s in named.values()})
    head = f"## Runs compared (speed vs {', '.join(speeds)}; status policy: {', '.join(policies)})\n"
    return head + "\n" + render_tables(comparison_tables(named)) + "\n" + LEGEND + "\n"
