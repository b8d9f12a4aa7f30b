"""Does reinforcing the miniature's own correct samples on training tasks carry over to held-out tasks? A CPU study.

    python bench/miniature_rft.py --policy runs/miniature-export --rl-tasks 64 --samples 4 --steps 12 --lr 1e-4

The positive half of a policy-gradient update, done as supervised steps (rejection-sampling fine-tuning): the exported
warm start (`bench/miniature_export.py --unpack`) samples `--samples` completions of each of the first `--rl-tasks`
GRPO tasks at temperature 1.0, keeps those that are their task's kernel line for line (`bench/miniature_sampling.py`'s
proxy for correct, which needs no GPU), and is trained on them for `--steps` steps (train/warm_start.py, constant
learning rate). Greedy exact-kernel share is measured before and after on those GRPO tasks (seen) and on the held-out
split (unseen API sets). If the seen tasks rise and the held-out ones do not, even the cleanest positive signal
fits tasks rather than the skill (what the GPU runs of issue 24 item 1 showed for GRPO); if both rise, what held the
GRPO runs back is elsewhere. bench/train.md (twenty-eighth session) has what it measured.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "src"))
sys.path.insert(0, str(ROOT / "bench"))


def _greedy(model, tok, name: str, tasks, solutions, table: dict) -> None:
    from miniature_sampling import exact_share

    began = time.time()
    hits, total = exact_share(model.eval(), tok, tasks, solutions, 0.0, 1)
    table.setdefault(name, []).append(hits / total)
    print(
        f"{name}: greedy exact-kernel share {hits}/{total} = {hits / total:.3f} ({time.time() - began:.0f} s)",
        flush=True,
    )


def main(argv: list[str] | None = None) -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--policy", type=Path, default=Path("runs/miniature-export"))
    p.add_argument("--config", default=str(ROOT / "configs" / "tiny-gpu.yaml"))
    p.add_argument("--rl-tasks", type=int, default=64)
    p.add_argument("--test-tasks", type=int, default=64)
    p.add_argument("--samples", type=int, default=4)
    p.add_argument("--steps", type=int, default=12)
    p.add_argument("--batch", type=int, default=8)
    p.add_argument("--lr", type=float, default=1e-4)
    p.add_argument("--adam-epsilon", type=float, default=1e-8, help="AdamW's eps (1e-8: every weight moves ~lr)")
    p.add_argument("--threads", type=int, default=2)
    args = p.parse_args(argv)
    if (
        min(args.rl_tasks, args.test_tasks, args.samples, args.steps, args.batch) < 1
        or min(args.lr, args.adam_epsilon) <= 0
    ):
        p.error("task counts, samples, steps and batch must be >= 1, the learning rate and epsilon > 0")

    import torch
    from miniature_sampling import draw, split_tasks
    from transformers import AutoModelForCausalLM, AutoTokenizer

    from kernelzero.coder import extract_code
    from kernelzero.coder.prompts import build_messages
    from kernelzero.train.config import WarmStartConfig
    from kernelzero.train.warm_start import sft_example, warm_start

    torch.set_num_threads(args.threads)
    torch.manual_seed(0)
    rl, rl_solutions = split_tasks(args.policy, "rl", args.rl_tasks, args.config)
    test, test_solutions = split_tasks(args.policy, "test", args.test_tasks, args.config)
    tok = AutoTokenizer.from_pretrained(args.policy / "policy")
    tok.padding_side = "left"
    model = AutoModelForCausalLM.from_pretrained(args.policy / "policy", dtype=torch.float32)
    table: dict[str, list[float]] = {}
    _greedy(model, tok, "GRPO tasks (seen)", rl, rl_solutions, table)
    _greedy(model, tok, "held-out", test, test_solutions, table)
    began, kept = time.time(), {}
    for task, text, hit in draw(model.eval(), tok, rl, rl_solutions, 1.0, args.samples):
        if hit:
            kept[(task.name, extract_code(text))] = task
    print(
        f"sampled {len(rl)} x {args.samples} at 1.0: {len(kept)} distinct exact kernels of "
        f"{len({n for n, _ in kept})} tasks ({time.time() - began:.0f} s)",
        flush=True,
    )
    if not kept:
        print("no exact kernel among the samples: nothing to reinforce")
        return
    examples = [sft_example(tok, build_messages(task, "triton"), code) for (_, code), task in kept.items()]
    cfg = WarmStartConfig(
        steps=args.steps, batch_size=args.batch, lr=args.lr, lr_schedule="constant", adam_epsilon=args.adam_epsilon
    )
    history = warm_start(model.train(), tok, examples, cfg, "cpu", 0)
    print(
        f"trained {len(history)} steps on them, loss {history[0]['loss']:.4f} -> {history[-1]['loss']:.4f}", flush=True
    )
    _greedy(model, tok, "GRPO tasks (seen)", rl, rl_solutions, table)
    _greedy(model, tok, "held-out", test, test_solutions, table)
    print("| split | greedy before | greedy after | change |\n|---|---|---|---|")
    for name, (before, after) in table.items():
        print(f"| {name} | {before:.3f} | {after:.3f} | {after - before:+.3f} |")


if __name__ == "__main__":
    main()
