"""Exact values of the Frontier Reward, its variants, rho and the near-duplicate penalty (kernelzero.rewards)."""

import pytest

from kernelzero.rewards import frontier_reward, is_correct, penalise_near_duplicates, success_rate
from kernelzero.types import Verdict


def _verdict(strict: str, profile: str = "default", status: str = "correct") -> Verdict:
    return Verdict(status, "t", "h", "c", "triton", profile, "cpu", "done", policy_status={"strict": strict})


@pytest.mark.parametrize("p, expected", [(0.5, 1.0), (0.25, 0.5), (0.75, 0.5), (0.0, 0.0), (1.0, 0.0), (0.375, 0.75)])
def test_linear_form(p, expected):
    assert frontier_reward(p) == pytest.approx(expected, abs=1e-12)


def test_variance_and_unbiased_forms():
    assert frontier_reward(0.25, form="variance") == 0.75
    assert frontier_reward(0.125, form="variance") == 0.4375
    assert frontier_reward(0.25, form="unbiased", n_samples=8) == pytest.approx(0.75 * 8 / 7)
    assert frontier_reward(0.5, form="unbiased", n_samples=8) == 1.0  # 8/7 clipped to 1
    assert frontier_reward(0.0, form="unbiased", n_samples=8) == 0.0


def test_failed_admission_gets_rho():
    assert frontier_reward(None) == -1.0
    assert frontier_reward(None, rho=-0.25) == -0.25


@pytest.mark.parametrize(
    "kwargs, message",
    [
        ({"success_rate": 0.5, "rho": 0.0}, "rho must be negative"),
        ({"success_rate": 1.5}, "must lie in"),
        ({"success_rate": 0.5, "form": "square"}, "unknown Frontier Reward form"),
        ({"success_rate": 0.5, "form": "unbiased", "n_samples": 1}, "n_samples >= 2"),
    ],
)
def test_bad_arguments_raise(kwargs, message):
    with pytest.raises(ValueError, match=message):
        frontier_reward(**kwargs)


def test_success_rate_reads_the_strict_policy():
    verdicts = [
        _verdict("correct"),
        _verdict("torch_compute"),
        _verdict("correct"),
        _verdict("mismatch", status="mismatch"),
    ]
    assert success_rate(verdicts) == 0.5  # the second is correct under kernelbench, not under strict
    assert is_correct({"status": "correct", "policy_status": {"strict": "torch_compute"}}) is False


def test_success_rate_refuses_other_profiles_and_empty_input():
    with pytest.raises(ValueError, match="profile"):
        success_rate([_verdict("correct", profile="strict")])
    with pytest.raises(ValueError, match="at least one"):
        success_rate([])


def test_near_duplicate_penalty():
    assert penalise_near_duplicates([1.0, 0.5, 0.75, -1.0, 0.5], ["a", "b", "a", None, None]) == [
        1.0,
        0.5,
        0.25,
        -1.0,
        0.5,
    ]
    assert penalise_near_duplicates([1.0, 1.0], ["a", "a"], penalty=2.0) == [1.0, -1.0]
    with pytest.raises(ValueError):
        penalise_near_duplicates([1.0], ["a", "b"])
