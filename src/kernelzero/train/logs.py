"""Per-step logs of a GRPO run: one JSON line per optimizer step (steps.jsonl) and TensorBoard scalars.

    log = StepLog(run_dir)                       # steps.jsonl + tb/ in run_dir
    reward = CoderReward(..., on_step=log.on_reward)
    trainer.add_callback(log.callback())         # timing and TRL's own metrics (loss, kl, ...)

A step's line holds: the correctness rate (strict policy) overall and per task, the share of groups whose CA-GRPO
gate was open, mean and geometric-mean speedup of the correct samples that were timed, the status histogram, mean
completion length in tokens, the mean reward, TRL's logged metrics, and the step's time split into generation (step
start to the reward call), verification (the reward call) and update (the rest), and `batch_step`: the step whose
generated batch it trained on (itself, or an earlier step's when `grpo.num_iterations` > 1 reuses a batch; such a
line has no reward statistics and no generation or verification time), and what other callbacks put in `extra`
(train/drift.py's anchor NLL), and `held: true` on a step whose update was held (below). After a resume from
checkpoint N, `truncate(N)` drops the lines of steps after N (they are redone), so no step appears twice, and
TensorBoard events from step N+1 on are purged.

`StepLog.callback(hold_without_signal=True)` also holds the weights on a batch with no learning signal: when the
reward's latest batch had no group whose rewards differ (every advantage zero), each optimizer step on it is skipped
(the gradients are dropped before `optimizer.step`, so Adam changes neither the weights nor its moments). TRL would
step anyway on what is left, the KL term's and rounding's gradient, and Adam's normalised first steps turn even a
gradient of norm 1e-4 into a change of about the learning rate on every weight: a co-evolution round's Coder phase
whose 128 samples a batch were all `format_error` moved its weights by 3.8e-3 (relative L2) over 72 steps, reward 0
throughout (H100, 2026-12-06, bench/train.md). Every process sees the gathered batch's statistics, so all hold
together. The Proposer's phase (one process) holds the same way on its step's Frontier Rewards.

`StepLog.callback(stop_format_share=S)` (S > 0, the Coder's `grpo.stop_format_share`) stops the run cleanly, with a
checkpoint, after two generated batches in a row each with more than S of its samples `format_error` (after the last
update of the second, `per_batch` being TRL's num_iterations), and the line of the step that generated that batch
says why (`stopped`): a policy drifting off the format it was warm-started on. On 2026-12-07 the miniature's GRPO on
a weak warm start raised its batches' format errors from 7 to 14, 22, 29, 14 and 28 of 128 in one call and lost
held-out ground (bench/train.md, thirty-seventh session); the call's last batches were device time spent on drift.
"""

from __future__ import annotations

import json
import time
from collections import Counter
from pathlib import Path
from typing import Any

from transformers import TrainerCallback

from kernelzero.metrics import geomean_speedup, rate_by_task
from kernelzero.types import SKIPPED_STATUSES

# TRL's metrics a step's line keeps (clip_ratio/region_mean: the share of tokens clipped, non-zero only on a reused
# batch)
TRL_KEYS = ("loss", "grad_norm", "learning_rate", "reward", "reward_std", "frac_reward_zero_std", "kl", "entropy")
TRL_KEYS += ("clip_ratio/region_mean",)


def step_stats(rows: list[tuple], rewards: list[float | None], gates: list[bool]) -> dict[str, Any]:
    """Statistics of one step's gathered rows (task, c, speedup, status, tokens). Skipped rows (`infra_error`,
    `task_broken`: reward None) are left out of the rates and means and counted in "skipped"."""
    speedups = [r[2] for r in rows if r[1] and r[2] is not None]
    size = len(rows) // len(gates) if gates else 0
    groups = [[x for x in rewards[i : i + size] if x is not None] for i in range(0, len(rewards), size)] if size else []
    judged = [r for r in rows if r[3] not in SKIPPED_STATUSES]
    scored = [x for x in rewards if x is not None]
    return {
        "samples": len(rows),
        "skipped": len(rows) - len(judged),
        "correct_rate": sum(r[1] for r in judged) / len(judged) if judged else 0.0,
        "gate_open_share": sum(gates) / len(gates) if gates else 0.0,
        "mean_speedup": sum(speedups) / len(speedups) if speedups else None,
        "geomean_speedup": geomean_speedup(speedups),
        "statuses": dict(sorted(Counter(r[3] for r in rows).items())),
        "completion_tokens": sum(r[4] for r in rows) / len(rows) if rows else 0.0,
        "reward_mean": sum(scored) / len(scored) if scored else 0.0,
        "groups_with_signal": sum(1 for g in groups if g and max(g) > min(g)),  # groups with nonzero advantages
        "per_task": rate_by_task((r[0], r[1]) for r in judged),  # a task drawn again later compares with itself
    }


class StepLog:
    """Collects the reward's statistics and the trainer's timings; writes steps.jsonl and TensorBoard."""

    def __init__(self, run_dir: Path, tensorboard: bool = True):
        self.path = Path(run_dir) / "steps.jsonl"
        self.tb_dir = Path(run_dir) / "tb"
        self.tensorboard = tensorboard
        self.writer: Any = None
        self.pending: dict[str, Any] = {}
        self.extra: dict[str, Any] = {}  # other callbacks' values for the next line (train/drift.py's anchor NLL)
        self.step_started = 0.0
        self.step_ended = 0.0
        self.batch_step: int | None = None  # the step that generated the batch the latest step trained on
        self.signal: int | None = None  # groups with signal in the latest generated batch (None: not known)
        self.held = False  # the latest optimizer step was skipped (no signal)

    def truncate(self, last_step: int) -> None:
        """Keep only the lines of steps <= `last_step` (a resume from that checkpoint redoes the rest)."""
        if not self.path.exists():
            return
        keep = [
            line
            for line in self.path.read_text().splitlines()
            if line.strip() and json.loads(line)["step"] <= last_step
        ]
        self.path.write_text("".join(line + "\n" for line in keep))

    def open_writer(self, purge_step: int | None = None) -> None:
        if self.tensorboard and self.writer is None:
            try:
                from tensorboardX import SummaryWriter
            except ImportError:  # torch's writer needs the tensorboard package instead (GPU images carry it)
                from torch.utils.tensorboard import SummaryWriter

            self.writer = SummaryWriter(str(self.tb_dir), purge_step=purge_step)

    def on_reward(self, info: dict[str, Any]) -> None:
        """The reward function's hook: the gathered rows of this step and when verification ran."""
        self.pending = {
            **step_stats(info["rows"], info["rewards"], info["gates"]),
            "reward_called_at": info["reward_called_at"],
            "verify_s": info["verify_s"],
        }
        self.signal = self.pending["groups_with_signal"]

    def write(self, step: int, trl_logs: dict[str, float]) -> dict[str, Any]:
        """Write the line of `step` (called once per optimizer step, on the main process)."""
        stats = dict(self.pending)
        if stats:  # this step generated and verified its batch; without, it reused one (grpo.num_iterations > 1)
            self.batch_step = step
        called = stats.pop("reward_called_at", None)
        verify_s = stats.pop("verify_s", 0.0)
        total = self.step_ended - self.step_started
        generate_s = max(0.0, called - self.step_started) if called else 0.0
        record = {
            "step": step,
            "batch_step": self.batch_step,
            **stats,
            **{k: trl_logs[k] for k in TRL_KEYS if k in trl_logs},
            **self.extra,
            **({"held": True} if self.held else {}),
            "completion_mean_length": trl_logs.get("completions/mean_length"),
            "time_generate_s": round(generate_s, 3),
            "time_verify_s": round(verify_s, 3),
            "time_update_s": round(max(0.0, total - generate_s - verify_s), 3),
            "time_step_s": round(total, 3),
            "wall": time.time(),
        }
        with self.path.open("a") as f:
            f.write(json.dumps(record) + "\n")
        if self.writer is not None:
            for key, value in record.items():
                if isinstance(value, (int, float)) and key not in ("step", "wall"):
                    self.writer.add_scalar(f"train/{key}", value, step)
            for status, count in record.get("statuses", {}).items():
                self.writer.add_scalar(f"status/{status}", count / max(1, record["samples"]), step)
            self.writer.flush()
        self.pending, self.extra = {}, {}
        return record

    def close(self) -> None:
        if self.writer is not None:
            self.writer.close()
            self.writer = None

    def callback(
        self, hold_without_signal: bool = False, stop_format_share: float = 0.0, per_batch: int = 1
    ) -> TrainerCallback:
        return _StepLogCallback(self, hold_without_signal, stop_format_share, per_batch)


class _StepLogCallback(TrainerCallback):
    def __init__(self, log: StepLog, hold: bool = False, stop_share: float = 0.0, per_batch: int = 1):
        self.log = log
        self.hold = hold
        self.stop_share = stop_share
        self.per_batch = max(1, per_batch)  # TRL's num_iterations: a drift stop waits for the batch's last update
        self.streak = 0  # generated batches in a row with more than `stop_share` of their samples format_error
        self.stop_at: int | None = None  # the step after which the drift stop ends the run

    def on_pre_optimizer_step(self, args: Any, state: Any, control: Any, model: Any = None, **kwargs: Any) -> None:
        if self.hold and self.log.signal == 0 and model is not None:
            for param in model.parameters():
                param.grad = None  # torch's optimizers skip a parameter without a gradient: no step, no moments
            self.log.held = True

    def on_step_begin(self, args: Any, state: Any, control: Any, **kwargs: Any) -> None:
        self.log.step_started = time.time()
        self.log.held = False  # every process (only the main one writes the line that reads it)

    def on_step_end(self, args: Any, state: Any, control: Any, **kwargs: Any) -> None:
        self.log.step_ended = time.time()
        batch = self.log.pending  # set only on a step that generated and verified its batch
        if self.stop_share > 0 and batch:
            got = batch.get("statuses", {}).get("format_error", 0) / max(1, batch.get("samples", 0))
            self.streak = self.streak + 1 if got > self.stop_share else 0
            if self.streak == 2:  # said on this step's line; a resume then starts a batch, as TRL expects
                why = f"format_error above {self.stop_share:g} of two batches in a row ({got:.3f} of this one)"
                self.log.extra["stopped"], self.stop_at = why, state.global_step + self.per_batch - 1
                print(f"[grpo] stop after step {self.stop_at}: {why}", flush=True)
        if self.stop_at is not None and state.global_step >= self.stop_at:
            control.should_training_stop = control.should_save = True

    def on_log(self, args: Any, state: Any, control: Any, logs: dict | None = None, **kwargs: Any) -> None:
        if logs and "loss" in logs and state.is_world_process_zero:
            self.log.write(state.global_step, logs)


class TimeBudget(TrainerCallback):
    """Stop training cleanly, with a checkpoint, before `max_minutes` of training pass (None: never): after a step
    when the next, as long as the longest so far, would end past the budget (a GRPO step of the miniature takes over
    a minute, which stopping only once past the budget added to a device call that had no room for it).

    With `per_batch` > 1 (TRL's num_iterations: that many optimizer steps on each generated batch, counted from the
    start of this run, as TRL generates at a run's first step, resumed or not) it stops only between batches, when
    the next batch (the longest generating step and per_batch - 1 of the longest update-only steps) would not fit:
    the updates of a batch verified at great cost are not cut off.

    The run's first generating step starts the verifier's judges cold: it sets the estimate only until a second one
    has run (H100, 2026-12-07: each call's first batch took 73-85 s, the later ones 45-64 s; judged by the first, a
    call could stop a batch early)."""

    def __init__(self, max_minutes: float | None, clock: Any = time.time, per_batch: int = 1):
        self.max_s = None if max_minutes is None else max_minutes * 60.0
        self.clock = clock
        self.per_batch = max(1, per_batch)
        self.started = self.last = 0.0
        self.done = 0
        self.longest = [0.0, 0.0]  # generating step (after the first), update-only step
        self.first = 0.0  # the run's first generating step

    def on_train_begin(self, args: Any, state: Any, control: Any, **kwargs: Any) -> None:
        self.started = self.last = self.clock()
        self.done = 0

    def on_step_end(self, args: Any, state: Any, control: Any, **kwargs: Any) -> None:
        now = self.clock()
        kind = 0 if self.done % self.per_batch == 0 else 1
        took, self.last = now - self.last, now
        if self.done == 0:
            self.first = took
        else:
            self.longest[kind] = max(self.longest[kind], took)
        self.done += 1
        if self.max_s is None or self.done % self.per_batch:
            return
        batch = (self.longest[0] or self.first) + (self.per_batch - 1) * self.longest[1]
        if now - self.started + batch > self.max_s:
            control.should_training_stop = True
            control.should_save = True
