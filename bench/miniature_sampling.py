"""How much of a miniature policy's error is sampling noise, and how much is shared by every split: a CPU study.

    python bench/miniature_sampling.py --policy runs/miniature-export --split test --temps 0 0.5 1.0 --samples 1 2 2
    python bench/miniature_sampling.py --policy runs/miniature-export --split sft --temps 0 --samples 1
    python bench/miniature_sampling.py --policy runs/miniature-i-cpu --against runs/miniature-i24-cpu --split test

For each temperature (0: greedy) the policy (a folder with `policy/` and `tasks/`, as `bench/miniature_export.py
--unpack` writes it) writes `--samples` completions for each of the first `--tasks` tasks of a split, with Hugging
Face `generate` in float32 on CPU, and prints the share whose code is its task's kernel line for line
(`bench/miniature_failures.classify`: "same as the solution"), a proxy for correct that needs no GPU (on the GPU's
held-out points of 2026-12-06, 106 of 123 correct samples were such, and every such sample was correct). `sft` and
`rl` are regenerated from configs/tiny-gpu.yaml's `tasks` section when the folder has no file for them; `test` and
`rl` come from the folder. `--against OTHER` sets the policy beside another one greedily, task by task (greedy
decoding is deterministic, so the tasks pair): how many each solves alone and both, and the second's change in
exact share with its interval over tasks (`metrics.paired_gain`, as the GPU points are compared). bench/train.md (twenty-seventh
and thirty-seventh sessions) has what it measured.
"""

from __future__ import annotations

import argparse
import random
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "src"))
sys.path.insert(0, str(ROOT / "bench"))


def split_tasks(folder: Path, split: str, count: int, config: str) -> tuple[list, dict[str, str]]:
    """(tasks, name -> solution) of `split`: the folder's file, else drawn from the config (a seeded sample)."""
    from kernelzero.tasks import load_suite
    from kernelzero.train.config import load_config
    from kernelzero.train.miniature import draw_splits, read_solutions, write_split

    path = folder / "tasks" / f"{split}.jsonl"
    if not path.exists():
        drawn = draw_splits(load_config(config, {"device": "cpu"}).tasks)[split]
        path = folder / "tasks" / f"{split}-sample{count}.jsonl"
        write_split(random.Random(1).sample(drawn, min(count, len(drawn))), path)
    return load_suite(path).tasks[:count], read_solutions(path)


def draw(model, tok, tasks, solutions, temperature: float, samples: int, batch: int = 16):
    """(task, completion text, is it the task's kernel line for line) for `samples` completions of each task."""
    import torch
    from miniature_failures import classify

    from kernelzero.train.warm_start import prompt_text

    for i in range(0, len(tasks), batch):
        part = tasks[i : i + batch]
        enc = tok([prompt_text(tok, t, "triton") for t in part], return_tensors="pt", padding=True)
        sampling = {"do_sample": True, "temperature": temperature, "top_p": None, "top_k": None}
        with torch.no_grad():
            out = model.generate(
                **enc,
                max_new_tokens=512,
                num_return_sequences=samples,
                pad_token_id=tok.pad_token_id,
                **(sampling if temperature > 0 else {"do_sample": False}),
            )
        texts = tok.batch_decode(out[:, enc["input_ids"].shape[1] :], skip_special_tokens=True)
        for j, text in enumerate(texts):
            task = part[j // samples]
            yield task, text, classify(solutions[task.name], text) == "same as the solution"


def exact_share(model, tok, tasks, solutions, temperature: float, samples: int, batch: int = 16) -> tuple[int, int]:
    """(samples that are their task's kernel line for line, samples drawn)."""
    hits = [hit for _, _, hit in draw(model, tok, tasks, solutions, temperature, samples, batch)]
    return sum(hits), len(hits)


def paired(first: dict[str, bool], second: dict[str, bool]) -> dict[str, int]:
    """Greedy exact hits of two policies on the same tasks (name -> hit): tasks solved by the first only, by the
    second only, and by both (the counts a sign or McNemar test reads); the task names must match."""
    if first.keys() != second.keys():
        raise ValueError(f"the two policies were drawn on different tasks ({len(first)} and {len(second)})")
    return {
        "first only": sum(first[k] and not second[k] for k in first),
        "second only": sum(second[k] and not first[k] for k in first),
        "both": sum(first[k] and second[k] for k in first),
    }


def class_table(drawn, solutions: dict[str, str]) -> str:
    """A markdown table of the drawn samples by their task's reduction: how many, and of each
    `miniature_failures.classify` class (a wrong reduction or mask is "reduction or mask")."""
    from collections import Counter

    from miniature_failures import CLASSES, classify, store_reduction

    counts: dict[str, Counter] = {}
    for task, text, _ in drawn:  # the suite's tasks carry no MiniTask fields: the reduction is what the solution stores
        kernel = solutions[task.name]
        counts.setdefault(store_reduction(kernel), Counter())[classify(kernel, text)] += 1
    lines = ["| reduction | samples | " + " | ".join(CLASSES) + " |", "|---" * (len(CLASSES) + 2) + "|"]
    for red, c in sorted(counts.items()):
        lines.append(f"| {red} | {sum(c.values())} | " + " | ".join(str(c[k]) for k in CLASSES) + " |")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--policy", type=Path, default=Path("runs/miniature-export"))
    p.add_argument("--config", default=str(ROOT / "configs" / "tiny-gpu.yaml"))
    p.add_argument("--split", choices=("test", "rl", "sft"), default="test")
    p.add_argument("--tasks", type=int, default=64)
    p.add_argument("--temps", type=float, nargs="+", default=[0.0, 1.0])
    p.add_argument("--samples", type=int, nargs="+", default=None, help="one per temperature (default 1 each)")
    p.add_argument("--threads", type=int, default=2)
    p.add_argument("--classes", action="store_true", help="a table of each reduction's samples by failure class")
    p.add_argument("--against", type=Path, default=None, help="another policy folder: greedy hits task by task")
    args = p.parse_args(argv)
    samples = args.samples or [1] * len(args.temps)
    if len(samples) != len(args.temps) or min(samples) < 1 or min(args.temps) < 0:
        p.error("--samples needs one count >= 1 per temperature, and temperatures are >= 0")

    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    from kernelzero.metrics import paired_gain

    torch.set_num_threads(args.threads)
    torch.manual_seed(0)
    tasks, solutions = split_tasks(args.policy, args.split, args.tasks, args.config)

    def load(folder: Path):
        tok = AutoTokenizer.from_pretrained(folder / "policy")
        tok.padding_side = "left"
        return AutoModelForCausalLM.from_pretrained(folder / "policy", dtype=torch.float32).eval(), tok

    model, tok = load(args.policy)
    if args.against is not None:
        other = load(args.against)
        hits = [{t.name: hit for t, _, hit in draw(m, k, tasks, solutions, 0.0, 1)} for m, k in ((model, tok), other)]
        gain = paired_gain(*({k: float(v) for k, v in h.items()} for h in hits))  # the second's change, CI over tasks
        print(f"{args.split} x{len(tasks)}, greedy: {args.policy} against {args.against}: {paired(*hits)}, {gain}")
        return
    for temperature, k in zip(args.temps, samples):
        began = time.time()
        if args.classes:
            print(class_table(draw(model, tok, tasks, solutions, temperature, k), solutions), flush=True)
            continue
        hits, total = exact_share(model, tok, tasks, solutions, temperature, k)
        print(
            f"{args.split} x{len(tasks)}, temperature {temperature}, {k} a task: exact-kernel share "
            f"{hits / total:.3f} ({hits}/{total}), {time.time() - began:.0f} s",
            flush=True,
        )


if __name__ == "__main__":
    main()
