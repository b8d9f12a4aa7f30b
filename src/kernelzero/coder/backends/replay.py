"""`replay:FILE.jsonl`: completions stored earlier, served as if a model had just written them.

    backend = load_backend("replay:runs/qwen/samples.jsonl")

Each line is `{"task": NAME, "completion": TEXT}`, optionally with "sample_idx", "output_tokens",
"prompt_tokens", "finish_reason" and "seconds" (a run's samples.jsonl has all of these, and other
fields, which are ignored). A request gets the completions whose "task" equals its key.

Order: a task's completions are ranked by "sample_idx" (a line without one takes the task's highest
index so far + 1, so a file without indices keeps file order), and sample i of a request is the i-th
of that ranking, so gaps in the stored indices close up. A task with fewer stored completions than
asked for gets what there is; the missing samples are listed in `missing` and `warnings` after
`generate`, never invented. Two lines with the same task and sample_idx are an error.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path

from kernelzero.coder.backends.base import Generation, GenRequest, OnDone, SamplingParams, check_requests


def load_completions(path: str | Path) -> dict[str, list[dict]]:
    """{task: its stored lines in sample_idx order} from a JSONL file."""
    by_task: dict[str, dict[int, dict]] = {}
    with open(path, encoding="utf-8") as fh:
        for lineno, line in enumerate(fh, 1):
            if not line.strip():
                continue
            try:
                row = json.loads(line)
            except ValueError as exc:
                raise ValueError(f"{path}:{lineno}: not JSON ({exc})") from None
            if (
                not isinstance(row, dict)
                or not isinstance(row.get("task"), str)
                or not isinstance(row.get("completion"), str)
            ):
                raise ValueError(f'{path}:{lineno}: need {{"task": str, "completion": str}}')
            stored = by_task.setdefault(row["task"], {})
            idx = row.get("sample_idx")
            if idx is None:
                idx = max(stored, default=-1) + 1
            if not isinstance(idx, int) or idx < 0:
                raise ValueError(f"{path}:{lineno}: sample_idx must be an integer >= 0, got {idx!r}")
            if idx in stored:
                raise ValueError(f"{path}:{lineno}: task {row['task']!r} sample_idx {idx} appears twice")
            stored[idx] = row
    return {task: [rows[i] for i in sorted(rows)] for task, rows in by_task.items()}


class ReplayBackend:
    """Serves the completions of a JSONL file; makes nothing up."""

    def __init__(self, path: str) -> None:
        self.path = path
        self.spec = f"replay:{path}"
        self.completions = load_completions(path)
        self.warnings: list[str] = []
        self.missing: dict[str, list[int]] = {}  # request key -> sample indices the file could not provide

    def generate(
        self, requests: Sequence[GenRequest], params: SamplingParams, on_done: OnDone | None = None
    ) -> dict[str, list[Generation]]:
        check_requests(requests)
        self.warnings, self.missing = [], {}
        results: dict[str, list[Generation]] = {}
        for req in requests:
            stored = self.completions.get(req.key, [])
            gens, missing = [], []
            for idx in req.indices(params):
                if idx >= len(stored):
                    missing.append(idx)
                    continue
                row = stored[idx]
                gens.append(
                    Generation(
                        text=row["completion"],
                        output_tokens=row.get("output_tokens"),
                        prompt_tokens=row.get("prompt_tokens"),
                        finish_reason=row.get("finish_reason") or "",
                        seconds=float(row.get("seconds") or 0.0),
                        sample_idx=idx,
                        seed=row.get("seed"),
                    )
                )
            results[req.key] = gens
            if missing:
                self.missing[req.key] = missing
                self.warnings.append(
                    f"{req.key}: {len(stored)} completions stored in {self.path}, "
                    f"missing sample_idx {_ranges(sorted(missing))}"
                )
            if on_done is not None and gens:
                on_done(req, gens)
        return results


def _ranges(idxs: list[int]) -> str:
    """'0-3, 7' for [0, 1, 2, 3, 7] (sorted input)."""
    runs: list[list[int]] = []
    for idx in idxs:
        if runs and idx == runs[-1][1] + 1:
            runs[-1][1] = idx
        else:
            runs.append([idx, idx])
    return ", ".join(str(a) if a == b else f"{a}-{b}" for a, b in runs)
