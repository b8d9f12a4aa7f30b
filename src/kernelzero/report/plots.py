"""PNG plots of a run: speedup distribution, pass@k and fast_p@k per level, statuses per level.

matplotlib is optional: `write_plots` returns [] without it and the report says the plots were
skipped. Figures are built with `matplotlib.figure.Figure` (no pyplot), so no global backend or
window is touched.
"""

from __future__ import annotations

import itertools
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from kernelzero.metrics import p_key
from kernelzero.report.tables import group_label, groups

SPEEDUPS_PNG, AT_K_PNG, STATUSES_PNG = "speedups.png", "pass_fast_at_k.png", "statuses.png"
TURNS_PNG = "turns.png"  # multi-turn runs: pass@1 and fast_1 after t turns


def matplotlib_available() -> bool:
    try:
        import matplotlib.figure  # noqa: F401
    except ImportError:
        return False
    return True


def write_plots(summary: dict[str, Any], speedups: dict[str, Sequence[float]], out_dir: Path) -> list[Path]:
    """Write the plots that have data into `out_dir`; [] when matplotlib is not installed.

    `speedups` maps a baseline ("eager", "compile") to the speedups of the correct samples.
    """
    if not matplotlib_available():
        return []
    out_dir = Path(out_dir)
    written = [
        _speedup_histogram(speedups, out_dir / SPEEDUPS_PNG),
        _at_k_bars(summary, out_dir / AT_K_PNG),
        _status_bars(summary, out_dir / STATUSES_PNG),
    ]
    return [p for p in written if p is not None]


def _figure(width: float, height: float) -> Any:
    from matplotlib.figure import Figure

    return Figure(figsize=(width, height), dpi=100)  # no constrained layout: it doubles the drawing time


def _speedup_histogram(speedups: dict[str, Sequence[float]], path: Path) -> Path | None:
    import numpy as np
    from matplotlib.ticker import FixedLocator, FuncFormatter, MaxNLocator, NullFormatter

    series = {b: [s for s in v if s > 0] for b, v in speedups.items() if v}
    if not series:
        return None
    values = [s for v in series.values() for s in v]
    lo, hi = min(values + [0.5]) / 1.2, max(values + [2.0]) * 1.2
    fig = _figure(7, 4)
    ax = fig.add_subplot()
    for baseline, v in series.items():
        ax.hist(v, bins=np.geomspace(lo, hi, 30), alpha=0.6, label=f"vs {baseline} (n={len(v)})")
    ax.axvline(1.0, color="black", linestyle="--", linewidth=1)
    ax.set_xscale("log")
    ax.set_xlim(lo, hi)
    # ticks at powers of two, labelled "0.5x", "2x": plain text, no mathtext parsing
    powers = range(int(np.floor(np.log2(lo))), int(np.ceil(np.log2(hi))) + 1)
    ax.xaxis.set_major_locator(FixedLocator([2.0**i for i in powers]))
    ax.xaxis.set_major_formatter(FuncFormatter(lambda x, _: f"{x:g}x"))
    ax.xaxis.set_minor_formatter(NullFormatter())
    ax.yaxis.set_major_locator(MaxNLocator(integer=True))
    ax.set(
        xlabel="speedup (log scale; > 1x is faster than the baseline)",
        ylabel="correct samples",
        title="Speedup of correct samples",
    )
    ax.legend()
    fig.savefig(path, bbox_inches="tight")
    return path


def _bars(ax: Any, labels: list[str], series: dict[str, list[float | None]], title: str) -> None:
    """Grouped bars, one group per label, one bar per series; None values are left out."""
    import numpy as np

    x = np.arange(len(labels))
    width = 0.8 / max(len(series), 1)
    for i, (name, values) in enumerate(series.items()):
        heights = [np.nan if v is None else 100 * v for v in values]
        ax.bar(x + (i - (len(series) - 1) / 2) * width, heights, width, label=name)
    ax.set_xticks(x, labels)
    ax.set_yticks(range(0, 101, 20))
    ax.set(ylabel="%", ylim=(0, 118), title=title)  # headroom for the legend above the bars
    ax.legend(fontsize="small", loc="upper left", ncols=len(series))


def _at_k_bars(summary: dict[str, Any], path: Path) -> Path | None:
    pairs = groups(summary)
    ks = [k for k in summary["ks"] if any(str(k) in g["pass@k"] for _, g in pairs)]
    if not ks:
        return None
    labels = [group_label(key) for key, _ in pairs]
    timed = summary["overall"]["fast_p@k"] is not None and 1.0 in summary["ps"]
    fig = _figure(7 if not timed else 12, 4)
    axes = fig.subplots(1, 2 if timed else 1, squeeze=False)[0]
    _bars(axes[0], labels, {f"pass@{k}": [g["pass@k"].get(str(k)) for _, g in pairs] for k in ks}, "pass@k")
    if timed:
        fast = {f"fast_1@{k}": [g["fast_p@k"][p_key(1.0)].get(str(k)) for _, g in pairs] for k in ks}
        _bars(axes[1], labels, fast, f"fast_1@k (correct and faster than {summary['speed']})")
    fig.savefig(path, bbox_inches="tight")
    return path


def _status_bars(summary: dict[str, Any], path: Path) -> Path | None:
    pairs = groups(summary)
    statuses = list(dict.fromkeys(s for _, g in pairs for s in g["statuses"]))
    if not statuses:
        return None
    labels = [group_label(key) for key, _ in pairs]
    fig = _figure(8, 1.2 + 0.5 * len(labels))
    ax = fig.add_subplot()
    left = [0.0] * len(labels)
    others = itertools.cycle(f"C{j}" for j in range(10) if j != 2)  # green (C2) is kept for correct
    for status in statuses:
        shares = [g["statuses"].get(status, 0) / max(g["samples"], 1) * 100 for _, g in pairs]
        ax.barh(labels, shares, left=left, label=status, color="C2" if status == "correct" else next(others))
        left = [a + b for a, b in zip(left, shares)]
    ax.set(xlabel="% of samples", xlim=(0, 100), title="Verdict statuses")
    ax.invert_yaxis()
    ax.legend(fontsize="small", loc="center left", bbox_to_anchor=(1.0, 0.5))
    fig.savefig(path, bbox_inches="tight")
    return path


def write_turn_plot(rows: Sequence[dict[str, Any]], out_dir: Path) -> list[Path]:
    """pass@1 and fast_1 after t turns against t (rows of `report.turns.per_turn`); [] without matplotlib."""
    if not matplotlib_available() or not rows:
        return []
    from matplotlib.ticker import MaxNLocator

    turns = [r["turn"] for r in rows]
    fig = _figure(6, 4)
    ax = fig.add_subplot()
    for key, label in (("pass@1", "pass@1"), ("fast_1", "fast_1")):
        points = [(t, 100 * r[key]) for t, r in zip(turns, rows) if r[key] is not None]
        if points:
            ax.plot(*zip(*points), marker="o", label=f"{label} after t turns")
    ax.xaxis.set_major_locator(MaxNLocator(integer=True))
    ax.set(xlabel="turns", ylabel="%", ylim=(0, 105), title="Solved after t turns")
    ax.legend(fontsize="small", loc="lower right")
    path = Path(out_dir) / TURNS_PNG
    fig.savefig(path, bbox_inches="tight")
    return [path]
