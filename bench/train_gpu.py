"""GPU benchmarks of the Coder phase (issue 17): the miniature that learns, the 7B step timing, the pool's rate.

Run from the repo root with the `train` extra installed (see bench/train.md for the wheels and exact commands):

    python bench/train_gpu.py miniature --call 1      # tasks, model, warm start, pass@1, GRPO until the budget
    python bench/train_gpu.py miniature --call 2      # GRPO (resumed from the checkpoint on the machine), pass@1
                                                      # (--no-point: no pass@1 point, the call's time to GRPO)
    python bench/train_gpu.py miniature --call 3 --final-eval   # more GRPO, pass@1, `kernelzero eval` if time is left
    python bench/train_gpu.py timing7b --steps 3      # random Qwen2.5-Coder-7B architecture, bf16 + LoRA, HF generation
    python bench/train_gpu.py verify-rate --seconds 120   # verified samples per hour on miniature tasks

Each call keeps within `--budget-s` (default 540 s, under a device call's 600 s), prints a short table and writes
JSON under $OUT (or --out). The miniature's state (tasks, policy, checkpoints, curve.jsonl) stays in --run on the
machine between calls; pass@1 points are 64 held-out tasks x 4 samples (strict policy, the reward's c_i). A point
that would outrun the call is skipped, saying so; when the warm-start point is, the call's GRPO takes its time and
no point follows it (the next call takes the warm-start point first).
Calls may come in any order: each first prints what state it needs and whether it found it (and writes
miniature_state_callN.json); call 2 or 3 without call 1's warm start and curve stops at once (exit status 2,
nothing done) unless `--from-scratch`, which does call 1's work within the call's budget.
With `--carry-out` a call ends by writing the run's state into $OUT (bench/miniature_carry.py); kept here with
`python bench/miniature_carry.py keep <files_at>` (into .gpu/mstate) and carried into the next call, `--carry-in
.gpu/mstate` restores it when that call's machine is a fresh one, so a lost machine costs only its start.
"""

from __future__ import annotations

import argparse
import dataclasses
import gzip
import json
import statistics
import time
from pathlib import Path
from typing import Any

# light imports only (no torch, no transformers) before the state check
from gpu_out import out_dir as _out
from miniature_report import GREEDY, report_miniature

from kernelzero.train.report import read_jsonl

STARTED = time.monotonic()


def _left(args: argparse.Namespace) -> float:
    return args.budget_s - (time.monotonic() - STARTED)


def _probe_point(cfg, run: Path, splits: dict, label: str, step: int, policy: Path | None = None, greedy=False) -> dict:
    """pass@1 of `policy` (default: the current one) on the held-out split (64 x 4; `greedy`: 64 x 1) to curve.jsonl."""
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    from kernelzero.service.store import VerdictStore
    from kernelzero.train.probe import probe_pass1
    from kernelzero.train.reward import CoderReward

    if policy is None:
        policy = run / "policy" if (run / "policy" / "config.json").exists() else run / "warm_start"
    tok = AutoTokenizer.from_pretrained(policy)
    from kernelzero.train import coder

    device = coder.device_of(cfg)
    dtype = torch.bfloat16 if device == "cuda" else torch.float32
    model = AutoModelForCausalLM.from_pretrained(policy, dtype=dtype).to(device)
    tasks = splits["test"]
    samples, temperature = (1, 0.0) if greedy else (cfg.eval.samples, cfg.eval.temperature)
    reward = CoderReward(
        {t.name: t for t in tasks},
        cfg.reward,
        cfg.verifier,
        samples,
        cfg.backend,
        VerdictStore(run / "verdicts.sqlite"),
    )
    result = probe_pass1(
        model,
        tok,
        tasks,
        reward,
        samples,
        temperature,
        cfg.eval.max_tokens,
        cfg.eval.batch_size,
        seed=step,
        timed=cfg.eval.probe_timed,
        keep_texts=True,
    )
    kept = [{"label": label, "step": step, **c} for c in result.pop("completions")]  # every point's samples, gzipped
    with gzip.open(run / "points.jsonl.gz", "at") as f:
        f.writelines(json.dumps(c) + "\n" for c in kept)
    point = {"label": label, "step": step, **result, "time": time.strftime("%Y-%m-%d %H:%M:%S")}
    if greedy:
        point["greedy"] = True
    coder.record_probe_time(run, label, len(tasks) * samples, result)
    with (run / "curve.jsonl").open("a") as f:
        f.write(json.dumps(point) + "\n")
    del model
    torch.cuda.empty_cache()
    return point


# what each call of the miniature finds on the machine: (path under --run, what it is, the call that writes it,
# whether a later call needs it); a missing warm-start point is taken by the next call with the time for it
STATE = (
    ("warm_start/config.json", "the warm-started policy", 1, True),
    ("curve.jsonl", "the pass@1 curve with its warm-start point", 1, False),
    ("checkpoints", "GRPO checkpoints (resumed from the last)", 2, False),
)


def miniature_state(args: argparse.Namespace) -> bool:
    """Say (first thing, before any heavy import) what state this call needs and whether it is on the machine;
    False when a later call lacks call 1's state and may not start from scratch (the caller stops at once)."""
    run = Path(args.run)
    found = {rel: (run / rel).exists() for rel, _, _, _ in STATE}
    for rel, what, writer, required in STATE:
        needed = "needs" if writer < args.call and required else "uses if present"
        print(
            f"[call {args.call}] {needed} {run / rel} ({what}, from call {writer}): "
            f"{'found' if found[rel] else 'NOT FOUND'}",
            flush=True,
        )
    if (run / "forked.json").exists():  # bench/miniature_carry.py fork: another run's policy is this one's warm start
        print(f"[call {args.call}] a fork: its warm start is {(run / 'forked.json').read_text().strip()}", flush=True)
    state = {"call": args.call, "run": str(run), "found": found, "from_scratch": args.from_scratch}
    state["set"] = getattr(args, "set", None) or []  # the overrides this call ran with (each call should repeat them)
    (_out(args) / f"miniature_state_call{args.call}.json").write_text(json.dumps(state, indent=1))
    missing = [rel for rel, _, _, required in STATE if required and not found[rel]]
    if args.call == 1 or not missing:
        return True
    if args.from_scratch:
        print(f"[call {args.call}] --from-scratch: doing call 1's work (tasks, warm start, pass@1) within this budget")
        return True
    print(
        f"[call {args.call}] STOP: call 1's state is missing ({', '.join(missing)} under {run}); a fresh machine "
        "(the warm one was given back) or a carried folder that replaced it. Nothing was done. Run --call 1, or "
        f"--call {args.call} --from-scratch to start over within this call's budget.",
        flush=True,
    )
    return False


def miniature(args: argparse.Namespace) -> None:
    carry_in(args)
    if not miniature_state(args):
        raise SystemExit(2)
    try:
        _miniature(args)
    finally:
        carry_out(args)


def carry_in(args: argparse.Namespace) -> None:
    """With --carry-in: a fresh machine (no warm start under --run) takes the state a former call carried out."""
    if not args.carry_in or (Path(args.run) / "warm_start" / "config.json").exists():
        return
    from miniature_carry import TAR, restore

    if not (Path(args.carry_in) / TAR).exists():
        print(f"[call {args.call}] --carry-in {args.carry_in}: nothing carried (no {TAR}); the state check decides")
        return
    restore(Path(args.carry_in), Path(args.run))


def carry_out(args: argparse.Namespace, report: bool = True) -> None:
    """With --carry-out: the run's state into $OUT (bench/miniature_carry.py), with the report files that would make
    more than 8 files in the tarball (`report`; a carry before the call's end leaves them where they are, for the
    last). A later carry replaces an earlier one: the carry's own files are never taken for report files."""
    run = Path(args.run)
    if not args.carry_out or not (run / "warm_start" / "config.json").exists():
        return
    from miniature_carry import carried, pack

    out = _out(args)
    files = [f for f in sorted(out.iterdir()) if f.is_file() and f.name not in CARRY_KEEPS and not carried(f.name)]
    pack(run, out, files if report else [])


# what a call with --carry-out returns beside the carried state (3 parts and a tarball): 8 files at most
CARRY_KEEPS = {f"miniature_{n}" for n in ("report.md", "curve.jsonl", "steps.jsonl", "points.jsonl.gz")}


def _miniature(args: argparse.Namespace) -> None:
    from kernelzero.train import coder

    cfg = miniature_config(args)
    run = coder._start(cfg)
    splits, solutions = coder.prepare_tasks(cfg, run)
    start = coder.prepare_policy(cfg, run, splits, solutions)
    if (run / "policy" / "config.json").exists():  # each call's GRPO (and KL reference) from the policy it finds
        start = run / "policy"
    samples = cfg.eval.samples * len(splits["test"])  # one pass@1 point
    no_point = args.no_point
    if not any(p["label"] == "warm start" for p in read_jsonl(run / "curve.jsonl")):
        if _point_fits(args, samples, run, "warm start"):
            _points(args, cfg, run, splits, "warm start", 0, policy=run / "warm_start")
        else:  # a point that did not fit before GRPO does not fit after it: its time goes to steps (2026-12-07's
            no_point = True  # call 1 left 214 s unused, all kept for a point after no GRPO)
    need = point_estimate(run, samples)  # with --greedy-points, and its greedy twin's
    need = need + (point_estimate(run, len(splits["test"])) or 0.0) if need and args.greedy_points else need
    minutes, no_point = grpo_plan(args, need, batch_estimate(run), no_point)
    if minutes:
        grpo = dataclasses.replace(cfg.grpo, max_minutes=minutes)
        cfg = dataclasses.replace(cfg, grpo=grpo)
        final = coder.run_grpo(cfg, run, start, splits)
        step = int((final / "step.txt").read_text())
        label = f"GRPO call {args.call}"
        why = drift_stop(run, step) if no_point else ""
        if why:  # the drift stop ended GRPO early: its point now, not in a later call
            print(f"[call {args.call}] GRPO stopped at step {step} ({why}): its point follows")
            no_point = False
        if no_point:
            print(f"[call {args.call}] no pass@1 point after this call's GRPO (its time went to steps)")
        elif _point_fits(args, samples, run, label):
            # the steps are carried out first: a point cut by the device call's limit loses only itself
            carry_out(args, report=False)
            _points(args, cfg, run, splits, label, step)
    if args.final_eval and _left(args) > 150 and (run / "policy" / "step.txt").exists():
        coder.evaluate(cfg, run, run / "policy", f"step-{(run / 'policy' / 'step.txt').read_text().strip()}")
    report_miniature(args, run)


def drift_stop(run: Path, step: int) -> str:
    """Why GRPO stopped at `step`, when the drift stop (`grpo.stop_format_share`, train/logs.py) stopped it ('' when
    it did not): the line of the step that generated `step`'s batch says so (its own, or with grpo.num_iterations > 1
    the batch's first)."""
    rows = read_jsonl(run / "steps.jsonl")
    batch = next((r.get("batch_step") for r in rows if r.get("step") == step), None)
    return next((r["stopped"] for r in rows if r.get("step") == batch and "stopped" in r), "")


def _points(args: argparse.Namespace, cfg, run: Path, splits: dict, label: str, step: int, policy=None) -> None:
    """The pass@1 point `label`, then with --greedy-points its greedy twin (`label` + " greedy", one greedy sample a
    held-out task) where it fits: what sampling costs the policy, which GRPO's sharpening could win."""
    print(json.dumps(_probe_point(cfg, run, splits, label, step, policy=policy)), flush=True)
    if args.greedy_points and _point_fits(args, len(splits["test"]), run, label + GREEDY):
        print(json.dumps(_probe_point(cfg, run, splits, label + GREEDY, step, policy, greedy=True)), flush=True)


def miniature_config(args: argparse.Namespace) -> Any:
    """The run's config: `--config` with the run folder, the seed and each `--set KEY=VALUE` (as `kernelzero train`
    takes them; a key the config does not have is refused by load_config). Give a run the same `--set` in every call:
    the settings are read anew by each."""
    from kernelzero.cli.train import parse_overrides
    from kernelzero.train.config import load_config

    extra = parse_overrides(getattr(args, "set", None) or [])
    model = {**extra.pop("model", {}), "seed": args.seed}
    return load_config(args.config, {**extra, "run_dir": args.run, "seed": args.seed, "model": model})


def grpo_minutes(args: argparse.Namespace, point_s: float | None, no_point: bool | None = None) -> float:
    """Minutes of GRPO this call holds: what is left less this call's pass@1 point (`point_s`, 45 s when nothing
    was measured; none with `no_point`, by default --no-point), 15 s for the saves, 10 s for each carry out (one
    before the point, one at the end) and 20 s for the trainer's set-up. Measured on an H100 (2026-12-07): the end's
    saves, report and carry took about 10 s together; the 90 s held back before left 170-260 s of a 540 s call unused."""
    skip = args.no_point if no_point is None else no_point
    carries = (1 if skip else 2) if getattr(args, "carry_out", False) else 0
    reserve = (0.0 if skip else (point_s or 45.0)) + 15.0 + 10.0 * carries
    return (_left(args) - reserve - 20.0) / 60.0


def grpo_plan(args: argparse.Namespace, point_s: float | None, batch_s: float, no_point: bool) -> tuple[float, bool]:
    """(minutes of GRPO, whether no pass@1 point follows it) for this call: none when not even one batch of `batch_s`
    fits (TRL's first batch always runs whole); when one fits only without the point, GRPO without it (the next
    call's point measures the steps: 2026-12-07's call 1 had 160 s left after its warm-start point and ran none)."""
    minutes, without = grpo_minutes(args, point_s, no_point), grpo_minutes(args, None, True)
    if not no_point and minutes * 60.0 < batch_s <= without * 60.0:
        print(f"[call {args.call}] a GRPO batch (about {batch_s:.0f} s) fits only without a pass@1 point after it")
        no_point, minutes = True, without
    if minutes * 60.0 < batch_s:
        left = max(0.0, minutes * 60.0)
        print(
            f"[call {args.call}] no GRPO in this call: a batch takes about {batch_s:.0f} s, {left:.0f} s are left for it"
        )
        return 0.0, no_point
    return minutes, no_point


def point_estimate(run: Path, samples: int) -> float | None:
    """Seconds a pass@1 point of `samples` samples will take, from the probes of that size (run/probe_times.jsonl;
    any size before one of that size ran; None before any probe): the median rate per sample of the last three, or
    1.5 times the latest rate where that is less. Not the latest alone: a call's first point on a fresh machine took
    217 s and the next 121 s (H100, 2026-12-07 morning). Not the median alone, nor with the warm start's small probe:
    the rate fell as the run's verdict cache filled (0.57, 0.31, 0.27, 0.22 s a sample over four points, 2026-12-07
    afternoon) and the median held back up to 116 s more than the point took."""
    rows = read_jsonl(run / "probe_times.jsonl")
    sized = [(r["samples"], (r["generate_s"] + r["verify_s"]) / r["samples"]) for r in rows if r["samples"]]
    rates = [rate for n, rate in sized if n == samples] or [rate for _, rate in sized]  # no samples: no rate
    return samples * min(statistics.median(rates[-3:]), 1.5 * rates[-1]) if rates else None


def batch_estimate(run: Path) -> float:
    """Seconds the first GRPO batch of a call will take (generation, verification and its updates): the longest batch
    of the run so far (run/steps.jsonl, a call's first batch is its slowest), or 90 s before any (H100, 2026-12-07:
    a call's first batch took 73-85 s)."""
    batches: dict[int, float] = {}
    for row in read_jsonl(run / "steps.jsonl"):
        key = row.get("batch_step", row["step"])
        batches[key] = batches.get(key, 0.0) + row.get("time_step_s", 0.0)
    return max(batches.values(), default=0.0) or 90.0


def _point_fits(args: argparse.Namespace, samples: int, run: Path, label: str) -> bool:
    """Whether the pass@1 point `label` fits in what is left of this call (`point_estimate`); if not, say so and why
    (a point cut by the device call's limit loses what the call did after its last carry out: 2026-12-03, call 1 ran
    600 s and lost everything; since 2026-12-07 the steps before a point are carried out first)."""
    need, left = point_estimate(run, samples), _left(args)
    if need is None or need + 30.0 <= left:
        return True
    whole = args.budget_s - 60.0
    if need > whole:
        then = f"more than a whole call's {whole:.0f} s: fewer eval.samples or tasks.n_test, or faster verification"
    elif label == "warm start":
        then = "the next call takes the warm-start point first (the warm-started policy is saved)"
    else:
        then = "the policy is saved; the next call's point measures it after more steps"
    print(
        f"[call {args.call}] SKIPPED the pass@1 point {label!r}: {samples} samples need about {need:.0f} s at the "
        f"last probes' rates, {left:.0f} s are left in this call; {then}",
        flush=True,
    )
    return False


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("what", choices=("miniature", "timing7b", "verify-rate"))
    p.add_argument("--config", default="configs/tiny-gpu.yaml")
    p.add_argument("--run", default="runs/miniature")
    p.add_argument("--set", action="append", default=[], metavar="KEY=VALUE", help="miniature: override a config value")
    p.add_argument("--call", type=int, default=1)
    p.add_argument("--seed", type=int, default=0, help="miniature: run and model seed (a second seed: another --run)")
    p.add_argument("--final-eval", action="store_true")
    p.add_argument("--no-point", action="store_true", help="miniature: this call's time to GRPO, no pass@1 point after")
    p.add_argument("--greedy-points", action="store_true", help="miniature: each pass@1 point also greedy, 1 a task")
    p.add_argument("--from-scratch", action="store_true", help="a later call without call 1's state redoes call 1")
    p.add_argument("--budget-s", type=float, default=540.0)
    p.add_argument("--carry-out", action="store_true", help="miniature: end by writing the run's state into $OUT")
    p.add_argument("--carry-in", default=None, help="miniature: a fresh machine restores the state kept in this folder")
    p.add_argument("--out", default=None)
    p.add_argument("--steps", type=int, default=3)
    p.add_argument("--prompts", type=int, default=2)
    p.add_argument("--group", type=int, default=8)
    p.add_argument("--max-new", type=int, default=512)
    p.add_argument("--seconds", type=float, default=120.0)
    p.add_argument("--per-gpu", type=int, default=8)
    p.add_argument("--small-arch", action="store_true", help="timing7b with a tiny model (CPU check of the script)")
    args = p.parse_args()
    if args.what == "miniature":
        miniature(args)
        return
    from train_timing import timing7b, verify_rate

    {"timing7b": timing7b, "verify-rate": verify_rate}[args.what](args)


if __name__ == "__main__":
    main()
