"""A self-contained HTML page of report tables (inline CSS, images as data URIs, no JavaScript)."""

from __future__ import annotations

import base64
import html
from collections.abc import Sequence
from pathlib import Path

from kernelzero.report.tables import Table

STYLE = """
body { font-family: system-ui, sans-serif; margin: 2em; color: #222; }
table { border-collapse: collapse; margin: 0.5em 0 1.5em; font-size: 0.9em; }
th, td { border: 1px solid #ccc; padding: 0.25em 0.6em; text-align: right; }
th:first-child, td:first-child { text-align: left; }
th { background: #f3f3f3; }
p.legend { color: #555; font-size: 0.85em; max-width: 60em; }
img { max-width: 48em; display: block; margin: 1em 0; }
"""


def render_table(table: Table) -> str:
    """One <h3> title and one <table>, every string escaped."""
    head = "".join(f"<th>{html.escape(h)}</th>" for h in table.header)
    body = "".join("<tr>" + "".join(f"<td>{html.escape(c)}</td>" for c in row) + "</tr>\n" for row in table.rows)
    title = html.escape(table.title)
    return f"<h3>{title}</h3>\n<table>\n<thead><tr>{head}</tr></thead>\n<tbody>\n{body}</tbody>\n</table>\n"


def _image(path: Path) -> str:
    data = base64.b64encode(path.read_bytes()).decode("ascii")
    return f'<img alt="{html.escape(path.name)}" src="data:image/png;base64,{data}">\n'


def render_page(
    title: str, tables: Sequence[Table], facts: Sequence[str] = (), legend: str = "", images: Sequence[Path] = ()
) -> str:
    """A whole HTML document: title, facts as a list, tables, legend, PNG images embedded."""
    items = "".join(f"<li>{html.escape(f)}</li>" for f in facts)
    parts = [
        "<!DOCTYPE html>",
        '<html lang="en"><head><meta charset="utf-8">',
        f"<title>{html.escape(title)}</title><style>{STYLE}</style></head><body>",
        f"<h1>{html.escape(title)}</h1>",
        f"<ul>{items}</ul>" if items else "",
        *(render_table(t) for t in tables),
        f'<p class="legend">{html.escape(legend)}</p>' if legend else "",
        *(_image(p) for p in images),
        "</body></html>",
    ]
    return "\n".join(p for p in parts if p) + "\n"
