"""Rewards of KernelZero's two models, as pure functions over Verdicts and numbers (no kernels run here).

The **Coder** is rewarded with CA-GRPO (correctness-aware GRPO): `r_i = c_i * (1 + T(G) * beta * S_i)`, where
`c_i` is 1 when sample i's verdict is `correct` under the `strict` anti-cheat policy, `T(G) = 1[mean c over the
group >= alpha]` (paper: alpha = 0.5, beta = 0.1) and `S_i` a normalised speedup (`speedup_score`: a clipped
log-speedup by default, in [-1, 1], 0 without timing); speed counts only once a group is reliably correct
(`ca_grpo_rewards`; `ca_grpo_from_verdicts` reads Verdicts).

The **Proposer** is rewarded with the Frontier Reward (`frontier_reward`): a module the current Coder solves
about half of the time is worth the most. With p the share of the Coder's N samples (default 8) on the module
whose verdict is `correct` under the `strict` policy and the `default` profile (the same c_i as above;
`success_rate` computes it from Verdicts):

| form | reward | at p = 0, 0.25, 0.5 |
|---|---|---|
| `linear` (default, DESIGN.md's reading of the paper) | `1 - 2 |p - 0.5|` | 0, 0.5, 1 |
| `variance` | `4 p (1 - p)` | 0, 0.75, 1 |
| `unbiased` | `4 p (1 - p) N / (N - 1)`, clipped to 1 | with N = 8: 0, 6/7, 1 |

`4 p (1 - p)` computed from N samples underestimates `4 q (1 - q)` of the true success rate q by the factor
(N - 1) / N (the sample variance's bias), which the `unbiased` form undoes. A module that fails admission
(proposer/admit.py) gets `rho` (negative, default -1) instead; `penalise_near_duplicates` lowers the reward of
proposals in one batch that repeat an earlier proposal's near-duplicate key (proposer/dedup.py).

    from kernelzero.rewards import frontier_reward, success_rate
    reward = frontier_reward(success_rate(verdicts))    # verdicts: the Coder's N Verdicts on one module

**Skipped samples.** A verdict whose status is in `types.SKIPPED_STATUSES` (`infra_error`: the verification could
not be carried out; `task_broken`: the task's own reference fails) says nothing about the candidate. CA-GRPO gives
such a sample no reward (None: TRL's contract allows it, and TRL 1.16's GRPOTrainer leaves a row every reward
function scored None out of its group's baseline, with advantage 0) and leaves it out of the group's accuracy that
opens the gate; the Frontier Reward's p is computed over the other samples only (`success_rate` is None, and the
module gets no reward, when every sample was skipped).
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence
from typing import Any

from kernelzero.types import Verdict, is_skipped

FRONTIER_FORMS = ("linear", "variance", "unbiased")
DEFAULT_RHO = -1.0  # the Frontier Reward of a module that failed admission
DEFAULT_DUPLICATE_PENALTY = 0.5  # subtracted from the reward of a repeated near-duplicate in a batch


def is_correct(verdict: Verdict | dict[str, Any], policy: str = "strict") -> bool:
    """c_i: the verdict's status under `policy` (its `policy_status`, else its own status) is `correct`."""
    if isinstance(verdict, dict):
        status = (verdict.get("policy_status") or {}).get(policy, verdict.get("status"))
    else:
        status = verdict.policy_status.get(policy, verdict.status)
    return status == "correct"


def success_rate(verdicts: Iterable[Verdict], policy: str = "strict", profile: str | None = "default") -> float | None:
    """p: the share of `verdicts` that are correct under `policy`, skipped verdicts (`types.SKIPPED_STATUSES`) left
    out; None when every verdict was skipped. All must come from `profile` (None: any).

    >>> from kernelzero.types import Verdict
    >>> v = lambda s: Verdict(s, "t", "h", "c", "triton", "default", "cpu", "done", policy_status={"strict": s})
    >>> success_rate([v("correct"), v("mismatch"), v("correct"), v("timeout")])
    0.5
    >>> success_rate([v("correct"), v("infra_error"), v("mismatch"), v("task_broken")])
    0.5
    >>> success_rate([v("infra_error"), v("task_broken")]) is None
    True
    """
    verdicts = list(verdicts)
    if not verdicts:
        raise ValueError("success_rate needs at least one verdict")
    wrong = sorted({v.profile for v in verdicts if profile is not None and v.profile != profile})
    if wrong:
        raise ValueError(f"verdicts from profile(s) {wrong}; the Frontier Reward reads profile {profile!r}")
    judged = [v for v in verdicts if not is_skipped(v)]
    return sum(is_correct(v, policy) for v in judged) / len(judged) if judged else None


def frontier_reward(
    success_rate: float | None, form: str = "linear", n_samples: int = 8, rho: float = DEFAULT_RHO
) -> float:
    """The Proposer's reward for one module: highest when the Coder solves it half of the time.

    `success_rate` is p in [0, 1], or None for a module that failed admission (reward `rho`, which must be
    negative). `form` is one of FRONTIER_FORMS; `n_samples` is N, used by the `unbiased` form (N >= 2).

    >>> frontier_reward(0.5), frontier_reward(0.25), frontier_reward(0.0), frontier_reward(1.0)
    (1.0, 0.5, 0.0, 0.0)
    >>> frontier_reward(0.25, form="variance"), frontier_reward(0.125, form="variance")
    (0.75, 0.4375)
    >>> frontier_reward(0.25, form="unbiased", n_samples=8), frontier_reward(0.5, form="unbiased", n_samples=8)
    (0.8571428571428571, 1.0)
    >>> frontier_reward(None), frontier_reward(None, rho=-0.5)
    (-1.0, -0.5)
    """
    if rho >= 0:
        raise ValueError(f"rho must be negative (a failed module must cost the Proposer), got {rho}")
    if form not in FRONTIER_FORMS:
        raise ValueError(f"unknown Frontier Reward form {form!r}; choose one of {', '.join(FRONTIER_FORMS)}")
    if success_rate is None:
        return float(rho)
    p = float(success_rate)
    if not 0.0 <= p <= 1.0:
        raise ValueError(f"success_rate must lie in [0, 1] (or be None for a failed module), got {p}")
    if form == "linear":
        return 1.0 - 2.0 * abs(p - 0.5)
    variance = 4.0 * p * (1.0 - p)
    if form == "variance":
        return variance
    if n_samples < 2:
        raise ValueError(f"the unbiased form needs n_samples >= 2, got {n_samples}")
    return min(1.0, variance * n_samples / (n_samples - 1))


def penalise_near_duplicates(
    rewards: Sequence[float | None], keys: Sequence[str | None], penalty: float = DEFAULT_DUPLICATE_PENALTY
) -> list[float | None]:
    """Rewards of one batch of proposals with repeats penalised: the first proposal with a given near-duplicate
    key keeps its reward, every later one with the same key loses `penalty` (>= 0). A key of None (no key,
    e.g. the proposal did not parse) is never a repeat. A reward of None (no reward: every solve was skipped)
    stays None.

    >>> penalise_near_duplicates([1.0, 0.5, 0.75, -1.0, None], ["a", "b", "a", None, "b"])
    [1.0, 0.5, 0.25, -1.0, None]
    """
    if penalty < 0:
        raise ValueError(f"the near-duplicate penalty must be >= 0, got {penalty}")
    if len(rewards) != len(keys):
        raise ValueError(f"{len(rewards)} rewards but {len(keys)} keys")
    seen: set[str] = set()
    out = []
    for reward, key in zip(rewards, keys):
        repeat = key is not None and key in seen
        if key is not None:
            seen.add(key)
        out.append(None if reward is None else float(reward) - penalty if repeat else float(reward))
    return out


# -- CA-GRPO (the Coder) -------------------------------------------------------------------------------------------
SPEEDUP_FORMS = ("log", "linear")  # how a raw speedup becomes S_i (speedup_score)
SPEEDUP_BASELINES = ("eager", "compile")  # which Verdict field S_i reads: speedup_eager or speedup_compile


def speedup_score(speedup: float | None, form: str = "log", cap: float = 4.0) -> float:
    """S_i: a speedup mapped into [-1, 1]; 0 when there is no timing (None: no GPU, or not timed).

    The method leaves the normalisation open; kernelzero's default is a clipped log-speedup,
    `S = clip(log2(speedup) / log2(cap), -1, 1)`: 1x gives 0, `cap`x or faster gives 1, 1/`cap`x or slower
    gives -1, and equal ratios count equally up and down. `form="linear"`:
    `S = clip((speedup - 1) / (cap - 1), -1, 1)`. With beta = 0.1 a correct kernel's reward stays within
    [0.9, 1.1], so no speedup can outweigh correctness.

    >>> speedup_score(2.0), speedup_score(4.0), speedup_score(16.0), speedup_score(0.5), speedup_score(None)
    (0.5, 1.0, 1.0, -0.5, 0.0)
    >>> speedup_score(2.5, form="linear"), speedup_score(0.25, form="linear", cap=2.0)
    (0.5, -0.75)
    """
    if form not in SPEEDUP_FORMS:
        raise ValueError(f"unknown speedup form {form!r}; choose one of {', '.join(SPEEDUP_FORMS)}")
    if not cap > 1.0:
        raise ValueError(f"the speedup cap must be > 1, got {cap}")
    if speedup is None:
        return 0.0
    s = float(speedup)
    if not (s > 0 and math.isfinite(s)):
        raise ValueError(f"a speedup must be positive and finite, got {speedup}")
    raw = math.log2(s) / math.log2(cap) if form == "log" else (s - 1.0) / (cap - 1.0)
    return min(1.0, max(-1.0, raw))


def ca_grpo_rewards(
    correct: Sequence[bool | int | None],
    speedups: Sequence[float | None],
    alpha: float = 0.5,
    beta: float = 0.1,
    *,
    gate: bool = True,
    form: str = "log",
    cap: float = 4.0,
) -> list[float | None]:
    """CA-GRPO rewards of ONE group (all samples of one prompt): `r_i = c_i (1 + T(G) beta S_i)`.

    `correct[i]` is c_i (0/1, or None for a skipped sample: its reward is None and it is left out of the mean),
    `speedups[i]` the raw speedup of sample i against the chosen baseline (None: no timing, S_i = 0),
    `S_i = speedup_score(speedups[i], form, cap)`. The gate `T(G) = 1[mean(c) >= alpha]` over the samples that
    are not skipped (a tolerance of 1e-12 absorbs rounding at the threshold); `gate=False` counts speed always
    (T = 1), `beta=0` rewards correctness only. A wrong sample's speedup is never read.

    >>> ca_grpo_rewards([1, 1, 0, 0], [2.0, None, 3.0, None])        # mean c = 0.5 >= alpha: gate open
    [1.05, 1.0, 0.0, 0.0]
    >>> ca_grpo_rewards([1, 0, 0, 0], [4.0, None, None, None])       # mean c = 0.25 < alpha: gate closed
    [1.0, 0.0, 0.0, 0.0]
    >>> ca_grpo_rewards([1, 0, 0, 0], [4.0, None, None, None], gate=False)
    [1.1, 0.0, 0.0, 0.0]
    >>> ca_grpo_rewards([1, 1], [0.5, 16.0], beta=0.2)
    [0.9, 1.2]
    >>> ca_grpo_rewards([1, None, 0, None], [2.0, None, None, None])  # mean c over the 2 judged = 0.5: gate open
    [1.05, None, 0.0, None]
    >>> ca_grpo_rewards([None, None], [None, None])
    [None, None]
    """
    if len(correct) != len(speedups):
        raise ValueError(f"{len(correct)} correctness values but {len(speedups)} speedups")
    if not correct:
        raise ValueError("ca_grpo_rewards needs a non-empty group")
    if not 0.0 <= alpha <= 1.0:
        raise ValueError(f"alpha must lie in [0, 1], got {alpha}")
    if beta < 0:
        raise ValueError(f"beta must be >= 0, got {beta}")
    c = [None if x is None else int(bool(x)) for x in correct]
    factor = beta if gate_open(c, alpha, gate) else 0.0
    return [
        None if ci is None else float(ci * (1.0 + factor * speedup_score(s, form, cap))) if ci else 0.0
        for ci, s in zip(c, speedups)
    ]


def gate_open(correct: Sequence[bool | int | None], alpha: float = 0.5, gate: bool = True) -> bool:
    """CA-GRPO's gate T(G) of one group: mean c over the samples that are not skipped (c None) >= alpha (within
    1e-12); always open with `gate=False`, closed when every sample was skipped.

    >>> gate_open([1, 0, None, None]), gate_open([1, 0, 0, None]), gate_open([None, None]), gate_open([0], gate=False)
    (True, False, False, True)
    """
    if not gate:
        return True
    judged = [int(bool(x)) for x in correct if x is not None]
    return bool(judged) and sum(judged) / len(judged) >= alpha - 1e-12


def verdict_speedup(verdict: Verdict, baseline: str = "eager") -> float | None:
    """The verdict's speedup against `baseline` ("eager" or "compile"), None when it was not timed."""
    if baseline not in SPEEDUP_BASELINES:
        raise ValueError(f"unknown speedup baseline {baseline!r}; choose one of {', '.join(SPEEDUP_BASELINES)}")
    return verdict.speedup_eager if baseline == "eager" else verdict.speedup_compile


def ca_grpo_from_verdicts(
    verdicts: Sequence[Verdict],
    alpha: float = 0.5,
    beta: float = 0.1,
    *,
    baseline: str = "eager",
    policy: str = "strict",
    profile: str | None = "default",
    gate: bool = True,
    form: str = "log",
    cap: float = 4.0,
) -> list[float | None]:
    """`ca_grpo_rewards` of one group given as Verdicts: c_i = `is_correct(v, policy)` (None for a skipped
    verdict: its reward is None), speedups from `baseline`.

    Every verdict must come from `profile` (None: any), as for `success_rate`.
    """
    wrong = sorted({v.profile for v in verdicts if profile is not None and v.profile != profile})
    if wrong:
        raise ValueError(f"verdicts from profile(s) {wrong}; CA-GRPO reads profile {profile!r}")
    correct = [None if is_skipped(v) else is_correct(v, policy) for v in verdicts]
    speedups = [verdict_speedup(v, baseline) if c else None for v, c in zip(verdicts, correct)]
    return ca_grpo_rewards(correct, speedups, alpha, beta, gate=gate, form=form, cap=cap)
