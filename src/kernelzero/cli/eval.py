"""`kernelzero eval SUITE --model SPEC --backend {triton,cuda}`: evaluate a kernel-writing model.

    kernelzero eval kz-basic --model replay:src/kernelzero/data/kz_basic_replay.jsonl --backend triton --preset smoke
    kernelzero eval path/to/kernelbench.jsonl --level 1 2 --model openai:qwen2.5-coder-7b -n 5 --out runs/qwen
    kernelzero eval kz-basic --config eval.yaml
    kernelzero eval kz-basic --turns 4 -n 4 --model openai:qwen2.5-coder-7b   # episodes of up to 4 turns

Writes a run folder (samples.jsonl, verdicts.jsonl, metrics.json, report.md, plots); re-running the
same command resumes it. `--config FILE.yaml` reads the options (the names of EvalConfig's fields);
flags given on the command line win.
"""

from __future__ import annotations

import argparse
import dataclasses
from pathlib import Path

import yaml
from rich.console import Console

from kernelzero.cli.tasks import add_selection_args
from kernelzero.cli.verify import UNSAFE_HELP
from kernelzero.evaluation.run import EvalConfig, run_eval
from kernelzero.tasks.sizes import parse_sizes
from kernelzero.types import PROFILES
from kernelzero.verify.backends import BACKENDS

DEFAULT_REPLAY = Path(__file__).resolve().parents[1] / "data" / "kz_basic_replay.jsonl"
DEFAULT_REPLAYS = {"helion": DEFAULT_REPLAY.with_name("kz_basic_helion_replay.jsonl")}  # else DEFAULT_REPLAY


def add_parser(sub: argparse._SubParsersAction, name: str) -> None:
    p = sub.add_parser(name, help="evaluate a model that writes kernels on a suite")
    add_selection_args(p)
    p.add_argument(
        "--model", help=f"openai:MODEL, hf:PATH, vllm:PATH or replay:FILE (default: replay of {DEFAULT_REPLAY.name})"
    )
    p.add_argument("--backend", choices=tuple(BACKENDS))
    p.add_argument("-n", "--samples", type=int, help="samples per task (default 1)")
    p.add_argument(
        "--turns",
        type=int,
        help="turns per sample (default 1, the one-shot protocol); T > 1: episodes with the verifier's feedback",
    )
    p.add_argument("--out", help="run folder (default runs/<suite>-<model>-<backend>)")
    p.add_argument("--temperature", type=float)
    p.add_argument("--top-p", type=float)
    p.add_argument("--max-tokens", type=int)
    p.add_argument("--seed", type=int)
    p.add_argument("--concurrency", type=int, help="requests in flight (openai)")
    p.add_argument("--profile", choices=tuple(PROFILES))
    p.add_argument("--device", choices=("auto", "cuda", "cpu"))
    p.add_argument(
        "--jobs",
        type=int,
        help="verifications side by side without a GPU (default 2); with GPUs see --per-gpu",
    )
    p.add_argument(
        "--per-gpu",
        type=int,
        help="verifications in flight per GPU (default 2), besides CPU build workers; a timed one holds its GPU alone",
    )
    p.add_argument(
        "--pool", choices=("local", "ray"), help="where verifications run: this machine (default) or a Ray cluster"
    )
    p.add_argument(
        "--ray-address", help="the Ray cluster's address (with --pool ray; default: RAY_ADDRESS or a local one)"
    )
    p.add_argument("--baselines", help="folder caching reference timings per GPU")
    p.add_argument("--compile-baseline", action="store_true", default=None)
    p.add_argument("--unsafe-no-sandbox", action="store_true", default=None, help=UNSAFE_HELP)
    p.add_argument(
        "--store", help="verdict store file shared across runs (default: ~/.cache/kernelzero/verdicts.sqlite)"
    )
    p.add_argument("--no-store", action="store_true", help="verify everything, reuse no stored verdict")
    p.add_argument("--config", type=Path, help="YAML file with EvalConfig fields")
    p.set_defaults(run=run)


def config_from(args: argparse.Namespace) -> EvalConfig:
    values: dict = yaml.safe_load(args.config.read_text()) if args.config else {}
    fields = {f.name for f in dataclasses.fields(EvalConfig)}
    unknown = set(values) - fields
    if unknown:
        raise ValueError(f"{args.config}: unknown option(s) {sorted(unknown)}; known: {sorted(fields)}")
    flags = {
        "model": args.model,
        "backend": args.backend,
        "samples": args.samples,
        "turns": args.turns,
        "out": args.out,
        "temperature": args.temperature,
        "top_p": args.top_p,
        "max_tokens": args.max_tokens,
        "seed": args.seed,
        "concurrency": args.concurrency,
        "profile": args.profile,
        "device": args.device,
        "jobs": args.jobs,
        "per_gpu": args.per_gpu,
        "baselines": args.baselines,
        "compile_baseline": args.compile_baseline,
        "unsafe_no_sandbox": args.unsafe_no_sandbox,
        "preset": args.preset,
        "scale": args.scale,
        "levels": tuple(args.level) if args.level else None,
        "tasks": tuple(args.task) if args.task else None,
        "sizes": parse_sizes(args.size) or None,
        "store": args.store,
        "pool": args.pool,
        "ray_address": args.ray_address,
    }
    values.update({k: v for k, v in flags.items() if v is not None})
    if args.no_store:
        values["store"] = None
    values["suite"] = args.suite
    values.setdefault("backend", "triton")
    values.setdefault("model", f"replay:{DEFAULT_REPLAYS.get(values['backend'], DEFAULT_REPLAY)}")
    for key in ("levels", "tasks"):
        if key in values:
            values[key] = tuple(values[key])
    if "out" not in values:
        model = values["model"].split(":", 1)[-1].replace("/", "_").removesuffix(".jsonl")
        turns = f"-t{values['turns']}" if values.get("turns", 1) > 1 else ""  # a multi-turn run: a folder of its own
        values["out"] = str(Path("runs") / f"{Path(args.suite).stem}-{Path(model).name}-{values['backend']}{turns}")
    return EvalConfig(**values)


def run(args: argparse.Namespace) -> int:
    console = Console(soft_wrap=True)
    cfg = config_from(args)
    result = run_eval(cfg, console)
    from kernelzero.report import print_summary

    print_summary(result, console)
    console.print(f"run folder: {cfg.out} (report.md, metrics.json, samples.jsonl, verdicts.jsonl)")
    return 0
