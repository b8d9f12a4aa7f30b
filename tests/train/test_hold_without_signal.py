"""A batch without learning signal holds the weights (train/logs.py): the StepLog callback drops the gradients
before `optimizer.step` when the reward's latest batch had no group whose rewards differ, inside the real
transformers Trainer loop, and the step's line says `held`; a batch with signal, or the hold turned off, trains.
The same callback stops the run after two batches in a row with more format errors than `stop_format_share`."""

from __future__ import annotations

import json

import pytest

pytest.importorskip("transformers")

import torch  # noqa: E402

from kernelzero.train.config import ModelConfig  # noqa: E402
from kernelzero.train.logs import StepLog  # noqa: E402
from kernelzero.train.tiny import build_model, build_tokenizer  # noqa: E402


def _info(rewards: list[float], wrong: str = "mismatch") -> dict:
    rows = [("t", r > 0, None, "correct" if r > 0 else wrong, 10) for r in rewards]
    return {"rows": rows, "rewards": rewards, "gates": [False] * 2, "reward_called_at": 0.0, "verify_s": 0.0}


class _Dataset(torch.utils.data.Dataset):
    def __init__(self, ids: list[int]):
        self.ids = ids

    def __len__(self) -> int:
        return 8

    def __getitem__(self, i: int) -> dict:
        x = torch.tensor(self.ids)
        return {"input_ids": x, "labels": x}


def _train(tmp_path, rewards: list[float], hold: bool, batches=None, stop=0.0, per_batch=1) -> tuple[bool, list]:
    """Train a tiny model two steps with the step log's callback after the reward reported `rewards` (two groups
    of two); return whether every weight is bit-identical afterwards and the step lines. With `batches` (the rewards
    of each generated batch, its wrong samples `format_error`, each trained on `per_batch` steps) that many batches,
    the callback stopping at `stop`."""
    from transformers import Trainer, TrainerCallback, TrainingArguments

    tok = build_tokenizer(["def forward(x):\n    return x * 2\n"] * 8, vocab_size=300)
    model = build_model(ModelConfig(vocab_size=300, hidden_size=16, intermediate_size=32, heads=2, kv_heads=1), tok)
    before = {k: v.clone() for k, v in model.state_dict().items()}
    log = StepLog(tmp_path, tensorboard=False)

    class Reward(TrainerCallback):  # what the reward function does at a batch's generation: report its statistics
        def on_step_begin(self, args, state, control, **kwargs):
            if not batches:
                log.on_reward(_info(rewards))
            elif state.global_step % per_batch == 0:  # a generating step; the others reuse its batch
                log.on_reward(_info(batches[state.global_step // per_batch], "format_error"))

    args = TrainingArguments(
        output_dir=str(tmp_path / "out"),
        max_steps=len(batches) * per_batch if batches else 2,
        per_device_train_batch_size=4,
        learning_rate=1e-2,
        logging_steps=1,
        report_to=[],
        save_strategy="no",
        use_cpu=True,
        disable_tqdm=True,
    )
    ids = tok("def forward(x):\n    return x * 2\n")["input_ids"]
    trainer = Trainer(
        model=model, args=args, train_dataset=_Dataset(ids), callbacks=[Reward(), log.callback(hold, stop, per_batch)]
    )
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


def test_two_batches_in_a_row_with_too_many_format_errors_stop_the_run(tmp_path):
    """`grpo.stop_format_share` (2026-12-07: a call's batches went from 7 to 29 of 128 `format_error` as GRPO drifted):
    at 0.3, a batch under it, one over, one under (the count starts again), then two over: the run stops after the
    fifth of seven steps, and that step's line says why; the share 0 (off) runs all seven."""
    quarter, half = [0.0, 1.0, 1.0, 1.0], [0.0, 0.0, 1.0, 1.0]  # rewards; each 0.0 is a format error
    batches = [quarter, half, quarter, half, half, quarter, quarter]
    _, lines = _train(tmp_path / "on", [], hold=False, batches=batches, stop=0.3)
    counts = [x["statuses"]["format_error"] for x in lines]
    assert [x["step"] for x in lines] == [1, 2, 3, 4, 5] and counts == [1, 2, 1, 2, 2]
    assert [("stopped" in x) for x in lines] == [False] * 4 + [True]
    assert lines[-1]["stopped"] == "format_error above 0.3 of two batches in a row (0.500 of this one)"
    _, lines = _train(tmp_path / "off", [], hold=False, batches=batches, stop=0.0)
    assert len(lines) == 7 and not any("stopped" in x for x in lines)


def test_the_drift_stop_waits_for_the_last_update_of_its_batch(tmp_path):
    """With two updates a batch (TRL's num_iterations), the stop found at the second batch's first step comes after
    its second: the checkpoint then ends a batch, where a resume must start (TRL generates at a run's first step)."""
    half = [0.0, 0.0, 1.0, 1.0]
    _, lines = _train(tmp_path, [], hold=False, batches=[half, half, half], stop=0.3, per_batch=2)
    assert [x["step"] for x in lines] == [1, 2, 3, 4] and [x["batch_step"] for x in lines] == [1, 1, 3, 3]
    assert [("stopped" in x) for x in lines] == [False, False, True, False]
