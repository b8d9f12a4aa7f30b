"""Where a GPU gate run's verification time went: a markdown summary of the verdict log's stage times.

    python3 scripts/gate_stages.py OUT/gpu_verdicts.jsonl >> OUT/gpu_table.md

Reads the JSON lines `KZ_VERDICT_LOG` collects (one verdict each, `stage_seconds` included: verify/api.py) and
prints, for each stage time in seconds (`total`, `gpu_mem_wait`, `import`, `gpu_excl_wait`, ...), how many verdicts
carry it, its median, 90th percentile, maximum and sum; then the verdicts per status, and the seconds the GPU was
held alone (ALONE), which no number of workers overlaps. Keys that are not durations
(`*_at` wall-clock stamps, `*_gib` sizes, `*_ms` per-call times) are left out. A missing or empty log prints a line
saying so; a line that is not JSON is counted and skipped.
"""

from __future__ import annotations

import json
import sys
from collections import Counter
from pathlib import Path

# Stages that hold the whole GPU (judge/judge.py `_timing`, judge/solo.py): they run one at a time, so their sum
# bounds a gate run from below however many workers it has.
ALONE = ("gpu_excl", "solo_excl")


def _is_duration(key: str) -> bool:
    return not (key.endswith("_at") or "gib" in key or key.endswith("_ms"))


def _quantile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


def summary(path: Path) -> str:
    """The markdown summary of the verdict log at `path`."""
    if not path.exists():
        return f"\nNo verdict log at {path}.\n"
    stages: dict[str, list[float]] = {}
    statuses: Counter[str] = Counter()
    bad = 0
    for line in path.read_text().splitlines():
        try:
            verdict = json.loads(line)
        except ValueError:
            bad += 1
            continue
        statuses[verdict.get("status", "?")] += 1
        for key, value in (verdict.get("stage_seconds") or {}).items():
            if isinstance(value, int | float) and _is_duration(key):
                stages.setdefault(key, []).append(float(value))
    if not statuses:
        return f"\nThe verdict log {path} holds no verdict.\n"
    rows = [
        f"| {key} | {len(v)} | {_quantile(v, 0.5):.2f} | {_quantile(v, 0.9):.2f} | {max(v):.2f} | {sum(v):.1f} |"
        for key, v in sorted(stages.items(), key=lambda kv: -sum(kv[1]))
    ]
    out = [
        "",
        f"### Where the verifications' time went ({sum(statuses.values())} verdicts)",
        "",
        "| stage | verdicts | median s | p90 s | max s | sum s |",
        "|---|---|---|---|---|---|",
        *rows,
        "",
        "Verdicts: " + ", ".join(f"{status} {n}" for status, n in statuses.most_common()),
    ]
    alone = sum(sum(stages.get(key, [])) for key in ALONE)
    if alone:
        out.append(
            f"The GPU held alone ({' + '.join(ALONE)}): {alone:.1f} s in all, one verification at a time: "
            "a floor under the run's wall time."
        )
    if bad:
        out.append(f"({bad} line(s) of the log were not JSON)")
    return "\n".join(out) + "\n"


if __name__ == "__main__":
    if len(sys.argv) != 2:
        sys.exit("usage: gate_stages.py VERDICTS.jsonl")
    print(summary(Path(sys.argv[1])), end="")
