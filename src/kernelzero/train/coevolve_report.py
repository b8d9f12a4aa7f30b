"""The report of a co-evolution run: one row per round for each model, and plots.

    write_coevolve_report("runs/tiny-cpu")     # -> report.md, coevolve_rounds.png, coevolve_success.png

Reads only the run folder (round-r/proposer/steps.jsonl and proposals.jsonl, round-r/coder_tasks.jsonl,
round-r/coder/eval/*/metrics.json), so it can be re-run on a finished or interrupted run. Per round: the
Coder's held-out pass@1/5/10 and fast_1 before (the round's start policy, `eval/warm`) and after its phase, and
how far its phase moved its weights (relative L2 change from the start checkpoint named in round-r/coder.yaml to
round-r/coder/policy, and how many tensors changed: a phase without advantages leaves them bit-identical), and how
many of its generated batches had a group with signal (and how many updates were held for want of one); the
Proposer's proposals, admission rate, rejection reasons, mean reward and the values its rewards took (a round where
every p is 0 or 1 shows only 0 and -1), the success-rate distribution of its admitted modules and the band pool's
size. Plots need matplotlib; without it the tables stay.
"""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path
from typing import Any

from kernelzero.train.report import batch_lines, fmt, plot_lines, plot_section, pyplot, read_jsonl, save_plot


def _mean(values: list[float]) -> float | None:
    return sum(values) / len(values) if values else None


def _eval(folder: Path) -> dict[str, Any] | None:
    path = folder / "metrics.json"
    if not path.exists():
        return None
    overall = json.loads(path.read_text())["overall"]
    pass_k = overall.get("pass@k") or {}
    return {
        "pass@1": pass_k.get("1"),
        "pass@5": pass_k.get("5"),
        "pass@10": pass_k.get("10"),
        "fast_1": (overall.get("fast_p") or {}).get("1"),
    }


def weight_change(start: Path, end: Path) -> dict[str, Any] | None:
    """{"relative_l2": |end - start| / |start| over every tensor both hold, "changed": tensors not bit-identical,
    "tensors": tensors compared}; None when either folder has no model.safetensors (a hub id, an unfinished phase)."""
    a_path, b_path = Path(start) / "model.safetensors", Path(end) / "model.safetensors"
    if not (a_path.is_file() and b_path.is_file()):
        return None
    import torch
    from safetensors.torch import load_file

    a, b = load_file(a_path), load_file(b_path)
    keys = sorted(set(a) & set(b))
    diff = sum(float((b[k].double() - a[k].double()).pow(2).sum()) for k in keys)
    base = sum(float(a[k].double().pow(2).sum()) for k in keys)
    changed = sum(1 for k in keys if not torch.equal(a[k], b[k]))
    return {"relative_l2": (diff / base) ** 0.5 if base else None, "changed": changed, "tensors": len(keys)}


def _coder_moved(folder: Path) -> dict[str, Any] | None:
    config = folder / "coder.yaml"
    if not config.exists():
        return None
    start = (json.loads(config.read_text()).get("model") or {}).get("path")
    return weight_change(Path(start), folder / "coder" / "policy") if start else None


def _coder_signal(folder: Path) -> dict[str, int] | None:
    """{"batches": generated batches, "signal": those with a group whose rewards differ, "held": updates held}."""
    steps = read_jsonl(folder / "coder" / "steps.jsonl")
    batches = batch_lines(steps)
    if not batches:
        return None
    signal = sum(1 for s in batches if s.get("groups_with_signal"))
    return {"batches": len(batches), "signal": signal, "held": sum(1 for s in steps if s.get("held"))}


def round_rows(run: Path) -> list[dict[str, Any]]:
    """One dict per round folder: Proposer statistics and the Coder's evaluations."""
    rows = []
    rounds = sorted((p for p in run.glob("round-*") if p.is_dir()), key=lambda p: int(p.name.split("-")[1]))
    for folder in rounds:
        records = read_jsonl(folder / "proposer" / "proposals.jsonl")
        admitted = [r for r in records if r["admitted"]]
        evals = sorted((folder / "coder" / "eval").glob("step-*"), key=lambda p: int(p.name.split("-")[1]))
        band = read_jsonl(folder / "coder_tasks.jsonl")
        rows.append(
            {
                "round": int(folder.name.split("-")[1]),
                "frozen": not (folder / "proposer" / "proposals.jsonl").exists(),  # trained on an earlier pool
                "proposals": len(records),
                "admission_rate": len(admitted) / len(records) if records else None,
                "reasons": dict(Counter(r["reason"] for r in records if not r["admitted"]).most_common()),
                "reward_mean": _mean([r["reward"] for r in records if r["reward"] is not None]),  # None: skipped
                "rewards": Counter(round(r["reward"], 3) for r in records if r["reward"] is not None),
                "success": [r["p"] for r in admitted if r["p"] is not None],
                "band": len(band),
                "topped_up": sum(1 for b in band if not b.get("provenance", {}).get("in_band", True)),
                "coder_before": _eval(folder / "coder" / "eval" / "warm"),
                "coder_after": _eval(evals[-1]) if evals else None,
                "coder_moved": _coder_moved(folder),
                "coder_signal": _coder_signal(folder),
            }
        )
    return rows


def _plots(rows: list[dict[str, Any]], run: Path) -> list[str]:
    plt = pyplot()
    if plt is None:
        return []
    x = [r["round"] for r in rows]
    lines = [
        ("Proposer admission rate", "o", [r["admission_rate"] for r in rows]),
        ("Coder held-out pass@1", "s", [(r["coder_after"] or {}).get("pass@1") for r in rows]),
    ]
    plot_lines(plt, run / "coevolve_rounds.png", x, lines, "round", xticks=True)
    fig, ax = plt.subplots(figsize=(6, 3.2))
    for r in rows:
        if r["success"]:
            ax.hist(r["success"], bins=[i / 8 for i in range(10)], alpha=0.5, label=f"round {r['round']}")
    save_plot(plt, fig, ax, run / "coevolve_success.png", "Coder success rate p of admitted modules", "modules")
    return ["coevolve_rounds.png", "coevolve_success.png"]


def write_coevolve_report(run_dir: str | Path) -> Path:
    """Write `report.md` (and its PNGs) into a co-evolution run folder; return its path."""
    run = Path(run_dir)
    rows = round_rows(run)
    lines = [f"# Co-evolution: {run.name}", "", "## Coder (held-out split, `kernelzero eval`)", ""]
    lines += [
        "| round | pass@1 before | pass@1 after | pass@5 after | pass@10 after | fast_1 after | weights moved "
        "| batches with signal (updates held) |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for r in rows:
        before, after = r["coder_before"] or {}, r["coder_after"] or {}
        cells = [
            before.get("pass@1"),
            after.get("pass@1"),
            after.get("pass@5"),
            after.get("pass@10"),
            after.get("fast_1"),
        ]
        moved = r["coder_moved"]
        rel = moved["relative_l2"] if moved else None
        shown = f"{rel:.2e} ({moved['changed']} of {moved['tensors']} tensors)" if moved and rel is not None else "n/a"
        sig = r["coder_signal"]
        signal = f"{sig['signal']} of {sig['batches']} ({sig['held']})" if sig else "n/a"
        lines.append(f"| {r['round']} | " + " | ".join(fmt(c) for c in cells) + f" | {shown} | {signal} |")
    lines += ["", "## Proposer", ""]
    lines += [
        "| round | proposals | admission rate | mean reward | rewards (value: proposals) "
        "| success rates of admitted (p: modules) | band pool (topped up) | rejections |"
    ]
    lines += ["|---|---|---|---|---|---|---|---|"]
    for r in rows:
        hist = ", ".join(f"{p:.2f}: {n}" for p, n in sorted(Counter(r["success"]).items())) or "none"
        reasons = ", ".join(f"{k} {v}" for k, v in r["reasons"].items()) or "none"
        cells = [
            "frozen (earlier pool)" if r["frozen"] else r["proposals"],
            fmt(r["admission_rate"]),
            fmt(r["reward_mean"]),
            ", ".join(f"{v:g}: {n}" for v, n in sorted(r["rewards"].items())) or "none",
            hist,
            f"{r['band']} ({r['topped_up']})",
            reasons,
        ]
        lines.append(f"| {r['round']} | " + " | ".join(str(c) for c in cells) + " |")
    lines += plot_section(_plots(rows, run) if rows else [], bool(rows))
    lines += ["", "Per-step logs: round-r/proposer/steps.jsonl and round-r/coder/steps.jsonl (and report.md there)."]
    path = run / "report.md"
    path.write_text("\n".join(lines) + "\n")
    return path
