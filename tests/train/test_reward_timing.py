"""The Coder reward's verification cost (train/reward.py): correctness first, timing only where the gate opens,
identical completions verified once; and the strict policy's c_i for a PyTorch fallback."""

from __future__ import annotations

import pytest

from kernelzero.train.config import RewardConfig, VerifierConfig
from kernelzero.train.reward import RETIMED_TRIALS, CoderReward
from kernelzero.types import Task, Verdict

TASKS = {name: Task(name=name, source="") for name in ("A", "B")}
TASK_COLUMN = ["A"] * 4 + ["B"] * 4
COMPLETIONS = (
    ["correct 2.0", "correct 2.0", "correct 4.0", "mismatch"]  # A: 3/4 correct (two identical), gate open
    + ["correct 4.0", "mismatch", "mismatch", "mismatch"]  # B: 1/4 correct, gate closed
)


class CountingReward(CoderReward):
    """Verifies by reading the completion ("correct 2.0": correct, 2x when timed); records every batch it verifies."""

    def __init__(self, reward: RewardConfig, verifier: VerifierConfig | None = None):
        super().__init__(TASKS, reward, verifier or VerifierConfig(), group_size=4)
        self.times_here = True  # its verdicts carry speedups when timed, GPU or not
        self.batches: list[tuple[list[str], bool]] = []
        self.trials: list[int | None] = []  # the trials asked for, per batch

    def _verify_distinct(self, names, texts, timed, trials=None):
        self.batches.append((list(zip(names, texts)), timed))
        self.trials.append(trials)
        out = []
        for name, text in zip(names, texts):
            status, _, speed = text.partition(" ")
            strict = "torch_compute" if status == "fallback" else status
            out.append(
                Verdict(
                    "correct" if status == "fallback" else status,
                    name,
                    "h",
                    "c",
                    "triton",
                    "default",
                    "H200",
                    "done",
                    policy="kernelbench" if status == "fallback" else "strict",
                    policy_status={"strict": strict, "kernelbench": "correct" if status == "fallback" else status},
                    speedup_eager=float(speed) if speed and timed else None,
                )
            )
        return out


def call(reward: CoderReward, completions=COMPLETIONS, tasks=TASK_COLUMN) -> list[float]:
    return reward(prompts=[""] * len(completions), completions=completions, task=tasks)


def test_correctness_first_then_timing_only_for_groups_whose_gate_opens():
    reward = CountingReward(RewardConfig())
    assert reward.timing == "gated"
    assert call(reward) == [1.05, 1.05, 1.1, 0.0] + [1.0, 0.0, 0.0, 0.0]
    untimed, timed = reward.batches
    # pass 1: 5 distinct (task, code) pairs of 8 completions, no timing
    assert untimed == (
        [("A", "correct 2.0"), ("A", "correct 4.0"), ("A", "mismatch"), ("B", "correct 4.0"), ("B", "mismatch")],
        False,
    )
    # pass 2: only A's correct samples (B's gate is closed: its 4x kernel is never timed), the duplicate once, with
    # one correctness trial (they passed all of the first pass's; the timing checks every timed call again)
    assert timed == ([("A", "correct 2.0"), ("A", "correct 4.0")], True)
    assert reward.trials == [None, RETIMED_TRIALS] and RETIMED_TRIALS == 1


def test_no_second_pass_when_no_gate_opens():
    reward = CountingReward(RewardConfig())
    assert call(reward, ["correct 2.0", "mismatch", "mismatch", "mismatch"], ["A"] * 4) == [1.0, 0.0, 0.0, 0.0]
    assert [(len(b), t) for b, t in reward.batches] == [(2, False)]


@pytest.mark.parametrize(
    "config, via, mode, expected",
    [
        # gate off: every correct sample's speed counts, so all are timed in one pass
        (RewardConfig(gate=False), "pool", "all", [1.05, 1.05, 1.1, 0.0, 1.1, 0.0, 0.0, 0.0]),
        # one timed pass with the gate on: every correct sample timed once (B's too), but B's gate stays shut, so its
        # 4x kernel earns no speed term: the same rewards as the gated two passes, from one verification each
        (RewardConfig(timed_pass="one_pass"), "pool", "all", [1.05, 1.05, 1.1, 0.0, 1.0, 0.0, 0.0, 0.0]),
        # correctness only (or beta = 0): nothing is timed
        (RewardConfig(correctness_only=True), "pool", "none", [1.0, 1.0, 1.0, 0.0, 1.0, 0.0, 0.0, 0.0]),
        # the HTTP service times as the server is configured: one pass
        (RewardConfig(), "http", "all", [1.05, 1.05, 1.1, 0.0, 1.0, 0.0, 0.0, 0.0]),
    ],
)
def test_one_pass_modes(config, via, mode, expected):
    reward = CountingReward(config, VerifierConfig(via=via, url="http://x"))
    assert reward.timing == mode
    assert call(reward) == expected
    assert [(len(b), t) for b, t in reward.batches] == [(5, mode == "all")]


def test_a_pytorch_fallback_scores_zero_under_the_strict_policy():
    # the fallback's verdict says `correct` under the kernelbench policy (its own status) and `torch_compute` under
    # strict: CA-GRPO's c_i reads strict, so it earns 0 and does not count towards the gate (1/4 < alpha)
    reward = CountingReward(RewardConfig())
    completions = ["fallback 8.0", "fallback 8.0", "correct 2.0", "mismatch"]
    assert call(reward, completions, ["A"] * 4) == [0.0, 0.0, 1.0, 0.0]
    # the same group with the fallback counted (the kernelbench policy) would open the gate and pay the fallback
    assert [v.policy_status["kernelbench"] for v in reward.verify(["A"] * 2, completions[:2])] == ["correct"] * 2


def test_the_local_pool_without_a_gpu_times_nothing():
    """Without a GPU the local pool's verdicts are correctness only: a timed pass would verify the same samples
    again for nothing (bench/reward_step.py on the 2-core CPU: 17 s of a 44 s step)."""
    import torch

    reward = CoderReward(TASKS, RewardConfig(), VerifierConfig(), group_size=4)
    assert reward.timing == ("gated" if torch.cuda.is_available() else "none")
    served = CoderReward(TASKS, RewardConfig(), VerifierConfig(via="http", url="http://127.0.0.1:1"), group_size=4)
    assert served.timing == "all"  # the server's machine decides


def test_the_run_caches_the_references_solo_timing_where_the_pool_verifies(tmp_path):
    """`baselines_dir` reaches the verification options on the local pool (the reference timed alone once per task for
    the run, verify/judge/solo.py); an explicit option wins; a remote service keeps its own."""
    where = str(tmp_path / "baselines")
    assert CoderReward(TASKS, RewardConfig(), VerifierConfig(), 4, baselines_dir=where).options.baselines_dir == where
    assert CoderReward(TASKS, RewardConfig(), VerifierConfig(), 4).options.baselines_dir is None
    mine = VerifierConfig(options={"baselines_dir": str(tmp_path / "mine")})
    assert CoderReward(TASKS, RewardConfig(), mine, 4, baselines_dir=where).options.baselines_dir == str(
        tmp_path / "mine"
    )
    remote = VerifierConfig(via="http", url="http://127.0.0.1:1")
    assert CoderReward(TASKS, RewardConfig(), remote, 4, baselines_dir=where).options.baselines_dir is None


def test_a_kept_pool_serves_every_pass_until_closed():
    """`keep_pool`: one local pool for every verification until `close()` (the trainer's steps), none without it.
    Answers without code are answered before any judge, so no process starts here."""
    kept = CoderReward(TASKS, RewardConfig(), VerifierConfig(), 4, keep_pool=True)
    texts = ["I could not write a kernel."] * 8
    kept.score(TASK_COLUMN, texts, [1] * 8)
    pool = kept.kept_pool
    assert pool is not None and pool.keep
    kept.score(TASK_COLUMN, [t + " again" for t in texts], [1] * 8)
    assert kept.kept_pool is pool and not pool.standby.closed
    kept.close()
    assert kept.kept_pool is None and pool.standby.closed
    kept.close()  # twice: nothing left to end
    single = CoderReward(TASKS, RewardConfig(), VerifierConfig(), 4)
    single.score(TASK_COLUMN, texts, [1] * 8)
    assert single.kept_pool is None
    remote = CoderReward(TASKS, RewardConfig(), VerifierConfig(via="ray"), 4, keep_pool=True)
    assert not remote.keep_pool  # only the local pool is kept
