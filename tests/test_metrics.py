"""Tests of metrics.py: pass@k, fast_p, fast_p@k, geometric-mean speedup and `summarise`.

Run: `PYTHONPATH=src .venv/bin/python -m pytest tests/test_metrics.py -q`
Expected values are computed by hand (or with math.comb) in each test.
"""

from __future__ import annotations

import doctest
import json
from dataclasses import replace
from math import comb

import numpy as np
import pytest

from kernelzero import metrics
from kernelzero.metrics import fast_p, fast_p_at_k, geomean_speedup, pass_at_k, summarise
from kernelzero.types import Sample, Verdict, to_dict


def verdict(
    status: str, task: str = "t", eager: float | None = None, compile_: float | None = None, device: str = "NVIDIA H200"
) -> Verdict:
    return Verdict(
        status=status,
        task=task,
        task_hash="h",
        candidate_hash="c",
        backend="triton",
        profile="default",
        device=device,
        stage="done",
        speedup_eager=eager,
        speedup_compile=compile_,
    )


def record(task: str, idx: int, status: str, level: int | None = 1, policies: dict | None = None, **kw) -> dict:
    r = {"task": task, "sample_idx": idx, "level": level, "verdict": verdict(status, task, **kw)}
    if policies is not None:
        r["policies"] = policies
    return r


def sample(task: str, idx: int, level: int | None = 1, tokens: int | None = None) -> Sample:
    return Sample(
        task=task,
        task_hash="h",
        sample_idx=idx,
        level=level,
        backend="triton",
        model="m",
        prompt_version="v",
        completion="",
        code="",
        output_tokens=tokens,
    )


def test_docstring_examples_hold():
    result = doctest.testmod(metrics)
    assert result.attempted >= 10 and result.failed == 0


def test_pass_at_k_hand_computed_values():
    assert pass_at_k(10, 3, 1) == pytest.approx(0.3)
    assert pass_at_k(10, 3, 5) == pytest.approx(1 - 21 / 252)
    assert pass_at_k(10, 0, 5) == 0.0
    assert pass_at_k(10, 10, 5) == 1.0
    assert pass_at_k(10, 3, 11) is None


def test_pass_at_k_matches_binomial_formula():
    for n in range(1, 16):
        for c in range(n + 1):
            for k in range(1, n + 1):
                assert pass_at_k(n, c, k) == pytest.approx(1 - comb(n - c, k) / comb(n, k), abs=1e-11)


def test_pass_at_k_stable_for_large_n():
    assert 0.0 < pass_at_k(2000, 1, 1) == pytest.approx(1 / 2000)


@pytest.mark.parametrize("n,c,k", [(10, 11, 1), (10, -1, 1), (10, 3, 0), (-1, 0, 1)])
def test_pass_at_k_rejects_impossible_counts(n, c, k):
    with pytest.raises(ValueError):
        pass_at_k(n, c, k)


def test_fast_p_at_k_is_pass_at_k_on_fast_count():
    assert fast_p_at_k(10, 3, 5) == pass_at_k(10, 3, 5)
    assert fast_p_at_k(4, 1, 5) is None


def test_fast_p_is_strict_at_the_threshold():
    assert fast_p([(True, 1.0)], 1.0) == 0.0
    assert fast_p([(True, 1.0)], 0.99) == 1.0
    assert fast_p([(True, 1.0000001), (False, 5.0), (True, None)], 1.0) == pytest.approx(1 / 3)
    assert fast_p([], 1.0) is None


def test_geomean_speedup():
    assert geomean_speedup([2.0, 8.0]) == pytest.approx(4.0)
    assert geomean_speedup([1.5, 1.0, 3.0, 2.0]) == pytest.approx(9**0.25)
    assert geomean_speedup([None]) is None
    with pytest.raises(ValueError):
        geomean_speedup([0.0, 2.0])


def test_cpu_run_has_no_speed_metrics_not_zeros():
    records = [
        record("a", 0, "correct", device="cpu"),
        record("a", 1, "mismatch", device="cpu"),
        record("b", 0, "compiled", device="cpu"),
    ]
    m = summarise([], records, ks=(1,))
    assert m["timed"] == {"eager": False, "compile": False}
    for group in (m["overall"], m["levels"]["1"]):
        assert group["fast_p"] is None and group["fast_p@k"] is None and group["correct_untimed"] is None
        assert group["geomean_speedup"] == {"eager": None, "compile": None}
    assert m["overall"]["pass@k"] == {"1": pytest.approx((0.5 + 0.0) / 2)}  # `compiled` is not correct
    json.dumps(m, allow_nan=False)


def test_all_failed_gpu_run_reports_zero_fast_p():
    m = summarise([], [record("a", 0, "mismatch"), record("b", 0, "timeout")], ks=(1,))
    assert m["overall"]["fast_p"]["0"] == 0.0 and m["overall"]["fast_p@k"]["1"]["1"] == 0.0
    assert m["overall"]["geomean_speedup"]["eager"] is None


def test_per_level_split_and_overall_average_over_tasks():
    records = [record("l1/a", i, "correct" if i < 3 else "mismatch", level=1, eager=2.0) for i in range(10)]
    records += [record("l2/b", i, "correct", level=2, eager=0.5) for i in range(10)]
    m = summarise([], records, ks=(1, 5, 10))
    assert m["levels"]["1"]["pass@k"]["1"] == pytest.approx(0.3)
    assert m["levels"]["1"]["pass@k"]["5"] == pytest.approx(1 - 21 / 252)
    assert m["levels"]["1"]["pass@k"]["10"] == 1.0
    assert m["levels"]["2"]["pass@k"]["1"] == 1.0
    assert m["overall"]["pass@k"]["1"] == pytest.approx(0.65)
    assert m["overall"]["tasks"] == 2 and m["overall"]["samples"] == 20
    assert m["levels"]["1"]["geomean_speedup"]["eager"] == pytest.approx(2.0)
    assert m["overall"]["geomean_speedup"]["eager"] == pytest.approx((2.0**3 * 0.5**10) ** (1 / 13))
    assert m["levels"]["2"]["fast_p"]["1"] == 0.0 and m["levels"]["2"]["fast_p"]["0.5"] == 0.0
    assert m["levels"]["1"]["fast_p"]["1.5"] == 1.0
    assert list(m["levels"]) == ["1", "2"]


def test_tasks_with_different_sample_counts_use_their_own_n():
    records = [record("a", i, "correct", eager=2.0) if i == 0 else record("a", i, "mismatch") for i in range(5)]
    records += [record("b", i, "correct", eager=2.0) if i < 3 else record("b", i, "mismatch") for i in range(10)]
    m = summarise([], records, ks=(1, 5, 10))["overall"]
    assert m["pass@k"]["1"] == pytest.approx((1 / 5 + 3 / 10) / 2)
    assert m["pass@k"]["5"] == pytest.approx((1.0 + 1 - 21 / 252) / 2)
    assert "10" not in m["pass@k"] and m["not_estimated"] == [10]
    assert set(m["fast_p@k"]["1"]) == {"1", "5"} and m["fast_p@k"]["1"]["5"] == m["pass@k"]["5"]
    assert m["samples_per_task"] == {"min": 5, "max": 10}


def test_fast_p_reads_the_first_sample_and_fast_p_at_k_all_samples():
    records = [
        record("a", 0, "correct", eager=1.0),
        record("a", 1, "correct", eager=3.0),
        record("a", 2, "mismatch"),
        record("a", 3, "correct", eager=1.5),
    ]
    m = summarise([], records, ks=(1, 2))["overall"]
    assert m["fast_p"]["1"] == 0.0  # the first sample is exactly 1.0x: not faster
    assert m["fast_p"]["0"] == 1.0
    assert m["fast_p@k"]["1"] == {"1": pytest.approx(0.5), "2": pytest.approx(1 - comb(2, 2) / comb(4, 2))}
    assert m["fast_p@k"]["2"]["1"] == pytest.approx(0.25)


def test_speed_compile_uses_compile_speedups():
    records = [record("a", 0, "correct", eager=2.0, compile_=0.9)]
    assert summarise([], records, ks=(1,), speed="eager")["overall"]["fast_p"]["1"] == 1.0
    m = summarise([], records, ks=(1,), speed="compile")
    assert m["overall"]["fast_p"]["1"] == 0.0
    assert m["overall"]["geomean_speedup"] == {"eager": pytest.approx(2.0), "compile": pytest.approx(0.9)}


def test_policy_selects_the_status():
    strict_fail = {"kernelbench": "correct", "strict": "mismatch"}
    records = [
        record("a", 0, "correct", policies=strict_fail),
        record("a", 1, "correct"),
        record("a", 2, "mismatch", policies={"kernelbench": "correct"}),
    ]
    assert summarise([], records, ks=(1,))["overall"]["correct"] == 2
    strict = summarise([], records, ks=(1,), policy="strict")["overall"]
    assert strict["correct"] == 1 and strict["statuses"] == {"correct": 1, "mismatch": 2}
    assert summarise([], records, ks=(1,), policy="kernelbench")["overall"]["correct"] == 3
    from_verdict = {
        "task": "a",
        "sample_idx": 0,
        "level": 1,
        "verdict": replace(verdict("correct", "a"), policy_status={"strict": "torch_compute"}),
    }
    assert summarise([], [from_verdict], ks=(1,), policy="strict")["overall"]["statuses"] == {"torch_compute": 1}


def test_tokens_last_verdict_wins_and_unverified_samples():
    samples = [sample("a", 0, tokens=100), sample("a", 1, tokens=300), sample("a", 2), sample("a", 3, tokens=900)]
    records = [
        record("a", 0, "mismatch"),
        record("a", 1, "correct", eager=1.2),
        record("a", 2, "correct", eager=1.2),
        record("a", 0, "correct", eager=1.2),
    ]
    m = summarise(samples, records, ks=(1,))
    assert m["unverified_samples"] == 1  # sample 3 has no verdict: left out, tokens too
    assert m["overall"]["avg_output_tokens"] == pytest.approx(200.0)
    assert m["overall"]["samples"] == 3 and m["overall"]["correct"] == 3


def test_dict_records_and_level_from_samples():
    records = [{"task": "a", "sample_idx": 0, "level": None, "verdict": to_dict(verdict("correct", "a", eager=2.0))}]
    m = summarise([to_dict(sample("a", 0, level=2, tokens=50))], records, ks=(1,))
    assert list(m["levels"]) == ["2"] and m["levels"]["2"]["geomean_speedup"]["eager"] == pytest.approx(2.0)
    assert list(summarise([], records, ks=(1,))["levels"]) == ["unknown"]


def test_empty_run_and_bad_arguments():
    m = summarise([], [])
    assert m["overall"]["tasks"] == 0 and m["overall"]["not_estimated"] == [1, 5, 10] and m["levels"] == {}
    json.dumps(m, allow_nan=False)
    with pytest.raises(ValueError, match="speed"):
        summarise([], [], speed="triton")
    with pytest.raises(ValueError, match="policy"):
        summarise([], [], policy="lenient")


def test_fast_p_lower_counts_only_speedups_whose_interval_clears_p():
    def with_ci(task: str, point: float, low: float) -> dict:
        r = record(task, 0, "correct", eager=point)
        r["verdict"] = replace(r["verdict"], speedup_ci=(low, point * 1.05))
        return r

    # a: 1.3x with its whole interval above 1; b: 1.1x but the interval reaches 0.97; c: wrong
    m = summarise([], [with_ci("a", 1.3, 1.2), with_ci("b", 1.1, 0.97), record("c", 0, "mismatch")], ks=(1,))
    assert m["overall"]["fast_p"]["1"] == pytest.approx(2 / 3)  # the point estimate: a and b
    assert m["overall"]["fast_p_lower"]["1"] == pytest.approx(1 / 3)  # beyond the noise: a only


def test_skipped_samples_are_left_out_of_every_metric_and_counted_apart():
    # task a: 0 infra_error, 1 correct (2.0x), 2 mismatch, 3 task_broken -> judged n = 2, c = 1, first = sample 1
    # task b: 0 correct (4.0x), 1 infra_error                           -> judged n = 1, c = 1, first = sample 0
    # task c: every sample skipped                                      -> not a task of the metrics
    records = [
        record("a", 0, "infra_error", device="cpu"),
        record("a", 1, "correct", eager=2.0),
        record("a", 2, "mismatch"),
        record("a", 3, "task_broken", device="cpu"),
        record("b", 0, "correct", eager=4.0),
        record("b", 1, "infra_error"),
        record("c", 0, "task_broken", policies={"strict": "correct"}),  # a skipped status wins over any policy's
        record("c", 1, "infra_error"),
    ]
    for policy in (None, "strict"):
        m = summarise([], records, ks=(1, 2), ps=(0.0, 1.0, 3.0), policy=policy)["overall"]
        assert (m["tasks"], m["samples"], m["correct"]) == (2, 3, 2)
        assert m["samples_per_task"] == {"min": 1, "max": 2}
        assert m["pass@k"] == {"1": 0.75} and m["not_estimated"] == [2]  # (1/2 + 1/1) / 2; k=2 above task b's n
        assert m["fast_p"] == {"0": 1.0, "1": 1.0, "3": 0.5}  # first judged samples: a#1 (2.0x), b#0 (4.0x)
        assert m["fast_p@k"]["3"] == {"1": 0.5}  # (0/2 + 1/1) / 2: only b#0 is faster than 3x
        assert m["geomean_speedup"]["eager"] == pytest.approx(8**0.5)
        assert m["statuses"] == {"correct": 2, "mismatch": 1}
        assert m["skipped"] == {"infra_error": 3, "task_broken": 2}


def test_a_run_of_skipped_samples_only_has_no_metrics_and_no_timings():
    m = summarise([], [record("a", 0, "infra_error"), record("a", 1, "task_broken")], ks=(1,))
    assert m["timed"] == {"eager": False, "compile": False}  # a GPU's name on skipped verdicts does not count
    o = m["overall"]
    assert (o["tasks"], o["samples"], o["pass@k"], o["fast_p"]) == (0, 0, {}, None)
    assert o["skipped"] == {"infra_error": 1, "task_broken": 1}


def test_a_task_mean_interval_is_reproducible_and_refuses_bad_input():
    from kernelzero.metrics import task_mean_ci

    values = [0.0, 0.25, 0.5, 1.0] * 16
    assert task_mean_ci(values) == task_mean_ci(values)  # a fixed seed
    mean, low, high = task_mean_ci(values)
    assert low < mean < high and mean == pytest.approx(0.4375)
    # 64 tasks: the interval is about +-2 standard errors of the mean over tasks
    se = np.std(values) / np.sqrt(len(values))
    assert high - low == pytest.approx(2 * 1.96 * se, rel=0.1)
    assert task_mean_ci([]) is None
    with pytest.raises(ValueError, match="finite"):
        task_mean_ci([0.5, float("nan")])
    with pytest.raises(ValueError, match="level"):
        task_mean_ci([0.5], level=1.0)


def test_a_paired_gain_counts_only_shared_tasks_and_cancels_each_tasks_difficulty():
    from kernelzero.metrics import paired_gain

    # hard and easy tasks, each up by 0.25: unpaired intervals would overlap, the paired one is exact
    before = {f"t{i}": (0.0 if i % 2 else 0.75) for i in range(40)}
    after = {t: p + 0.25 for t, p in before.items()}
    gain = paired_gain(before, {**after, "only_after": 1.0})
    assert gain["tasks"] == 40 and gain["gain"] == pytest.approx(0.25) and gain["ci"] == pytest.approx([0.25, 0.25])
    # no change on most tasks, a gain on a few: the interval's low end stays at or below the mean, above 0 here
    mixed = {t: before[t] + (0.5 if i < 10 else 0.0) for i, t in enumerate(before)}
    found = paired_gain(before, mixed)
    assert found["gain"] == pytest.approx(0.125) and 0 < found["ci"][0] < 0.125 < found["ci"][1]
    # noise around no change: the interval holds 0
    noisy = {t: before[t] + (0.25 if i % 4 == 0 else -0.25 if i % 4 == 2 else 0.0) for i, t in enumerate(before)}
    low, high = paired_gain(before, noisy)["ci"]
    assert low < 0 < high
    assert paired_gain({"a": 0.0}, {"b": 1.0}) is None
