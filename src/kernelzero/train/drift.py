"""How far GRPO moves the policy from kernels it knew: the anchor NLL, logged on every optimizer step.

    callbacks = anchor_callbacks(cfg, run, splits, tokenizer, log)   # [] unless grpo.anchor_tasks > 0
    # or: AnchorNLL(anchor_examples(run, tasks, tokenizer, backend, 32), tokenizer.pad_token_id, log)
    # steps.jsonl: anchor_nll on each line, anchor_nll_start on the first line of a run (resumed or not)

The anchor is a fixed set of held-out tasks (the first `grpo.anchor_tasks` of the eval split, never trained on)
with their known-correct kernels (`run/tasks/<split>.jsonl`). After each optimizer step the callback measures the
mean negative log-likelihood per answer token of those kernels under the policy, teacher-forced on the Coder's own
prompt (the warm start's examples, `warm_start.sft_example`): one forward pass over them, no generation, no
verification. A run whose pass@1 falls while the anchor NLL climbs is breaking what the warm start taught
(the miniature at lr 1e-4, 2026-12-06: boilerplate tokens written wrong, format and compile errors from 12% to 59%
of a batch); a flat anchor NLL under a flat pass@1 says the update barely moved the policy.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from transformers import TrainerCallback

from kernelzero.train.miniature import read_solutions
from kernelzero.train.warm_start import sft_batch, sft_examples
from kernelzero.types import Task


def anchor_examples(
    run: Path, tasks: list[Task], tokenizer: Any, backend: str, count: int, split: str = "test"
) -> list[tuple[list[int], int]]:
    """The first `count` tasks of `split` with their solutions from `run/tasks/<split>.jsonl`, as warm-start
    examples (token ids, prompt length). A split with fewer tasks, or without solutions, is refused by name."""
    path = run / "tasks" / f"{split}.jsonl"
    solutions = read_solutions(path) if path.exists() else {}
    picked = tasks[:count]
    missing = [t.name for t in picked if t.name not in solutions]
    if len(picked) < count or missing:
        raise ValueError(
            f"grpo.anchor_tasks = {count} needs that many {split} tasks with solutions in {path}: "
            f"{len(picked)} tasks, {len(missing)} without a solution (a real suite has none: set anchor_tasks 0)"
        )
    return sft_examples(picked, solutions, tokenizer, backend)


def anchor_nll(model: Any, examples: list[tuple[list[int], int]], pad_id: int, batch_size: int = 8) -> float:
    """Mean negative log-likelihood per answer token (answer and end token, as the warm start's loss counts them)
    of `examples` under `model`, without gradients; the model's train/eval mode is left as it was."""
    import torch

    device = next(model.parameters()).device
    was_training = model.training
    model.eval()
    total, tokens = 0.0, 0
    try:
        with torch.no_grad():
            for i in range(0, len(examples), batch_size):
                batch = sft_batch(examples[i : i + batch_size], pad_id, str(device))
                logits = model(input_ids=batch["input_ids"], attention_mask=batch["attention_mask"]).logits
                labels = batch["labels"][:, 1:]
                nll = torch.nn.functional.cross_entropy(
                    logits[:, :-1].float().transpose(1, 2), labels, ignore_index=-100, reduction="sum"
                )
                total += nll.item()
                tokens += int((labels != -100).sum().item())
    finally:
        model.train(was_training)
    return total / max(1, tokens)


def anchor_callbacks(cfg: Any, run: Path, splits: dict[str, list[Task]], tokenizer: Any, log: Any) -> list[Any]:
    """The Coder config's anchor (`grpo.anchor_tasks` of the `eval.split` tasks) as a one-callback list; [] when
    `grpo.anchor_tasks` is 0."""
    count = cfg.grpo.anchor_tasks
    if not count:
        return []
    split = cfg.eval.split
    examples = anchor_examples(run, splits.get(split) or [], tokenizer, cfg.backend, count, split)
    return [AnchorNLL(examples, tokenizer.pad_token_id, log)]


class AnchorNLL(TrainerCallback):
    """Puts the anchor NLL into the step log's next line (`log.extra`): `anchor_nll_start` when training begins
    (before any update of this run, resumed or not) and `anchor_nll` after every optimizer step."""

    def __init__(self, examples: list[tuple[list[int], int]], pad_id: int, log: Any):
        self.examples, self.pad_id, self.log = examples, pad_id, log

    def on_train_begin(self, args: Any, state: Any, control: Any, model: Any = None, **kwargs: Any) -> None:
        self._measure(state, model, "anchor_nll_start")

    def on_step_end(self, args: Any, state: Any, control: Any, model: Any = None, **kwargs: Any) -> None:
        self._measure(state, model, "anchor_nll")

    def _measure(self, state: Any, model: Any, key: str) -> None:
        """Every process measures (a model sharded over processes needs them all in its forward); the main one logs."""
        if model is not None:
            value = anchor_nll(model, self.examples, self.pad_id)
            if state.is_world_process_zero:
                self.log.extra[key] = round(value, 5)
