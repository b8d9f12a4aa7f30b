"""Multi-turn runs: the view "after t turns" and the per-turn metrics table.

A run of `kernelzero eval --turns T` (T > 1) writes one record per (task, sample_idx, turn) in samples.jsonl (a
`Sample` dict plus "turn", 1-based) and verdicts.jsonl (the usual record plus "turn"). Sample `i` of a task is an
episode: turn 1 is the one-shot prompt, each later turn is the Coder's revision after the verifier's feedback.

A task's episode is *solved after t turns* when any of its turns 1..t is correct. The view after t turns keeps,
per episode, its best turn among 1..t (correct before incorrect, then the larger speedup vs eager, then the
earlier turn; an episode without a correct turn is shown by its latest turn), with `output_tokens` the sum over the
turns 1..t (what the episode cost so far). `metrics.summarise` over that view gives pass@k and fast_p after t
turns; `per_turn` collects, for each t, pass@1 and fast_1 after t turns and the output tokens of turn t itself.

    from kernelzero.report.turns import has_turns, after_turns, per_turn, turn_table
    samples, records = after_turns(sample_dicts, verdict_records, upto=2)     # -> metrics.summarise
    rows = per_turn(sample_dicts, verdict_records)                            # -> metrics.json "per_turn"
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable, Sequence
from typing import Any

from kernelzero.metrics import p_key, summarise
from kernelzero.report.tables import Table, pct, tokens
from kernelzero.types import Sample, from_dict

TURN = "turn"  # the key a multi-turn run adds to its samples.jsonl and verdicts.jsonl records


def has_turns(records: Iterable[dict[str, Any]]) -> bool:
    """Whether verdict (or sample) records come from a multi-turn run (they carry "turn")."""
    return any(TURN in r for r in records)


def _field(obj: Any, name: str) -> Any:
    return obj.get(name) if isinstance(obj, dict) else getattr(obj, name, None)


def _status(record: dict[str, Any], policy: str | None) -> str:
    status = _field(record["verdict"], "status")
    if policy is not None:
        status = (record.get("policies") or _field(record["verdict"], "policy_status") or {}).get(policy, status)
    return status


def _rank(record: dict[str, Any], policy: str | None) -> tuple:
    """Sort key of a turn within its episode: the best turn has the largest key."""
    correct = _status(record, policy) == "correct"
    speedup = _field(record["verdict"], "speedup_eager")
    return (correct, speedup if correct and speedup is not None else -1.0, -record[TURN] if correct else record[TURN])


def _as_sample(data: dict[str, Any], output_tokens: int | None) -> Sample:
    fields = {k: v for k, v in data.items() if k != TURN}
    fields["output_tokens"] = output_tokens
    return from_dict(Sample, fields)


def after_turns(
    samples: Sequence[dict[str, Any]],
    records: Sequence[dict[str, Any]],
    upto: int | None = None,
    policy: str | None = None,
) -> tuple[list[Sample], list[dict[str, Any]]]:
    """(samples, verdict records) with one record per episode: its best turn among 1..`upto` (None: all turns).

    Records without "turn" count as turn 1. Each returned sample is the best turn's sample with output_tokens
    summed over the episode's turns 1..upto (None when no turn reported a count). The returned records carry no
    "turn", so `metrics.summarise` reads them as a one-shot run.
    """
    by_episode: dict[tuple[str, int], list[dict[str, Any]]] = defaultdict(list)
    for r in records:
        turn = r.get(TURN, 1)
        if upto is None or turn <= upto:
            by_episode[(r["task"], r["sample_idx"])].append({**r, TURN: turn})
    sample_of = {(s["task"], s["sample_idx"], s.get(TURN, 1)): s for s in samples}
    out_samples, out_records = [], []
    for (task, idx), turns in by_episode.items():
        best = max(turns, key=lambda r: _rank(r, policy))
        out_records.append({k: v for k, v in best.items() if k != TURN})
        counts = [
            sample_of[(task, idx, t)].get("output_tokens")
            for t in range(1, (upto or max(r[TURN] for r in turns)) + 1)
            if (task, idx, t) in sample_of
        ]
        total = sum(c for c in counts if c is not None) if any(c is not None for c in counts) else None
        chosen = sample_of.get((task, idx, best[TURN]))
        if chosen is not None:
            out_samples.append(_as_sample(chosen, total))
    return out_samples, out_records


def per_turn(
    samples: Sequence[dict[str, Any]], records: Sequence[dict[str, Any]], policy: str | None = None
) -> list[dict[str, Any]]:
    """One dict per turn t = 1..the last turn of the run: metrics after t turns and the tokens of turn t.

    Keys: "turn"; "episodes" (episodes with a verdict by turn t); "reached" (episodes verified at turn t: those
    still running); "correct_at_turn" (of those, correct at turn t); "pass@1" and "fast_1" after t turns (fast_1
    None without timings); "avg_output_tokens" (turn t's samples) and "avg_tokens_so_far" (per episode, turns
    1..t).
    """
    last = max((r.get(TURN, 1) for r in records), default=0)
    rows = []
    for t in range(1, last + 1):
        view_samples, view_records = after_turns(samples, records, t, policy)
        overall = summarise(view_samples, view_records, ks=(1,), ps=(1.0,), policy=policy)["overall"]
        at_t = [r for r in records if r.get(TURN, 1) == t]
        turn_tokens = [s.get("output_tokens") for s in samples if s.get(TURN, 1) == t]
        turn_tokens = [n for n in turn_tokens if n is not None]
        so_far = [s.output_tokens for s in view_samples if s.output_tokens is not None]
        rows.append(
            {
                "turn": t,
                "episodes": len(view_records),
                "reached": len(at_t),
                "correct_at_turn": sum(_status(r, policy) == "correct" for r in at_t),
                "pass@1": overall["pass@k"].get("1"),
                "fast_1": None if overall["fast_p"] is None else overall["fast_p"][p_key(1.0)],
                "avg_output_tokens": round(sum(turn_tokens) / len(turn_tokens), 3) if turn_tokens else None,
                "avg_tokens_so_far": round(sum(so_far) / len(so_far), 3) if so_far else None,
            }
        )
    return rows


def turn_table(rows: Sequence[dict[str, Any]]) -> Table:
    """The per-turn rows as a table: one line per turn."""
    header = ("turn", "episodes", "verified at turn", "correct at turn", "pass@1 after", "fast_1 after")
    header += ("tokens of turn (mean)", "tokens so far (per episode)")
    cells = tuple(
        (
            str(r["turn"]),
            str(r["episodes"]),
            str(r["reached"]),
            str(r["correct_at_turn"]),
            pct(r["pass@1"]),
            pct(r["fast_1"]),
            tokens(r["avg_output_tokens"]),
            tokens(r["avg_tokens_so_far"]),
        )
        for r in rows
    )
    return Table("Per turn (an episode is solved after t turns when any of turns 1..t is correct)", header, cells)
