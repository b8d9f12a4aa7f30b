"""The held-out probe (train/probe.py) verifies for correctness only unless asked to time: pass@1 and the gate's
share need no timing, and a timed sample holds the GPU alone."""

from __future__ import annotations

import pytest

pytest.importorskip("transformers")

from kernelzero.train.config import ModelConfig, RewardConfig, VerifierConfig  # noqa: E402
from kernelzero.train.miniature import make_tasks  # noqa: E402
from kernelzero.train.probe import probe_pass1  # noqa: E402
from kernelzero.train.reward import CoderReward  # noqa: E402
from kernelzero.train.tiny import build_model, build_tokenizer  # noqa: E402
from kernelzero.types import Task, Verdict  # noqa: E402


class AllCorrect(CoderReward):
    """Every sample correct (2x when timed): every group's gate opens. Records each batch and whether it was timed."""

    def __init__(self, tasks: dict[str, Task]):
        super().__init__(tasks, RewardConfig(), VerifierConfig(), group_size=2)
        self.times_here = True  # its verdicts carry speedups when timed, GPU or not
        self.batches: list[tuple[int, bool]] = []

    def _verify_distinct(self, names, texts, timed, trials=None):
        self.batches.append((len(names), timed))
        return [
            Verdict("correct", n, "h", "c", "triton", "default", "H200", "done", speedup_eager=2.0 if timed else None)
            for n in names
        ]


@pytest.fixture(scope="module")
def setup():
    minis = make_tasks(2, seed=0, rows=2, cols=8, max_steps=1)
    tasks = [Task(name=m.name, source=m.source) for m in minis]
    tok = build_tokenizer([m.source + m.solution for m in minis] * 4, vocab_size=320)
    model = build_model(ModelConfig(vocab_size=320, hidden_size=16, intermediate_size=32, heads=2, kv_heads=1), tok)
    return tasks, tok, model


@pytest.mark.parametrize("timed", [False, True])
def test_the_probe_times_only_when_asked(setup, timed):
    tasks, tok, model = setup
    reward = AllCorrect({t.name: t for t in tasks})
    assert reward.timing == "gated"
    result = probe_pass1(model, tok, tasks, reward, samples=2, max_new_tokens=8, batch_size=4, timed=timed)
    assert result["pass1"] == 1.0 and result["gate_open_share"] == 1.0
    # each task's pass@1 is kept, so two points on the same tasks compare pairwise (metrics.paired_gain)
    assert result["per_task"] == {t.name: 1.0 for t in tasks} and result["pass1_ci95"] == [1.0, 1.0]
    assert [t for _, t in reward.batches] == ([False, True] if timed else [False])
    if timed:
        assert result["reward_mean"] > 1.0  # the speed term of the timed pass
    else:
        assert result["reward_mean"] is None  # no speedups, so no mean reward


def test_the_probe_keeps_each_sample_only_when_asked(setup):
    tasks, tok, model = setup
    reward = AllCorrect({t.name: t for t in tasks})
    plain = probe_pass1(model, tok, tasks, reward, samples=2, max_new_tokens=8, batch_size=4, timed=False)
    assert "completions" not in plain
    kept = probe_pass1(
        model, tok, tasks, reward, samples=2, max_new_tokens=8, batch_size=4, timed=False, keep_texts=True
    )
    assert [c["task"] for c in kept["completions"]] == [t.name for t in tasks for _ in range(2)]
    assert {c["status"] for c in kept["completions"]} == {"correct"}
    assert all(isinstance(c["text"], str) for c in kept["completions"])
