"""Rewards of the kernel environment: one per turn, the best turn of an episode, and a group of episodes.

    from kernelzero.env.scoring import turn_reward, best_turn, group_rewards
    turn_reward(verdict, "speedup")                 # c_i * speedup over eager (1.0 untimed), 0 when wrong
    best_turn(verdicts)                             # index: correct first, then the faster, then the earlier
    group_rewards(best_verdicts, "ca_grpo")         # CA-GRPO over one task's G episodes (rewards.ca_grpo_rewards)

Every reward reads Verdicts only (no kernels run here). c_i is `rewards.is_correct(verdict, "strict")`, the same
c_i the Coder phase of training uses, so a kernel that passes only under the lenient `kernelbench` policy is wrong
here too. The RL-engine adapters call these functions, so an engine's reward and the environment's agree.

A verdict that is not the candidate's (`types.SKIPPED_STATUSES`: `infra_error`, `task_broken`) scores 0.0 as a
turn (a step's reward is a number; its observation tells the model it was not its fault), ranks below every real
verdict in `best_turn`, and gives an episode whose best turn it is no reward in `group_rewards` (None) and no
place in CA-GRPO's gate.
"""

from __future__ import annotations

from collections.abc import Sequence

from kernelzero.rewards import ca_grpo_rewards, is_correct, verdict_speedup
from kernelzero.types import Verdict, is_skipped

REWARDS = ("correctness", "speedup", "ca_grpo")
POLICY = "strict"  # the anti-cheat policy c_i is read under


def check_reward(reward: str) -> str:
    """`reward` if it is one of REWARDS, else ValueError naming the valid ones."""
    if reward not in REWARDS:
        raise ValueError(f"unknown reward {reward!r}; choose one of {', '.join(REWARDS)}")
    return reward


def correct(verdict: Verdict | None) -> int:
    """c_i: 1 when the verdict is `correct` under the strict policy; 0 otherwise and for no verdict."""
    return int(verdict is not None and is_correct(verdict, POLICY))


def speedup_of(verdict: Verdict | None, baseline: str = "eager") -> float | None:
    """The speedup of a correct verdict against `baseline`, None when wrong or not timed."""
    if not correct(verdict):
        return None
    return verdict_speedup(verdict, baseline)  # type: ignore[arg-type]


def turn_reward(verdict: Verdict | None, reward: str, *, baseline: str = "eager", cap: float = 10.0) -> float:
    """The reward of one turn.

    `correctness` and `ca_grpo`: c_i (CA-GRPO's gate needs the group, see `group_rewards`); `speedup`:
    c_i * min(speedup, cap), 1.0 for a correct kernel without timing (on CPU).

    >>> from kernelzero.types import Verdict
    >>> v = Verdict("correct", "t", "h", "c", "triton", "default", "cpu", "done", speedup_eager=2.5)
    >>> turn_reward(v, "correctness"), turn_reward(v, "speedup"), turn_reward(v, "speedup", cap=2.0)
    (1.0, 2.5, 2.0)
    >>> turn_reward(None, "speedup"), turn_reward(Verdict("mismatch", "t", "h", "c", "triton", "default", "cpu", "x"), "ca_grpo")
    (0.0, 0.0)
    """
    check_reward(reward)
    c = correct(verdict)
    if reward != "speedup" or not c:
        return float(c)
    speed = speedup_of(verdict, baseline)
    return 1.0 if speed is None else min(float(speed), cap)


def best_turn(verdicts: Sequence[Verdict | None], baseline: str = "eager") -> int | None:
    """Index of the best of an episode's turns: a correct one first, then the fastest, then a real verdict before a
    skipped one (`infra_error`, `task_broken`), then the earliest.

    None for no turns. An untimed correct turn counts as speedup 0 against timed ones.

    >>> from kernelzero.types import Verdict
    >>> v = lambda s, x=None: Verdict(s, "t", "h", "c", "triton", "default", "cpu", "done", speedup_eager=x)
    >>> best_turn([v("mismatch"), v("correct", 1.5), v("correct", 2.0), v("correct", 2.0)])
    2
    >>> best_turn([v("mismatch"), v("timeout")]), best_turn([v("infra_error"), v("timeout")]), best_turn([])
    (0, 1, None)
    """
    best, best_key = None, None
    for i, verdict in enumerate(verdicts):
        real = verdict is not None and not is_skipped(verdict)
        key = (correct(verdict), speedup_of(verdict, baseline) or 0.0, real)
        if best_key is None or key > best_key:
            best, best_key = i, key
    return best


def group_rewards(
    verdicts: Sequence[Verdict | None],
    reward: str,
    *,
    alpha: float = 0.5,
    beta: float = 0.1,
    baseline: str = "eager",
    cap: float = 10.0,
) -> list[float | None]:
    """Rewards of one group: the best-turn verdict of each of G episodes of one task (None: an episode without
    a verified turn). `ca_grpo`: `rewards.ca_grpo_rewards` with gate alpha and weight beta; the others: each
    verdict's `turn_reward`. An episode whose best verdict is skipped (`infra_error`, `task_broken`) gets None.

    >>> from kernelzero.types import Verdict
    >>> v = lambda s, x=None: Verdict(s, "t", "h", "c", "triton", "default", "cpu", "done", speedup_eager=x)
    >>> group_rewards([v("correct", 2.0), v("correct"), v("mismatch"), None], "ca_grpo")
    [1.05, 1.0, 0.0, 0.0]
    >>> group_rewards([v("correct", 4.0), v("mismatch"), v("mismatch"), None], "ca_grpo")
    [1.0, 0.0, 0.0, 0.0]
    >>> group_rewards([v("correct", 2.0), v("mismatch"), v("infra_error"), v("task_broken")], "ca_grpo")
    [1.05, 0.0, None, None]
    """
    check_reward(reward)
    if not verdicts:
        raise ValueError("group_rewards needs a non-empty group")
    skipped = [v is not None and is_skipped(v) for v in verdicts]
    if reward != "ca_grpo":
        return [None if s else turn_reward(v, reward, baseline=baseline, cap=cap) for v, s in zip(verdicts, skipped)]
    cs = [None if s else correct(v) for v, s in zip(verdicts, skipped)]
    speeds = [speedup_of(v, baseline) for v in verdicts]
    return ca_grpo_rewards(cs, speeds, alpha, beta)
