"""A batch without learning signal holds the weights (train/logs.py): the StepLog callback drops the gradients
before `optimizer.step` when the reward's latest batch had no group whose rewards differ, inside the real
transformers Trainer loop, and the step's line says `held`; a batch with signal, or the hold turned off, trains."""

from __future__ import annotations

import json

import pytest

pytest.importorskip("transformers")

import torch  # noqa: E402

from kernelzero.train.config import ModelConfig  # noqa: E402
from kernelzero.train.logs import StepLog  # noqa: E402
from kernelzero.train.tiny import build_model, build_tokenizer  # noqa: E402


def _info(rewards: list[float]) -> dict:
    rows = [("t", r > 0, None, "correct" if r > 0 else "mismatch", 10) for r in rewards]
    return {"rows": rows, "rewards": rewards, "gates": [False] * 2, "reward_called_at": 0.0, "verify_s": 0.0}


class _Dataset(torch.utils.data.Dataset):
    def __init__(self, ids: list[int]):
        self.ids = ids

    def __len__(self) -> int:
        return 8

    def __getitem__(self, i: int) -> dict:
        x = torch.tensor(self.ids)
        return {"input_ids": x, "labels": x}


def _train(tmp_path, rewards: list[float], hold: bool) -> tuple[bool, list[dict]]:
    """Train a tiny model two steps with the step log's callback after the reward reported `rewards` (two groups
    of two); return whether every weight is bit-identical afterwards and the step lines."""
    from transformers import Trainer, TrainerCallback, TrainingArguments

    tok = build_tokenizer(["def forward(x):\n    return x * 2\n"] * 8, vocab_size=300)
    model = build_model(ModelConfig(vocab_size=300, hidden_size=16, intermediate_size=32, heads=2, kv_heads=1), tok)
    before = {k: v.clone() for k, v in model.state_dict().items()}
    log = StepLog(tmp_path, tensorboard=False)

    class Reward(TrainerCallback):  # what the reward function does at a batch's generation: report its statistics
        def on_step_begin(self, *args, **kwargs):
            log.on_reward(_info(rewards))

    args = TrainingArguments(
        output_dir=str(tmp_path / "out"),
        max_steps=2,
        per_device_train_batch_size=4,
        learning_rate=1e-2,
        logging_steps=1,
        report_to=[],
        save_strategy="no",
        use_cpu=True,
        disable_tqdm=True,
    )
    ids = tok("def forward(x):\n    return x * 2\n")["input_ids"]
    trainer = Trainer(model=model, args=args, train_dataset=_Dataset(ids), callbacks=[Reward(), log.callback(hold)])
    trainer.train()
    same = all(torch.equal(before[k], v) for k, v in model.state_dict().items())
    lines = [json.loads(x) for x in (tmp_path / "steps.jsonl").read_text().splitlines()]
    return same, lines


def test_no_group_with_signal_holds_every_weight(tmp_path):
    same, lines = _train(tmp_path, [0.0, 0.0, 1.0, 1.0], hold=True)  # each group's rewards equal: no advantage
    assert same
    assert [x["groups_with_signal"] for x in lines] == [0, 0] and all(x["held"] for x in lines)
    assert all(x["grad_norm"] > 0 for x in lines)  # the dropped gradient was there (the supervised loss here)


def test_a_group_with_signal_trains(tmp_path):
    same, lines = _train(tmp_path, [0.0, 1.0, 1.0, 1.0], hold=True)
    assert not same
    assert [x["groups_with_signal"] for x in lines] == [1, 1] and not any("held" in x for x in lines)


def test_the_hold_turned_off_trains_on_what_is_left(tmp_path):
    same, lines = _train(tmp_path, [0.0, 0.0, 0.0, 0.0], hold=False)
    assert not same and not any("held" in x for x in lines)
