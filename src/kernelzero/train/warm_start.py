"""Supervised warm start: fit the policy on (Coder prompt, correct kernel) pairs before GRPO.

    examples = sft_examples(tasks, solutions, tokenizer, "triton")     # token ids, loss on the answer only
    history = warm_start(model, tokenizer, examples, cfg.warm_start, device="cuda", probe=probe_fn)

The prompt is exactly the Coder's one-shot prompt (`coder.prompts.build_messages`) through the tokenizer's
chat template, so the model is trained on what GRPO and `kernelzero eval` later show it. The loss covers
the answer and its end token only. With `eval_every > 0`, `probe(model)` (held-out pass@1, measured by the
caller with real verification) runs every that many steps, and the warm start stops as soon as the probe
reaches the floor of `stop_band` (`probe_in_band` records whether it also stayed under the ceiling): the
miniature wants GRPO to start from a policy that solves some tasks, not all.
"""

from __future__ import annotations

import math
import random
import time
from collections.abc import Callable, Sequence
from typing import Any

from kernelzero.coder.prompts import build_messages
from kernelzero.train.config import WarmStartConfig
from kernelzero.types import Task


def prompt_text(tokenizer: Any, task: Task, backend: str) -> str:
    """The chat-templated Coder prompt of `task`, ending where the answer starts."""
    return tokenizer.apply_chat_template(build_messages(task, backend), tokenize=False, add_generation_prompt=True)


def sft_examples(
    tasks: Sequence[Task], solutions: dict[str, str], tokenizer: Any, backend: str
) -> list[tuple[list[int], int]]:
    """(token ids of prompt + answer + end token, number of prompt tokens) per task that has a solution."""
    missing = next((task.name for task in tasks if task.name not in solutions), None)
    if missing is not None:
        raise ValueError(f"no solution for task {missing}")
    return encode_examples(tokenizer, [(build_messages(task, backend), solutions[task.name]) for task in tasks])


def encode_examples(
    tokenizer: Any, pairs: Sequence[tuple[list[dict[str, str]], str]], chunk: int = 1024
) -> list[tuple[list[int], int]]:
    """`sft_example` of each (messages, source) pair, tokenized a chunk at a time: one fast-tokenizer call a chunk
    (4,000 miniature examples: 9.1 s one at a time, 4.1 s in batches on an idle 2-core machine, 2026-12-07; on the
    H100's host a call with 20,000 spent about 36 s on everything but its warm-start steps and point)."""
    out: list[tuple[list[int], int]] = []
    for start in range(0, len(pairs), chunk):
        part = pairs[start : start + chunk]
        texts = [tokenizer.apply_chat_template(m, tokenize=False, add_generation_prompt=True) for m, _ in part]
        answers = [f"```python\n{source}```{tokenizer.eos_token}" for _, source in part]
        prompts = tokenizer(texts, add_special_tokens=False)["input_ids"]
        tails = tokenizer(answers, add_special_tokens=False)["input_ids"]
        out += [(list(prompt) + list(tail), len(prompt)) for prompt, tail in zip(prompts, tails)]
    return out


def sft_example(tokenizer: Any, messages: list[dict[str, str]], source: str) -> tuple[list[int], int]:
    """(token ids of the chat-templated prompt + the fenced `source` + end token, number of prompt tokens)."""
    return encode_examples(tokenizer, [(messages, source)])[0]


def sft_batch(examples: list[tuple[list[int], int]], pad_id: int, device: str) -> dict[str, Any]:
    import torch

    width = max(len(ids) for ids, _ in examples)
    input_ids = torch.full((len(examples), width), pad_id, dtype=torch.long)
    labels = torch.full((len(examples), width), -100, dtype=torch.long)
    mask = torch.zeros((len(examples), width), dtype=torch.long)
    for row, (ids, n_prompt) in enumerate(examples):
        input_ids[row, : len(ids)] = torch.tensor(ids)
        labels[row, n_prompt : len(ids)] = torch.tensor(ids[n_prompt:])
        mask[row, : len(ids)] = 1
    return {"input_ids": input_ids.to(device), "labels": labels.to(device), "attention_mask": mask.to(device)}


def warm_start(
    model: Any,
    tokenizer: Any,
    examples: list[tuple[list[int], int]],
    cfg: WarmStartConfig,
    device: str = "cpu",
    seed: int = 0,
    probe: Callable[[Any], float] | None = None,
    on_log: Callable[[dict[str, Any]], None] | None = None,
) -> list[dict[str, Any]]:
    """Train `model` in place for `cfg.steps` steps (cosine decay to 10%); return one log record per step."""
    import torch

    if not examples:
        raise ValueError("the warm start needs at least one example")
    rng = random.Random(seed)
    torch.manual_seed(seed)
    model.to(device).train()
    opt = torch.optim.AdamW(model.parameters(), lr=cfg.lr, weight_decay=cfg.weight_decay, eps=cfg.adam_epsilon)
    warmup = max(1, cfg.steps // 20)

    def factor(s: int) -> float:
        decay = 1.0 if cfg.lr_schedule == "constant" else 0.1 + 0.45 * (1 + math.cos(math.pi * s / max(1, cfg.steps)))
        return min(1.0, (s + 1) / warmup) * decay

    sched = torch.optim.lr_scheduler.LambdaLR(opt, factor)
    bf16 = device.startswith("cuda") and next(model.parameters()).dtype == torch.float32
    history: list[dict[str, Any]] = []
    began = time.monotonic()
    order: list[int] = []
    for step in range(1, cfg.steps + 1):
        start = time.monotonic()
        if len(order) < cfg.batch_size:
            order += rng.sample(range(len(examples)), len(examples))
        picked, order = order[: cfg.batch_size], order[cfg.batch_size :]
        batch = sft_batch([examples[i] for i in picked], tokenizer.pad_token_id, device)
        with torch.autocast("cuda", dtype=torch.bfloat16, enabled=bf16):
            loss = model(**batch).loss
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        sched.step()
        opt.zero_grad(set_to_none=True)
        record: dict[str, Any] = {"step": step, "loss": round(loss.item(), 5), "seconds": time.monotonic() - start}
        stop = cfg.stop_loss is not None and record["loss"] < cfg.stop_loss
        stop = stop or (cfg.max_minutes is not None and time.monotonic() - began > cfg.max_minutes * 60)
        if probe is not None and cfg.eval_every > 0 and (step % cfg.eval_every == 0 or step == cfg.steps):
            model.eval()
            record["probe_pass1"] = probe(model)
            model.train()
            # past the band's floor: stop (above its ceiling too, since more fitting only climbs further)
            stop = stop or record["probe_pass1"] >= cfg.stop_band[0]
            record["probe_in_band"] = cfg.stop_band[0] <= record["probe_pass1"] <= cfg.stop_band[1]
        history.append(record)
        if on_log is not None:
            on_log(record)
        if stop:
            break
    model.eval()
    return history
