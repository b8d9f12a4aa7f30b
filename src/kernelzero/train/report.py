"""The report of a Coder training run: per-step table and plots, warm start and evaluations.

    write_train_report("runs/tiny-cpu")      # -> report.md, train_rewards.png, train_time.png

Reads only the run folder's files (steps.jsonl, warm_start.jsonl, eval/*/metrics.json), so it can be
re-run on any finished or interrupted run. Plots need matplotlib (the `report` extra); without it the
report says so and keeps its tables. Its cell format and plot helpers (`fmt`, `pyplot`, `plot_lines`,
`save_plot`, `plot_section`) also serve the co-evolution report (coevolve_report.py).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any


def read_jsonl(path: Path) -> list[dict[str, Any]]:
    """The rows of a JSONL file written by a run ([] when it does not exist yet)."""
    if not path.exists():
        return []
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


def batch_lines(steps: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The steps.jsonl lines of steps that generated and verified a batch (a reused batch's update-only lines carry
    no batch statistics: train/logs.py)."""
    return [s for s in steps if "samples" in s]


def fmt(x: Any, digits: int = 3) -> str:
    """A table cell: "n/a" for None, floats to `digits` places."""
    if x is None:
        return "n/a"
    if isinstance(x, float):
        return f"{x:.{digits}f}"
    return str(x)


def pyplot() -> Any | None:
    """matplotlib.pyplot drawing to files only (the Agg backend), or None without matplotlib."""
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        return None
    return plt


def plot_lines(
    plt: Any, path: Path, x: list[Any], lines: list[tuple[str, str, list[Any]]], xlabel: str, xticks: bool = False
) -> None:
    """Save a line plot of (label, marker, values) over `x` to `path`; x ticks on every value (`xticks`) or on
    whole numbers."""
    import matplotlib.ticker

    fig, ax = plt.subplots(figsize=(6, 3.2))
    for label, marker, values in lines:
        ax.plot(x, values, marker=marker, label=label)
    if xticks:
        ax.set_xticks(x)
    else:
        ax.xaxis.set_major_locator(matplotlib.ticker.MaxNLocator(integer=True))
    ax.grid(alpha=0.3)
    save_plot(plt, fig, ax, path, xlabel)


def save_plot(plt: Any, fig: Any, ax: Any, path: Path, xlabel: str, ylabel: str | None = None) -> None:
    """Label the axes, add the legend and save `fig` to `path`, closing it."""
    ax.set_xlabel(xlabel)
    if ylabel is not None:
        ax.set_ylabel(ylabel)
    ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=100)
    plt.close(fig)


def plot_section(plots: list[str], drawn: bool) -> list[str]:
    """The report lines that show `plots`; when there was something to draw (`drawn`) but no plot, why."""
    lines = [""] + [f"![{p}]({p})" for p in plots]
    if drawn and not plots:
        lines.append("Plots skipped: matplotlib is not installed.")
    return lines


def _eval_rows(run: Path) -> list[str]:
    """One row per evaluation folder: pass@k and fast_1 as `kernelzero eval` reports them (kernelbench
    policy), and pass@1 under the strict policy that CA-GRPO rewards."""
    from kernelzero.metrics import summarise
    from kernelzero.report import load_run

    rows = []
    folders = sorted((run / "eval").glob("*/metrics.json"), key=lambda p: (p.parent.name != "warm", p.parent.name))
    for path in folders:
        overall = json.loads(path.read_text())["overall"]
        _, samples, records = load_run(path.parent)
        strict = summarise(samples, records, ks=(1,), policy="strict")["overall"]["pass@k"].get("1")
        pass_k = overall.get("pass@k") or {}
        cells = [fmt(pass_k.get(k)) for k in ("1", "5", "10")] + [fmt(strict)]
        cells += [fmt((overall.get("fast_p") or {}).get("1")), fmt(overall.get("avg_output_tokens"), 1)]
        cells += [f"{overall.get('tasks')} x {(overall.get('samples_per_task') or {}).get('min')}"]
        rows.append(f"| {path.parent.name} | " + " | ".join(cells) + " |")
    return rows


def _plots(steps: list[dict[str, Any]], run: Path) -> list[str]:
    plt = pyplot()
    if plt is None:
        return []
    import matplotlib.ticker

    x = [s["step"] for s in steps]
    lines = [
        ("correct rate (strict)", "o", [s.get("correct_rate") for s in steps]),
        ("mean reward", "s", [s.get("reward_mean") for s in steps]),
        ("gate open (share of groups)", "^", [s.get("gate_open_share") for s in steps]),
    ]
    plot_lines(plt, run / "train_rewards.png", x, lines, "GRPO step")
    fig, ax = plt.subplots(figsize=(6, 3.2))
    bottom = [0.0] * len(x)
    for key, label in (
        ("time_generate_s", "generation"),
        ("time_verify_s", "verification"),
        ("time_update_s", "update"),
    ):
        values = [s.get(key) or 0.0 for s in steps]
        ax.bar(x, values, bottom=bottom, label=label)
        bottom = [b + v for b, v in zip(bottom, values)]
    ax.xaxis.set_major_locator(matplotlib.ticker.MaxNLocator(integer=True))
    save_plot(plt, fig, ax, run / "train_time.png", "GRPO step", "seconds")
    return ["train_rewards.png", "train_time.png"]


def redrawn_gain(steps: list[dict[str, Any]]) -> dict[str, Any] | None:
    """Training tasks drawn in two or more steps: their correct share at the first draw against the latest, paired
    over those tasks (`metrics.paired_gain`), so learning on the training tasks shows apart from which tasks a step
    happened to draw. None when no task was drawn twice (or the lines predate `per_task`)."""
    from kernelzero.metrics import paired_gain

    first: dict[str, float] = {}
    latest: dict[str, float] = {}
    for s in steps:
        for task, rate in (s.get("per_task") or {}).items():
            if task in first:
                latest[task] = rate
            else:
                first[task] = rate
    return paired_gain({t: first[t] for t in latest}, latest) if latest else None


def first_draw_curve(steps: list[dict[str, Any]], windows: int = 4) -> list[dict[str, Any]]:
    """The correct share of training tasks at their first draw, in `windows` runs of consecutive verified steps: each
    such task is new to GRPO, so this is an unseen-task curve that costs no extra sample. A policy that learns only the
    tasks it trains on lifts the tasks drawn again (`redrawn_gain`) and leaves this flat (the miniature on 2026-12-06,
    bench/train.md). Each row: first and last step, tasks, mean and its bootstrap 95% interval (tasks as the unit);
    windows with no first draw are left out."""
    from kernelzero.metrics import task_mean_ci

    if windows < 1:
        raise ValueError(f"windows must be at least 1, got {windows}")
    seen: set[str] = set()
    verified = []
    for s in steps:
        if s.get("per_task"):
            new = {t: r for t, r in s["per_task"].items() if t not in seen}
            seen |= set(s["per_task"])
            verified.append((s["step"], new))
    rows = []
    for i in range(windows):
        part = verified[i * len(verified) // windows : (i + 1) * len(verified) // windows]
        rates = [r for _, new in part for r in new.values()]
        if rates:
            mean, low, high = task_mean_ci(rates)
            rows.append({"steps": [part[0][0], part[-1][0]], "tasks": len(rates), "correct": mean, "ci": [low, high]})
    return rows


def _first_draw_lines(steps: list[dict[str, Any]]) -> list[str]:
    fresh = first_draw_curve(steps)
    if not fresh:
        return []
    head = ["", "Training tasks at their first draw (new to GRPO), correct share by stretch of steps:"]
    return head + [
        f"- steps {r['steps'][0]}-{r['steps'][1]}: {r['correct']:.3f} [{r['ci'][0]:.3f}, {r['ci'][1]:.3f}] "
        f"over {r['tasks']} tasks"
        for r in fresh
    ]


def write_train_report(run_dir: str | Path) -> Path:
    """Write `report.md` (and its PNGs) into a Coder run folder; return its path."""
    run = Path(run_dir)
    steps = read_jsonl(run / "steps.jsonl")
    warm = read_jsonl(run / "warm_start.jsonl")
    config = json.loads((run / "run.json").read_text())["config"] if (run / "run.json").exists() else {}
    lines = [f"# Coder training: {run.name}", ""]
    if config:
        g, r = config["grpo"], config["reward"]
        lines += [
            f"GRPO: {g['steps']} steps, {g['prompts_per_step']} tasks x {g['group_size']} samples per step, "
            f"lr {g['lr']}, loss {g['loss_type']}, LoRA {'on' if g['lora'] else 'off'}. "
            f"CA-GRPO: alpha {r['alpha']}, beta {0.0 if r['correctness_only'] else r['beta']}, "
            f"gate {'on' if r['gate'] else 'off'}, speedup vs {r['baseline']} ({r['form']}, cap {r['cap']}).",
            "",
        ]
    if warm:
        probes = [w for w in warm if "probe_pass1" in w]
        probed = f", last probed pass@1 {probes[-1]['probe_pass1']:.3f}" if probes else ""
        lines += [f"Warm start: {len(warm)} steps, final loss {warm[-1]['loss']:.4f}{probed}.", ""]
    lines += ["## Evaluation (held-out split, `kernelzero eval`)", ""]
    lines += ["| policy | pass@1 | pass@5 | pass@10 | pass@1 strict | fast_1 | mean tokens | tasks x samples |"]
    lines += ["|---|---|---|---|---|---|---|---|", *_eval_rows(run), ""]
    lines += ["## Steps", ""]
    columns = ["step", "correct", "gate open", "reward", "groups with signal", "geomean speedup", "tokens", "gen s"]
    columns += ["verify s", "update s", "anchor NLL"]
    lines += ["| " + " | ".join(columns) + " |", "|" + "---|" * len(columns)]
    for s in steps:
        cells = [s["step"], fmt(s.get("correct_rate")), fmt(s.get("gate_open_share")), fmt(s.get("reward_mean"))]
        cells += [s.get("groups_with_signal"), fmt(s.get("geomean_speedup")), fmt(s.get("completion_tokens"), 1)]
        cells += [fmt(s.get(k), 2) for k in ("time_generate_s", "time_verify_s", "time_update_s")]
        cells.append(fmt(s.get("anchor_nll"), 5))  # train/drift.py (grpo.anchor_tasks); n/a without it
        lines.append("| " + " | ".join(str(c) for c in cells) + " |")
    again = redrawn_gain(steps)
    if again:
        lines += [
            "",
            f"Training tasks drawn again ({again['tasks']}): correct share {again['before']:.3f} at the first draw, "
            f"{again['after']:.3f} at the latest, gain {again['gain']:+.3f} "
            f"(95% interval {again['ci'][0]:+.3f} to {again['ci'][1]:+.3f}, tasks as the unit).",
        ]
    lines += _first_draw_lines(steps)
    if steps:
        statuses: dict[str, int] = {}
        for s in steps:
            for k, v in s.get("statuses", {}).items():
                statuses[k] = statuses.get(k, 0) + v
        lines += [
            "",
            "Statuses over all steps (strict policy): " + ", ".join(f"{k} {v}" for k, v in sorted(statuses.items())),
        ]
    lines += plot_section(_plots(steps, run) if steps else [], bool(steps))
    path = run / "report.md"
    path.write_text("\n".join(lines) + "\n")
    return path
