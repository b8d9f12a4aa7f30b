"""Which warm start makes the tiny Proposer write the API set it is asked for (issue 24 item 2, GPU).

    PYTHONPATH=$T:src python3 bench/proposer_warm_study.py --pool .gpu/pool.jsonl --budget-s 300 --out $OUT \\
        --setting steps=2400,lr=1e-3 --setting steps=2400,lr=3e-4

Each setting (proposer.warm_start fields, `batch_size`, `steps`, `lr`) builds a fresh Proposer of configs/tiny-gpu.yaml
on the pool's first `warm_start_sets` sets, fits it (train/proposer_phase.prepare_proposer_policy) and reports its
follow check: one sampled proposal per set through admission's syntax stage, seen and unseen sets apart. The table
goes to stdout and `--out`/proposer_warm.md as each setting ends; a setting is not started when the time left is
under the last one's.
"""

from __future__ import annotations

import argparse
import json
import shutil
import time
from pathlib import Path

from kernelzero.train.coevolve import freeze_run_config
from kernelzero.train.proposer_phase import prepare_proposer_policy

HEAD = "| setting | steps run | s | last-20 loss | seen passed | unseen passed | rejections |\n|---|---|---|---|---|---|---|\n"


def _setting(text: str) -> dict:
    """`k=v,...` of proposer.warm_start's numeric fields; argparse turns a ValueError into a usage error. Not
    cli.train.parse_overrides: its YAML scalars read `lr=1e-3` as a string (YAML 1.1 wants `1.0e-3`)."""
    from dataclasses import fields

    from kernelzero.train.config import WarmStartConfig

    known = {f.name for f in fields(WarmStartConfig)}
    out: dict = {}
    for part in filter(None, text.split(",")):
        key, _, value = (x.strip() for x in part.partition("="))
        if key not in known or not value:
            raise ValueError(f"{part!r}: want k=v with k one of {', '.join(sorted(known))}")
        try:
            out[key] = int(value) if value.isdigit() else float(value)
        except ValueError:
            raise ValueError(f"{part!r}: {value!r} is not a number") from None
    return out


def _row(name: str, root: Path, seconds: float) -> str:
    history = [json.loads(x) for x in (root / "proposer-init" / "warm_start.jsonl").read_text().splitlines()]
    follow = json.loads((root / "proposer-init" / "follow.json").read_text())
    tail = [h["loss"] for h in history[-20:]]

    def passed(part: str) -> str:
        counts = follow[part]
        return f"{counts.get('passed', 0)} of {sum(counts.values())}" if counts else "-"

    return (
        f"| {name} | {len(history)} | {seconds:.0f} | {sum(tail) / len(tail):.4f} | {passed('seen')} | "
        f"{passed('unseen')} | {json.dumps(follow['rejected'])} |\n"
    )


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--config", default="configs/tiny-gpu.yaml")
    p.add_argument("--pool", type=Path, required=True, help="a run's pool.jsonl")
    p.add_argument("--setting", action="append", default=[], help="k=v,... of proposer.warm_start")
    p.add_argument("--budget-s", type=float, default=300)
    p.add_argument("--out", type=Path, default=Path("."))
    p.add_argument("--work", type=Path, default=Path("/tmp/proposer-warm"))
    args = p.parse_args(argv)
    try:
        settings = [(text, _setting(text)) for text in args.setting or [""]]
    except ValueError as exc:
        p.error(f"--setting {exc}")
    began, last, table = time.monotonic(), 0.0, HEAD
    print(table, end="", flush=True)
    for text, values in settings:
        if time.monotonic() - began + last > args.budget_s:
            print(f"| {text} | not run: {args.budget_s - (time.monotonic() - began):.0f} s left |", flush=True)
            continue
        root = args.work / (text.replace(",", "_").replace("=", "-") or "default")
        shutil.rmtree(root, ignore_errors=True)
        root.mkdir(parents=True)
        shutil.copy(args.pool, root / "pool.jsonl")
        overrides = {"run_dir": str(root), "proposer": {"warm_start": {**values, "max_minutes": 30.0}}}
        overrides["proposer"]["admission"] = {"benchmark_dedup": False}
        cfg, _ = freeze_run_config(args.config, overrides)
        start = time.monotonic()
        prepare_proposer_policy(cfg, root)
        last = time.monotonic() - start
        table += _row(text or "config", root, last)
        print(table.splitlines()[-1], flush=True)
        args.out.mkdir(parents=True, exist_ok=True)
        (args.out / "proposer_warm.md").write_text(table)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
