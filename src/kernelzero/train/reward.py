"""The Coder's reward function for TRL's GRPOTrainer: verify every completion, then CA-GRPO per group.

    reward = CoderReward(tasks_by_name, cfg.reward, cfg.verifier, group_size=8, store=VerdictStore(path))
    GRPOTrainer(..., reward_funcs=[reward])        # TRL calls reward(prompts=..., completions=..., task=..., ...)

TRL's contract: `(prompts, completions, **kwargs) -> list[float | None]`, one reward per completion, every dataset
column passed as a keyword (here `task`, the task's name). A sample whose verdict is not the candidate's
(`types.SKIPPED_STATUSES`: `infra_error`, `task_broken`) gets None and is left out of its group's gate
(rewards.py); TRL 1.16 then leaves it out of the group's baseline and gives it advantage 0. Completions are verified through the local pool
(`service.pool.verify_many`), a Ray cluster (the same call with `pool="ray"`), or the HTTP service
(`service.client.Client.verify_batch`), so verification can run on other GPUs or machines.

The gate of CA-GRPO needs the whole group, and TRL may split a group over processes: it repeats each prompt
`num_generations` times contiguously and cuts the generation batch into equal contiguous slices, one per
process. So each process verifies its own slice, then every process gathers (task, c_i, speedup, status,
length) of ALL slices (`torch.distributed.all_gather_object`, a no-op with one process), computes the gate of
every group from the whole group, and returns the rewards of its own slice. Consecutive runs of
`group_size` rows must name one task; anything else means the layout changed and raises.

Verification cost: with `keep_pool` (the trainer's GRPO reward and warm-start probe) one local pool serves every
step and its standby judges (`verifier.standby` per GPU) stay ready between steps, started while the policy
generates, so a step's first verifications do not each wait for a judge's start-up (the owner calls `close()`).
With `baselines_dir` (the trainer passes its run's `baselines/`) the local pool times each task's reference alone
once for the run (the baseline-sabotage check's yardstick, verify/judge/solo.py), not once per timed sample: on the
H200 (2026-12-04) that was 0.16 s of the GPU held alone per timed sample. A sample's speedup counts only when its
group's gate opens, so by default (`timing` below: "gated") every completion is first checked for correctness
without timing, the gate of each group is computed from those checks, and only the correct samples of groups whose
gate opens are verified again with timing (the verdict of that second, timed verification is the sample's; it runs
RETIMED_TRIALS correctness trials, as the first pass ran all of them on fresh secret inputs and the timing checks
every timed and audit call's outputs again). With `reward.timed_pass: one_pass`, or with the gate off, every
correct sample is timed in its one verification ("all": the judge times only what passed correctness), and the gate
still decides whose speed counts: no sample is verified twice, and the gate-shut groups' correct samples are timed
for nothing (on the miniature's middle-of-training mix, 3 of 33 correct samples; bench/service.md);
with `correctness_only` or beta = 0 nothing is timed ("none"). Through the HTTP service timing is the server's
setting, so it is one pass ("all"). CUDA on CPU (`compiled_counts`) is compile-checked only: c_i = 1 for a
`compiled` verdict, nothing timed. The local pool on a machine without a GPU times nothing either ("none": its
verdicts are correctness only, so a timed pass would only verify the same samples again). Identical completions of
a task (the same extracted code) are verified once and share the verdict.
"""

from __future__ import annotations

import dataclasses
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from kernelzero.extract import extract_code
from kernelzero.rewards import ca_grpo_rewards, gate_open, is_correct, verdict_speedup
from kernelzero.service.client import Client
from kernelzero.service.pool import LocalPool, VerifyRequest, verify_many, visible_gpus
from kernelzero.service.store import VerdictStore
from kernelzero.train.config import CoderTrainConfig, RewardConfig, VerifierConfig
from kernelzero.types import SKIPPED_STATUSES, Task, Verdict, is_skipped
from kernelzero.verify import options_for

# (task, c_i, speedup or None, strict status (a skipped verdict's own status), completion tokens)
Row = tuple[str, int, float | None, str, int]
# Correctness trials of the gated pass's timed verification: its samples passed every trial of the first pass, and the
# timing compares the outputs of every timed and audit call on fresh inputs again; the trials' reference draws,
# forwards and round trips were the rest of a timed sample's shared-lease time (H200 step at 92a41dc, 0.37 s a sample).
RETIMED_TRIALS = 1


def completion_text(completion: Any) -> str:
    """The text of a TRL completion: a string (standard format) or a list of messages (conversational)."""
    if isinstance(completion, str):
        return completion
    if isinstance(completion, list) and completion and isinstance(completion[-1], dict):
        return "".join(str(m.get("content", "")) for m in completion if m.get("role", "assistant") == "assistant")
    raise ValueError(f"unexpected completion of type {type(completion).__name__}")


def verdict_row(name: str, verdict: Verdict, tokens: int, baseline: str, compiled_counts: bool = False) -> Row:
    """The Row of one verified sample: correct under the strict policy, its speedup against `baseline` if so; a
    skipped verdict (`types.SKIPPED_STATUSES`) keeps its own status, which `is_skipped_row` reads.
    `compiled_counts` (CUDA on CPU): a `compiled` verdict counts as correct (compile check only; no speedup)."""
    c = is_correct(verdict, "strict") or (compiled_counts and verdict.status == "compiled")
    speed = verdict_speedup(verdict, baseline) if c else None
    status = verdict.status if is_skipped(verdict) else verdict.policy_status.get("strict", verdict.status)
    return (name, int(c), speed, status, tokens)


def is_skipped_row(row: Row) -> bool:
    """The row's verdict is not the candidate's (`infra_error`, `task_broken`): no reward, not in the gate."""
    return row[3] in SKIPPED_STATUSES


def gather_rows(rows: list[Row]) -> tuple[list[Row], int]:
    """Every process's rows in rank order, and this process's offset into them (one process: as given)."""
    import torch.distributed as dist

    if not (dist.is_available() and dist.is_initialized()) or dist.get_world_size() == 1:
        return list(rows), 0
    parts: list[Any] = [None] * dist.get_world_size()
    dist.all_gather_object(parts, rows)
    offset = sum(len(p) for p in parts[: dist.get_rank()])
    return [r for p in parts for r in p], offset


def group_rewards(rows: Sequence[Row], group_size: int, reward: RewardConfig) -> tuple[list[float | None], list[bool]]:
    """CA-GRPO over consecutive groups of `group_size` rows: (reward per row, gate open per group). A skipped row
    (`is_skipped_row`) gets None and is left out of its group's gate; a group of skipped rows keeps its gate shut."""
    if len(rows) % group_size:
        raise ValueError(f"{len(rows)} completions are not whole groups of {group_size}")
    rewards: list[float | None] = []
    gates: list[bool] = []
    beta = 0.0 if reward.correctness_only else reward.beta
    for start in range(0, len(rows), group_size):
        group = rows[start : start + group_size]
        if len({r[0] for r in group}) != 1:
            raise ValueError(f"a group of {group_size} completions spans tasks {sorted({r[0] for r in group})}")
        correct = [None if is_skipped_row(r) else r[1] for r in group]
        rewards += ca_grpo_rewards(
            correct, [r[2] for r in group], reward.alpha, beta, gate=reward.gate, form=reward.form, cap=reward.cap
        )
        gates.append(gate_open(correct, reward.alpha, reward.gate))
    return rewards, gates


class CoderReward:
    """A TRL reward function (callable object) computing CA-GRPO from verified completions."""

    __name__ = "ca_grpo"  # TRL names a reward function's logs by this

    def __init__(
        self,
        tasks: dict[str, Task],
        reward: RewardConfig,
        verifier: VerifierConfig,
        group_size: int,
        backend: str = "triton",
        store: VerdictStore | None = None,
        on_step: Callable[[dict[str, Any]], None] | None = None,
        baselines_dir: str | None = None,
        keep_pool: bool = False,
    ):
        self.tasks = tasks
        self.reward = reward
        self.verifier = verifier
        self.group_size = group_size
        self.backend = backend
        self.store = store
        self.on_step = on_step  # called (on every process) with the gathered step statistics
        self.keep_pool = keep_pool and verifier.via == "pool"  # one local pool, its judges kept ready, until close()
        self._pool: LocalPool | None = None
        overrides = {"policy": "strict", **{k: x for k, x in verifier.options.items() if k != "profile"}}
        if reward.baseline == "compile":
            overrides["compile_baseline"] = True
        if baselines_dir and verifier.via == "pool":  # the reference's solo timing, once per task for the whole run
            overrides.setdefault("baselines_dir", str(baselines_dir))
        self.options = options_for("default", **overrides)
        # Where verification can time at all: the local pool times only on a GPU of this machine (without one every
        # verdict is correctness only, so a timed pass would verify the gate-open groups again for nothing)
        self.times_here = verifier.via != "pool" or visible_gpus() != []
        if verifier.via != "http":  # verified on this machine: refuse now, before any step, without the sandbox
            from kernelzero.verify.sandbox.process import plan_for

            plan_for(self.options)

    @property
    def timing(self) -> str:
        """Which samples are timed: "none", "all" (one pass) or "gated" (see the module docstring)."""
        if self.reward.correctness_only or self.reward.beta == 0 or self.reward.compiled_counts or not self.times_here:
            return "none"
        if not self.reward.gate or self.verifier.via == "http" or self.reward.timed_pass == "one_pass":
            return "all"
        return "gated"

    def verify(
        self, names: Sequence[str], texts: Sequence[str], timed: bool = True, trials: int | None = None
    ) -> list[Verdict]:
        """Verdicts of (task, completion) pairs, in order; pairs with the same task and code are verified once.
        `timed=False`: correctness only (no timing, hence no speedup). `trials`: at most this many correctness
        trials (the gated pass's samples passed them all already)."""
        unknown = sorted({n for n in names if n not in self.tasks})
        if unknown:
            raise ValueError(f"reward asked for unknown task(s) {unknown[:5]}")
        keys = [(n, extract_code(t)) for n, t in zip(names, texts)]
        first = {key: i for i, key in reversed(list(enumerate(keys)))}  # the first pair of each key
        todo = sorted(first.values())
        distinct = ([names[i] for i in todo], [texts[i] for i in todo])
        found = dict(zip(todo, self._verify_distinct(*distinct, timed, trials)))
        return [found[first[key]] for key in keys]

    def score(
        self,
        names: Sequence[str],
        texts: Sequence[str],
        tokens: Sequence[int],
        gather: Callable[[list[Row]], tuple[list[Row], int]] = gather_rows,
        timing: str | None = None,
    ) -> tuple[list[Verdict], list[Row], int]:
        """Verify (and time, as `timing` says: default `self.timing`) this process's samples; return their verdicts,
        the gathered rows of every process and this process's offset into them (`gather`: all processes' rows in
        rank order)."""
        mode = timing or self.timing
        verdicts = self.verify(names, texts, timed=mode == "all")
        counts = self.reward.compiled_counts
        rows = [verdict_row(n, v, k, self.reward.baseline, counts) for n, v, k in zip(names, verdicts, tokens)]
        everything, offset = gather(rows)
        if mode != "gated":
            return verdicts, everything, offset
        _, gates = group_rewards(everything, self.group_size, self.reward)
        todo = [i for i, r in enumerate(rows) if r[1] and gates[(offset + i) // self.group_size]]
        again = ([names[i] for i in todo], [texts[i] for i in todo])
        timed = self.verify(*again, timed=True, trials=RETIMED_TRIALS) if todo else []
        for i, verdict in zip(todo, timed):
            verdicts[i] = verdict
            rows[i] = verdict_row(names[i], verdict, tokens[i], self.reward.baseline, counts)
        everything, offset = gather(rows)  # every process gathers twice, timed samples or not
        return verdicts, everything, offset

    def _verify_distinct(
        self, names: list[str], texts: list[str], timed: bool, trials: int | None = None
    ) -> list[Verdict]:
        v = self.verifier
        if v.via == "http":
            options = {"profile": "default", **{k: x for k, x in v.options.items() if k != "policy"}}
            items = [(self.tasks[n], t, self.backend, options) for n, t in zip(names, texts)]
            return Client(v.url or "", token=v.token).verify_batch(items, timeout_s=v.timeout_s)
        opts = self.options if timed else dataclasses.replace(self.options, time_it=False)
        if trials is not None and trials < opts.trials:
            opts = dataclasses.replace(opts, trials=trials)
        requests = [
            VerifyRequest(self.tasks[n], t, self.backend, opts, tag=i) for i, (n, t) in enumerate(zip(names, texts))
        ]
        out: list[Verdict | None] = [None] * len(requests)
        if self.keep_pool:
            if self._pool is None:
                self._pool = LocalPool(
                    v.jobs, self.store, per_gpu=v.per_gpu, standby=v.standby, keep=True, serves=v.serves
                )
            results = self._pool.run(requests)
        else:
            pool = "ray" if v.via == "ray" else "local"
            results = verify_many(
                requests,
                v.jobs,
                self.store,
                per_gpu=v.per_gpu,
                pool=pool,
                ray_address=v.ray_address,
                standby=v.standby,
                serves=v.serves,
            )
        for req, verdict in results:
            out[req.tag] = verdict
        return [x for x in out if x is not None]

    @property
    def kept_pool(self) -> LocalPool | None:
        """The pool `keep_pool` keeps (None before the first verification, after `close()`, or without it)."""
        return self._pool

    def close(self) -> None:
        """End the kept pool's standby judges (`keep_pool`); the next verification starts a pool again."""
        if self._pool is not None:
            self._pool.close()
            self._pool = None

    def __call__(self, prompts: list, completions: list, task: list[str], **kwargs: Any) -> list[float | None]:
        called = time.time()
        texts = [completion_text(c) for c in completions]
        ids = kwargs.get("completion_ids") or [[]] * len(texts)
        _, everything, offset = self.score(task, texts, [len(t) for t in ids])
        verified = time.time()
        rewards, gates = group_rewards(everything, self.group_size, self.reward)
        if self.on_step is not None:
            self.on_step(
                {
                    "rows": everything,
                    "rewards": rewards,
                    "gates": gates,
                    "reward_called_at": called,
                    "verify_s": time.time() - called,
                    "verified_at": verified,
                }
            )
        return rewards[offset : offset + len(texts)]


def run_reward(
    cfg: CoderTrainConfig,
    run: Path,
    tasks: list[Task],
    group: int,
    on_step: Callable[[dict[str, Any]], None] | None = None,
) -> CoderReward:
    """A run's CA-GRPO reward: its verdict store, the reference timed alone once per task for the run (`baselines/`),
    and one kept pool whose judges stay ready between steps or probes (`keep_pool`: the caller closes it)."""
    store = VerdictStore(cfg.verifier.store or run / "verdicts.sqlite")
    tasks_by_name = {t.name: t for t in tasks}
    return CoderReward(
        tasks_by_name,
        cfg.reward,
        cfg.verifier,
        group,
        cfg.backend,
        store,
        on_step,
        baselines_dir=str(run / "baselines"),
        keep_pool=True,
    )
