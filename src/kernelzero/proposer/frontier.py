"""The frontier: from a Coder run's verdicts, the next Proposer inputs and the Coder's next tasks.

    kernelzero proposer frontier runs/coder-round1 --out next_pool.jsonl --coder-out coder_tasks.jsonl

Reads a Coder run folder written by `kernelzero eval` (run.json for the suite, verdicts.jsonl for the
verdicts; the files are read directly, this package sits below evaluation). Per task, p is the share of its
verdicts that are `correct` under the `strict` policy (rewards.success_rate: the same c_i as the Coder's
reward; the verdicts must come from the `default` profile), and its Frontier Reward is
rewards.frontier_reward(p). Verdicts that are not the Coder's (`infra_error`, `task_broken`) are left out of p and
n; a task with no other verdict is left out.

- Tasks with p below `threshold` (default 0.5: the Coder fails more often than not) are the frontier:
  their API sets (the suite line's provenance, or the APIs the task's forward uses when it has none) go to
  the next pool with origin `frontier`, the task's p, and the Coder's failure messages as notes for the
  Proposer's prompt.
- They are mixed with co-occurrence samples (cooccur.py, from a catalog) so that frontier sets make up
  `frontier_share` of the pool (default 0.5), or `size` entries in all when given.
- Admitted modules (suite lines with provenance) whose p lies in the band [lo, hi] (default 0.25..0.75)
  go, with p and reward added to their provenance, to the Coder's task pool (`coder_out`), a suite file
  `tasks.load_suite` loads.
"""

from __future__ import annotations

import json
from collections import defaultdict
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from kernelzero.proposer.catalog import api_table, forward_apis
from kernelzero.proposer.cooccur import Sampler, mine_counts, sample_sets, set_key
from kernelzero.rewards import frontier_reward, is_correct, success_rate
from kernelzero.types import is_skipped, verdict_from_dict

MAX_NOTES = 5


@dataclass(frozen=True)
class FrontierConfig:
    """How the frontier is drawn from Coder runs."""

    threshold: float = 0.5  # tasks solved less often than this are the frontier
    band: tuple[float, float] = (0.25, 0.75)  # success rates of admitted modules the Coder trains on
    frontier_share: float = 0.5  # share of frontier sets in the next pool (the rest: co-occurrence samples)
    size: int | None = None  # entries in the next pool (None: from the frontier's size and the share)
    seed: int = 0  # co-occurrence sampling seed
    temperature: float = 1.0  # co-occurrence sampling temperature
    policy: str = "strict"  # anti-cheat policy whose status counts as correct


@dataclass
class TaskResult:
    """One task of a run: its verdicts' success rate and where it came from."""

    name: str
    n: int
    p: float
    reward: float
    apis: list[str]
    notes: list[str]
    row: dict[str, Any] | None  # the suite line (admitted modules), None for suites without provenance


def _suite_rows(suite_spec: str) -> dict[str, dict[str, Any]]:
    """name -> suite line for JSONL suites with provenance (as tasks.load_suite names them)."""
    path = Path(suite_spec)
    if path.suffix != ".jsonl" or not path.is_file():
        return {}
    rows = {}
    for line in path.read_text().splitlines():
        if line.strip():
            row = json.loads(line)
            if isinstance(row, dict) and "name" in row:
                stem = str(row["name"]).removesuffix(".py")
                rows[f"level{row['level']}/{stem}" if row.get("level") is not None else stem] = row
    return rows


def read_run(run_dir: str | Path, policy: str = "strict") -> list[TaskResult]:
    """Per-task success rates of one eval run folder."""
    from kernelzero.tasks import load_suite

    run = Path(run_dir)
    try:
        config = json.loads((run / "run.json").read_text())["config"]
    except (OSError, ValueError, KeyError) as exc:
        raise ValueError(f"{run}: not a Coder run folder (run.json unreadable: {exc})") from None
    verdicts: dict[str, list] = defaultdict(list)
    path = run / "verdicts.jsonl"
    if not path.exists():
        raise ValueError(f"{run}: no verdicts.jsonl (run `kernelzero eval` first)")
    for line in path.read_text().splitlines():
        if not line.strip():
            continue
        try:
            record = json.loads(line)
        except ValueError:
            continue  # a torn last line of a killed run
        verdict = verdict_from_dict(record["verdict"])
        if record.get("policies"):
            verdict = replace(verdict, policy_status={**verdict.policy_status, **record["policies"]})
        verdicts[record["task"]].append(verdict)
    rows = _suite_rows(config["suite"])
    sources = {t.name: t.source for t in load_suite(config["suite"]).tasks} if not rows else {}
    table = api_table()
    out = []
    for name, every in sorted(verdicts.items()):
        vs = [v for v in every if not is_skipped(v)]
        p = success_rate(vs, policy=policy) if vs else None
        if p is None:  # every verdict of the task was skipped: nothing is known of the Coder on it
            continue
        row = rows.get(name)
        if row and (row.get("provenance") or {}).get("apis"):
            apis = list(row["provenance"]["apis"])
        else:
            source = row["code"] if row else sources.get(name, "")
            apis = sorted(a for a in forward_apis(source) if table.sampled(a)) if source else []
        notes = [f"{v.status}: {v.message}" for v in vs if not is_correct(v, policy) and v.message][:MAX_NOTES]
        out.append(TaskResult(name, len(vs), p, frontier_reward(p), apis, notes, row))
    return out


def next_pool(results: list[TaskResult], cfg: FrontierConfig, catalog: dict[str, Any] | None) -> list[dict[str, Any]]:
    """Frontier sets (origin "frontier") mixed with co-occurrence samples (origin "cooccurrence")."""
    if not 0 < cfg.frontier_share <= 1:
        raise ValueError(f"frontier_share must lie in (0, 1], got {cfg.frontier_share}")
    frontier: dict[str, dict[str, Any]] = {}
    for r in sorted(results, key=lambda r: r.p):
        if r.p < cfg.threshold and len(r.apis) >= 2:
            key = set_key(r.apis)
            corpus = (r.row or {}).get("provenance", {}).get("corpus", {})
            frontier.setdefault(
                key,
                {
                    "key": key,
                    "apis": sorted(r.apis),
                    "origin": "frontier",
                    "from_task": r.name,
                    "success_rate": r.p,
                    "failure_notes": r.notes,
                    "corpus": corpus,
                },
            )
    entries = list(frontier.values())
    if cfg.size is not None:
        entries = entries[: round(cfg.size * cfg.frontier_share)]
        n_cooc = cfg.size - len(entries)
    else:
        n_cooc = round(len(entries) * (1 - cfg.frontier_share) / cfg.frontier_share)
    if n_cooc > 0:
        if catalog is None:
            raise ValueError("co-occurrence samples need a catalog (--catalog, or --frontier-share 1)")
        sampler = Sampler(mine_counts(catalog), cfg.temperature, seed=cfg.seed)
        taken = {tuple(e["apis"]) for e in entries}
        sets = sample_sets(sampler, 2, n_cooc // 2, taken) + sample_sets(sampler, 3, n_cooc - n_cooc // 2, taken)
        entries += [
            {"key": set_key(s), "apis": list(s), "origin": "cooccurrence", "corpus": catalog.get("corpus", {})}
            for s in sets
        ]
    return entries


def coder_tasks(results: list[TaskResult], cfg: FrontierConfig) -> list[dict[str, Any]]:
    """Suite lines of admitted modules whose success rate lies in the band, with p and reward in provenance."""
    lo, hi = cfg.band
    out, names = [], set()
    for r in results:
        if r.row is not None and lo <= r.p <= hi and r.name not in names:
            names.add(r.name)
            prov = {**(r.row.get("provenance") or {}), "success_rate": r.p, "frontier_reward": r.reward, "samples": r.n}
            out.append({**r.row, "provenance": prov})
    return out
