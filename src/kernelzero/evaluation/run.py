"""`kernelzero eval`: suite x model x samples -> a run folder with samples, verdicts, metrics, report.

    run = EvalConfig(suite="kz-basic", model="replay:completions.jsonl", backend="triton", samples=1,
                     out=Path("runs/demo"), preset="smoke")
    metrics = run_eval(run)

The run folder:
- `run.json`: the configuration, versions and date; a resumed run must match it (same model,
  backend, suite and sizes), while more samples per task extend it;
- `samples.jsonl`: one `Sample` per (task, sample_idx), appended as generations finish;
- `verdicts.jsonl`: one record per (task, sample_idx): `{"task", "sample_idx", "level", "verdict",
  "policies"}`, appended as verifications finish;
- `metrics.json` and `report.md` (+ PNG plots), rewritten at the end of every run.
Both JSONL files are append-only and resumable (evaluation/jsonl.py): an interrupted run, even one
killed mid-line, continues where it stopped, and nothing is generated or verified twice.

`--turns T` (T > 1) makes each sample an episode of up to T turns with the verifier's feedback in between
(evaluation/multiturn.py: its run folder, policy and metrics); T = 1, the default, is the one-shot protocol above.

Headline numbers use the `kernelbench` anti-cheat policy (PyTorch ops allowed beside the
candidate's own kernels, as in published KernelBench results); every verdict also records its
status under the `strict` policy, which rewards use.
"""

from __future__ import annotations

import datetime
import json
import platform
from pathlib import Path
from typing import Any

from rich.console import Console

from kernelzero.coder.backends import load_backend
from kernelzero.coder.backends.base import Generation, GenRequest, SamplingParams
from kernelzero.coder.prompts import PROMPT_VERSIONS, build_messages
from kernelzero.env.runlog import sample_record
from kernelzero.evaluation.config import EvalConfig, differing, run_config, verdict_store, verify_options
from kernelzero.evaluation.jsonl import JsonlLog
from kernelzero.evaluation.multiturn import run_turns, turn_metrics
from kernelzero.report.terminal import progress
from kernelzero.service.pool import VerifyRequest, verify_many
from kernelzero.tasks import load_suite, resize, select
from kernelzero.types import Task, to_dict

__all__ = ["EvalConfig", "generate_missing", "run_eval", "verify_missing"]


def _load_tasks(cfg: EvalConfig) -> list[Task]:
    suite = load_suite(cfg.suite)
    tasks = select(suite.tasks, list(cfg.levels) or None, list(cfg.tasks) or None)
    if not tasks:
        raise ValueError(f"no task of {cfg.suite} matches the selection")
    return [resize(t, sizes=cfg.sizes or None, scale=cfg.scale, preset=cfg.preset) for t in tasks]


def _check_run_json(cfg: EvalConfig, out: Path) -> None:
    path = out / "run.json"
    mine = run_config(cfg)
    if path.exists():
        diff = differing(json.loads(path.read_text())["config"], mine)
        if diff:
            raise ValueError(f"{out} holds a run with other settings ({', '.join(diff)}); use another --out")
    import torch

    meta = {
        "config": mine,
        "date": datetime.datetime.now().isoformat(timespec="seconds"),
        "versions": {"python": platform.python_version(), "torch": torch.__version__},
        "prompt_version": PROMPT_VERSIONS[cfg.backend],
    }
    path.write_text(json.dumps(meta, indent=1))


def generate_missing(cfg: EvalConfig, tasks: list[Task], log: JsonlLog, console: Console) -> list[str]:
    """Generate the samples `log` lacks; return the backend's warnings."""
    params = SamplingParams(
        n=cfg.samples, temperature=cfg.temperature, top_p=cfg.top_p, max_tokens=cfg.max_tokens, seed=cfg.seed
    )
    by_name = {t.name: t for t in tasks}
    requests = []
    for task in tasks:
        missing = tuple(i for i in range(cfg.samples) if (task.name, i) not in log)
        if missing:
            requests.append(GenRequest(task.name, build_messages(task, cfg.backend), missing))
    if not requests:
        return []
    options = {"concurrency": cfg.concurrency} if cfg.model.startswith("openai:") else {}
    backend = load_backend(cfg.model, **options)
    total = sum(len(r.sample_idxs) for r in requests)
    failed: list[str] = []
    with progress(console) as bar:
        job = bar.add_task("generate", total=total)

        def on_done(request: GenRequest, gens: list[Generation]) -> None:
            task = by_name[request.key]
            for g in gens:
                if not g.ok:  # not stored: a resumed run asks again
                    failed.append(f"{task.name} sample {g.sample_idx}: {g.error}")
                    continue
                log.append(sample_record(task, g, cfg.backend, cfg.model, PROMPT_VERSIONS[cfg.backend]))
            bar.advance(job, len(gens))

        backend.generate(requests, params, on_done=on_done)
    if failed:
        failed.insert(0, f"{len(failed)} generation(s) failed and were not stored (a re-run retries them)")
    return list(getattr(backend, "warnings", [])) + failed[:20]


def verify_missing(cfg: EvalConfig, tasks: list[Task], samples: JsonlLog, verdicts: JsonlLog, console: Console) -> None:
    """Verify every stored sample that has no verdict yet, `cfg.jobs` at a time."""
    by_name = {t.name: t for t in tasks}
    todo = [s for s in samples.records() if s["task"] in by_name and (s["task"], s["sample_idx"]) not in verdicts]
    if not todo:
        return
    opts = verify_options(cfg, "kernelbench")
    store = verdict_store(cfg)
    requests = (
        VerifyRequest(by_name[s["task"]], s["completion"], cfg.backend, opts, tag=s["sample_idx"]) for s in todo
    )
    with progress(console) as bar:
        job = bar.add_task("verify", total=len(todo))
        pool = {"pool": cfg.pool, "ray_address": cfg.ray_address, "per_gpu": cfg.per_gpu}
        for req, verdict in verify_many(requests, cfg.jobs, store, **pool):
            verdicts.append(
                {
                    "task": req.task.name,
                    "sample_idx": req.tag,
                    "level": req.task.level,
                    "verdict": to_dict(verdict),
                    "policies": verdict.policy_status,
                }
            )
            bar.advance(job)


def run_eval(cfg: EvalConfig, console: Console | None = None) -> dict[str, Any]:
    """Run (or resume) an evaluation; return the metrics written to metrics.json."""
    from kernelzero import metrics, report

    console = console or Console()
    if cfg.backend not in PROMPT_VERSIONS:
        raise ValueError(f"backend must be one of {', '.join(PROMPT_VERSIONS)}, got {cfg.backend!r}")
    tasks = _load_tasks(cfg)
    if cfg.model.startswith("replay:"):
        from kernelzero.coder.backends.replay import load_completions

        stored = load_completions(cfg.model.split(":", 1)[1])
        covered = [t for t in tasks if t.name in stored]
        if not covered:
            raise ValueError(f"{cfg.model} holds no completion for the selected tasks")
        if len(covered) < len(tasks):
            console.print(f"replay file covers {len(covered)} of the {len(tasks)} selected tasks; evaluating those")
        tasks = covered
    out = Path(cfg.out)
    out.mkdir(parents=True, exist_ok=True)
    _check_run_json(cfg, out)
    if cfg.turns > 1:
        return _run_multiturn(cfg, tasks, out, console)
    key = lambda r: (r["task"], r["sample_idx"])  # noqa: E731
    samples, verdicts = JsonlLog(out / "samples.jsonl", key), JsonlLog(out / "verdicts.jsonl", key)
    console.print(f"{len(tasks)} tasks x {cfg.samples} samples, model {cfg.model}, backend {cfg.backend} -> {out}")
    for warning in generate_missing(cfg, tasks, samples, console):
        console.print(f"[yellow]warning:[/] {warning}")
    verify_missing(cfg, tasks, samples, verdicts, console)
    sample_rows, verdict_rows = _rows(cfg, tasks, samples, verdicts)
    result = metrics.summarise(sample_rows, verdict_rows)
    (out / "metrics.json").write_text(json.dumps(result, indent=1))
    report.write_report(out)
    return result


def _rows(cfg: EvalConfig, tasks: list[Task], samples: JsonlLog, verdicts: JsonlLog) -> tuple[list, list]:
    """The records of the selected tasks and samples (a run folder may hold more)."""
    names = {t.name for t in tasks}
    sample_rows = [s for s in samples.records() if s["task"] in names and s["sample_idx"] < cfg.samples]
    verdict_rows = [v for v in verdicts.records() if v["task"] in names and v["sample_idx"] < cfg.samples]
    return sample_rows, verdict_rows


def _run_multiturn(cfg: EvalConfig, tasks: list[Task], out: Path, console: Console) -> dict[str, Any]:
    """`--turns T` with T > 1: episodes in the kernel environment (evaluation/multiturn.py)."""
    from kernelzero import report

    console.print(
        f"{len(tasks)} tasks x {cfg.samples} episodes of up to {cfg.turns} turns, model {cfg.model}, "
        f"backend {cfg.backend} -> {out}"
    )
    for warning in run_turns(cfg, tasks, out, console):
        console.print(f"[yellow]warning:[/] {warning}")
    key = lambda r: (r["task"], r["sample_idx"], r["turn"])  # noqa: E731
    samples, verdicts = JsonlLog(out / "samples.jsonl", key), JsonlLog(out / "verdicts.jsonl", key)
    result = turn_metrics(*_rows(cfg, tasks, samples, verdicts), cfg.turns)
    (out / "metrics.json").write_text(json.dumps(result, indent=1))
    report.write_report(out)
    return result
