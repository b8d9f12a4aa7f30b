"""Options and tolerances decide rewards: the precedence of explicit options, the task's own tolerance and the
profile's default, and the profile records every consumer reads."""

from __future__ import annotations

import pytest

from kernelzero.types import POLICIES, PROFILES
from kernelzero.verify import options_for, tolerances


@pytest.mark.parametrize(
    ("profile", "precision", "want"),
    [
        ("default", "fp32", 1e-2),
        ("strict", "fp32", 1e-4),
        ("kernelbench", "fp32", 1e-4),
        ("strict", "fp16", 1e-2),
        ("kernelbench", "bf16", 1e-2),
    ],
)
def test_profile_default_tolerance(profile, precision, want):
    assert tolerances(options_for(profile, precision=precision), None, None) == (want, want)


def test_task_tolerance_beats_the_profile():
    assert tolerances(options_for("strict"), 5e-3, None) == (5e-3, 5e-3)
    assert tolerances(options_for("strict"), 5e-3, 1e-3) == (5e-3, 1e-3)


def test_explicit_option_beats_the_task():
    opts = options_for("default", atol=1e-3)
    assert tolerances(opts, 5e-2, 4e-2) == (1e-3, 4e-2)  # rtol not given: the task's
    assert tolerances(options_for("default", atol=1e-3, rtol=2e-3), 5e-2, 4e-2) == (1e-3, 2e-3)


def test_rtol_defaults_to_atol_when_nothing_sets_it():
    assert tolerances(options_for("default", atol=3e-3), None, None) == (3e-3, 3e-3)


def test_profile_records_shape_the_options():
    kb = options_for("kernelbench")
    assert (kb.seed, kb.eval_mode, kb.timed_calls, kb.input_sets) == (42, False, 100, 1)
    assert options_for("default").seed is None  # a secret seed per run
    assert PROFILES["kernelbench"].statistic == "mean" and PROFILES["default"].statistic == "median"
    assert options_for("kernelbench", timed_calls=7).timed_calls == 7  # an override beats the profile


def test_unknown_names_are_refused():
    with pytest.raises(ValueError, match="unknown profile"):
        options_for("fast")
    with pytest.raises(ValueError, match="policy"):
        options_for(policy="lenient")
    with pytest.raises(ValueError, match="unknown verify option"):
        options_for(tolerance=1)
    assert set(POLICIES) == {"strict", "kernelbench"}


def test_command_line_overrides_read_json_values_and_name_the_flag_on_a_bad_item():
    from kernelzero.verify.options import parse_overrides

    got = parse_overrides(["trials=3", "device=cuda", "compile_baseline=true", "seed=null"])
    assert got == {"trials": 3, "device": "cuda", "compile_baseline": True, "seed": None}
    for bad in ("trials", "=3"):
        with pytest.raises(ValueError, match="--opt wants KEY=VALUE"):
            parse_overrides([bad], flag="--opt")
