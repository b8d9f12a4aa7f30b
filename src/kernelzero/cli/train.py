"""`kernelzero train PHASE --config FILE.yaml`: one phase of KernelZero's training on TRL.

    kernelzero train coder --config configs/tiny-cpu.yaml              # warm start, CA-GRPO, eval, report
    kernelzero train coder --config configs/tiny-gpu.yaml --set grpo.steps=40 --set run_dir=runs/mini
    kernelzero train coder --config configs/tiny-cpu.yaml --prepare-only   # tasks and policy, no GRPO

Several processes: `--prepare-only` once, then `accelerate launch -m kernelzero train coder --config ...` (each
process verifies its share of a step's samples; the CA-GRPO gate gathers whole groups; process 0 logs and
evaluates). A run folder that already holds checkpoints is resumed from the last one. `--set KEY=VALUE` overrides one
config value (VALUE read as YAML: numbers, true/false, null). The config's sections and keys are documented
in src/kernelzero/train/config.py. Needs the `train` extra: `pip install 'kernelzero[train]'`.

Co-evolution (a config with `proposer:` and `coevolution:` sections; train/coevolve.py):

    kernelzero train --config configs/tiny-cpu.yaml              # R rounds of (Proposer phase, Coder phase)
    kernelzero train --config configs/qwen2.5-coder-7b.yaml --dry-run   # config, model paths, verifier health

The loop starts each phase as `kernelzero train prepare|proposer|coder --config RUN/...` in its own process.
"""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

import yaml

PHASES = ("coder", "proposer", "prepare")


def add_parser(sub: argparse._SubParsersAction, name: str) -> None:
    parser = sub.add_parser(name, help="train a model of KernelZero (GRPO on TRL)")
    parser.add_argument("phase", nargs="?", choices=PHASES, help="one phase (none: the co-evolution loop)")
    parser.add_argument("--config", required=True, metavar="FILE.yaml", help="the run's configuration")
    parser.add_argument("--set", action="append", default=[], metavar="KEY=VALUE", help="override a config value")
    parser.add_argument("--prepare-only", action="store_true", help="write tasks and the start policy, then stop")
    parser.add_argument("--dry-run", action="store_true", help="check config, model paths and verifier; no training")
    parser.add_argument("--round", type=int, help="proposer phase: the round")
    parser.add_argument("--start", help="proposer phase: the Proposer checkpoint it starts from")
    parser.add_argument("--coder", help="proposer phase: the frozen Coder checkpoint that solves its modules")
    parser.add_argument("--frozen", action="store_true", help="proposer phase: sample and score, no update")
    parser.set_defaults(run=run)


def parse_overrides(items: list[str]) -> dict[str, Any]:
    """`section.key=value` items as a nested dict (values parsed as YAML scalars)."""
    out: dict[str, Any] = {}
    for item in items:
        key, sep, raw = item.partition("=")
        if not sep or not key:
            raise ValueError(f"--set wants KEY=VALUE, got {item!r}")
        node = out
        *parents, leaf = key.split(".")
        for part in parents:
            node = node.setdefault(part, {})
        node[leaf] = yaml.safe_load(raw)
    return out


def dry_run(args: argparse.Namespace) -> int:
    """Check a config without a GPU and without loading a model; raise listing every problem found."""
    from kernelzero.train.coevolve_config import check_model_path, dry_run, load_coevolve_config
    from kernelzero.train.config import load_config

    overrides = parse_overrides(args.set)
    data = yaml.safe_load(Path(args.config).read_text()) if args.phase != "coder" else {}
    if isinstance(data, dict) and "proposer" in data:
        problems = dry_run(load_coevolve_config(args.config, overrides))
    else:
        cfg = load_config(args.config, overrides)
        problems = [check_model_path("model.path", cfg.model.path)]
        if cfg.verifier.via == "http":
            from kernelzero.train.coevolve_config import AdmissionSettings, CoevolveConfig, LoopSettings, ProposerConfig

            no_proposer = ProposerConfig(admission=AdmissionSettings(benchmark_dedup=False))  # a Coder-only run
            problems += dry_run(CoevolveConfig(cfg, no_proposer, LoopSettings()))
    problems = sorted({p for p in problems if p})
    if problems:
        raise ValueError(f"{args.config}: dry run found {len(problems)} problem(s): " + "; ".join(problems))
    print(f"{args.config}: ok (config valid, model paths found or hub ids, verifier reachable where remote)")
    return 0


def run(args: argparse.Namespace) -> int:
    if args.dry_run:
        return dry_run(args)
    try:
        import trl  # noqa: F401
    except ImportError:
        raise ValueError("training needs the train extra: pip install 'kernelzero[train]'") from None
    if args.phase in (None, "proposer", "prepare"):
        from kernelzero.train.coevolve import run_coevolution, run_phase

        if args.phase is None:
            summary = run_coevolution(args.config, parse_overrides(args.set))
            print(f"{summary['rounds']} round(s) done; coder {summary['coder']}; report {summary['report']}")
            return 0
        print(run_phase(args.phase, args.config, args.round, args.start, args.coder, args.frozen))
        return 0
    from kernelzero.train.coder import prepare_only, run_coder
    from kernelzero.train.config import load_config

    cfg = load_config(args.config, parse_overrides(args.set))
    if args.prepare_only:
        print(f"prepared {prepare_only(cfg)}")
        return 0
    summary = run_coder(cfg)
    print(f"policy {summary['policy']} after {summary['steps']} steps; report {summary['report']}")
    return 0
