"""The GRPO-step reward bench's answers (bench/reward_step.py), without verifying them: per group the planned number
of correct answers, one answer without code where there is room, and wrong answers that differ from the right one
for every kind of miniature task (elementwise and the three reductions)."""

from __future__ import annotations

import re
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "bench"))

import reward_step as rs  # noqa: E402

from kernelzero.extract import extract_code  # noqa: E402
from kernelzero.train.miniature import answer_text, make_tasks  # noqa: E402


def test_each_group_gets_its_share_of_right_wrong_and_codeless_answers():
    minis = make_tasks(40, seed=77, rows=4, cols=48, max_steps=2)
    names, texts = rs.completions(minis, 8, step=3)
    assert len(texts) == 8 * len(minis) and names == [m.name for m in minis for _ in range(8)]
    for k, m in enumerate(minis):
        group = texts[8 * k : 8 * k + 8]
        right = answer_text(m)
        n_right = rs.MIX[k % len(rs.MIX)]
        assert sum(re.sub(r"# step 3 sample \d+\n", "", t) == right for t in group) == n_right
        assert all(extract_code(t) for t in group if t != rs.NO_CODE)  # every other answer has code to verify
        assert (rs.NO_CODE in group) == (8 - n_right > 1)
        wrong = [t for t in group[n_right:] if t != rs.NO_CODE]
        assert all("1.5" in t and "# step 3 sample" in t for t in wrong)
    # every answer is distinct (nothing shares a verdict) within the step
    assert len({t for t in texts if t != rs.NO_CODE}) == len([t for t in texts if t != rs.NO_CODE])


def test_the_pools_lanes_and_verifier_options_can_be_set_per_run():
    import pytest

    from kernelzero.train.config import load_config

    cfg = load_config(str(ROOT / "configs" / "tiny-gpu.yaml"))
    got = rs.with_verifier(cfg, 12, ["input_sets=1", "timed_calls=30", "profile=default"], standby=16)
    assert got.verifier.per_gpu == 12 and got.verifier.options["input_sets"] == 1 and got.verifier.standby == 16
    assert got.verifier.options["timed_calls"] == 30 and got.verifier.options["profile"] == "default"
    assert got.verifier.options["trials"] == cfg.verifier.options["trials"]  # the config's others stay
    assert rs.with_verifier(cfg, None, []).verifier == cfg.verifier
    for bad in (["input_sets"], ["=1"]):
        with pytest.raises(ValueError, match="KEY=VALUE"):
            rs.with_verifier(cfg, None, bad)
    with pytest.raises(ValueError, match="per-gpu"):
        rs.with_verifier(cfg, 0, [])
    with pytest.raises(ValueError, match="standby"):
        rs.with_verifier(cfg, None, [], standby=-1)
    with pytest.raises(ValueError, match="--serves"):
        rs.with_verifier(cfg, None, [], serves=0)
    assert rs.with_verifier(cfg, None, [], serves=8).verifier.serves == 8
