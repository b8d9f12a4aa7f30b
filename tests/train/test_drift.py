"""The anchor NLL (train/drift.py): the warm start's own loss on held-out kernels, measured without touching the
policy, its examples refused by name when the split lacks them, and its values reaching the step log."""

from __future__ import annotations

import json

import pytest

pytest.importorskip("transformers")

import torch  # noqa: E402

from kernelzero.train.config import ModelConfig  # noqa: E402
from kernelzero.train.drift import AnchorNLL, anchor_examples, anchor_nll  # noqa: E402
from kernelzero.train.logs import StepLog  # noqa: E402
from kernelzero.train.miniature import make_tasks, write_split  # noqa: E402
from kernelzero.train.tiny import build_model, build_tokenizer  # noqa: E402
from kernelzero.train.warm_start import sft_batch  # noqa: E402
from kernelzero.types import Task  # noqa: E402


@pytest.fixture(scope="module")
def setup(tmp_path_factory):
    run = tmp_path_factory.mktemp("run")
    minis = make_tasks(3, seed=1, rows=2, cols=8, max_steps=2)
    write_split(minis, run / "tasks" / "test.jsonl")
    tasks = [Task(name=f"level1/{m.name}", source=m.source) for m in minis]
    tok = build_tokenizer([m.source + m.solution for m in minis] * 4, vocab_size=320)
    model = build_model(ModelConfig(vocab_size=320, hidden_size=16, intermediate_size=32, heads=2, kv_heads=1), tok)
    return run, tasks, tok, model


def test_equals_the_warm_start_loss_per_answer_token_and_leaves_the_mode(setup):
    run, tasks, tok, model = setup
    examples = anchor_examples(run, tasks, tok, "triton", 3)
    assert len(examples) == 3
    model.train()
    value = anchor_nll(model, examples, tok.pad_token_id, batch_size=2)  # two batches of unequal width
    assert model.training
    with torch.no_grad():
        model.eval()
        per_example = [model(**sft_batch([e], tok.pad_token_id, "cpu")).loss.item() for e in examples]
    answer_tokens = [len(ids) - n_prompt for ids, n_prompt in examples]
    expected = sum(x * n for x, n in zip(per_example, answer_tokens)) / sum(answer_tokens)
    assert value == pytest.approx(expected, rel=1e-4)
    model.eval()
    anchor_nll(model, examples, tok.pad_token_id)
    assert not model.training


def test_moves_when_the_weights_move(setup):
    run, tasks, tok, model = setup
    examples = anchor_examples(run, tasks, tok, "triton", 2)
    before = anchor_nll(model, examples, tok.pad_token_id)
    with torch.no_grad():
        for p in model.parameters():
            p.add_(0.05 * torch.randn_like(p))
    assert anchor_nll(model, examples, tok.pad_token_id) != pytest.approx(before, rel=1e-3)


def test_too_few_tasks_or_no_solutions_is_refused_by_name(setup, tmp_path):
    run, tasks, tok, _ = setup
    with pytest.raises(ValueError, match="anchor_tasks = 4 needs that many test tasks"):
        anchor_examples(run, tasks, tok, "triton", 4)
    with pytest.raises(ValueError, match="1 without a solution"):
        anchor_examples(run, [Task(name="level1/other", source="")], tok, "triton", 1)
    with pytest.raises(ValueError, match="set anchor_tasks 0"):
        anchor_examples(tmp_path, tasks, tok, "triton", 1)  # no tasks/test.jsonl: a real suite


class _State:
    is_world_process_zero = True


def test_values_reach_the_step_log_start_once_then_every_step(setup, tmp_path):
    run, tasks, tok, model = setup
    log = StepLog(tmp_path, tensorboard=False)
    anchor = AnchorNLL(anchor_examples(run, tasks, tok, "triton", 2), tok.pad_token_id, log)
    anchor.on_train_begin(None, _State(), None, model=model)
    for step in (1, 2):
        anchor.on_step_end(None, _State(), None, model=model)
        log.write(step, {"loss": 0.0})
    first, second = [json.loads(line) for line in (tmp_path / "steps.jsonl").read_text().splitlines()]
    assert first["anchor_nll_start"] == first["anchor_nll"] > 0  # no update between: the same value
    assert "anchor_nll_start" not in second and second["anchor_nll"] == first["anchor_nll"]
