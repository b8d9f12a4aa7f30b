"""KernelZero's co-evolution loop: R rounds of (Proposer phase, Coder phase), each phase its own process.

    kernelzero train --config configs/tiny-cpu.yaml            # or run_coevolution("configs/tiny-cpu.yaml")

The run folder (the config's top-level `run_dir`) holds everything:

| path | what |
|---|---|
| config.yaml | the config as run (file plus --set overrides); every phase process reads this copy |
| state.json | finished phases, in order, with their outputs (rewritten atomically after each phase) |
| catalog.json, pool.jsonl | the API catalog and the co-occurrence pool (prepare) |
| coder-init/, proposer-init/ | the start policies (tiny models built and warm-started here, unless given by path) |
| proposer/admissions.jsonl, admitted.jsonl | every admission decision and the admitted suite, all rounds |
| round-r/inputs.jsonl | the round's Proposer API sets (round 1 co-occurrence; later frontier and mix) |
| round-r/proposer/ | steps.jsonl, tb/, proposals.jsonl (decision, p, reward), solutions.jsonl, checkpoints/, policy/ |
| round-r/coder_tasks.jsonl | the band pool the round's Coder phase trains on |
| round-r/coder/ | a whole `kernelzero train coder` run folder (steps, checkpoints, policy, eval/, report.md) |
| report.md, *.png | per round: held-out pass@k and fast_1, admission rate, success-rate distribution |

Phases run as `python -m kernelzero train {prepare,proposer,coder} ...` subprocesses; models pass between
them as checkpoint folders (LoRA merged). A killed run restarted with the same command skips the phases that
state.json lists as finished, and the interrupted phase resumes from its own last checkpoint (the phases drop
the records of steps after it), so no step is done twice. Ablations: `coevolution.freeze_proposer_after`
(the Coder trains on the pool of the last Proposer round after it; 0: the untrained Proposer's pool),
`proposer.pool.inputs` and `frontier_share`, `proposer.reward.band`, `proposer.solve.samples` (N).
"""

from __future__ import annotations

import dataclasses
import datetime
import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import yaml

from kernelzero.train.coevolve_config import CoevolveConfig, load_coevolve_config


def _log(msg: str) -> None:
    print(f"[train] {msg}", flush=True)


class State:
    """state.json: the finished phases of a run, written atomically (a temporary file renamed)."""

    def __init__(self, path: Path):
        self.path = path
        self.data: dict[str, Any] = json.loads(path.read_text()) if path.exists() else {"finished": []}

    def done(self, name: str) -> dict[str, Any] | None:
        return next((p for p in self.data["finished"] if p["phase"] == name), None)

    def finish(self, name: str, **info: Any) -> None:
        stamp = datetime.datetime.now().isoformat(timespec="seconds")
        self.data["finished"].append({"phase": name, "finished_at": stamp, **info})
        tmp = self.path.with_name(self.path.name + ".tmp")
        tmp.write_text(json.dumps(self.data, indent=1))
        tmp.replace(self.path)


def _merge(base: dict[str, Any], extra: dict[str, Any]) -> dict[str, Any]:
    out = dict(base)
    for key, value in extra.items():
        out[key] = _merge(out.get(key) or {}, value) if isinstance(value, dict) else value
    return out


def freeze_run_config(path: str | Path, overrides: dict[str, Any] | None) -> tuple[CoevolveConfig, Path]:
    """Load the config and write it (overrides merged) to RUN/config.yaml; a folder holding another config is
    refused, except for `coevolution.rounds` (a finished run may be extended by more rounds)."""
    cfg = load_coevolve_config(path, overrides)
    data = _merge(yaml.safe_load(Path(path).read_text()) or {}, overrides or {})
    root = Path(cfg.coder.run_dir)
    data["run_dir"] = str(root)
    if (data.get("coevolution") or {}).get("run_dir"):
        data["coevolution"]["run_dir"] = str(root)
    root.mkdir(parents=True, exist_ok=True)
    frozen = root / "config.yaml"
    if frozen.exists():
        old = yaml.safe_load(frozen.read_text())

        def strip(d: dict) -> dict:
            return {**d, "coevolution": {k: v for k, v in (d.get("coevolution") or {}).items() if k != "rounds"}}

        if strip(old) != strip(data):
            raise ValueError(f"{root} holds a run with another configuration (see {frozen}); use another run_dir")
    tmp = frozen.with_name("config.yaml.tmp")
    tmp.write_text(yaml.safe_dump(data, sort_keys=False))
    tmp.replace(frozen)
    return load_coevolve_config(frozen), frozen


def _phase(config: Path, python: str | None, *args: str) -> None:
    """Run one phase as its own process; a failure stops the loop with the phase's exit status."""
    cmd = [python or sys.executable, "-m", "kernelzero", "train", *args, "--config", str(config)]
    _log("running " + " ".join(cmd[1:]))
    done = subprocess.run(cmd, env={**os.environ, "PYTHONUNBUFFERED": "1"})
    if done.returncode != 0:
        raise RuntimeError(f"phase `{' '.join(args)}` exited with status {done.returncode}; rerun to resume")


def coder_phase_config(cfg: CoevolveConfig, round_no: int, start: str) -> Path:
    """round-r/coder.yaml: the Coder config of the round (band pool, start checkpoint, no warm start)."""
    root = Path(cfg.coder.run_dir)
    c = cfg.coder
    tasks = dataclasses.replace(
        c.tasks, suite=str(root / f"round-{round_no}" / "coder_tasks.jsonl"), scale=cfg.proposer.admission.scale
    )
    phase = dataclasses.replace(
        c,
        run_dir=str(root / f"round-{round_no}" / "coder"),
        tasks=tasks,
        model=dataclasses.replace(c.model, path=start),
        warm_start=dataclasses.replace(c.warm_start, steps=0),
        grpo=dataclasses.replace(c.grpo, train_split="rl"),
        verifier=dataclasses.replace(c.verifier, store=c.verifier.store or str(root / "verdicts.sqlite")),
    )
    path = root / f"round-{round_no}" / "coder.yaml"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(dataclasses.asdict(phase), indent=1))  # JSON is YAML
    return path


def prepare(cfg: CoevolveConfig) -> dict[str, str]:
    """Catalog, pool and both start policies (the `prepare` phase); returns their paths."""
    from kernelzero.train.coder import prepare_only
    from kernelzero.train.coevolve_pool import write_base_pool
    from kernelzero.train.proposer_phase import prepare_proposer_policy

    root = Path(cfg.coder.run_dir)
    pool = write_base_pool(cfg, root)
    if cfg.coder.model.path:
        coder = cfg.coder.model.path
    else:
        warm = cfg.coder.warm_start if cfg.loop.coder_warm_start else dataclasses.replace(cfg.coder.warm_start, steps=0)
        init = dataclasses.replace(cfg.coder, run_dir=str(root / "coder-init"), warm_start=warm)
        extra = []
        if cfg.loop.coder_warm_templates:  # the Proposer's warm-start template modules, with known-good kernels
            from kernelzero.train.report import read_jsonl
            from kernelzero.train.template_kernels import template_tasks

            extra = template_tasks(read_jsonl(pool), cfg.proposer.warm_start_sets, cfg.proposer.warm_start_variants)
            if not extra:
                raise ValueError("coevolution.coder_warm_templates: no API set of the pool has a template kernel")
        coder = str(prepare_only(init, extra, cfg.loop.coder_warm_keep_sft))
    proposer = str(prepare_proposer_policy(cfg, root))
    return {"pool": str(pool), "coder": coder, "proposer": proposer}


def proposer_trains(cfg: CoevolveConfig, round_no: int) -> bool:
    freeze = cfg.loop.freeze_proposer_after
    return freeze is None or round_no <= freeze


def run_coevolution(path: str | Path, overrides: dict[str, Any] | None = None) -> dict[str, Any]:
    """Run (or resume) the whole loop; return a summary (also in summary.json)."""
    from kernelzero.train.coevolve_report import write_coevolve_report

    cfg, config = freeze_run_config(path, overrides)
    root = Path(cfg.coder.run_dir)
    state = State(root / "state.json")
    py = cfg.loop.python
    if not state.done("prepare"):
        _phase(config, py, "prepare")
        state.finish("prepare", **json.loads((root / "prepared.json").read_text()))
    paths = state.done("prepare")
    coder, proposer, pool_round = paths["coder"], paths["proposer"], 0
    for r in range(1, cfg.loop.rounds + 1):
        trains = proposer_trains(cfg, r)
        if trains or pool_round == 0:  # a frozen Proposer still writes the first pool (freeze from the start)
            name = f"round-{r}/proposer"
            if not state.done(name):
                _phase(
                    config,
                    py,
                    "proposer",
                    "--round",
                    str(r),
                    "--start",
                    proposer,
                    "--coder",
                    coder,
                    *([] if trains else ["--frozen"]),
                )
                out = root / f"round-{r}" / "proposer" / "policy"
                state.finish(
                    name, policy=str(out) if trains else proposer, pool=str(root / f"round-{r}" / "coder_tasks.jsonl")
                )
            proposer, pool_round = state.done(name)["policy"], r
        elif not (root / f"round-{r}" / "coder_tasks.jsonl").exists():
            source = root / f"round-{pool_round}" / "coder_tasks.jsonl"  # the fixed pool of the last Proposer round
            (root / f"round-{r}").mkdir(parents=True, exist_ok=True)
            (root / f"round-{r}" / "coder_tasks.jsonl").write_text(source.read_text())
        name = f"round-{r}/coder"
        if not state.done(name):
            _phase(coder_phase_config(cfg, r, coder), py, "coder")
            state.finish(name, policy=str(root / f"round-{r}" / "coder" / "policy"))
        coder = state.done(name)["policy"]
    report = write_coevolve_report(root)
    summary = {
        "run_dir": str(root),
        "rounds": cfg.loop.rounds,
        "coder": coder,
        "proposer": proposer,
        "report": str(report),
    }
    (root / "summary.json").write_text(json.dumps(summary, indent=1))
    _log(f"done: {report}")
    return summary


def run_phase(
    phase: str, config: str | Path, round_no: int | None, start: str | None, coder: str | None, frozen: bool
) -> str:
    """The body of one phase process (`kernelzero train prepare|proposer --config RUN/config.yaml ...`)."""
    cfg = load_coevolve_config(config)
    root = Path(cfg.coder.run_dir)
    if phase == "prepare":
        paths = prepare(cfg)
        tmp = root / "prepared.json.tmp"
        tmp.write_text(json.dumps(paths))
        tmp.replace(root / "prepared.json")
        return f"prepared {paths}"
    from kernelzero.train.proposer_phase import run_proposer_phase

    if round_no is None or start is None or coder is None:
        raise ValueError("the proposer phase needs --round, --start and --coder")
    final = run_proposer_phase(cfg, round_no, start, coder, update=not frozen)
    return f"round {round_no} Proposer phase done: {final}"
