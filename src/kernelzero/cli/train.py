"""`kernelzero train PHASE --config FILE.yaml`: one phase of KernelZero's training on TRL.

    kernelzero train coder --config configs/tiny-cpu.yaml              # warm start, CA-GRPO, eval, report
    kernelzero train coder --config configs/tiny-gpu.yaml --set grpo.steps=40 --set run_dir=runs/mini
    kernelzero train coder --config configs/tiny-cpu.yaml --prepare-only   # tasks and policy, no GRPO

Several processes: `--prepare-only` once, then `accelerate launch -m kernelzero train coder --config ...` (each
process verifies its share of a step's samples; the CA-GRPO gate gathers whole groups; process 0 logs and
evaluates). A run folder that already holds checkpoints is resumed from the last one. `--set KEY=VALUE` overrides one
config value (VALUE read as YAML: numbers, true/false, null). The config's sections and keys are documented
in src/kernelzero/train/config.py. Needs the `train` extra: `pip install 'kernelzero[train]'`.
"""

from __future__ import annotations

import argparse
from typing import Any

import yaml

PHASES = ("coder",)


def add_parser(sub: argparse._SubParsersAction, name: str) -> None:
    parser = sub.add_parser(name, help="train a model of KernelZero (GRPO on TRL)")
    parser.add_argument("phase", choices=PHASES, help="which model to train")
    parser.add_argument("--config", required=True, metavar="FILE.yaml", help="the run's configuration")
    parser.add_argument("--set", action="append", default=[], metavar="KEY=VALUE", help="override a config value")
    parser.add_argument("--prepare-only", action="store_true", help="write tasks and the start policy, then stop")
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


def run(args: argparse.Namespace) -> int:
    try:
        import trl  # noqa: F401
    except ImportError:
        raise ValueError("training needs the train extra: pip install 'kernelzero[train]'") from None
    from kernelzero.train.coder import prepare_only, run_coder
    from kernelzero.train.config import load_config

    cfg = load_config(args.config, parse_overrides(args.set))
    if args.prepare_only:
        print(f"prepared {prepare_only(cfg)}")
        return 0
    summary = run_coder(cfg)
    print(f"policy {summary['policy']} after {summary['steps']} steps; report {summary['report']}")
    return 0
