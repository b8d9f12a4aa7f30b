"""One GRPO step's reward, as the trainer asks for it (issue 26 item 3): 64 completions (8 tasks x 8) through
`CoderReward.score`, correctness first for the whole step, then timing for the correct samples of the groups whose
gate opens; wall seconds of each pass, the verifications each made, the statuses.

    PYTHONPATH=src python3 bench/reward_step.py --steps 3              # on the GPU host: warm steps after the first
    PYTHONPATH=src python3 bench/reward_step.py --steps 1 --tasks 2    # a CPU check of the script (interpreter)
    ... --per-gpu 12 --standby 16 --option input_sets=0              # lanes, judges kept ready, an option
    ... --serves 8                                                   # requests each standby judge serves
    ... --timed-pass one_pass                                        # every correct sample timed in one pass

The completions are the miniature's tasks (configs/tiny-gpu.yaml sizes) answered the way a policy part-way through
training answers them: per group, from all correct down to none (`MIX`), the rest wrong (the right kernel storing a
scaled result: it compiles, runs and mismatches) or without code (answered before any judge). Each step draws new
tasks and marks every answer with the step, so no verdict is reused across steps; identical answers within a group
are verified once, as in training. Writes reward_step.jsonl (one row per step) under $OUT or --out.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import os
import tempfile
import time
from pathlib import Path

from kernelzero.train.config import TIMED_PASSES, load_config
from kernelzero.train.miniature import answer_text, make_tasks
from kernelzero.train.reward import CoderReward
from kernelzero.types import Task
from kernelzero.verify.judge.serving import KEPT_NOTE
from kernelzero.verify.options import parse_overrides

# correct answers per group of 8 (a spread like the middle of training: some gates open, some closed); of the rest,
# one is an answer without code where there is room, the others wrong
MIX = (8, 7, 6, 5, 4, 2, 1, 0)
NO_CODE = "I could not write a kernel for this module."


class TimedReward(CoderReward):
    """The trainer's reward, noting each verification pass: (timed, distinct completions verified, seconds)."""

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.passes: list[tuple[bool, int, float]] = []

    def _verify_distinct(self, names, texts, timed, trials=None):
        start = time.monotonic()
        out = super()._verify_distinct(names, texts, timed, trials)
        self.passes.append((timed, len(names), time.monotonic() - start))
        return out


def completions(minis: list, group: int, step: int) -> tuple[list[str], list[str]]:
    """(task names, completion texts) of one step: `group` answers per task after `MIX`."""
    names, texts = [], []
    for k, m in enumerate(minis):
        right = MIX[k % len(MIX)] * group // 8
        answer = answer_text(m)
        wrong = answer.replace("tl.store(out_ptr + offsets, x,", "tl.store(out_ptr + offsets, x * 1.5,")
        wrong = wrong.replace("tl.store(out_ptr + row, ", "tl.store(out_ptr + row, 1.5 * ")
        if wrong == answer:
            raise ValueError(f"{m.name}: no store to make wrong in its answer")
        for i in range(group):
            if i < right:
                text = answer.replace("```python\n", f"```python\n# step {step} sample {i}\n", 1)
            elif i == right and group - right > 1:
                text = NO_CODE
            else:
                text = wrong.replace("```python\n", f"```python\n# step {step} sample {i}\n", 1)
            names.append(m.name)
            texts.append(text)
    return names, texts


def _judges(reward: TimedReward) -> tuple[int, int, int]:
    """(standby judges started, taken, taken again after serving) so far in the reward's kept pool."""
    pool = reward.kept_pool
    return (pool.standby.started, pool.standby.taken, pool.standby.again) if pool is not None else (0, 0, 0)


def one_step(reward: TimedReward, minis: list, group: int, step: int) -> dict:
    """One step's 64 (tasks x group) completions through `reward`, whose pool and judges earlier steps left ready."""
    reward.passes = []
    before = _judges(reward)
    names, texts = completions(minis, group, step)
    start = time.monotonic()
    verdicts, rows, _ = reward.score(names, texts, [0] * len(texts))
    wall = time.monotonic() - start
    statuses: dict[str, int] = {}
    for v in verdicts:
        statuses[v.status] = statuses.get(v.status, 0) + 1
    clocked = [v for v in verdicts if v.timing is not None]
    untimed = [p for p in reward.passes if not p[0]]
    timed = [p for p in reward.passes if p[0]]
    return {
        "step": step,
        "completions": len(texts),
        "wall_s": round(wall, 2),
        "correctness_s": round(sum(p[2] for p in untimed), 2),
        "verified_untimed": sum(p[1] for p in untimed),
        "timing_s": round(sum(p[2] for p in timed), 2),
        "verified_timed": sum(p[1] for p in timed),
        "timing_mode": reward.timing,
        # the answers here are honest or plainly wrong: a correction of a correct one is the judge's clock misreading
        "clock_corrected": sum((v.timing_check or "").startswith("corrected") for v in clocked),
        "timed_again": sum(any(n.startswith("a first timing was corrected") for n in v.notes) for v in clocked),
        "standby_taken": _judges(reward)[1] - before[1],  # verifications that found a judge ready (warm or warming)
        "standby_started": _judges(reward)[0] - before[0],
        "standby_again": _judges(reward)[2] - before[2],  # taken by a judge that had served (verify/judge/serving.py)
        "kept_reference": sum(KEPT_NOTE in v.notes for v in verdicts),  # served by a kept reference process
        "statuses": dict(sorted(statuses.items())),
    }


def with_verifier(cfg, per_gpu: int | None, options: list[str], standby: int | None = None, serves: int | None = None):
    """`cfg` with the pool's lanes and standby judges per GPU and verifier options (KEY=VALUE, the value JSON or else a
    string) replaced."""
    extra = parse_overrides(options)
    if per_gpu is not None and per_gpu < 1:
        raise ValueError("--per-gpu must be at least 1")
    if standby is not None and standby < 0:
        raise ValueError("--standby must be at least 0")
    if serves is not None and serves < 1:
        raise ValueError("--serves must be at least 1")
    verifier = dataclasses.replace(
        cfg.verifier,
        per_gpu=per_gpu or cfg.verifier.per_gpu,
        standby=cfg.verifier.standby if standby is None else standby,
        serves=cfg.verifier.serves if serves is None else serves,
        options={**cfg.verifier.options, **extra},
    )
    return dataclasses.replace(cfg, verifier=verifier)


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--config", default="configs/tiny-gpu.yaml")
    p.add_argument("--steps", type=int, default=3, help="steps, each on new tasks (the first starts the judges)")
    p.add_argument("--tasks", type=int, default=8)
    p.add_argument("--group", type=int, default=8)
    p.add_argument("--out", default=None)
    p.add_argument("--per-gpu", type=int, default=None, help="verifications in flight per GPU (default: the config's)")
    p.add_argument("--standby", type=int, default=None, help="judges kept ready per GPU (default: the config's)")
    p.add_argument(
        "--serves", type=int, default=None, help="requests each standby judge serves (default: the config's)"
    )
    p.add_argument(
        "--option", action="append", default=[], metavar="KEY=VALUE", help="a verifier option (JSON value), repeatable"
    )
    p.add_argument(
        "--timed-pass",
        choices=TIMED_PASSES,
        default=None,
        help="reward.timed_pass: correctness first then the gate-open groups timed (gated), or one timed pass",
    )
    args = p.parse_args()
    if args.steps < 1 or args.tasks < 1 or args.group < 2:
        p.error("--steps and --tasks must be at least 1, --group at least 2")
    cfg = load_config(args.config)
    if args.timed_pass is not None:
        cfg = dataclasses.replace(cfg, reward=dataclasses.replace(cfg.reward, timed_pass=args.timed_pass))
    try:
        cfg = with_verifier(cfg, args.per_gpu, args.option, args.standby, args.serves)
    except ValueError as exc:
        p.error(str(exc))
    t = cfg.tasks
    minis = make_tasks(args.tasks * args.steps, seed=77, rows=t.rows, cols=t.cols, max_steps=t.max_steps)
    out = Path(args.out or os.environ.get("OUT") or "bench_out")
    out.mkdir(parents=True, exist_ok=True)
    baselines = tempfile.mkdtemp(prefix="baselines-", dir=out)  # as the trainer's run: solo timings once per task
    tasks = {m.name: Task(name=m.name, source=m.source) for m in minis}
    # as the trainer's: one pool for every step, its judges kept ready between steps (`keep_pool`)
    reward = TimedReward(
        tasks, cfg.reward, cfg.verifier, args.group, cfg.backend, baselines_dir=baselines, keep_pool=True
    )
    keys = ["step", "completions", "wall_s", "correctness_s", "verified_untimed", "timing_s", "verified_timed"]
    print("| " + " | ".join([*keys, "statuses"]) + " |\n|" + "---|" * (len(keys) + 1), flush=True)
    try:
        for step in range(args.steps):
            row = one_step(reward, minis[step * args.tasks : (step + 1) * args.tasks], args.group, step)
            serves = reward.kept_pool.standby.serves if reward.kept_pool is not None else None
            row["verifier"] = {
                "per_gpu": cfg.verifier.per_gpu,
                "standby": cfg.verifier.standby,
                "serves": serves,
                **cfg.verifier.options,
            }
            print("| " + " | ".join(str(row[k]) for k in [*keys, "statuses"]) + " |", flush=True)
            with (out / "reward_step.jsonl").open("a") as f:
                f.write(json.dumps(row) + "\n")
    finally:
        reward.close()


if __name__ == "__main__":
    main()
