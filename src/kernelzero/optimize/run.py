"""`kernelzero optimize`: a fast, verified kernel for one module, from a model, within a budget.

    cfg = OptimizeConfig(module="my_module.py", model="openai:qwen2.5-coder-7b", backend="triton", budget=64, turns=4)
    result = run_optimize(cfg)          # result.kernel: the chosen kernel's file (None when nothing passed)

Steps, each resumable from the output folder (`out`, default `runs/optimize-<module>-<backend>`):
1. the module becomes a task (optimize/inputs.py) and its size variants are made (optimize/sizes.py); one contract
   check (`tasks.check_tasks`, in a child process) runs the module at its own sizes (a failure ends the command
   with the check's message) and at each variant (a variant the module does not allow is left out, with a note);
2. the search (optimize/search.py): waves of episodes in the kernel environment, each turn verified under the
   `strict` policy, until the sample budget is spent or the time limit passes;
3. the choice (optimize/choose.py): finalists re-verified with more trials and at the other sizes; the fastest that
   passes everywhere (on CPU, without timings: the first found that passes everywhere);
4. report.md and `<module>_optimized.py` (optimize/report.py).

The folder: run.json (the settings; a rerun must match the module, model, backend, turns, sizes and profile, while
budget, time limit, finalists and trials may change), sizes.json (the contract check's results), the search's
samples.jsonl, verdicts.jsonl and episodes.jsonl, reverify.jsonl (one verdict per candidate, size and trial count),
report.md and the kernel.
A rerun generates and verifies only what is missing; a larger budget continues the search.
"""

from __future__ import annotations

import json
import time
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path
from typing import Any

from rich.console import Console

from kernelzero.coder.backends import load_backend
from kernelzero.coder.backends.base import SamplingParams
from kernelzero.coder.prompts import PROMPT_VERSIONS
from kernelzero.env import KernelEnv, Verifier
from kernelzero.env.runlog import TurnLogs
from kernelzero.optimize import choose as choosing
from kernelzero.optimize.inputs import load_module
from kernelzero.optimize.report import Outcome, status_counts, write_outputs
from kernelzero.optimize.search import SearchPlan, search
from kernelzero.optimize.sizes import describe_sizes, size_variants
from kernelzero.proposer.records import AppendLog
from kernelzero.report.terminal import progress
from kernelzero.service.pool import VerifyRequest, verify_many
from kernelzero.service.store import VerdictStore
from kernelzero.tasks import CheckOptions, check_tasks, task_hash
from kernelzero.tasks.sizes import check_overrides
from kernelzero.types import Task, Verdict, to_dict
from kernelzero.verify import options_for
from kernelzero.verify.profile import profiler
from kernelzero.verify.sandbox.process import task_launcher

MATCHING = ("model", "backend", "turns", "sizes", "profile", "model_class", "inputs", "init_inputs")


@dataclass(frozen=True)
class OptimizeConfig:
    """One `kernelzero optimize` run."""

    module: str  # a task-format file, or an nn.Module file (with `inputs`)
    model: str  # model spec: openai:MODEL, hf:PATH, vllm:PATH, replay:FILE.jsonl
    backend: str = "triton"  # the kernel language: "triton" or "cuda"
    out: str | None = None  # output folder (None: runs/optimize-<module stem>-<backend>)
    budget: int = 64  # completions verified at most, over all episodes
    turns: int = 4  # turns per episode at most
    wave: int | None = None  # episodes started together (None: budget // turns, at least 1)
    time_limit_s: float = 3600.0  # no new search round starts after this many seconds (per invocation)
    finalists: int = 3  # candidates re-verified together, down the ranking
    final_trials: int = 20  # correctness trials of the re-verification at the original sizes
    model_class: str | None = None  # the nn.Module class (None: Model, or the file's only nn.Module)
    inputs: str | None = None  # the function returning forward inputs (None: get_inputs)
    init_inputs: str | None = None  # the function returning constructor arguments (None: get_init_inputs or none)
    sizes: dict[str, int] = field(default_factory=dict)  # size overrides: the sizes to optimise for
    profile: str = "default"  # verifier profile (tolerances, timing protocol)
    device: str = "auto"  # verification device: auto, cuda, cpu
    jobs: int = 2  # verifications side by side without a GPU
    compile_check: bool = True  # without a GPU: also compile Triton kernels for sm_90 (slower, catches more)
    refine_correct: bool | None = None  # keep refining correct kernels (None: when a GPU times them)
    store: str | None = None  # verdict store file shared with other runs (None: off)
    temperature: float = 1.0
    top_p: float = 1.0
    max_tokens: int = 8192
    seed: int | None = None
    concurrency: int = 8  # requests in flight (openai backend)

    def __post_init__(self) -> None:
        if self.backend not in PROMPT_VERSIONS:
            raise ValueError(f"backend must be one of {', '.join(PROMPT_VERSIONS)}, got {self.backend!r}")
        for name in ("budget", "turns", "finalists", "final_trials"):
            if getattr(self, name) < 1:
                raise ValueError(f"{name} must be at least 1, got {getattr(self, name)}")
        if self.wave is not None and self.wave < 1:
            raise ValueError(f"wave must be at least 1, got {self.wave}")

    def folder(self) -> Path:
        return Path(self.out or Path("runs") / f"optimize-{Path(self.module).stem}-{self.backend}")


@dataclass(frozen=True)
class OptimizeResult:
    """What a run produced."""

    out: Path  # the output folder
    report: Path  # its report.md
    kernel: Path | None  # the chosen kernel's module; None when no candidate passed
    chosen: choosing.Candidate | None
    verdict: Verdict | None  # the chosen kernel's re-verification at the original sizes


def _on_gpu(device: str) -> bool:
    if device == "cpu":
        return False
    import torch

    return device == "cuda" or torch.cuda.is_available()


def _check_run_json(cfg: OptimizeConfig, task: Task, out: Path) -> None:
    path = out / "run.json"
    mine = {**asdict(cfg), "task_hash": task_hash(task)}
    if path.exists():
        old = json.loads(path.read_text())["config"]
        diff = [k for k in (*MATCHING, "task_hash") if json.dumps(old.get(k)) != json.dumps(mine.get(k))]
        if diff:
            raise ValueError(f"{out} holds a run with other settings ({', '.join(diff)}); use another --out")
    path.write_text(json.dumps({"config": mine, "date": time.strftime("%Y-%m-%dT%H:%M:%S")}, indent=1))


def _variants(cfg: OptimizeConfig, task: Task, out: Path, console: Console) -> tuple[dict[str, Task], list[str]]:
    """{variant: task} the module allows (ORIGINAL first) and notes; raises ValueError when the module itself fails."""
    variants, notes = size_variants(task)
    named = {choosing.ORIGINAL: task, **dict(variants)}
    path = out / "sizes.json"
    stored = json.loads(path.read_text()) if path.exists() else {}
    todo = [t for t in named.values() if stored.get(t.name, {}).get("task_hash") != task_hash(t)]
    if todo:
        console.print(f"checking the module at {len(todo)} size(s) ...")
        device = "cuda" if _on_gpu(cfg.device) else "cpu"
        opts = CheckOptions(device=device, time_forward=False, launcher=task_launcher())
        for check in check_tasks(todo, opts):
            stored[check.name] = {"task_hash": check.task_hash, "ok": check.ok, "error": check.error}
            stored[check.name]["message"] = check.message
        path.write_text(json.dumps(stored, indent=1))
    own = stored[task.name]
    if not own["ok"]:
        raise ValueError(f"{cfg.module} fails the contract check at its own sizes: {own['error']}: {own['message']}")
    allowed = {choosing.ORIGINAL: task}
    for name, variant in variants:
        if stored[variant.name]["ok"]:
            allowed[name] = variant
        else:
            result = stored[variant.name]
            notes.append(f"{name}: left out, the module fails there ({result['error']}: {result['message'][:120]})")
    return allowed, notes


def _search(cfg: OptimizeConfig, task: Task, out: Path, console: Console, on_gpu: bool) -> tuple[TurnLogs, list[str]]:
    """Run or resume the search; return its logs and notes."""
    opts = options_for(cfg.profile, policy="strict", device=cfg.device, compile_check=cfg.compile_check)
    store = None if cfg.store is None else VerdictStore(cfg.store)
    refine = on_gpu if cfg.refine_correct is None else cfg.refine_correct
    env = KernelEnv(
        cfg.backend,
        max_turns=cfg.turns,
        reward="speedup",
        verifier=Verifier.pool(opts, jobs=cfg.jobs, store=store),
        sample_budget=cfg.budget,
        stop_on_correct=not refine,
        profiler=profiler(opts) if on_gpu else None,  # which kernels take the time, in each timed turn's feedback
    )
    openai = cfg.model.startswith("openai:")
    plan = SearchPlan(
        task=task,
        model=cfg.model,
        backend=cfg.backend,
        turns=cfg.turns,
        wave=cfg.wave or max(1, cfg.budget // cfg.turns),
        params=SamplingParams(temperature=cfg.temperature, top_p=cfg.top_p, max_tokens=cfg.max_tokens, seed=cfg.seed),
        deadline=time.monotonic() + cfg.time_limit_s,
    )
    logs = TurnLogs(out)
    backend = load_backend(cfg.model, **({"concurrency": cfg.concurrency} if openai else {}))
    with progress(console) as bar:
        job = bar.add_task("search (verified completions)", total=cfg.budget, completed=len(logs.verdicts))
        _, notes = search(plan, env, logs, backend, advance=lambda n: bar.advance(job, n))
    return logs, notes


def _checker(cfg: OptimizeConfig, variants: dict[str, Task], out: Path, console: Console) -> tuple[Any, Any]:
    """(checks_for, run_checks) for choose.choose: the re-verification plan and its resumable runner."""
    common = {"policy": "strict", "device": cfg.device, "compile_check": cfg.compile_check}
    final = options_for(cfg.profile, trials=cfg.final_trials, compile_baseline=True, **common)
    other = options_for(cfg.profile, time_it=False, **common)
    log = AppendLog(out / "reverify.jsonl", key=lambda r: (r["candidate"], r["variant"], r["task_hash"], r["trials"]))
    store = None if cfg.store is None else VerdictStore(cfg.store)

    def checks_for(c: choosing.Candidate) -> list[choosing.Check]:
        return [
            choosing.Check(c, name, t, final if name == choosing.ORIGINAL else other) for name, t in variants.items()
        ]

    def run_checks(checks: list[choosing.Check]) -> dict[tuple[str, str], Verdict]:
        done = {log.key(r): r for r in log.records()}
        key = lambda ch: (*ch.key, task_hash(ch.task), ch.options.trials)  # noqa: E731  (more trials: verify again)
        todo = [ch for ch in checks if key(ch) not in done]
        if todo:
            requests = [VerifyRequest(ch.task, ch.candidate.code, cfg.backend, ch.options, tag=ch) for ch in todo]
            with progress(console) as bar:
                job = bar.add_task("re-verify finalists", total=len(todo))
                for req, verdict in verify_many(requests, cfg.jobs, store):
                    ch = req.tag
                    record = {"candidate": ch.candidate.hash, "variant": ch.variant, "task_hash": task_hash(ch.task)}
                    record["trials"] = ch.options.trials
                    log.append({**record, "verdict": to_dict(verdict)})
                    done[key(ch)] = {**record, "verdict": to_dict(verdict)}
                    bar.advance(job)
        return {ch.key: choosing.stored_verdict(done[key(ch)]) for ch in checks}

    return checks_for, run_checks


def run_optimize(cfg: OptimizeConfig, console: Console | None = None) -> OptimizeResult:
    """Run (or resume) `kernelzero optimize` (see the module docstring)."""
    console = console or Console()
    task = load_module(cfg.module, cfg.model_class, cfg.inputs, cfg.init_inputs)
    if cfg.sizes:
        check_overrides(task.source, cfg.sizes)
        task = replace(task, sizes=dict(cfg.sizes))
    out = cfg.folder()
    out.mkdir(parents=True, exist_ok=True)
    _check_run_json(cfg, task, out)
    on_gpu = _on_gpu(cfg.device)
    variants, notes = _variants(cfg, task, out, console)
    if cfg.backend == "cuda" and not on_gpu:
        notes.append("CUDA without a GPU: candidates are only compile-checked (status `compiled`), none can be chosen")
    logs, search_notes = _search(cfg, task, out, console, on_gpu)
    history = [r for r in logs.verdicts.records() if r["task"] == task.name]
    samples = [r for r in logs.samples.records() if r["task"] == task.name]
    ranked = choosing.rank(choosing.candidates(history, samples))
    console.print(f"{len(history)} attempts, {len(ranked)} distinct correct candidate(s): {status_counts(history)}")
    checks_for, run_checks = _checker(cfg, variants, out, console)
    chosen, finalists, results = choosing.choose(ranked, checks_for, run_checks, cfg.finalists)
    facts = [
        f"model: {cfg.model}",
        f"backend: {cfg.backend}",
        f"budget: {len(history)} of {cfg.budget} completions verified; up to {cfg.turns} turns per episode",
        f"verifier: profile {cfg.profile}, strict policy, {cfg.final_trials} trials at the original sizes",
        f"device: {'GPU' if on_gpu else 'CPU (no timings: speed is n/a)'}",
    ]
    outcome = Outcome(
        module=cfg.module,
        task_name=task.name,
        facts=facts,
        sizes={name: describe_sizes(t) for name, t in variants.items()},
        chosen=chosen,
        finalists=finalists,
        results=results,
        history=history,
        tokens={(s["sample_idx"], s["turn"]): s.get("output_tokens") for s in samples},
        notes=notes + search_notes,
    )
    report, kernel = write_outputs(out, outcome)
    verdict = results[chosen.hash][choosing.ORIGINAL] if chosen is not None else None
    return OptimizeResult(out, report, kernel, chosen, verdict)
