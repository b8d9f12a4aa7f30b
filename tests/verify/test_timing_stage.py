"""The timing stage's arithmetic (judge/timing_stage.py): the judge's clock against the reported times, the
speedup's confidence interval, and the baseline-sabotage check. The GPU runs are in scripts/gpu_tests.sh."""

from __future__ import annotations

import statistics

import numpy as np
import pytest
import torch

from kernelzero.types import Timing
from kernelzero.verify.judge.timing_checks import block_overhead, bootstrap_ci, check_clock, sabotage


def sides(ref_over: list[float], cand_over: list[float], cand_ms: float = 1.0) -> dict:
    return {
        "ref": {"times": [2.0] * 40, "overheads": ref_over},
        "cand": {"times": [cand_ms] * 40, "overheads": cand_over},
    }


def test_honest_times_are_confirmed():
    extra, check = check_clock(sides([0.20, 0.21, 0.19, 0.20], [0.205, 0.21, 0.20, 0.21]))
    assert extra == 0.0 and check.startswith("confirmed")


def test_reported_times_below_the_judges_clock_are_corrected():
    # A candidate that reports 0.02 ms per call while the judge's clock saw ~1 ms more per call than the reference.
    extra, check = check_clock(sides([0.20, 0.21, 0.19, 0.20], [1.2, 1.21, 1.19, 1.2], cand_ms=0.02))
    assert extra == pytest.approx(1.0, abs=0.01)
    assert check.startswith("corrected")
    # the words say whether every block showed the excess or a few did (the blocks' quartiles)
    assert "blocks' excess 1000..1000 us (quartiles of 4)" in check, check


def test_noise_of_the_reference_widens_the_margin_not_the_candidates():
    # The candidate's own overheads are noisy; the allowance follows the reference's noise only.
    extra, _ = check_clock(sides([0.20, 0.20, 0.20, 0.20], [0.0, 1.0, 0.0, 1.0], cand_ms=0.1))
    assert extra == pytest.approx(0.3, abs=1e-9)


def test_blocks_with_calls_stalled_to_the_holds_cap_leave_the_clock_check():
    """H200 gate at b7077c4: beside the other tests, reference blocks with calls stalled to the hold's 2 ms cap
    made the noise allow 4.6 ms a call, and a candidate hiding 1.07 ms a call was confirmed at 19.3x. Without
    the stalled pairs its excess is seen; an honest candidate stays confirmed; too few clean pairs keep every block."""
    ref = [0.20, 2.40, 0.21, 0.19, 4.10, 0.20]  # two reference blocks with a stalled call each
    hiding = [1.27, 3.40, 1.26, 1.28, 5.20, 1.27]  # 1.07 ms a call more than the reference, block by block
    capped = {"ref": [0, 1, 0, 0, 2, 0], "cand": [0] * 6}

    def with_caps(ref_over, cand_over, caps):
        got = sides(ref_over, cand_over, cand_ms=0.02)
        for side in got:
            got[side]["capped"] = caps[side]
        return got

    extra, check = check_clock(with_caps(ref, hiding, capped))
    assert check.startswith("corrected") and extra == pytest.approx(1.07, abs=0.01)
    honest = [0.21, 2.35, 0.20, 0.20, 4.20, 0.21]
    assert check_clock(with_caps(ref, honest, capped))[1].startswith("confirmed")
    # a candidate that claims stalls on every block removes every pair: all blocks are kept, and the robust noise
    # (`clock_noise`) still sees its excess
    extra, check = check_clock(with_caps(ref, hiding, {"ref": capped["ref"], "cand": [1] * 6}))
    assert check.startswith("corrected") and extra == pytest.approx(1.07, abs=0.01)
    # a candidate claiming stalls on some blocks only loses those pairs; the rest show its excess alike
    some = {"ref": capped["ref"], "cand": [1, 0, 0, 1, 0, 0]}
    assert check_clock(with_caps(ref, hiding, some))[1].startswith("corrected")


def test_a_few_slow_blocks_do_not_widen_the_clocks_allowance():
    """H200 gate at 08bef74 (2026-12-04): beside the other tests a few one-call blocks took tens of ms longer in the
    judge's clock, with no call stalled to the hold's cap on record; their standard deviation allowed 13 ms a call and
    a candidate hiding 0.6 ms a call was confirmed at 11x. The robust noise keeps the allowance at the typical
    blocks' spread: the hider is corrected by its excess, an honest candidate with the same slow blocks is not."""
    from kernelzero.verify.judge.timing_checks import clock_noise

    rng = np.random.default_rng(1)
    ref = 0.30 + rng.normal(0, 0.03, 30)
    ref[[3, 11, 24]] += [40.0, 15.0, 60.0]  # descheduled blocks
    honest = ref + rng.normal(0, 0.03, 30)
    honest[[5, 17]] += [30.0, 25.0]  # slow blocks of its own
    hiding = honest + 0.62
    assert float(np.std(ref, ddof=1)) * np.sqrt(2 / 30) * 3 > 10  # what the standard deviation would have allowed
    assert 3 * clock_noise(ref) < 0.1
    extra, check = check_clock(sides(list(ref), list(hiding), cand_ms=0.026))
    assert check.startswith("corrected") and extra == pytest.approx(0.62, abs=0.05)
    extra, check = check_clock(sides(list(ref), list(honest), cand_ms=0.026))
    assert extra == 0.0 and check.startswith("confirmed"), check
    assert clock_noise(np.array([0.2])) == 0.0  # one block: no spread to take


def test_same_hold_keeps_the_stall_counts_beside_their_blocks():
    from kernelzero.verify.judge.timing_checks import same_hold

    side = {"overheads": [0.5, 0.2, 0.3, 0.4], "holds": [100.0, 200.0, 200.0, 200.0], "capped": [3, 0, 1, 0]}
    got = same_hold({"ref": side})["ref"]
    assert got["overheads"] == [0.2, 0.3, 0.4] and got["capped"] == [0, 1, 0]


def test_bootstrap_interval_holds_the_point_estimate():
    ref = [2.0 + 0.01 * (i % 7) for i in range(60)]
    cand = [1.0 + 0.01 * (i % 5) for i in range(60)]
    low, high = bootstrap_ci(ref, cand, "median")
    assert low <= 2.03 / 1.02 <= high and high - low < 0.1
    assert bootstrap_ci(ref, cand, "median") == (low, high)  # seeded: reproducible


def timing(median: float, p10: float, p90: float) -> Timing:
    return Timing(median_ms=median, mean_ms=median, p10_ms=p10, p90_ms=p90, calls=30)


def test_sabotage_flags_a_slowed_reference():
    assert sabotage(timing(1.0, 0.99, 1.01), timing(1.3, 1.2, 1.4)).startswith("the reference ran 30% slower")


def test_sabotage_allows_noise():
    assert sabotage(timing(1.0, 0.99, 1.01), timing(1.05, 1.0, 1.1)) == ""
    assert sabotage(timing(1.0, 0.8, 1.2), timing(1.3, 1.2, 1.4)) == ""  # a noisy solo run: 2x its spread allowed
    assert sabotage(None, timing(5.0, 5.0, 5.0)) == ""
    # a launch-bound reference: host noise of tens of microseconds is not sabotage (H200: 0.0229 ms alone, 0.0412
    # beside an honest ReLU); three times slower is
    assert sabotage(timing(0.0229, 0.0225, 0.0233), timing(0.0412, 0.040, 0.043)) == ""
    assert sabotage(timing(0.0229, 0.0225, 0.0233), timing(0.070, 0.068, 0.072)) != ""


def test_block_overhead_takes_untimed_calls_out_at_the_sides_own_rate():
    # A slow honest side (2 ms calls) and a fast one (0.5 ms), each with 2 warm-up/audit calls and 0.1 ms of
    # harness per call: the same overhead for both.
    slow = block_overhead(judge_ms=4 * 2.0 + 2 * 2.0 + 4 * 0.1, times=[2.0] * 4, untimed=2)
    fast = block_overhead(judge_ms=4 * 0.5 + 2 * 0.5 + 4 * 0.1, times=[0.5] * 4, untimed=2)
    assert slow == pytest.approx(0.1) and fast == pytest.approx(0.1)


def test_block_overhead_charges_under_reporting_for_every_call():
    # Takes 1 ms per call, reports 0.1 ms: each of its 6 calls (4 timed, 2 untimed) hides 0.9 ms.
    forged = block_overhead(judge_ms=6 * 1.0 + 4 * 0.1, times=[0.1] * 4, untimed=2)
    assert forged == pytest.approx(0.1 + 6 * 0.9 / 4)


def test_the_confirmation_of_a_speedup_draws_fresh_inputs_for_every_call_whatever_the_profile():
    """Regression (c28d87c dropped it): under the kernelbench profile (one input set for all calls) a content-keyed
    memo had its >10x speedup confirmed, because the second verification reused one set too."""
    from kernelzero.verify import options_for
    from kernelzero.verify.judge.confirm import confirming_options

    for profile in ("kernelbench", "default", "strict"):
        opts = options_for(profile)
        second = confirming_options(opts)
        assert second.input_sets == 0 and second.seed is None and second.confirming
        assert second.trials >= 10 and second.timed_calls >= 100
    assert options_for("kernelbench").input_sets == 1  # the profile itself keeps KernelBench's protocol


class _CountingReference:
    """Stands in for the reference's process in `_draw` (timing needs a GPU; the GPU gate runs the real one)."""

    def __init__(self):
        self.seeds: list[list[int]] = []
        self.on_device: list[bool | None] = []

    def input_sets(self, seeds: list[int], timeout_s: float, on_device: bool | None = None) -> list[list]:
        self.seeds.append(list(seeds))
        self.on_device.append(on_device)
        return [[torch.arange(4.0) + seed, 3] for seed in seeds]


def _drawing_judge(profile: str):
    from types import SimpleNamespace

    from kernelzero.verify import options_for

    return SimpleNamespace(
        opts=options_for(profile), ref=_CountingReference(), input_seed=7, one_set=None, draws=0, check_seed=1 << 40
    )


def test_the_kernelbench_profile_draws_its_one_set_once_and_every_block_gets_a_copy():
    """KernelBench's one input set was drawn again for every block (a 512 MiB CPU draw per timed call while the GPU
    was held alone: 2+ minutes of an idle H200). It is drawn once; a call that writes into its inputs changes only
    its own block's copy."""
    from kernelzero.verify.judge.timing_stage import _draw, prime_inputs

    judge = _drawing_judge("kernelbench")
    prime_inputs(judge)
    first, second = _draw(judge, 2), _draw(judge, 3)
    assert judge.ref.seeds == [[7 + 10_000]]
    assert len(first) == 2 and len(second) == 3 and first[0] is first[1]
    first[0][0].zero_()
    assert torch.equal(second[0][0], torch.arange(4.0) + 10_007) and torch.equal(judge.one_set[0], second[0][0])
    assert second[0][1] == 3


def test_fresh_sets_are_drawn_per_call_from_seeds_never_used_before():
    from kernelzero.verify.judge.timing_stage import _draw, prime_inputs

    judge = _drawing_judge("default")
    prime_inputs(judge)  # nothing to prime: every call draws its own
    _draw(judge, 2)
    _draw(judge, 1)
    assert judge.ref.seeds == [[10_007, 10_008], [10_009]]


def test_the_recurring_input_check_draws_fresh_sets_from_its_secret_seed_on_the_gpu():
    """The kernelbench profile's seed is public; the check's fresh sets come from `check_seed` and are drawn on the
    device (a CPU draw of a 512 MiB set per call held the GPU idle, see above)."""
    from kernelzero.verify.judge.timing_stage import _draw

    judge = _drawing_judge("kernelbench")
    _draw(judge, 2, fresh=True)
    _draw(judge, 1)  # the recurring set: its own seed, on the CPU as KernelBench draws it
    assert judge.ref.seeds == [[1 << 40, (1 << 40) + 1], [10_007]]
    assert judge.ref.on_device == [True, None]


def _sides(ref_ms: float, cand_ms: float) -> dict:
    return {"ref": {"times": [ref_ms] * 9 + [ref_ms * 3]}, "cand": {"times": [cand_ms] * 9 + [cand_ms * 3]}}


def test_a_candidate_faster_only_on_the_recurring_set_is_a_replay_and_an_honest_one_is_not():
    from kernelzero.verify.judge.timing_checks import RECUR_TOLERANCE, replay_suspected

    # the H200's content memo on GELU: 0.25 ms against 0.34 ms on the recurring set, its honest 0.40 ms on fresh ones
    replayed, said = replay_suspected(_sides(0.34, 0.25), _sides(0.34, 0.40))
    assert replayed and "1.36x on the recurring input set, 0.85x on fresh sets" in said and "replayed" in said
    assert not replay_suspected(_sides(0.34, 0.20), _sides(0.35, 0.21))[0]  # honest 1.7x, alike on both
    # both sides faster on the recurring set (the reference benefits alike): no replay
    assert not replay_suspected(_sides(0.30, 0.20), _sides(0.40, 0.27))[0]
    edge = 0.34 / (0.25 * RECUR_TOLERANCE)  # exactly the tolerance: allowed
    assert not replay_suspected(_sides(0.34, 0.25), _sides(0.34, 0.34 / edge))[0]


def test_the_recurring_input_check_needs_a_replay_in_two_rounds_and_noise_in_one_passes(monkeypatch):
    """H200, 2026-12-03: honest kernels of tens of microseconds crossed the tolerance in one round (8 of 88 samples
    of a loaded pool); a memo gains in every round. The second round times fresh sets first, then the recurring one."""
    from types import SimpleNamespace

    from kernelzero.verify.judge import timing_stage

    def judge_with(rounds: list[dict]):
        calls = []

        def measured(judge, worker, host_check, fresh=False, calls_=None, **kw):
            calls.append("fresh" if fresh else "recurring")
            return rounds.pop(0)

        monkeypatch.setattr(timing_stage, "interleaved", measured)
        judge = SimpleNamespace(notes=[], timed=lambda *a: None, verdict=lambda status, stage, msg: (status, msg))
        return judge, calls

    memo = _sides(0.34, 0.25)  # the recurring set, as the main timing measured it
    judge, calls = judge_with([_sides(0.34, 0.40), _sides(0.35, 0.41), _sides(0.33, 0.24)])
    status, said = timing_stage.recurring_input_check(judge, None, False, memo)
    assert status == "unconfirmed_speedup" and calls == ["fresh", "fresh", "recurring"]
    assert "0.85x on fresh sets; again, fresh sets first: median speedup 1.38x" in said and "replayed" in said

    second = _sides(0.34, 0.27)
    judge, calls = judge_with([_sides(0.34, 0.40), _sides(0.35, 0.25), second])  # noise: gone in the second round
    assert timing_stage.recurring_input_check(judge, None, False, memo) is second  # its timing gives the speedup
    said = judge.notes[-1]
    assert calls == ["fresh", "fresh", "recurring"] and "first: median speedup 1.26x on the recurring input set" in said
    assert "the speedup is the second round's" in said

    judge, calls = judge_with([_sides(0.34, 0.26)])  # alike in the first round: no second one
    assert timing_stage.recurring_input_check(judge, None, False, memo) is None and calls == ["fresh"]

    from kernelzero.types import Verdict

    stop = Verdict("crash", "t", "h", "c", "triton", "kernelbench", "cuda", "timing")
    judge, calls = judge_with([_sides(0.34, 0.40), stop])  # a verdict while re-timing is the verdict
    assert timing_stage.recurring_input_check(judge, None, False, memo) == stop


def test_a_launch_bound_gain_in_both_rounds_is_noise_and_the_fresh_sets_speedup_is_credited(monkeypatch):
    """H200, 2026-12-04, one GRPO step of the miniature: honest answers of 4-12 us calls crossed the tolerance in both
    rounds (1.33x against 0.84x, then 2.00x against 1.39x) with gains of 2-6 us a call, and were failed as replays.
    Under RECUR_FLOOR_MS a call, or on a launch-bound call, the fresh sets' timing is credited (so such a replay
    gains nothing); a memo on a 0.34 ms call saves far more and is still refused."""
    from types import SimpleNamespace

    from kernelzero.verify.judge import timing_stage
    from kernelzero.verify.judge.timing_checks import RECUR_FLOOR_MS, replay_gain_ms

    def judge_with(rounds: list[dict]):
        monkeypatch.setattr(timing_stage, "interleaved", lambda *a, **k: rounds.pop(0))
        return SimpleNamespace(notes=[], timed=lambda *a: None, verdict=lambda status, stage, msg: (status, msg))

    tiny = _sides(0.010, 0.0075)  # 1.33x on the recurring set
    fresh = _sides(0.010, 0.0072)  # the second round: 1.39x fresh, 2.00x recurring
    recurring = _sides(0.010, 0.0050)
    assert 0 < replay_gain_ms(recurring, fresh) <= RECUR_FLOOR_MS
    judge = judge_with([_sides(0.010, 0.0119), fresh, recurring])
    assert timing_stage.recurring_input_check(judge, None, False, tiny) is fresh  # credited the fresh sets' speed
    assert "within a launch-bound call's noise" in judge.notes[-1] and "fresh sets'" in judge.notes[-1]

    # the step on b7077c4's branch: an honest 13 us answer at 1.35x recurring, 0.65x fresh in both rounds (a gain
    # of 12 us a call, over the floor): launch-bound, so noise too
    slow_fresh, fast_recurring = _sides(0.013, 0.020), _sides(0.013, 0.0096)
    assert replay_gain_ms(fast_recurring, slow_fresh) > RECUR_FLOOR_MS
    judge = judge_with([_sides(0.013, 0.020), slow_fresh, fast_recurring])
    assert timing_stage.recurring_input_check(judge, None, False, _sides(0.013, 0.0096)) is slow_fresh

    memo = _sides(0.34, 0.25)  # the same ratios at 0.34 ms: 90 us and more a call saved
    assert replay_gain_ms(_sides(0.33, 0.24), _sides(0.35, 0.41)) > RECUR_FLOOR_MS
    judge = judge_with([_sides(0.34, 0.40), _sides(0.35, 0.41), _sides(0.33, 0.24)])
    assert timing_stage.recurring_input_check(judge, None, False, memo)[0] == "unconfirmed_speedup"


def test_a_candidate_that_replays_until_it_sees_a_fresh_set_is_credited_its_second_round_speed(monkeypatch):
    """It is suspect in the first round only (it stops replaying once a fresh set came): the verdict's speedup comes
    from the second round's recurring-set timing, never from the replayed main timing."""
    from types import SimpleNamespace

    from kernelzero.verify import options_for
    from kernelzero.verify.judge import timing_stage

    def timed(ref_ms, cand_ms):
        base = _sides(ref_ms, cand_ms)
        return {side: {**base[side], "overheads": [0.0] * 4, "held": []} for side in base}

    rounds = [timed(0.34, 0.05), timed(0.34, 0.40), timed(0.34, 0.40), timed(0.34, 0.38)]
    monkeypatch.setattr(timing_stage, "interleaved", lambda *a, **k: rounds.pop(0))
    opts = options_for("kernelbench", device="cuda")
    verdicts = []
    judge = SimpleNamespace(
        opts=opts,
        device="cpu",  # no floor batch (judge/floor.py: GPU only) in this arithmetic
        fields={},
        notes=[],
        solo_ref=None,
        timed=lambda *a: None,
        verdict=lambda status, stage, message, **kw: verdicts.append((status, kw)) or (status, kw),
    )
    status, kw = timing_stage.timed_comparison(judge, None)
    assert not rounds and status == "correct"
    assert abs(kw["speedup_eager"] - 0.34 / 0.38) < 1e-9  # not 0.34 / 0.05
    assert "the speedup is the second round's" in judge.notes[-1]


def _planning_judge(ref_ms: float, timed_calls: int = 30, budget_s: float = 0.3):
    from types import SimpleNamespace

    from kernelzero.verify import options_for

    opts = options_for(timed_calls=timed_calls, timing_budget_s=budget_s)
    return SimpleNamespace(opts=opts, stage_s={"ref_forward_ms": ref_ms})


def test_a_block_bound_caps_the_calls_of_mid_sized_sets_and_never_goes_below_the_profiles():
    from kernelzero.verify.judge.timing_stage import MAX_BLOCKS, MAX_CALLS, MIN_BLOCKS, plan_calls

    mib = 1 << 20
    # 32 MiB in, 32 MiB out: two calls a block; a 0.02 ms kernel would fill the budget with MAX_CALLS calls
    calls, per_block = plan_calls(_planning_judge(0.02), 32 * mib, 32 * mib)
    assert per_block == 2 and calls == max(30, 2 * MAX_BLOCKS) < MAX_CALLS
    # small sets: the whole budget in MIN_BLOCKS blocks (the clock check's median needs that many)
    assert plan_calls(_planning_judge(0.02), 1 << 10, 1 << 10) == (MAX_CALLS, MAX_CALLS // MIN_BLOCKS)
    # huge sets (one call a block): the profile's timed calls all the same
    assert plan_calls(_planning_judge(0.02, timed_calls=100), 512 * mib, 512 * mib)[0] == 100


def _held_sides(ref: tuple[float, float], cand: tuple[float, float]) -> dict:
    """Per side (event ms, held ms) for ten calls, one of them slow on both clocks (host noise)."""
    out = {}
    for side, (event, held) in (("ref", ref), ("cand", cand)):
        out[side] = {"times": [event] * 9 + [event * 3], "held": [held] * 9 + [held * 3]}
    return out


def test_work_left_on_an_unjoined_stream_is_found_and_honest_gaps_are_not():
    from kernelzero.verify.judge.timing_checks import ESCAPE_FLOOR_MS, escaped_work

    # the H200's side-stream GELU: events saw 0.134 ms (the launch), the synchronised host clock 0.30 ms
    said = escaped_work(_held_sides(ref=(0.275, 0.280), cand=(0.134, 0.30)))
    assert "outlived its timed stream" in said and "0.1660 ms" in said
    # an honest faster kernel: both sides' held times a few microseconds over their events
    assert escaped_work(_held_sides(ref=(0.275, 0.281), cand=(0.134, 0.139))) == ""
    # a tiny launch-bound kernel with a noisy host: the gap stays under the floor
    assert escaped_work(_held_sides(ref=(0.010, 0.012), cand=(0.005, 0.005 + ESCAPE_FLOOR_MS))) == ""
    # both sides show the same large gap (a slow synchronise on a loaded host): not the candidate's doing
    assert escaped_work(_held_sides(ref=(0.275, 0.475), cand=(0.134, 0.334))) == ""
    # a noisy host doubles the candidate's gap over the reference's: allowed up to the reference's own gap
    assert escaped_work(_held_sides(ref=(0.275, 0.305), cand=(0.134, 0.190))) == ""
    assert escaped_work(_held_sides(ref=(0.275, 0.305), cand=(0.134, 0.234))) != ""
    # no held times (a CPU run) or a short series: nothing to compare
    assert escaped_work({"ref": {"times": [0.2]}, "cand": {"times": [0.1]}}) == ""
    assert escaped_work({"ref": {"times": [0.2], "held": [0.2]}, "cand": {"times": [0.1, 0.1], "held": [0.5]}}) == ""


def test_a_timing_reply_without_well_formed_held_times_is_refused():
    from kernelzero.verify.judge.timing_checks import well_formed_times

    assert well_formed_times([0.1, 0.2], [0.1, 0.25]) and well_formed_times([], [])
    assert not well_formed_times([0.1, 0.2], None)  # dropped: the gap check would be switched off
    assert not well_formed_times([0.1, 0.2], [0.1])  # one short
    assert not well_formed_times([0.1, 0.2], [0.1, "0.2"]) and not well_formed_times([0.1, True], [0.1, 0.2])
    assert not well_formed_times([0.1, float("nan")], [0.1, 0.2]) and not well_formed_times("0.1", [0.1])


def test_a_timing_reply_with_malformed_counts_is_refused():
    """The judge reads a reply's launch paths, stall count and event times as numbers: a word there (written by other
    code in the process) would end the verification with the judge's own error, so the reply is refused instead."""
    from kernelzero.verify.judge.timing_checks import well_formed_reply

    good = {"times_ms": [0.1], "held_ms": [0.12], "launch_ms": 0.05, "launch_p90_ms": 0.2, "capped": 0}
    assert well_formed_reply(good) and well_formed_reply({**good, "events_ms": [0.1]})
    assert well_formed_reply({"times_ms": [], "held_ms": []})  # the older fields absent: nothing to refuse
    for bad in (
        {"launch_ms": "0.05"},
        {"launch_p90_ms": float("inf")},
        {"launch_ms": -1.0},
        {"capped": "2"},
        {"capped": True},
        {"capped": -1},
        {"events_ms": ["0.1"]},
        {"events_ms": 0.1},
        {"held_ms": None},
    ):
        assert not well_formed_reply({**good, **bad}), bad


def test_a_blocks_launch_tail_is_its_90th_percentile():
    from kernelzero.verify.worker.timed_block import launch_tail

    assert launch_tail([]) == 0.0 and launch_tail([0.05, 0.3, 0.1]) == 0.3  # under ten calls: the longest
    calls = [0.05] * 18 + [0.4, 2.0]
    assert 0.05 < launch_tail(calls) < 2.0  # the stalled call alone does not make the tail


def test_a_corrected_timing_is_timed_again_and_the_second_one_kept(monkeypatch):
    """`clock_again`: after the clock corrected a timing, the candidate is timed once more and that timing decides on
    its own, confirmed (host load that stretched one timing's blocks) or corrected again (time hidden from its events
    shows in every timing). The second timing here is a stand-in for `interleaved`'s; the checks on it are the real
    ones (`_checked`, `check_clock`)."""
    from types import SimpleNamespace

    from kernelzero.verify.judge import timing_stage as ts

    def timing(hidden_ms: float) -> dict:
        ref = [0.20, 0.21, 0.19, 0.20, 0.22, 0.20]
        return {
            "ref": {"times": [0.03] * 30, "held": [0.03] * 30, "overheads": ref},
            "cand": {"times": [0.01] * 30, "held": [0.01] * 30, "overheads": [o + hidden_ms for o in ref]},
        }

    first = "corrected: the judge's clock saw 268.2 us per call more than the candidate reported (allowed 109.0 us)"
    for hidden, kept in ((0.0, "confirmed"), (1.0, "corrected")):
        monkeypatch.setattr(ts, "interleaved", lambda *args, h=hidden, **kw: timing(h))
        judge = SimpleNamespace(notes=[], stage_s={}, solo_ref=None, timed=lambda stage, start: None)
        sides, checked = ts.clock_again(judge, None, False, "median", first)
        assert checked[4].startswith(kept), checked[4]
        assert checked[2] == (pytest.approx(3.0) if hidden == 0.0 else pytest.approx(0.03 / 1.01, rel=0.01))
        assert sides["cand"]["overheads"][0] == pytest.approx(0.2 + hidden)
        (note,) = judge.notes
        assert note.startswith("a first timing was corrected: the judge's clock saw 268.2 us") and "timed again" in note
    # corrected in both timings: the lesser of the two excesses is charged (the first's 0.3 ms here, the second's 1 ms
    # when the first saw more), never nothing
    for charged, extra in ((0.3, 0.3), (5.0, 1.0)):
        judge = SimpleNamespace(notes=[], stage_s={}, solo_ref=None, timed=lambda stage, start: None)
        _, checked = ts.clock_again(judge, None, False, "median", first, charged)
        assert checked[3][0] == pytest.approx(0.01 + extra, rel=0.01) and checked[4].startswith("corrected")
        assert ("the lesser of two timings' excess" in checked[4]) == (charged < 1.0)


def test_the_events_profile_times_by_event_intervals_and_flags_work_left_past_them():
    """The `events` profile (issue 26): the default profile's inputs, seeds and tolerances, each call timed by its
    event interval alone; work a call leaves past its end event makes the speedup unconfirmed instead of being added
    to the call (the host's wake-up after a call added 4-27 us a call to honest verdicts on the H200, 2026-12-05)."""
    from types import SimpleNamespace

    from kernelzero.verify import options_for, tolerances
    from kernelzero.verify.judge.timing_stage import _checked
    from kernelzero.verify.options import profile_of

    opts, default = options_for("events"), options_for("default")
    profile = profile_of(opts)
    assert profile.host_check is False and profile_of(default).host_check is True
    assert (opts.seed, opts.input_sets, opts.timed_calls, profile.statistic) == (
        default.seed,
        default.input_sets,
        default.timed_calls,
        "median",
    )
    assert tolerances(opts, None, None) == tolerances(default, None, None) == (1e-2, 1e-2)
    judge = SimpleNamespace(solo_ref=None, verdict=lambda status, stage, message: (status, message))

    def sides(cand_held: float) -> dict:
        got = _held_sides(ref=(0.275, 0.281), cand=(0.134, cand_held))
        for side in got.values():
            side.update(overheads=[0.0], holds=[100.0], capped=[0], launch=[0.0], tail=[0.0])
        return got

    status, message = _checked(judge, sides(0.30), profile.statistic, profile.host_check)
    assert status == "unconfirmed_speedup" and "outlived its timed stream" in message
    timing, eager, speedup, _, check = _checked(judge, sides(0.139), profile.statistic, profile.host_check)
    assert (timing.median_ms, eager.median_ms) == (0.134, 0.275) and speedup == pytest.approx(0.275 / 0.134)
    assert check.startswith("confirmed by the judge's clock")


class _PlanningReference(_CountingReference):
    """A `_CountingReference` that also answers the reference's outputs for the timing's probe set."""

    calls = 0  # the reference's forwards asked for (one is a round trip to its process)

    def expected(self, inputs: list, timeout_s: float) -> list:
        self.calls += 1
        return [inputs[0] * 2]


def _timing_judge():
    from types import SimpleNamespace

    from kernelzero.verify import options_for

    judge = SimpleNamespace(
        opts=options_for("default", timed_calls=12, timing_budget_s=0.0),
        ref=_PlanningReference(),
        input_seed=7,
        one_set=None,
        draws=0,
        check_seed=1 << 40,
        device="cuda",
        stage_s={"ref_forward_ms": 1.0},
        notes=[],
        predrawn=[],
        run_timeout=lambda: 5.0,
        timed=lambda name, began: None,
    )
    return judge


def _interleaved_draws(judge, monkeypatch) -> list[list[int]]:
    """The seeds of every draw `timing_stage.interleaved` makes for `judge` (its blocks answered by stand-ins)."""
    from kernelzero.verify.judge import timing_stage as ts

    def block(judge, *args):
        sets, warmup = args[-6], args[-5]  # (..., sets, warmup, host_check, audits, before, hold_us)
        timed = len(sets) - warmup
        return [0.1] * timed, [], 0.01, [0.1] * timed, {}

    monkeypatch.setattr(ts, "_reference_block", block)
    monkeypatch.setattr(ts, "_candidate_block", lambda judge, worker, *args: block(judge, *args))
    monkeypatch.setattr(ts, "_check_outputs", lambda *args: None)
    monkeypatch.setattr(ts, "record_split", lambda *args: None)
    monkeypatch.setattr(ts, "hold_notes", lambda *args: None)
    before = len(judge.ref.seeds)
    ts.interleaved(judge, None, host_check=True)
    return judge.ref.seeds[before:]


def test_sets_drawn_before_the_exclusive_window_are_the_ones_the_timing_would_draw_in_it(monkeypatch):
    """judge/predraw.py (KZ_PREDRAW=1): the timing's probe and every block's sets and audits are drawn before the GPU
    is held alone, with the seeds they would have had; the timing then draws nothing more; off, nothing changes."""
    from kernelzero.verify.judge.predraw import ENV, draw_counts, predraw

    monkeypatch.delenv(ENV, raising=False)
    plain = _timing_judge()
    assert predraw(plain) == 0 and plain.predrawn == []  # off by default until gated on a GPU
    seeds_plain = [s for draw in _interleaved_draws(plain, monkeypatch) for s in draw]

    monkeypatch.setenv(ENV, "1")
    ahead = _timing_judge()
    drawn = predraw(ahead)
    assert drawn == len(seeds_plain) == 1 + sum(draw_counts(ahead.opts.warmup_calls, 12, 12))
    assert ahead.ref.calls == 1  # the probe's outputs, before the window
    assert _interleaved_draws(ahead, monkeypatch) == []  # nothing drawn inside the window
    assert ahead.ref.calls == 1 and plain.ref.calls == 1  # and no reference forward there for the plan's sizes
    assert [s for draw in ahead.ref.seeds for s in draw] == seeds_plain and ahead.predrawn == []
    assert ahead.draws == plain.draws
    assert predraw(ahead) == 0  # once per verification: a timing taken again draws as before

    cpu = _timing_judge()
    cpu.device = "cpu"
    assert predraw(cpu) == 0 and cpu.ref.seeds == []
    monkeypatch.setenv(ENV, "yes")
    with pytest.raises(ValueError, match=ENV):
        predraw(_timing_judge())


def test_sets_too_large_to_draw_ahead_are_drawn_in_the_window_with_the_same_seeds(monkeypatch):
    from kernelzero.verify.judge import predraw as pd

    monkeypatch.setenv(pd.ENV, "1")
    monkeypatch.setattr(pd, "PREDRAW_BYTES", 1)  # nothing beyond the probe fits
    judge = _timing_judge()
    assert pd.predraw(judge) == 1  # the probe alone
    inside = _interleaved_draws(judge, monkeypatch)
    plain = _timing_judge()
    monkeypatch.delenv(pd.ENV)
    expected = [s for draw in _interleaved_draws(plain, monkeypatch) for s in draw]
    assert [s for draw in judge.ref.seeds for s in draw] == expected and len(inside) > 0


def test_under_the_mean_blocks_where_the_reference_stalled_leave_both_sides():
    """`steady_times` (the kernelbench profile's mean): a block in which the reference's calls hit the GPU hold's cap
    (host time over 2 ms carried into a call) leaves both sides' statistic; the candidate's own claimed stalls choose
    nothing; the median keeps every call (the H100 gate at c5c95cc: an honest 27 us GELU read 17x)."""
    from types import SimpleNamespace

    from kernelzero.verify.judge.timing_checks import steady_times
    from kernelzero.verify.judge.timing_stage import _checked

    def timing(ref_stalls: list[int], cand_stalls: list[int]) -> dict:
        ref = [0.027] * 5 + [2.5, 2.4, 0.027, 2.6, 0.027] + [0.027] * 10  # block 2: the reference stalled
        return {
            "ref": {"times": ref, "sizes": [5, 5, 5, 5], "stalls": ref_stalls, "overheads": [0.1] * 4},
            "cand": {"times": [0.027] * 20, "sizes": [5, 5, 5, 5], "stalls": cand_stalls, "overheads": [0.1] * 4},
        }

    sides = timing([0, 2, 0, 0], [0, 0, 0, 0])
    ref, cand = steady_times(sides, "mean")
    assert len(ref) == len(cand) == 15 and max(ref) == 0.027
    assert steady_times(sides, "median") == (sides["ref"]["times"], sides["cand"]["times"])
    judge = SimpleNamespace(notes=[], stage_s={}, solo_ref=None, fields={})
    speedup = _checked(judge, sides, "mean", True)[2]
    assert speedup == pytest.approx(1.0)  # every call kept, it read 6.7x
    assert statistics.fmean(sides["ref"]["times"]) / 0.027 > 6
    # the candidate's claimed stalls remove nothing; nor do the reference's when they are in most blocks
    for ref_stalls, cand_stalls in (([0, 0, 0, 0], [1, 0, 1, 0]), ([1, 2, 1, 0], [0, 0, 0, 0])):
        assert len(steady_times(timing(ref_stalls, cand_stalls), "mean")[0]) == 20
    # blocks that do not add up to the times (an older record): every call kept
    broken = timing([0, 2, 0, 0], [0, 0, 0, 0])
    broken["ref"]["sizes"] = [5, 5, 10]
    assert len(steady_times(broken, "mean")[0]) == 20


def test_the_blocks_stage_times_are_recorded_per_side_and_paired():
    """`record_split`: each side's median stage (sets taken to the device, outside the run's clock) and the
    candidate's paired excess over the reference's, for the record (a stage delayed on purpose would show there)."""
    from types import SimpleNamespace

    from kernelzero.verify.judge.timing_checks import record_split

    judge = SimpleNamespace(stage_s={})
    sides = {"ref": {"stage": [0.2, 0.3, 0.25]}, "cand": {"stage": [0.3, 5.3, 0.45]}}
    record_split(judge, sides, 200.0)
    assert judge.stage_s["block_stage_ms_ref"] == 0.25 and judge.stage_s["block_stage_ms_cand"] == 0.45
    assert judge.stage_s["block_stage_excess_ms"] == pytest.approx(0.2)
    judge = SimpleNamespace(stage_s={})
    record_split(judge, {"ref": {"stage": [0.2]}, "cand": {}}, 200.0)  # unpaired: nothing recorded
    assert "block_stage_excess_ms" not in judge.stage_s and judge.stage_s["call_hold_us"] == 200.0


def test_the_block_trace_writes_each_blocks_calls_only_when_asked_and_cleans_what_a_side_sent(tmp_path, monkeypatch):
    """KZ_BLOCK_TRACE (judge/block_trace.py): one JSON line per block and side, through `hold_notes`; the per-call
    lists come from the side's own process, so only numbers are kept, at most MAX_CALLS of them, and a record that
    cannot be written changes nothing of the verification."""
    import json
    from types import SimpleNamespace

    from kernelzero.verify.judge import block_trace
    from kernelzero.verify.judge.timing_checks import hold_notes

    judge = SimpleNamespace(notes=[], task=SimpleNamespace(name="level1/47_Sum"))
    honest = {"stage_ms": 2.1, "calls_trace": {"kinds": ["warm", "timed", "audit"], "events_ms": [0.13, 0.131, 0.12],
                                               "spent_ms": [0.05, 0.06, 0.9], "outlive_ms": [0.006],
                                               "phases_ms": [0.02, 1.9, 0.3, 7.0]}}  # fmt: skip
    forged = {"calls_trace": {"kinds": ["timed", "x" * 99], "events_ms": ["1", float("nan"), 2, *[0.1] * 9999],
                              "spent_ms": "many", "outlive_ms": None}}  # fmt: skip
    path = tmp_path / "blocks.jsonl"
    hold_notes(judge, "ref", honest, (0, 200.0, 3.2, [0.131], 2))  # not asked: nothing written
    assert not path.exists()
    monkeypatch.setenv(block_trace.ENV, str(path))
    hold_notes(judge, "ref", honest, (0, 200.0, 3.2, [0.131], 2))
    hold_notes(judge, "cand", forged, (0, 200.0, 3.9, [0.13], 2))
    hold_notes(judge, "cand", {}, None)  # no block: nothing
    ref, cand = (json.loads(line) for line in path.read_text().splitlines())
    assert ref["task"] == "level1/47_Sum" and ref["side"] == "ref" and ref["judge_ms"] == 3.2
    assert ref["kinds"] == ["warm", "timed", "audit"] and ref["spent_ms"][2] == 0.9 and ref["untimed"] == 2
    assert ref["phases_ms"] == [0.02, 1.9, 0.3] and cand["phases_ms"] == []  # three phases at most
    assert cand["kinds"] == ["timed", "?"] and cand["events_ms"][:3] == [None, None, 2.0]
    assert len(cand["events_ms"]) == block_trace.MAX_CALLS and cand["spent_ms"] == [] and cand["outlive_ms"] == []
    assert judge.notes == []
    monkeypatch.setenv(block_trace.ENV, str(tmp_path / "missing" / "blocks.jsonl"))
    assert block_trace.write("t", "ref", honest, (1, 200.0, 3.0, [0.1], 2)) is False


def test_work_seen_outliving_the_stream_once_is_timed_again_and_refused_only_when_it_shows_again(monkeypatch):
    """`retime_reason`: H100 panel at e2fe471, a loaded pool: an honest 49 us GELU was refused once for 30.8 us a call
    past its end events (the reference's 10.4 us) and showed nothing in its other runs. A refusal for escaped work is
    timed once more and the second timing decides on its own: work left on another stream shows in both (refused),
    host load in one only (credited the second timing's speed). A confirming run is never retimed."""
    from types import SimpleNamespace

    from kernelzero.types import Verdict
    from kernelzero.verify.judge import timing_stage as ts
    from kernelzero.verify.judge.timing_checks import ESCAPED, retime_reason

    def timing(gap_ms: float) -> dict:
        over = [0.20, 0.21, 0.19, 0.20, 0.22, 0.20]
        return {
            "ref": {"times": [0.40] * 30, "held": [0.41] * 30, "overheads": over},
            "cand": {"times": [0.05] * 30, "held": [0.05 + gap_ms] * 30, "overheads": over},
        }

    def judge() -> SimpleNamespace:
        return SimpleNamespace(
            notes=[], stage_s={}, solo_ref=None, timed=lambda stage, start: None,
            verdict=lambda status, stage, message, **kw: Verdict(status, "t", "h", "c", "triton", "events", "cuda",
                                                                 stage, message),
        )  # fmt: skip

    first = ts._checked(judge(), timing(0.0308 + 0.01), "median", False)
    assert isinstance(first, Verdict) and first.status == "unconfirmed_speedup" and first.message.startswith(ESCAPED)
    said, cap = retime_reason(first, timing(0.04), False)
    assert said.startswith(f"refused ({ESCAPED}") and cap == float("inf")
    assert retime_reason(first, timing(0.04), True) == ("", float("inf"))  # confirming: never again
    other = Verdict("tampered", "t", "h", "c", "triton", "events", "cuda", "timing", "a reply not the worker's")
    assert retime_reason(other, timing(0.0), False)[0] == ""  # other refusals stand
    confirmed = ts._checked(judge(), timing(0.0), "median", False)
    assert retime_reason(confirmed, timing(0.0), False)[0] == ""  # nothing to retime
    _second_timing_decides(monkeypatch, judge, (timing(0.0), 8.0), (timing(0.04), "unconfirmed_speedup"), said, ESCAPED)


def _second_timing_decides(monkeypatch, judge, honest: tuple, again_bad: tuple, said: str, words: str) -> None:
    """A timing refused for `words` and timed once more (`clock_again`): an honest second timing (its sides, the
    speedup it must credit) is kept, with a note naming the refusal; a second one as bad as the first (its sides, the
    status) is refused again with the same words."""
    from kernelzero.types import Verdict
    from kernelzero.verify.judge import timing_stage as ts

    for second, expect in (honest, again_bad):
        monkeypatch.setattr(ts, "interleaved", lambda *args, got=second, **kw: got)
        j = judge()
        again = ts.clock_again(j, None, False, "median", said)
        if isinstance(expect, float):
            _, checked = again
            assert checked[2] == pytest.approx(expect) and checked[4].startswith("confirmed")
            (note,) = j.notes
            assert note.startswith(f"a first timing was refused ({words}") and "timed again: confirmed" in note
        else:
            assert isinstance(again, Verdict) and again.status == expect and again.message.startswith(words)


def test_a_reference_slowed_once_is_timed_again_and_tampered_only_when_slowed_again(monkeypatch):
    """`retime_reason` and `sabotage`: the miniature's run of 2026-12-06 lost a correct sample's reward to a 19 us
    launch-bound reference timed at 0.0878 ms a call beside it (0.0190 ms alone) while seven other judges compiled on
    the same cores. A slowed reference is timed once more and the second timing decides on its own: work the candidate
    leaves on the GPU slows it in both (`tampered`), host load in one only (the second timing is credited)."""
    from types import SimpleNamespace

    from kernelzero.types import Verdict
    from kernelzero.verify.judge import timing_stage as ts
    from kernelzero.verify.judge.timing_checks import SLOWED, retime_reason

    def sides(ref_ms: float) -> dict:
        over = [0.20, 0.21, 0.19, 0.20, 0.22, 0.20]
        return {
            "ref": {"times": [ref_ms] * 30, "held": [ref_ms] * 30, "overheads": over},
            "cand": {"times": [0.01] * 30, "held": [0.01] * 30, "overheads": over},
        }

    def judge() -> SimpleNamespace:
        return SimpleNamespace(
            notes=[], stage_s={}, solo_ref=timing(0.0190, 0.0188, 0.0192), timed=lambda stage, start: None,
            verdict=lambda status, stage, message, **kw: Verdict(status, "t", "h", "c", "triton", "events", "cuda",
                                                                 stage, message),
        )  # fmt: skip

    first = ts._checked(judge(), sides(0.0878), "median", False)
    assert isinstance(first, Verdict) and first.status == "tampered" and first.message.startswith(SLOWED)
    said, cap = retime_reason(first, sides(0.0878), False)
    assert said.startswith(f"refused ({SLOWED}") and cap == float("inf")
    assert retime_reason(first, sides(0.0878), True) == ("", float("inf"))  # confirming: never again
    _second_timing_decides(monkeypatch, judge, (sides(0.0195), 1.95), (sides(0.0878), "tampered"), said, SLOWED)
