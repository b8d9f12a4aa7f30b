"""A run's metrics on the terminal (rich tables), as `kernelzero eval` prints them at the end of a run, and the
progress bars of its stages (eval and optimize)."""

from __future__ import annotations

from typing import Any

from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn
from rich.table import Table as RichTable

from kernelzero.report.tables import NA, NOT_ESTIMATED, Table, run_facts, status_table, summary_table
from kernelzero.report.turns import turn_table


def to_rich(table: Table) -> RichTable:
    """A rich table of the same cells; numeric columns right-aligned."""
    rich = RichTable(title=table.title, title_justify="left")
    for i, head in enumerate(table.header):
        rich.add_column(head, justify="left" if i == 0 else "right")
    for row in table.rows:
        rich.add_row(*row)
    return rich


def drop_empty_columns(table: Table) -> Table:
    """The table without the columns where every row reads "n/a" or "–" (narrow terminals)."""
    empty = (NA, NOT_ESTIMATED)
    keep = [i for i in range(len(table.header)) if i == 0 or any(r[i] not in empty for r in table.rows)]
    rows = tuple(tuple(r[i] for i in keep) for r in table.rows)
    return Table(table.title, tuple(table.header[i] for i in keep), rows)


def transpose(table: Table) -> Table:
    """Rows become columns: a status breakdown reads as one status a line on a narrow terminal."""
    header = ("status",) + tuple(r[0] for r in table.rows)
    rows = tuple((table.header[i],) + tuple(r[i] for r in table.rows) for i in range(1, len(table.header)))
    return Table(table.title, header, tuple(r for r in rows if any(c not in ("0", "") for c in r[1:])))


def print_summary(summary: dict[str, Any], console: Console | None = None) -> None:
    """Print the metrics table and the status breakdown of `metrics.summarise` output (rates in %), and the
    per-turn table when the summary has one (a multi-turn run's metrics.json: "per_turn")."""
    console = console or Console()
    for fact in run_facts({}, summary):
        console.print(fact, highlight=False)
    for table in (drop_empty_columns(summary_table(summary)), transpose(status_table(summary))):
        console.print(to_rich(table))
    if summary.get("per_turn"):  # a multi-turn run (kernelzero eval --turns T)
        console.print(to_rich(drop_empty_columns(turn_table(summary["per_turn"]))))


def progress(console: Console) -> Progress:
    """The progress bars of a run's stages (description, bar, done of total, time so far)."""
    return Progress(
        TextColumn("{task.description}"),
        BarColumn(),
        MofNCompleteColumn(),
        TimeElapsedColumn(),
        console=console,
        transient=False,
    )
