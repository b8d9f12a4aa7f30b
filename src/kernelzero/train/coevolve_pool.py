"""The task and API-set pools of co-evolution: the round's Proposer inputs and the Coder's band pool.

    pool = write_base_pool(cfg, root)                               # catalog.json + pool.jsonl (co-occurrence)
    inputs = round_inputs(cfg, root, round_no, coder_path)           # round-r/inputs.jsonl
    rows = band_pool(records, suite_rows, band=(0.25, 0.75), min_tasks=8, bench=index)

Round 1's Proposer inputs are co-occurrence samples (proposer/cooccur.py). A later round's inputs follow
`proposer.pool.inputs`: `cooccurrence` (the same pool), `frontier` (only the API sets of modules the current
Coder solves less often than `threshold`), or `mix` (frontier sets making up `frontier_share`, co-occurrence
samples the rest; proposer/frontier.py). The frontier is built from the Coder's failures on every module it
evaluated: the current Coder is evaluated on the previous round's band pool through `kernelzero eval` (N samples
per module, the eval folder kept in the round), and every other module admitted in the previous round joins with
the success rate its N tries had in that round's Proposer phase (p below the band, p = 0 included; their
failure messages from solutions.jsonl become the notes), so modules the Coder failed completely feed the next
Proposer too.

The band pool: admitted modules whose success rate lies in the band, most informative (p nearest 0.5) first;
when fewer than `min_tasks`, the nearest admitted modules outside the band (by distance to it) fill it up, the
round's own first, then those of earlier rounds (with the success rate measured then). Only the run's admitted
modules are candidates, and any candidate whose syntax-tree or API-sequence key matches a
benchmark task is dropped (admission already rejects those; this is the second lock on the door), so the
Coder never trains on a benchmark task.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from kernelzero.proposer.dedup import BenchmarkIndex, exact_key, near_key
from kernelzero.train.coevolve_config import CoevolveConfig
from kernelzero.train.report import read_jsonl


def write_jsonl(path: Path, rows: list[dict[str, Any]]) -> Path:
    """Write rows atomically (a temporary file renamed), so a killed writer leaves the old file or the new."""
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_text("".join(json.dumps(r) + "\n" for r in rows))
    tmp.replace(path)
    return path


def vocabulary(cfg: CoevolveConfig) -> set[str] | None:
    from kernelzero.proposer.generator import SUPPORTED

    pool = cfg.proposer.pool
    vocab = set(pool.vocabulary) if pool.vocabulary else None
    if pool.template_only:
        vocab = (vocab or set(SUPPORTED)) & set(SUPPORTED)
    return vocab


def write_base_pool(cfg: CoevolveConfig, root: Path) -> Path:
    """The catalog of the configured corpus and the co-occurrence pool (written once)."""
    from kernelzero.proposer.cooccur import pool_entries
    from kernelzero.proposer.corpus import build_catalog, load_catalog

    p = cfg.proposer.pool
    root.mkdir(parents=True, exist_ok=True)
    catalog_path, pool_path = root / "catalog.json", root / "pool.jsonl"
    if not catalog_path.exists():
        tmp = catalog_path.with_suffix(".tmp")
        tmp.write_text(json.dumps(build_catalog([p.corpus])))
        tmp.replace(catalog_path)
    if not pool_path.exists():
        catalog = load_catalog(catalog_path)
        rows = pool_entries(catalog, p.pairs, p.triples, p.temperature, seed=p.seed, vocabulary=vocabulary(cfg))
        write_jsonl(pool_path, rows)
    return pool_path


def round_inputs(cfg: CoevolveConfig, root: Path, round_no: int, coder_path: str) -> Path:
    """The Proposer's API sets of round `round_no` (written once per round)."""
    out = root / f"round-{round_no}" / "inputs.jsonl"
    if out.exists():
        return out
    p = cfg.proposer.pool
    base = read_jsonl(root / "pool.jsonl")
    previous = root / f"round-{round_no - 1}" / "coder_tasks.jsonl"
    if round_no == 1 or p.inputs == "cooccurrence" or not previous.exists():
        return write_jsonl(out, base)
    results = frontier_results(cfg, root, round_no, coder_path, previous)
    results += solved_modules(root, round_no - 1, skip={r.name for r in results})
    return write_jsonl(out, mix_inputs(cfg, results, round_no, root))


def solved_modules(root: Path, round_no: int, skip: set[str]) -> list:
    """TaskResults of the modules admitted in round `round_no`'s Proposer phase (but those named in `skip`), with
    the success rate of the Coder's N tries there and its failure messages as notes."""
    from kernelzero.proposer.frontier import MAX_NOTES, TaskResult

    phase = root / f"round-{round_no}" / "proposer"
    suite = {r["name"]: r for r in read_jsonl(root / "proposer" / "admitted.jsonl")}
    tries = read_jsonl(phase / "solutions.jsonl") if (phase / "solutions.jsonl").exists() else []
    out = []
    for r in read_jsonl(phase / "proposals.jsonl"):
        if not r["admitted"] or r["p"] is None or r["task"] not in suite or r["task"] in skip:
            continue
        mine = [t for t in tries if t["task"] == r["task"] and t["step"] == r["step"]]
        notes = [f"{t['status']}: {t['message']}" for t in mine if not t["correct"] and t["message"]][:MAX_NOTES]
        out.append(TaskResult(r["task"], len(mine), r["p"], r["reward"], list(r["apis"]), notes, suite[r["task"]]))
    return out


def frontier_results(cfg: CoevolveConfig, root: Path, round_no: int, coder_path: str, suite: Path) -> list:
    """Per-module success rates of the current Coder on the previous band pool (an eval run, resumable)."""
    from kernelzero.evaluation.run import EvalConfig, run_eval
    from kernelzero.proposer.frontier import read_run

    s, c = cfg.proposer.solve, cfg.coder
    out = root / f"round-{round_no}" / "frontier_eval"
    run_eval(
        EvalConfig(
            suite=str(suite),
            scale=cfg.proposer.admission.scale,
            model=s.model or f"hf:{coder_path}",
            backend=c.backend,
            out=str(out),
            samples=s.samples,
            temperature=s.temperature,
            max_tokens=s.max_tokens,
            seed=c.seed + round_no,
            jobs=c.verifier.jobs,
            store=c.verifier.store or str(root / "verdicts.sqlite"),
        )
    )
    return read_run(out)


def mix_inputs(cfg: CoevolveConfig, results: list, round_no: int, root: Path) -> list[dict[str, Any]]:
    """Frontier sets of `results` (proposer/frontier.py's TaskResult) mixed with co-occurrence samples."""
    from kernelzero.proposer.corpus import load_catalog
    from kernelzero.proposer.frontier import FrontierConfig, next_pool

    p, g = cfg.proposer.pool, cfg.proposer.grpo
    share = 1.0 if p.inputs == "frontier" else p.frontier_share
    size = None if p.inputs == "frontier" else max(g.prompts_per_step * g.steps, g.prompts_per_step)
    fcfg = FrontierConfig(threshold=p.threshold, frontier_share=share, size=size, seed=p.seed + round_no)
    catalog = load_catalog(root / "catalog.json") if share < 1 else None
    vocab = vocabulary(cfg)
    if catalog is not None and vocab is not None:  # the same APIs as round 1's pool (template_only, vocabulary)
        apis = {n: {**e, "sampled": bool(e.get("sampled")) and n in vocab} for n, e in catalog["apis"].items()}
        catalog = {**catalog, "apis": apis}
    rows = next_pool(results, fcfg, catalog)
    if not rows:
        raise ValueError(
            f"round {round_no}: the frontier is empty (the Coder solves every module of the last band pool at least "
            f"{p.threshold:.2f} of the time) and proposer.pool.inputs is frontier only; use mix or cooccurrence"
        )
    return rows


def _distance(p: float, band: tuple[float, float]) -> float:
    lo, hi = band
    return 0.0 if lo <= p <= hi else min(abs(p - lo), abs(p - hi))


def _candidates(
    records: list[dict[str, Any]], suite_rows: dict[str, dict[str, Any]], band: tuple[float, float], bench: Any
) -> list[tuple[float, float, str, dict[str, Any]]]:
    best: dict[str, dict[str, Any]] = {}
    for r in records:
        if r["admitted"] and r["p"] is not None and r["task"] in suite_rows:
            best[r["task"]] = r  # a task is admitted once; the last record wins
    out = []
    for name, r in best.items():
        code = suite_rows[name]["code"]
        if bench is not None and bench.match(exact_key(code), near_key(code)):
            continue
        out.append((_distance(r["p"], band), abs(r["p"] - 0.5), name, r))
    return sorted(out, key=lambda c: c[:3])


def band_pool(
    records: list[dict[str, Any]],
    suite_rows: dict[str, dict[str, Any]],
    band: tuple[float, float],
    min_tasks: int,
    bench: BenchmarkIndex | None = None,
    earlier: list[dict[str, Any]] | None = None,
) -> list[dict[str, Any]]:
    """Suite lines for the Coder: admitted modules in the band, topped up with the nearest admitted others.

    `records` are the round's per-proposal records (admitted, task, p, reward), `earlier` those of earlier
    rounds (used only to top up, after the round's own modules); `suite_rows` the admitted suite's lines by
    task name. Each line gets `success_rate`, `frontier_reward` and `in_band` in its provenance.
    """
    current = _candidates(records, suite_rows, band, bench)
    names = {c[2] for c in current}
    older = [c for c in _candidates(earlier or [], suite_rows, band, bench) if c[2] not in names]
    inside = [c for c in current if c[0] == 0.0]
    rest = [c for c in current if c[0] > 0.0] + older
    chosen = [(c, True) for c in inside] + [(c, False) for c in rest[: max(0, min_tasks - len(inside))]]
    out = []
    for (_, _, name, r), in_band in chosen:
        row = suite_rows[name]
        prov = {**(row.get("provenance") or {}), "success_rate": r["p"], "frontier_reward": r["reward"]}
        out.append({**row, "provenance": {**prov, "in_band": in_band}})
    return out


def write_band_pool(cfg: CoevolveConfig, root: Path, round_no: int) -> Path:
    """round-r/coder_tasks.jsonl from the round's Proposer records; raises when nothing was admitted."""
    from kernelzero.proposer.admit import benchmark_index
    from kernelzero.train.proposer_reward import admit_options, dedup_note

    records = read_jsonl(root / f"round-{round_no}" / "proposer" / "proposals.jsonl")
    earlier = [x for k in range(1, round_no) for x in read_jsonl(root / f"round-{k}" / "proposer" / "proposals.jsonl")]
    suite = {r["name"]: r for r in read_jsonl(root / "proposer" / "admitted.jsonl")}
    bench, _ = benchmark_index(admit_options(cfg))
    r = cfg.proposer.reward
    rows = band_pool(records, suite, r.band, r.min_tasks, bench, earlier)
    if not rows:
        raise ValueError(
            f"round {round_no}: the Proposer had no admitted module to give the Coder "
            f"({len(records)} proposals; see round-{round_no}/proposer/proposals.jsonl for the reasons)"
        )
    note = dedup_note(cfg)  # the Coder's tasks say whether they were de-duplicated against the benchmark
    rows = [{**r, "provenance": {**r["provenance"], "benchmark_dedup": note}} for r in rows]
    return write_jsonl(root / f"round-{round_no}" / "coder_tasks.jsonl", rows)
