"""CA-GRPO reward (kernelzero.rewards): exact test vectors for the gate, the speedup score and Verdict input."""

from __future__ import annotations

import pytest

from kernelzero.rewards import ca_grpo_from_verdicts, ca_grpo_rewards, speedup_score
from kernelzero.types import Verdict


def verdict(strict: str, speedup: float | None = None, profile: str = "default", compile_: float | None = None):
    # the verdict's own status is the kernelbench one; c_i reads the strict policy's
    return Verdict(
        "correct",
        "t",
        "h",
        "c",
        "triton",
        profile,
        "H200",
        "done",
        policy="kernelbench",
        policy_status={"strict": strict, "kernelbench": "correct"},
        speedup_eager=speedup,
        speedup_compile=compile_,
    )


def test_gate_open_exactly_at_threshold():
    # mean c = 2/4 = alpha: the gate opens; S = log2(2)/log2(4) = 0.5 -> 1 + 0.1 * 0.5
    assert ca_grpo_rewards([1, 1, 0, 0], [2.0, 4.0, 8.0, None], alpha=0.5, beta=0.1) == [1.05, 1.1, 0.0, 0.0]


def test_gate_closed_just_below_threshold():
    # mean c = 2/4 < 0.75: speed does not count, correct samples get exactly 1
    assert ca_grpo_rewards([1, 1, 0, 0], [2.0, 4.0, 8.0, None], alpha=0.75) == [1.0, 1.0, 0.0, 0.0]
    # 3 of 5 = 0.6 is at alpha = 0.6 despite float rounding; 2 of 5 is below it
    assert ca_grpo_rewards([1, 1, 1, 0, 0], [4.0] * 5, alpha=0.6) == [1.1, 1.1, 1.1, 0.0, 0.0]
    assert ca_grpo_rewards([1, 1, 0, 0, 0], [4.0] * 5, alpha=0.6) == [1.0, 1.0, 0.0, 0.0, 0.0]


def test_all_correct_slow_and_fast():
    # gate open; 0.5x -> S = -0.5 -> 0.95; 16x is clipped at the cap (S = 1)
    assert ca_grpo_rewards([1, 1, 1, 1], [0.5, 1.0, 2.0, 16.0]) == [0.95, 1.0, 1.05, 1.1]


def test_all_wrong_is_zero_whatever_the_speedups():
    assert ca_grpo_rewards([0, 0, 0], [10.0, 2.0, None], gate=False) == [0.0, 0.0, 0.0]


def test_no_timing_gives_exactly_one_for_correct():
    assert ca_grpo_rewards([1, 1, 0, 1], [None, None, None, None]) == [1.0, 1.0, 0.0, 1.0]


def test_ablations_gate_off_and_correctness_only():
    assert ca_grpo_rewards([1, 0, 0, 0], [4.0, None, None, None], gate=False) == [1.1, 0.0, 0.0, 0.0]
    assert ca_grpo_rewards([1, 1], [4.0, 0.25], beta=0.0) == [1.0, 1.0]


def test_speedup_score_forms():
    assert [speedup_score(s) for s in (None, 1.0, 2.0, 4.0, 0.25, 0.125)] == [0.0, 0.0, 0.5, 1.0, -1.0, -1.0]
    assert speedup_score(8.0, cap=16.0) == 0.75
    assert [speedup_score(s, form="linear") for s in (1.0, 2.5, 7.0, 0.5)] == [0.0, 0.5, 1.0, -0.5 / 3]


@pytest.mark.parametrize(
    "kwargs, match",
    [
        ({"correct": [1, 0], "speedups": [None]}, "1 speedups"),
        ({"correct": [], "speedups": []}, "non-empty"),
        ({"correct": [1], "speedups": [None], "alpha": 1.5}, "alpha"),
        ({"correct": [1], "speedups": [None], "beta": -0.1}, "beta"),
        ({"correct": [1], "speedups": [2.0], "form": "sqrt"}, "unknown speedup form"),
        ({"correct": [1], "speedups": [2.0], "cap": 1.0}, "cap"),
        ({"correct": [1], "speedups": [0.0]}, "positive and finite"),
        ({"correct": [1], "speedups": [float("nan")]}, "positive and finite"),
    ],
)
def test_bad_inputs_raise(kwargs, match):
    with pytest.raises(ValueError, match=match):
        ca_grpo_rewards(**kwargs)


def test_from_verdicts_reads_the_strict_policy_and_the_baseline():
    group = [verdict("correct", 2.0, compile_=4.0), verdict("torch_compute", 8.0), verdict("correct", None)]
    # 2 of 3 correct under strict (the torch_compute one is correct only under kernelbench): gate open
    assert ca_grpo_from_verdicts(group) == [1.05, 0.0, 1.0]
    assert ca_grpo_from_verdicts(group, baseline="compile") == [1.1, 0.0, 1.0]
    assert ca_grpo_from_verdicts(group, alpha=0.75) == [1.0, 0.0, 1.0]


def test_from_verdicts_refuses_another_profile_and_baseline():
    with pytest.raises(ValueError, match="profile"):
        ca_grpo_from_verdicts([verdict("correct", 2.0, profile="strict")])
    with pytest.raises(ValueError, match="baseline"):
        ca_grpo_from_verdicts([verdict("correct", 2.0)], baseline="cudnn")
