"""`kernelzero eval --turns T` with T > 1: every sample is an episode of up to T turns in the kernel environment.

    kernelzero eval kz-basic --turns 4 -n 4 --model openai:qwen2.5-coder-7b --backend triton --out runs/qwen-t4

Sample i of a task is an episode (`kernelzero.env.Episode`): turn 1 is the one-shot prompt; each later turn is the
Coder's answer to the conversation so far, whose last message is the verifier's feedback on the previous attempt
(env/observe.py). An episode ends at a correct turn (the environment's rule: correct under the `strict` policy) or
after T turns. Each turn's completions are verified in one batch (`KernelEnv.step_many`).

The run folder holds, besides run.json (with "turns"), metrics.json and report.md:
- `samples.jsonl`: a `Sample` dict plus "turn" (1-based) per (task, sample_idx, turn);
- `verdicts.jsonl`: `{"task", "sample_idx", "turn", "level", "verdict", "policies"}` per (task, sample_idx, turn);
- `episodes.jsonl`: `{"task", "sample_idx", "turn", "episode"}`, the episode's state after that turn
  (`Episode.to_dict`), from which a resumed run continues.
All three are append-only (env/runlog.py, which `kernelzero optimize` shares): a resumed run generates and
verifies only what is missing.

Turns are verified under the `strict` policy (the environment's notion of correct, which also decides when an
episode ends), so a multi-turn run's statuses are strict ones; each verdict still records its `kernelbench` status.
metrics.json is `metrics.summarise` over each episode's best turn (report/turns.py), plus "turns" and "per_turn"
(pass@1 and fast_1 after t turns, tokens per turn).

Generation: turn 1 asks for each task under its name, as the one-shot protocol does (sample i: the task's i-th
completion); turn t >= 2 asks for sample i of task X under the key `X#sample{i}#turn{t}` (`runlog.turn_key`), one
request per episode, all of a turn in one backend call. A replay file scripts a multi-turn run with lines such as
`{"task": "level1/21_GELU#sample0#turn2", "completion": ...}`. With --seed, every request of turn t >= 2 draws
with the same seed (each has its own prompt).
"""

from __future__ import annotations

import functools
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from rich.console import Console

from kernelzero.coder.backends import load_backend
from kernelzero.coder.backends.base import SamplingParams
from kernelzero.env import Episode, KernelEnv, Verifier
from kernelzero.env.runlog import Key, TurnLogs, generate_turn, latest_states, resume_episode, step_turn
from kernelzero.evaluation.config import EvalConfig, verdict_store, verify_options
from kernelzero.metrics import summarise
from kernelzero.report.terminal import progress
from kernelzero.report.turns import after_turns, per_turn
from kernelzero.types import Task
from kernelzero.verify.profile import profiler
from kernelzero.verify.sandbox.process import gpu_visible


def restore(tasks: Sequence[Task], samples: int, logs: TurnLogs, env: KernelEnv) -> dict[Key, Episode]:
    """Every episode of the run: the latest state in episodes.jsonl, else a fresh one (env/runlog.py)."""
    states = latest_states(logs)
    return {
        (task.name, i): resume_episode(env, task, i, states.get((task.name, i)), logs)
        for task in tasks
        for i in range(samples)
    }


def _verifier(cfg: EvalConfig, advance: Any) -> Verifier:
    """The pool `cfg` names, calling `advance()` after each verdict (the progress bar)."""
    return Verifier.pool(
        verify_options(cfg, "strict"),
        cfg.jobs,
        verdict_store(cfg),
        on_verdict=advance,
        pool=cfg.pool,
        ray_address=cfg.ray_address,
        per_gpu=cfg.per_gpu,
    )


def _generate(
    cfg: EvalConfig, live: Sequence[tuple[Key, Episode]], turn: int, logs: TurnLogs, console: Console, backend: Any
) -> list[str]:
    """Generate turn `turn` of the live episodes that lack it; return what the backend could not provide."""
    todo = [(key, ep) for key, ep in live if (*key, turn) not in logs.samples]
    if not todo:
        return []
    params = SamplingParams(temperature=cfg.temperature, top_p=cfg.top_p, max_tokens=cfg.max_tokens, seed=cfg.seed)
    with progress(console) as bar:
        job = bar.add_task(f"turn {turn}: generate", total=len(todo))
        advance = functools.partial(bar.advance, job)
        lost = generate_turn(backend, todo, turn, logs, params, cfg.backend, cfg.model, advance=advance)
    failed = [f"{task.name} sample {g.sample_idx} turn {turn}: {g.error}" for task, g in lost]
    if failed:
        failed.insert(0, f"{len(failed)} generation(s) failed and were not stored (a re-run retries them)")
    return list(getattr(backend, "warnings", [])) + failed[:20]


def run_turns(cfg: EvalConfig, tasks: Sequence[Task], out: Path, console: Console) -> list[str]:
    """Run (or resume) every episode to its end, turn by turn; return the generation warnings."""
    logs = TurnLogs(out)
    bar_state: dict[str, Any] = {}
    on_gpu = cfg.device != "cpu" and gpu_visible()  # timed turns get a profile of their kernels in the feedback
    env = KernelEnv(
        cfg.backend,
        max_turns=cfg.turns,
        verifier=_verifier(cfg, lambda: bar_state["advance"]()),
        profiler=profiler(verify_options(cfg, "strict")) if on_gpu else None,
    )
    episodes = restore(tasks, cfg.samples, logs, env)
    backend = None
    warnings: list[str] = []
    for turn in range(1, cfg.turns + 1):
        live = [(key, ep) for key, ep in episodes.items() if not ep.done and len(ep.turns) == turn - 1]
        if not live:
            continue
        if backend is None and any((*key, turn) not in logs.samples for key, _ in live):
            options = {"concurrency": cfg.concurrency} if cfg.model.startswith("openai:") else {}
            backend = load_backend(cfg.model, **options)
        warnings += _generate(cfg, live, turn, logs, console, backend)
        with progress(console) as bar:
            total = sum((*k, turn) in logs.samples for k, _ in live)
            job = bar.add_task(f"turn {turn}: verify", total=total)
            bar_state["advance"] = functools.partial(bar.advance, job)
            step_turn(env, live, turn, logs)
            bar.update(job, completed=total)  # a completion repeated within a turn is verified once
    return warnings


def turn_metrics(samples: Sequence[dict[str, Any]], verdicts: Sequence[dict[str, Any]], turns: int) -> dict[str, Any]:
    """metrics.json of a multi-turn run: the summary over each episode's best turn, "turns" and "per_turn"."""
    view_samples, view_records = after_turns(samples, verdicts)
    result = summarise(view_samples, view_records)
    result["turns"] = turns
    result["per_turn"] = per_turn(samples, verdicts)
    return result
