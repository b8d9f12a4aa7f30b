"""What the miniature's held-out samples got wrong: each sample of a pass@1 point against its task's own kernel.

    python bench/miniature_failures.py miniature_points.jsonl.gz [--config configs/tiny-gpu.yaml]

Reads the samples that `bench/train_gpu.py miniature` keeps for every pass@1 point (label, step, task, strict
status, text), regenerates the run's tasks from the config (the same `tasks` section gives the same tasks and
solutions), and compares each sample's code with its task's solution line by line. A difference is put in the
first class that covers it:

| class | what differs from the task's kernel |
|---|---|
| no code | the sample holds no function, class or kernel |
| same as the solution | nothing (a sample like this judged wrong would be the verifier's fault) |
| constant | chain steps with the right ops in the right order, a constant changed |
| chain | chain steps (`x = ...` between the loads and the mask or store) added, dropped or replaced |
| reduction or mask | the masked lanes' value or the reduction at the store |
| structure | anything else: loads, signature, launch, the module around the kernel |

Prints, for each point, the classes of the correct and of the other samples, and for the others the most frequent
(task's ops, class) pairs, so a flat curve can be read as what the policy keeps getting wrong; then the samples by
their task's reduction against the reduction their store writes (`store_reduction`): whether the policy reads the
reduction off the module at all, a skill every API set shares (the 1,000-step warm start of 2026-12-08 wrote a sum
for every max task, greedy).
"""

from __future__ import annotations

import argparse
import difflib
import gzip
import json
import re
import sys
from collections import Counter
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from kernelzero.train.miniature import MiniTask

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "src"))

NUMBER = re.compile(r"-?\d+\.\d+|-?\d+")
CLASSES = ("no code", "same as the solution", "constant", "chain", "reduction or mask", "structure")


def _lines(code: str) -> list[str]:
    return [line.strip() for line in code.splitlines() if line.strip()]


def _is_step(line: str) -> bool:
    """A chain step of the kernel: an update of x that is neither a load nor the reduction's masking."""
    return line.startswith("x = ") and "tl.load(" not in line and "tl.where(mask" not in line


def _part(line: str) -> str:
    if _is_step(line):
        return "chain"
    if "tl.where(mask" in line or line.startswith("tl.store(out_ptr + row"):
        return "reduction or mask"
    return "structure"


def classify(solution: str, text: str) -> str:
    """The class (CLASSES) of the first difference between `text`'s extracted code and the task's `solution`."""
    from kernelzero.extract import extract_code

    code = extract_code(text)  # the whole text when it has no fenced block
    if not re.search(r"^\s*(def|class|@triton\.jit)\b", code, re.MULTILINE):
        return "no code"
    want, have = _lines(solution), _lines(code)
    if want == have:
        return "same as the solution"
    parts = set()
    for tag, i1, i2, j1, j2 in difflib.SequenceMatcher(a=want, b=have, autojunk=False).get_opcodes():
        if tag != "equal":
            parts |= {_part(line) for line in want[i1:i2] + have[j1:j2]}
    if parts == {"chain"}:
        steps_want, steps_have = [x for x in want if _is_step(x)], [x for x in have if _is_step(x)]
        same_ops = [NUMBER.sub("C", x) for x in steps_want] == [NUMBER.sub("C", x) for x in steps_have]
        return "constant" if same_ops else "chain"
    for name in ("structure", "reduction or mask", "chain"):
        if name in parts:
            return name
    return "structure"


def tasks_of(config: str, names: list[str]) -> dict:
    """name (without its suite prefix) -> MiniTask, regenerated from the config's `tasks` section (a name is its
    forward's place in the draw, so the tasks come back whichever split code placed them)."""
    from kernelzero.train.config import load_config
    from kernelzero.train.miniature import tasks_named

    t = load_config(config, {"device": "cpu"}).tasks
    return tasks_named(names, seed=t.seed, rows=t.rows, cols=t.cols, max_steps=t.max_steps)


def summarise(samples: list[dict], tasks: dict) -> list[str]:
    """Markdown lines: per point, the classes of correct and other samples, and the commonest failures."""
    out: list[str] = []
    labels = list(dict.fromkeys((s["label"], s["step"]) for s in samples))
    for label, step in labels:
        rows = [s for s in samples if (s["label"], s["step"]) == (label, step)]
        found = [(s, tasks[s["task"].split("/")[-1]]) for s in rows]
        classes = [(s["status"] == "correct", classify(t.solution, s["text"])) for s, t in found]
        out += [f"## {label} (step {step}): {len(rows)} samples", "", "| class | correct | other |", "|---|---|---|"]
        for name in CLASSES:
            right = sum(1 for ok, c in classes if ok and c == name)
            wrong = sum(1 for ok, c in classes if not ok and c == name)
            out.append(f"| {name} | {right} | {wrong} |")
        ops = Counter(
            (" ".join(op for op, _ in t.steps) + (f" -> {t.reduction}" if t.reduction else ""), c)
            for (s, t), (ok, c) in zip(found, classes)
            if not ok
        )
        out += [
            "",
            "Commonest failures (task's chain, class): "
            + "; ".join(f"{k[0]} [{k[1]}] x{n}" for k, n in ops.most_common(8)),
            "",
            *reduction_table(found),
            "",
        ]
    return out


def store_reduction(text: str) -> str:
    """The reduction a sample's kernel stores: max, mean (a sum over n_cols), sum, none (a store without one), or
    "no store" (no `tl.store(` line)."""
    stores = [line for line in text.splitlines() if "tl.store(" in line]
    if not stores:
        return "no store"
    line = stores[-1]
    if "tl.max(" in line:
        return "max"
    if "tl.sum(" in line:
        return "mean" if "/ n_cols" in line else "sum"
    return "none"


STORED = ("sum", "mean", "max", "none", "no store")


def reduction_table(found: list[tuple[dict, MiniTask]]) -> list[str]:
    """Markdown lines: per task reduction, its samples, how many are correct, and the reductions their stores write."""
    out = ["| task's reduction | samples | correct | " + " | ".join(f"stores {r}" for r in STORED) + " |"]
    out.append("|---" * (3 + len(STORED)) + "|")
    for reduction in ("max", "mean", "sum", "none"):
        rows = [s for s, t in found if (t.reduction or "none") == reduction]
        if rows:
            stored = Counter(store_reduction(s["text"]) for s in rows)
            right = sum(1 for s in rows if s["status"] == "correct")
            out.append(f"| {reduction} | {len(rows)} | {right} | " + " | ".join(str(stored[r]) for r in STORED) + " |")
    return out


def read_points(path: Path) -> list[dict]:
    with gzip.open(path, "rt") as f:
        return [json.loads(line) for line in f if line.strip()]


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("points", type=Path, help="miniature_points.jsonl.gz (or a run's points.jsonl.gz)")
    p.add_argument("--config", default=str(ROOT / "configs" / "tiny-gpu.yaml"), help="the run's config")
    args = p.parse_args()
    samples = read_points(args.points)
    tasks = tasks_of(args.config, sorted({s["task"].split("/")[-1] for s in samples}))
    print("\n".join(summarise(samples, tasks)))


if __name__ == "__main__":
    main()
