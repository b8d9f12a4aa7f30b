"""The TRL reward function's group handling (train/reward.py): gating over whole groups, also when TRL splits a
group over two processes (torch.distributed with gloo on CPU, as under `accelerate launch`)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import torch.multiprocessing as mp

from kernelzero.train.config import RewardConfig, VerifierConfig
from kernelzero.train.reward import CoderReward, completion_text, gather_rows, group_rewards
from kernelzero.types import Task, Verdict

TASKS = {name: Task(name=name, source="") for name in ("A", "B", "C")}


class ScriptedReward(CoderReward):
    """CoderReward whose verification reads the verdict off the completion: "correct 2.0" or "mismatch"."""

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.times_here = True  # its verdicts carry speedups when timed, GPU or not

    def verify(self, names, texts, timed=True, trials=None):
        out = []
        for name, text in zip(names, texts):
            status, _, speed = text.partition(" ")
            out.append(
                Verdict(
                    status,
                    name,
                    "h",
                    "c",
                    "triton",
                    "default",
                    "H200",
                    "done",
                    policy_status={"strict": status},
                    speedup_eager=float(speed) if speed and timed else None,
                )
            )
        return out


# 3 groups of 4 completions; group B straddles the two processes (rows 4-5 on rank 0, 6-7 on rank 1).
TASK_COLUMN = ["A"] * 4 + ["B"] * 4 + ["C"] * 4
COMPLETIONS = (
    ["correct 2.0", "correct 4.0", "mismatch", "correct"]  # A: 3/4 correct, gate open
    + ["correct 4.0", "mismatch", "mismatch", "timeout"]  # B: 1/4 correct, gate closed (rank 0 alone sees 1/2)
    + ["mismatch", "mismatch", "correct 4.0", "correct 2.0"]  # C: 2/4, gate open at alpha = 0.5
)
EXPECTED = [1.05, 1.1, 0.0, 1.0] + [1.0, 0.0, 0.0, 0.0] + [0.0, 0.0, 1.1, 1.05]


def _reward(steps: list) -> ScriptedReward:
    return ScriptedReward(TASKS, RewardConfig(), VerifierConfig(), group_size=4, on_step=steps.append)


def _rank_main(rank: int, world: int, init_file: str, out_dir: str) -> None:
    import torch.distributed as dist

    dist.init_process_group("gloo", init_method=f"file://{init_file}", rank=rank, world_size=world)
    try:
        part = slice(rank * 6, rank * 6 + 6)
        steps: list = []
        rewards = _reward(steps)(prompts=[""] * 6, completions=COMPLETIONS[part], task=TASK_COLUMN[part])
        Path(out_dir, f"rank{rank}.json").write_text(json.dumps({"rewards": rewards, "gates": steps[0]["gates"]}))
    finally:
        dist.destroy_process_group()


def test_two_processes_gate_a_split_group_on_the_whole_group(tmp_path):
    mp.spawn(_rank_main, args=(2, str(tmp_path / "pg"), str(tmp_path)), nprocs=2, join=True)
    rank0 = json.loads((tmp_path / "rank0.json").read_text())
    rank1 = json.loads((tmp_path / "rank1.json").read_text())
    assert rank0["rewards"] + rank1["rewards"] == EXPECTED
    # both processes saw every group: gate of A open, B closed, C open
    assert rank0["gates"] == rank1["gates"] == [True, False, True]
    # rank 0 alone would have opened B's gate (1 of its 2 B rows is correct) and paid 1.1 for the 4x kernel
    assert rank0["rewards"][4] == 1.0


def test_one_process_same_rewards_and_step_statistics():
    steps: list = []
    rewards = _reward(steps)(prompts=[""] * 12, completions=COMPLETIONS, task=TASK_COLUMN)
    assert rewards == EXPECTED
    rows = steps[0]["rows"]
    assert [r[1] for r in rows] == [1, 1, 0, 1, 1, 0, 0, 0, 0, 0, 1, 1]
    assert rows[3][2] is None and rows[1][2] == 4.0  # no timing -> None; speedups kept for correct rows
    assert rows[4][2] is None  # group B's gate is closed: its correct 4x kernel is never timed


def test_conversational_completions_are_read():
    assert completion_text([{"role": "assistant", "content": "abc"}]) == "abc"
    assert completion_text("abc") == "abc"
    with pytest.raises(ValueError, match="unexpected completion"):
        completion_text(42)


def test_group_spanning_two_tasks_is_refused():
    rows = [("A", 1, None, "correct", 3), ("B", 0, None, "mismatch", 3)]
    with pytest.raises(ValueError, match="spans tasks"):
        group_rewards(rows, 2, RewardConfig())


def test_partial_group_is_refused():
    with pytest.raises(ValueError, match="not whole groups"):
        group_rewards([("A", 1, None, "correct", 3)] * 3, 2, RewardConfig())


def test_ablations_reach_the_rewards():
    rows = [("A", 1, 4.0, "correct", 1), ("A", 0, None, "mismatch", 1)] * 2
    assert group_rewards(rows, 4, RewardConfig())[0] == [1.1, 0.0, 1.1, 0.0]
    assert group_rewards(rows, 4, RewardConfig(correctness_only=True))[0] == [1.0, 0.0, 1.0, 0.0]
    assert group_rewards(rows, 4, RewardConfig(alpha=0.75, gate=False))[0] == [1.1, 0.0, 1.1, 0.0]
    assert group_rewards(rows, 4, RewardConfig(alpha=0.75))[0] == [1.0, 0.0, 1.0, 0.0]


def test_unknown_task_is_refused():
    with pytest.raises(ValueError, match="unknown task"):
        CoderReward.verify(_reward([]), ["Z"], ["x"])


def test_single_process_gather_is_identity():
    rows = [("A", 1, None, "correct", 3)]
    assert gather_rows(rows) == (rows, 0)


def test_same_task_and_code_is_verified_once():
    seen: list = []
    same = "Here it is:\n```python\nx = 1\n```"
    same_code_other_words = "Again:\n```python\nx = 1\n```"
    other = "```python\nx = 2\n```"
    status = {same: "correct", other: "mismatch"}

    class Counting(CoderReward):
        def _verify_distinct(self, names, texts, timed=True, trials=None):
            seen.append(list(zip(names, texts)))
            return ScriptedReward.verify(self, names, [status[t] for t in texts])

    reward = Counting(TASKS, RewardConfig(), VerifierConfig(), group_size=2)
    verdicts = reward.verify(["A", "A", "B", "A"], [same, same_code_other_words, same, other])
    assert seen == [[("A", same), ("B", same), ("A", other)]]  # (A, x = 1) is verified once
    assert [v.status for v in verdicts] == ["correct", "correct", "correct", "mismatch"]
    assert [v.task for v in verdicts] == ["A", "A", "B", "A"]
