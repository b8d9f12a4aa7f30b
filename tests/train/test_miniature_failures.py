"""bench/miniature_failures.py tells what a miniature sample changed in its task's kernel."""

from __future__ import annotations

import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "bench"))

import miniature_failures as mf  # noqa: E402


def _task():
    from kernelzero.train.miniature import CONSTANTS, make_tasks

    tasks = make_tasks(80, seed=0, rows=4, cols=32)
    return next(t for t in tasks if t.reduction == "sum" and len(t.steps) >= 2 and t.steps[0][0] in CONSTANTS)


def fenced(code: str) -> str:
    return f"Here it is.\n```python\n{code}```\n"


def test_each_kind_of_change_gets_its_class():
    task = _task()
    sol = task.solution
    lines = sol.splitlines()
    steps = [i for i, line in enumerate(lines) if mf._is_step(line.strip())]
    constant = with_constant_changed(lines, steps[0])
    dropped = "\n".join(line for i, line in enumerate(lines) if i != steps[-1]) + "\n"
    masked = sol.replace("tl.where(mask, x, 0.0)", 'tl.where(mask, x, float("-inf"))')
    loaded = sol.replace("mask = cols < n_cols", "mask = cols <= n_cols")
    assert masked != sol and loaded != sol
    got = {
        "same": mf.classify(sol, fenced(sol)),
        "constant": mf.classify(sol, fenced(constant)),
        "dropped": mf.classify(sol, fenced(dropped)),
        "masked": mf.classify(sol, fenced(masked)),
        "loaded": mf.classify(sol, fenced(loaded)),
        "none": mf.classify(sol, "I cannot write this kernel."),
    }
    assert got == {
        "same": "same as the solution",
        "constant": "constant",
        "dropped": "chain",
        "masked": "reduction or mask",
        "loaded": "structure",
        "none": "no code",
    }
    samples = [
        {"label": "warm start", "step": 0, "task": f"level1/{task.name}", "status": "correct", "text": fenced(sol)},
        {"label": "warm start", "step": 0, "task": task.name, "status": "mismatch", "text": fenced(constant)},
        {"label": "GRPO call 3", "step": 16, "task": task.name, "status": "mismatch", "text": fenced(dropped)},
    ]
    text = "\n".join(mf.summarise(samples, {task.name: task}))
    assert "## warm start (step 0): 2 samples" in text and "## GRPO call 3 (step 16): 1 samples" in text
    assert "| same as the solution | 1 | 0 |" in text and "| constant | 0 | 1 |" in text and "| chain | 0 | 1 |" in text


def with_constant_changed(lines: list[str], index: int) -> str:
    """The code with the constant of line `index` changed."""
    line = lines[index]
    changed = line.replace(next(c for c in ("0.5", "2.0", "1.5", "-1.0", "3.0", "1.0", "-0.5") if c in line), "7.25")
    return "\n".join(changed if i == index else x for i, x in enumerate(lines)) + "\n"


def test_tasks_come_back_by_name_whichever_split_holds_them():
    from kernelzero.train.miniature import make_splits, make_tasks, tasks_named

    drawn = make_tasks(40, seed=3, rows=4, cols=32)
    again = tasks_named([drawn[7].name, f"level1/{drawn[31].name}"], seed=3, rows=4, cols=32)
    assert again == {drawn[7].name: drawn[7], drawn[31].name: drawn[31]}
    held = make_splits({"test": 5, "sft": 30}, seed=3, rows=4, cols=32)["test"]
    assert tasks_named([t.name for t in held], seed=3, rows=4, cols=32) == {t.name: t for t in held}


def test_the_sampling_study_counts_each_reduction_s_samples_by_class():
    """bench/miniature_sampling.py --classes: a max task answered with a sum is a wrong reduction, counted under max."""
    import miniature_sampling  # bench/ is on the path (above)

    from kernelzero.train.miniature import make_tasks

    tasks = make_tasks(80, seed=0, rows=4, cols=32)
    by = {r: next(t for t in tasks if t.reduction == r) for r in ("max", "mean", "")}
    solutions = {t.name: t.solution for t in by.values()}
    as_sum = by["max"].solution.replace('float("-inf")', "0.0").replace("tl.max(x, axis=0)", "tl.sum(x, axis=0)")
    drawn = [(by["max"], fenced(by["max"].solution), True), (by["max"], fenced(as_sum), False)]
    drawn += [(by["mean"], fenced(by["mean"].solution), True), (by[""], "no code here", False)]
    rows = miniature_sampling.class_table(drawn, solutions).splitlines()
    assert rows[0].startswith("| reduction | samples | no code | same as the solution |")
    assert rows[2:] == [
        "| max | 2 | 0 | 1 | 0 | 0 | 1 | 0 |",
        "| mean | 1 | 0 | 1 | 0 | 0 | 0 | 0 |",
        "| none | 1 | 1 | 0 | 0 | 0 | 0 | 0 |",
    ]


def test_the_reduction_table_counts_what_each_sample_stores_against_its_task_s_reduction():
    """A max task answered with a sum's store is counted under max as `stores sum`; mean is a sum over n_cols."""
    from kernelzero.train.miniature import make_tasks

    tasks = make_tasks(80, seed=0, rows=4, cols=32)
    by = {r: next(t for t in tasks if t.reduction == r) for r in ("max", "mean", "sum", "")}
    as_sum = by["max"].solution.replace('float("-inf")', "0.0").replace("tl.max(x, axis=0)", "tl.sum(x, axis=0)")
    assert [mf.store_reduction(by[r].solution) for r in ("max", "mean", "sum", "")] == ["max", "mean", "sum", "none"]
    assert mf.store_reduction(as_sum) == "sum" and mf.store_reduction("no kernel at all") == "no store"
    samples = [
        ({"status": "correct", "text": fenced(by["max"].solution)}, by["max"]),
        ({"status": "mismatch", "text": fenced(as_sum)}, by["max"]),
        ({"status": "mismatch", "text": fenced(as_sum)}, by["max"]),
        ({"status": "correct", "text": fenced(by["mean"].solution)}, by["mean"]),
        ({"status": "format_error", "text": "no kernel at all"}, by[""]),
    ]
    rows = mf.reduction_table(samples)
    assert rows[0].startswith("| task's reduction | samples | correct | stores sum | stores mean | stores max |")
    assert rows[2:] == [
        "| max | 3 | 1 | 2 | 0 | 1 | 0 | 0 |",
        "| mean | 1 | 1 | 0 | 1 | 0 | 0 | 0 |",
        "| none | 1 | 0 | 0 | 0 | 0 | 0 | 1 |",
    ]
