"""The report of a Coder training run: per-step table and plots, warm start and evaluations.

    write_train_report("runs/tiny-cpu")      # -> report.md, train_rewards.png, train_time.png

Reads only the run folder's files (steps.jsonl, warm_start.jsonl, eval/*/metrics.json), so it can be
re-run on any finished or interrupted run. Plots need matplotlib (the `report` extra); without it the
report says so and keeps its tables.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any


def _jsonl(path: Path) -> list[dict[str, Any]]:
    if not path.exists():
        return []
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


def _fmt(x: Any, digits: int = 3) -> str:
    if x is None:
        return "n/a"
    if isinstance(x, float):
        return f"{x:.{digits}f}"
    return str(x)


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
        cells = [_fmt(pass_k.get(k)) for k in ("1", "5", "10")] + [_fmt(strict)]
        cells += [_fmt((overall.get("fast_p") or {}).get("1")), _fmt(overall.get("avg_output_tokens"), 1)]
        cells += [f"{overall.get('tasks')} x {(overall.get('samples_per_task') or {}).get('min')}"]
        rows.append(f"| {path.parent.name} | " + " | ".join(cells) + " |")
    return rows


def _plots(steps: list[dict[str, Any]], run: Path) -> list[str]:
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
        import matplotlib.ticker
    except ImportError:
        return []
    x = [s["step"] for s in steps]
    fig, ax = plt.subplots(figsize=(6, 3.2))
    ax.plot(x, [s.get("correct_rate") for s in steps], marker="o", label="correct rate (strict)")
    ax.plot(x, [s.get("reward_mean") for s in steps], marker="s", label="mean reward")
    ax.plot(x, [s.get("gate_open_share") for s in steps], marker="^", label="gate open (share of groups)")
    ax.set_xlabel("GRPO step")
    ax.xaxis.set_major_locator(matplotlib.ticker.MaxNLocator(integer=True))
    ax.legend(fontsize=8)
    ax.grid(alpha=0.3)
    fig.tight_layout()
    fig.savefig(run / "train_rewards.png", dpi=100)
    plt.close(fig)
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
    ax.set_xlabel("GRPO step")
    ax.xaxis.set_major_locator(matplotlib.ticker.MaxNLocator(integer=True))
    ax.set_ylabel("seconds")
    ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(run / "train_time.png", dpi=100)
    plt.close(fig)
    return ["train_rewards.png", "train_time.png"]


def write_train_report(run_dir: str | Path) -> Path:
    """Write `report.md` (and its PNGs) into a Coder run folder; return its path."""
    run = Path(run_dir)
    steps = _jsonl(run / "steps.jsonl")
    warm = _jsonl(run / "warm_start.jsonl")
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
    header = "| step | correct | gate open | reward | groups with signal | geomean speedup | tokens | gen s | verify s | update s |"
    lines += [header, "|" + "---|" * 10]
    for s in steps:
        cells = [s["step"], _fmt(s.get("correct_rate")), _fmt(s.get("gate_open_share")), _fmt(s.get("reward_mean"))]
        cells += [s.get("groups_with_signal"), _fmt(s.get("geomean_speedup")), _fmt(s.get("completion_tokens"), 1)]
        cells += [_fmt(s.get(k), 2) for k in ("time_generate_s", "time_verify_s", "time_update_s")]
        lines.append("| " + " | ".join(str(c) for c in cells) + " |")
    if steps:
        statuses: dict[str, int] = {}
        for s in steps:
            for k, v in s.get("statuses", {}).items():
                statuses[k] = statuses.get(k, 0) + v
        lines += [
            "",
            "Statuses over all steps (strict policy): " + ", ".join(f"{k} {v}" for k, v in sorted(statuses.items())),
        ]
    plots = _plots(steps, run) if steps else []
    lines += [""] + [f"![{p}]({p})" for p in plots]
    if steps and not plots:
        lines.append("Plots skipped: matplotlib is not installed.")
    path = run / "report.md"
    path.write_text("\n".join(lines) + "\n")
    return path
