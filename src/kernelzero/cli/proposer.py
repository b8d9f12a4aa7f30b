"""`kernelzero proposer catalog|pool|propose|admit|frontier`: the Proposer's pipeline, one file per stage.

    kernelzero proposer catalog default --out catalog.json
    kernelzero proposer pool --corpus default --pairs 2000 --triples 2000 --out pool.jsonl
    kernelzero proposer propose --pool pool.jsonl --model template -n 1 --out proposals.jsonl
    kernelzero proposer admit proposals.jsonl --out suite.jsonl --jobs 2 --scale 0.25
    kernelzero proposer frontier runs/coder --out next_pool.jsonl --catalog catalog.json --coder-out tasks.jsonl

Every stage appends to its output and resumes: re-running a command does only what is missing.
With no model, `--model replay:src/kernelzero/data/proposer_replay.jsonl` serves the bundled hand-written
proposals (include its API sets in the pool with `pool --include` that file).
"""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path

from rich.console import Console
from rich.table import Table

REPLAY = Path(__file__).resolve().parents[1] / "data" / "proposer_replay.jsonl"


def _corpus_args(p: argparse.ArgumentParser, flag: bool) -> None:
    if flag:
        p.add_argument("--corpus", nargs="+", default=None, metavar="SPEC", help="corpus specs (default: default)")
    p.add_argument("--kernelbench-corpus", action="store_true", help="allow mining KernelBench (recorded)")
    p.add_argument("--level", type=int, nargs="+", default=[], help="only these levels of suite corpora")


def add_parser(sub: argparse._SubParsersAction, name: str) -> None:
    parser = sub.add_parser(name, help="the Proposer: API catalog, pool, proposals, admission, frontier")
    verbs = parser.add_subparsers(dest="verb", required=True)
    p = verbs.add_parser("catalog", help="mine torch APIs from a corpus")
    p.add_argument("corpus", nargs="*", default=["default"], help="default, torch.nn, transformers, a suite, a folder")
    _corpus_args(p, False)
    p.add_argument("--no-torch", action="store_true", help="leave out torch's operators the corpus does not use")
    p.add_argument("--out", required=True)
    p = verbs.add_parser("pool", help="sample API pairs and triples from co-occurrence")
    _corpus_args(p, True)
    p.add_argument("--catalog", help="a catalog.json instead of mining --corpus")
    p.add_argument("--pairs", type=int, default=2000)
    p.add_argument("--triples", type=int, default=2000)
    p.add_argument("--temperature", type=float, default=1.0)
    p.add_argument("--smoothing", type=float, default=0.2, help="share of the category-compatible prior")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--include", nargs="+", default=[], help="JSONL files whose lines' 'apis' go in first")
    p.add_argument("--template-only", action="store_true", help="only APIs the template generator can write")
    p.add_argument("--out", required=True)
    p = verbs.add_parser("propose", help="write proposals for a pool with a model, a replay file or the template")
    p.add_argument("--pool", required=True)
    p.add_argument("--model", default=f"replay:{REPLAY}", help="openai:M, hf:P, vllm:P, replay:F, template[:SEED]")
    p.add_argument("-n", "--samples", type=int, default=1)
    p.add_argument("--limit", type=int, help="only the first N pool entries")
    p.add_argument("--temperature", type=float, default=1.0)
    p.add_argument("--top-p", type=float, default=1.0)
    p.add_argument("--max-tokens", type=int, default=4096)
    p.add_argument("--seed", type=int)
    p.add_argument("--concurrency", type=int, default=8)
    p.add_argument("--out", required=True)
    p = verbs.add_parser("admit", help="run admission (syntax, dedup, runnable, numerical); exits 0")
    p.add_argument("proposals")
    p.add_argument("--out", required=True, help="the admitted suite (.jsonl)")
    p.add_argument("--log", help="decisions JSONL (default: OUT with .admissions.jsonl)")
    p.add_argument("--jobs", type=int, default=2)
    p.add_argument("--device", default="auto", choices=("auto", "cpu", "cuda"))
    p.add_argument("--timeout", type=float, default=180.0, help="seconds per proposal")
    p.add_argument("--mem-gb", type=float, default=16.0)
    p.add_argument("--scale", type=float, help="shrink size globals by F before running (CPU)")
    p.add_argument("--max-extra", type=int, default=2)
    p.add_argument("--window-us", type=float, nargs=2, default=(50.0, 20000.0), metavar=("LO", "HI"))
    p.add_argument("--window-on-cpu", action="store_true")
    p.add_argument("--benchmark", nargs="+", default=[], help="suites never to duplicate (besides KernelBench)")
    p.add_argument("--no-default-benchmark", action="store_true")
    p.add_argument("--json", action="store_true", help="print each decision as JSON")
    p = verbs.add_parser("frontier", help="next pool and Coder tasks from Coder runs")
    p.add_argument("runs", nargs="+", metavar="RUN_DIR")
    _corpus_args(p, True)
    p.add_argument("--catalog", help="catalog for the co-occurrence share (default: mine --corpus)")
    p.add_argument("--threshold", type=float, default=0.5)
    p.add_argument("--band", type=float, nargs=2, default=(0.25, 0.75), metavar=("LO", "HI"))
    p.add_argument("--frontier-share", type=float, default=0.5)
    p.add_argument("--size", type=int)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--coder-out", help="suite of admitted modules inside the band")
    p.add_argument("--out", required=True)
    parser.set_defaults(run=run)


def _catalog(args: argparse.Namespace, specs: list[str] | None) -> dict:
    from kernelzero.proposer.corpus import build_catalog, load_catalog

    if getattr(args, "catalog", None):
        return load_catalog(args.catalog)
    return build_catalog(specs or ["default"], args.kernelbench_corpus, tuple(args.level))


def _write_jsonl(path: str, rows: list[dict]) -> None:
    Path(path).parent.mkdir(parents=True, exist_ok=True)
    Path(path).write_text("".join(json.dumps(r) + "\n" for r in rows))


def _run_pool(args: argparse.Namespace, console: Console) -> int:
    from kernelzero.proposer.cooccur import pool_entries
    from kernelzero.proposer.generator import SUPPORTED

    start = time.monotonic()
    catalog = _catalog(args, args.corpus)
    include = []
    for path in args.include:
        for line in Path(path).read_text().splitlines():
            row = json.loads(line) if line.strip() else {}
            if isinstance(row.get("apis"), list):
                include.append(row["apis"])
    rows = pool_entries(
        catalog,
        args.pairs,
        args.triples,
        args.temperature,
        args.smoothing,
        args.seed,
        include,
        set(SUPPORTED) if args.template_only else None,
    )
    _write_jsonl(args.out, rows)
    mined = " (KernelBench mined)" if catalog["corpus"].get("kernelbench_mined") else ""
    console.print(f"{len(rows)} API sets -> {args.out} in {time.monotonic() - start:.1f} s{mined}")
    return 0


def _run_admit(args: argparse.Namespace, console: Console) -> int:
    from kernelzero.proposer.admit import AdmitOptions, admit, load_proposals

    options = AdmitOptions(
        device=args.device,
        jobs=args.jobs,
        timeout_s=args.timeout,
        mem_gb=args.mem_gb,
        scale=args.scale,
        max_extra=args.max_extra,
        window_us=tuple(args.window_us),
        window_on_cpu=args.window_on_cpu,
        benchmarks=tuple(args.benchmark),
        default_benchmark=not args.no_default_benchmark,
    )
    log = args.log or str(Path(args.out).with_suffix(".admissions.jsonl"))

    def show(d) -> None:
        if args.json:
            print(
                json.dumps({"id": d.id, "admitted": d.admitted, "reason": d.reason, "message": d.message}), flush=True
            )
        else:
            mark = "[green]admit[/]" if d.admitted else f"[red]{d.reason}[/]"
            console.print(f"{mark} {d.id} {d.task or d.message[:120]}", highlight=False)

    summary = admit(load_proposals(args.proposals), options, args.out, log, on_decision=show)
    table = Table("outcome", "proposals")
    for reason, count in summary["reasons"].items():
        table.add_row(reason, str(count))
    console.print(table)
    for note in summary["notes"]:
        console.print(f"[yellow]note:[/] {note}")
    console.print(
        f"{summary['decided']} decided, {summary['admitted']} admitted in {summary['seconds']} s "
        f"({summary['per_hour']} per hour, {summary['jobs']} jobs, {summary['device']}); suite: {args.out}"
    )
    return 0


def _run_frontier(args: argparse.Namespace, console: Console) -> int:
    from kernelzero.proposer.frontier import FrontierConfig, coder_tasks, next_pool, read_run

    cfg = FrontierConfig(
        threshold=args.threshold,
        band=tuple(args.band),
        frontier_share=args.frontier_share,
        size=args.size,
        seed=args.seed,
    )
    results = [r for run in args.runs for r in read_run(run)]
    need_catalog = args.frontier_share < 1
    rows = next_pool(results, cfg, _catalog(args, args.corpus) if need_catalog else None)
    _write_jsonl(args.out, rows)
    table = Table("task", "samples", "p", "frontier reward")
    for r in sorted(results, key=lambda r: -r.reward)[:20]:
        table.add_row(r.name, str(r.n), f"{r.p:.3f}", f"{r.reward:.3f}")
    console.print(table)
    n_front = sum(r["origin"] == "frontier" for r in rows)
    console.print(f"{n_front} frontier sets + {len(rows) - n_front} co-occurrence sets -> {args.out}")
    if args.coder_out:
        tasks = coder_tasks(results, cfg)
        _write_jsonl(args.coder_out, tasks)
        console.print(f"{len(tasks)} admitted modules in the band {cfg.band} -> {args.coder_out}")
    return 0


def run(args: argparse.Namespace) -> int:
    console = Console(soft_wrap=True)
    if args.verb == "catalog":
        from kernelzero.proposer.corpus import build_catalog

        start = time.monotonic()
        catalog = build_catalog(args.corpus, args.kernelbench_corpus, tuple(args.level), with_torch=not args.no_torch)
        Path(args.out).parent.mkdir(parents=True, exist_ok=True)
        Path(args.out).write_text(json.dumps(catalog, indent=1))
        used = sum(1 for e in catalog["apis"].values() if e["count"])
        console.print(
            f"{len(catalog['apis'])} APIs ({used} used by {len(catalog['modules'])} corpus modules) -> "
            f"{args.out} in {time.monotonic() - start:.1f} s"
        )
        return 0
    if args.verb == "pool":
        return _run_pool(args, console)
    if args.verb == "propose":
        from kernelzero.proposer.propose import ProposeConfig, run_propose

        cfg = ProposeConfig(
            pool=args.pool,
            model=args.model,
            out=args.out,
            samples=args.samples,
            limit=args.limit,
            temperature=args.temperature,
            top_p=args.top_p,
            max_tokens=args.max_tokens,
            seed=args.seed,
            concurrency=args.concurrency,
        )
        summary = run_propose(cfg)
        for warning in summary["warnings"]:
            console.print(f"[yellow]warning:[/] {warning}")
        console.print(
            f"{summary['written']} proposals written ({summary['skipped']} already there, "
            f"{summary['failed']} failed) -> {args.out}"
        )
        return 0
    if args.verb == "admit":
        return _run_admit(args, console)
    return _run_frontier(args, console)
