"""Held-out pass@1 of a policy in memory: sample, verify through the training verifier, score.

    result = probe_pass1(model, tokenizer, tasks, reward, samples=4, temperature=1.0, max_new_tokens=512)
    result["pass1"], result["pass1_ci95"], result["per_task"], result["reward_mean"], result["statuses"]

Used where a full `kernelzero eval` run (which reloads the model from disk and has its own pool settings) would
be too slow: the warm start's stopping rule, and the miniature's curve between GRPO calls (bench/train_gpu.py).
pass@1 is the unbiased estimate c/n per task, averaged over tasks; c counts verdicts correct under the strict
policy, exactly as the CA-GRPO reward does (the verification goes through `CoderReward.verify`). Each task's pass@1
is kept (`per_task`) with the mean's 95% bootstrap interval, tasks as the unit (`metrics.task_mean_ci`), so two
points of a curve on the same tasks compare pairwise (`metrics.paired_gain`).
"""

from __future__ import annotations

import time
from collections import Counter
from collections.abc import Sequence
from typing import Any

from kernelzero.metrics import paired_gain, rate_by_task, task_mean_ci
from kernelzero.train.reward import CoderReward, group_rewards, is_skipped_row
from kernelzero.train.warm_start import prompt_text
from kernelzero.types import Task


def sample_completions(
    model: Any,
    tokenizer: Any,
    prompts: Sequence[str],
    n: int,
    temperature: float,
    max_new_tokens: int,
    batch_size: int = 64,
    seed: int = 0,
) -> list[tuple[str, int]]:
    """(text, token count) of `n` samples per prompt, prompt-major; stops at the tokenizer's end token.
    `temperature` 0: greedy decoding (each prompt's likeliest continuation; `n` copies of it)."""
    import torch

    device = next(model.parameters()).device
    jobs = [p for p in prompts for _ in range(n)]
    out: list[tuple[str, int]] = []
    torch.manual_seed(seed)
    for start in range(0, len(jobs), batch_size):
        chunk = jobs[start : start + batch_size]
        enc = tokenizer(chunk, return_tensors="pt", padding=True, add_special_tokens=False).to(device)
        with torch.no_grad():
            gen = model.generate(
                **enc,
                **({"do_sample": True, "temperature": temperature} if temperature > 0 else {"do_sample": False}),
                max_new_tokens=max_new_tokens,
                eos_token_id=tokenizer.eos_token_id,
                pad_token_id=tokenizer.pad_token_id,
            )
        for row in gen[:, enc["input_ids"].shape[1] :].tolist():
            count = row.index(tokenizer.eos_token_id) + 1 if tokenizer.eos_token_id in row else len(row)
            out.append((tokenizer.decode(row[:count], skip_special_tokens=True), count))
    return out


def probe_pass1(
    model: Any,
    tokenizer: Any,
    tasks: Sequence[Task],
    reward: CoderReward,
    samples: int = 4,
    temperature: float = 1.0,
    max_new_tokens: int = 512,
    batch_size: int = 64,
    seed: int = 0,
    timed: bool = True,
    keep_texts: bool = False,
) -> dict[str, Any]:
    """pass@1 (strict policy), mean CA-GRPO reward and statuses of `samples` completions per task.
    `keep_texts`: the result also holds "completions", each sample's task, strict status and text (what a failure
    looks like; the miniature keeps them beside its curve).

    `timed=False`: correctness only. pass@1 and the gate's open share need no timing (the gate is decided by a
    group's correctness), so nothing is timed and `reward_mean` is None where the reward has a speed term (a timed
    sample holds the GPU alone: on the H200 the exclusive window was most of a timed verification's cost)."""
    was_training = model.training
    model.eval()
    start = time.monotonic()
    prompts = [prompt_text(tokenizer, t, reward.backend) for t in tasks]
    gens = sample_completions(model, tokenizer, prompts, samples, temperature, max_new_tokens, batch_size, seed)
    generated = time.monotonic()
    names = [t.name for t in tasks for _ in range(samples)]
    untimed = not timed and reward.timing != "none"
    texts, tokens = [text for text, _ in gens], [count for _, count in gens]
    _, rows, _ = reward.score(names, texts, tokens, lambda r: (r, 0), timing="none" if untimed else None)
    rewards, gates = group_rewards(rows, samples, reward.reward)
    scored = [x for x in rewards if x is not None]  # skipped samples (infra_error, task_broken) have no reward
    if was_training:
        model.train()
    # pass@1 of each task over its samples with a real verdict (a task with none is left out)
    per_task = rate_by_task((r[0], r[1]) for r in rows if not is_skipped_row(r))
    interval = task_mean_ci(list(per_task.values()))
    kept = [{"task": n, "status": r[3], "text": t} for n, r, t in zip(names, rows, texts)] if keep_texts else None
    return {
        **({"completions": kept} if kept is not None else {}),
        "tasks": len(tasks),
        "samples": samples,
        "pass1": interval[0] if interval is not None else 0.0,
        "pass1_ci95": None if interval is None else [round(interval[1], 4), round(interval[2], 4)],
        "per_task": per_task,
        "tasks_solved": sum(1 for p in per_task.values() if p > 0),
        "reward_mean": None if untimed else sum(scored) / len(scored) if scored else 0.0,
        "gate_open_share": sum(gates) / len(gates) if gates else 0.0,
        "statuses": dict(sorted(Counter(r[3] for r in rows).items())),
        "mean_tokens": sum(t for _, t in gens) / len(gens) if gens else 0.0,
        "generate_s": round(generated - start, 1),
        "verify_s": round(time.monotonic() - generated, 1),
    }


def curve_gains(curve: Sequence[dict[str, Any]], base: str = "warm start", level: float = 0.95) -> list[dict[str, Any]]:
    """Each later point of a pass@1 curve (rows of `probe_pass1` results with a `label`) against the point labelled
    `base` (its first), paired over the tasks both evaluated (`metrics.paired_gain`): label, step, tasks, before, after,
    gain and its interval. Points without `per_task` (written before it was kept) are left out; no base, no rows."""
    first = next((p for p in curve if p.get("label") == base and p.get("per_task")), None)
    if first is None:
        return []
    rows = []
    for point in curve:
        if point is first or not point.get("per_task"):
            continue
        gain = paired_gain(first["per_task"], point["per_task"], level)
        if gain is not None:
            rows.append({"label": point.get("label"), "step": point.get("step"), **gain})
    return rows
