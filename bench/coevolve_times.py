"""Time per phase of a co-evolution run, split into generation, admission, verification and update.

    python3 bench/coevolve_times.py runs/tiny-gpu-coevolve          # a run folder of `kernelzero train --config`
    python3 bench/coevolve_times.py runs/tiny-gpu-coevolve --steps  # and a line per Proposer step and Coder batch

Reads the run folder only (round-r/proposer/steps.jsonl, round-r/coder/steps.jsonl, prepare's warm-start logs)
and prints one markdown table row per phase, summed over its steps, plus the Proposer's admission rate and the
Coder phase's correctness rate, for bench/train.md. The Proposer's reward time is split into admission, the
frozen Coder's generation of its N tries and their verification; the Coder phase's into generation,
verification and update, as train/logs.py records them.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "src"))

from kernelzero.train.report import batch_lines, read_jsonl  # noqa: E402


def _sum(steps: list[dict], key: str) -> float:
    return sum(s.get(key) or 0.0 for s in steps)


def rows(run: Path) -> list[str]:
    out = []
    for folder in sorted(run.glob("round-*"), key=lambda p: int(p.name.split("-")[1])):
        p = read_jsonl(folder / "proposer" / "steps.jsonl")
        if p:
            admitted = sum(s["admitted"] for s in p) / max(1, sum(s["proposals"] for s in p))
            cells = [f"{folder.name} Proposer", len(p), _sum(p, "time_generate_s"), _sum(p, "time_solve_generate_s")]
            cells += [_sum(p, "time_admit_s"), _sum(p, "time_solve_verify_s"), _sum(p, "time_update_s")]
            cells += [_sum(p, "time_step_s"), f"admitted {admitted:.2f}"]
            out.append(cells)
        c = read_jsonl(folder / "coder" / "steps.jsonl")
        if c:
            batches = batch_lines(c)
            correct = sum(s["correct_rate"] * s["samples"] for s in batches) / max(
                1, sum(s["samples"] for s in batches)
            )
            cells = [f"{folder.name} Coder", len(c), _sum(c, "time_generate_s"), 0.0, 0.0]
            cells += [_sum(c, "time_verify_s"), _sum(c, "time_update_s"), _sum(c, "time_step_s")]
            cells += [f"correct {correct:.2f}"]
            out.append(cells)
    header = "| phase | steps | policy generation s | Coder tries generation s | admission s | verification s |"
    header += " update s | total s | rate |"
    lines = [header, "|" + "---|" * 9]
    for cells in out:
        lines.append("| " + " | ".join(f"{c:.1f}" if isinstance(c, float) else str(c) for c in cells) + " |")
    return lines


def _top(counts: dict, n: int = 3) -> str:
    return ", ".join(f"{k} {v}" for k, v in sorted(counts.items(), key=lambda kv: -kv[1])[:n]) or "-"


def step_rows(run: Path) -> list[str]:
    """One line per Proposer step and per generated Coder batch: what item 2 of issue 24 reads first (admission,
    the success rates of admitted modules, groups with signal, held updates), without unpacking the run."""
    lines = [
        "| phase | step | proposals or samples | admitted or correct | p of admitted / statuses | reward | signal |"
    ]
    lines.append("|" + "---|" * 7)
    for folder in sorted(run.glob("round-*"), key=lambda p: int(p.name.split("-")[1])):
        for s in read_jsonl(folder / "proposer" / "steps.jsonl"):
            cells = [f"{folder.name} Proposer", s["step"], s["proposals"], s["admitted"]]
            tries = "; tries: " + _top(s["try_statuses"]) if s.get("try_statuses") else ""
            cells += [_top(s.get("success_hist") or {}, 6) + "; rejected: " + _top(s.get("reasons") or {}) + tries]
            cells += [f"{s.get('reward_mean', 0.0):.3f}", s.get("groups_with_signal", "?")]
            lines.append("| " + " | ".join(str(c) for c in cells) + " |")
        c = read_jsonl(folder / "coder" / "steps.jsonl")
        held = {s["batch_step"] for s in c if s.get("held")}
        for s in batch_lines(c):
            cells = [f"{folder.name} Coder", s["step"], s["samples"], f"{s['correct_rate']:.3f}"]
            cells += [_top(s.get("statuses") or {}), f"{s.get('reward_mean', 0.0):.3f}"]
            cells += [f"{s.get('groups_with_signal')}" + (" (held)" if s["step"] in held else "")]
            lines.append("| " + " | ".join(str(c) for c in cells) + " |")
    return lines


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("run", type=Path, help="the co-evolution run folder")
    parser.add_argument("--steps", action="store_true", help="also one line per Proposer step and Coder batch")
    args = parser.parse_args()
    print("\n".join(rows(args.run)))
    if args.steps:
        print("\n" + "\n".join(step_rows(args.run)))


if __name__ == "__main__":
    main()
