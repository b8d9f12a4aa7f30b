"""Records survive JSON: a verdict written by the judge, the store or the HTTP service reads back equal."""

import json

from kernelzero.types import Mismatch, Timing, Verdict, to_dict, verdict_from_dict


def test_a_verdict_with_every_nested_record_and_tuple_reads_back_equal_after_json():
    timing = Timing(median_ms=1.5, mean_ms=1.6, p10_ms=1.4, p90_ms=1.9, calls=30)
    verdict = Verdict(
        status="correct",
        task="level1/21_GELU",
        task_hash="t" * 16,
        candidate_hash="c" * 16,
        backend="triton",
        profile="default",
        device="cpu",
        stage="done",
        mismatch=Mismatch(
            trial=0, output=0, index=(1, 2), expected=1.0, got=2.0, max_abs_err=1.0, max_rel_err=1.0, bad_fraction=0.5
        ),
        timing=timing,
        ref_eager=timing,
        speedup_ci=(1.1, 1.3),
        notes=("a", "b"),
        torch_ops=("aten::add",),
        task_degenerate=("zeros",),
        policy_status={"strict": "correct"},
    )
    again = verdict_from_dict(json.loads(json.dumps(to_dict(verdict))))
    assert again == verdict
    assert isinstance(again.torch_ops, tuple) and isinstance(again.mismatch.index, tuple)
