"""`kernelzero optimize MODULE.py --model SPEC --backend {triton,cuda}`: a fast, verified kernel for your module.

    kernelzero optimize my_module.py --model openai:qwen2.5-coder-7b --backend triton --budget 64 --turns 4
    kernelzero optimize block.py --model-class MyBlock --inputs example_inputs --model hf:./coder-7b
    kernelzero optimize src/kernelzero/tasks/suites/kz_basic/level1/21_GELU.py \
        --model replay:src/kernelzero/data/optimize_replay.jsonl --size rows=256 --size cols=512

MODULE is a task-format file (`Model`, `get_inputs`, `get_init_inputs`) or any file with an nn.Module class and a
function returning its forward inputs (--model-class, --inputs, --init-inputs name them). The command searches
within --budget verified completions (episodes of up to --turns turns, each turn with the verifier's feedback),
re-verifies the best candidates with more trials and at half and double the module's sizes, and writes
report.md and MODULE_optimized.py (defining ModelNew) into --out. Re-running the same command resumes; a larger
--budget continues the search. Exit code 0 when a kernel was chosen, 1 when no candidate passed.
"""

from __future__ import annotations

import argparse

from rich.console import Console

from kernelzero.optimize import OptimizeConfig, run_optimize
from kernelzero.tasks.sizes import parse_sizes
from kernelzero.types import PROFILES
from kernelzero.verify.backends import BACKENDS


def add_parser(sub: argparse._SubParsersAction, name: str) -> None:
    p = sub.add_parser(name, help="find a fast, verified kernel for one nn.Module")
    p.add_argument("module", help="a task-format .py file, or a .py file with an nn.Module and an inputs function")
    p.add_argument("--model", required=True, help="openai:MODEL, hf:PATH, vllm:PATH or replay:FILE.jsonl")
    p.add_argument("--backend", choices=tuple(BACKENDS), default="triton")
    p.add_argument("--budget", type=int, default=64, help="completions verified at most (default 64)")
    p.add_argument("--turns", type=int, default=4, help="turns per episode at most (default 4)")
    p.add_argument("--wave", type=int, help="episodes started together (default budget // turns)")
    p.add_argument("--time-limit", type=float, default=3600.0, help="seconds of search per invocation (default 3600)")
    p.add_argument("--finalists", type=int, default=3, help="candidates re-verified together (default 3)")
    p.add_argument("--final-trials", type=int, default=20, help="correctness trials when re-verifying (default 20)")
    p.add_argument("--model-class", help="the nn.Module class to optimise (default Model, or the file's only one)")
    p.add_argument("--inputs", help="function returning the forward inputs (default get_inputs)")
    p.add_argument("--init-inputs", help="function returning the constructor arguments (default get_init_inputs)")
    p.add_argument("--size", action="append", default=[], metavar="NAME=VALUE", help="a size global to optimise at")
    p.add_argument("--out", help="output folder (default runs/optimize-<module>-<backend>)")
    p.add_argument("--profile", choices=tuple(PROFILES), default="default")
    p.add_argument("--device", choices=("auto", "cuda", "cpu"), default="auto")
    p.add_argument("--jobs", type=int, default=2, help="verifications side by side without a GPU (default 2)")
    p.add_argument("--no-compile-check", action="store_true", help="without a GPU: skip compiling Triton for sm_90")
    p.add_argument(
        "--refine-correct",
        choices=("auto", "yes", "no"),
        default="auto",
        help="keep refining correct kernels for speed (auto: when a GPU times them)",
    )
    p.add_argument("--store", help="verdict store file shared with other runs (default: none)")
    p.add_argument("--temperature", type=float, default=1.0)
    p.add_argument("--max-tokens", type=int, default=8192)
    p.add_argument("--seed", type=int)
    p.add_argument("--concurrency", type=int, default=8, help="requests in flight (openai)")
    p.set_defaults(run=run)


def config_from(args: argparse.Namespace) -> OptimizeConfig:
    return OptimizeConfig(
        module=args.module,
        model=args.model,
        backend=args.backend,
        out=args.out,
        budget=args.budget,
        turns=args.turns,
        wave=args.wave,
        time_limit_s=args.time_limit,
        finalists=args.finalists,
        final_trials=args.final_trials,
        model_class=args.model_class,
        inputs=args.inputs,
        init_inputs=args.init_inputs,
        sizes=parse_sizes(args.size),
        profile=args.profile,
        device=args.device,
        jobs=args.jobs,
        compile_check=not args.no_compile_check,
        refine_correct={"auto": None, "yes": True, "no": False}[args.refine_correct],
        store=args.store,
        temperature=args.temperature,
        max_tokens=args.max_tokens,
        seed=args.seed,
        concurrency=args.concurrency,
    )


def run(args: argparse.Namespace) -> int:
    console = Console(soft_wrap=True)
    result = run_optimize(config_from(args), console)
    if result.kernel is None:
        console.print(f"[red]no candidate passed at every size[/]; see {result.report}")
        return 1
    v = result.verdict
    speed = "not timed (no GPU)" if v is None or v.speedup_eager is None else f"{v.speedup_eager:.2f}x eager"
    if v is not None and v.speedup_compile is not None:
        speed += f", {v.speedup_compile:.2f}x torch.compile"
    console.print(f"kernel: {result.kernel} ({speed}); report: {result.report}")
    return 0
