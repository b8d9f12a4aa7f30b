"""Does a GRPO setting break the miniature's warm start? A CPU study on the real warm-started policy, no verifier.

    python bench/miniature_export.py --unpack <files_at> --to runs/miniature-export     # the policy, once
    python bench/miniature_drift.py --lr 1e-4 --beta 0 --out bench/drift_a.jsonl            # the collapsed setting
    python bench/miniature_drift.py --lr 2e-5 --beta 0.04 --mask --out bench/drift_b.jsonl  # tiny-gpu.yaml's now

TRL's GRPOTrainer exactly as `kernelzero train coder` sets it up for configs/tiny-gpu.yaml (DAPO loss, rewards scaled
per group, `num_iterations` clipped updates a generated batch, constant learning rate), with two differences that
make it fit two CPU cores: a batch is `--tasks` GRPO tasks x 8 samples (the GPU's is 16 x 8), and the reward is a
proxy that needs no GPU: 1 when the sample's code is line for line its task's kernel, else 0 (on the GPU's held-out
points of 2026-12-06 every such sample was correct, and 93 of 101 correct samples were such). Each line of `--out`
is one optimizer step: the anchor NLL (train/drift.py: mean NLL per token of `--anchor` held-out tasks' kernels), and
on a batch's first step the batch's proxy reward, the share of its samples that are not valid Python, and the
share whose code departs from its task's kernel outside the chain of ops (bench/miniature_failures.py's
`structure`): the broken lines the GPU run's collapse wrote.

The GRPOConfig is the Coder's own (`coder.grpo_args` of configs/tiny-gpu.yaml on CPU: float32, as on the GPU). The
arms recorded in bench/train.md on 2026-12-06 ran d0f4818's version, which built its GRPOConfig by hand and so took
TRL's default `bf16=True`: their updates ran under bfloat16 autocast on CPU.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "src"))
sys.path.insert(0, str(ROOT / "bench"))


def proxy_reward(solutions: dict[str, str], sink: list):
    from miniature_failures import classify

    from kernelzero.extract import extract_code
    from kernelzero.train.reward import completion_text

    def ca_proxy(prompts, completions, task, **kwargs):
        classes = [classify(solutions[n], completion_text(c)) for n, c in zip(task, completions)]
        rewards = [1.0 if c == "same as the solution" else 0.0 for c in classes]
        syntax = 0
        for c in completions:
            try:
                compile(extract_code(completion_text(c)), "<sample>", "exec")
            except (SyntaxError, ValueError):
                syntax += 1
        n = len(classes)
        structure = sum(c in ("structure", "no code") for c in classes)
        sink.append({"proxy_reward": sum(rewards) / n, "not_python": syntax / n, "structure": structure / n})
        return rewards

    return ca_proxy


def main(argv: list[str] | None = None) -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--policy", type=Path, default=Path("runs/miniature-export"))
    p.add_argument("--lr", type=float, required=True)
    p.add_argument("--beta", type=float, default=0.0, help="TRL's KL weight")
    p.add_argument("--mask", action="store_true", help="mask_truncated_completions")
    p.add_argument("--iterations", type=int, default=4)
    p.add_argument("--adam-epsilon", type=float, default=1e-8, help="AdamW's eps (grpo.adam_epsilon)")
    p.add_argument("--updates", type=int, default=24)
    p.add_argument("--tasks", type=int, default=2, help="GRPO tasks a batch (x 8 samples)")
    p.add_argument("--anchor", type=int, default=8)
    p.add_argument("--threads", type=int, default=1)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--out", type=Path, required=True)
    args = p.parse_args(argv)

    import torch
    from datasets import Dataset
    from transformers import AutoTokenizer, TrainerCallback
    from transformers.trainer_utils import SaveStrategy
    from trl import GRPOTrainer

    from kernelzero.coder.prompts import build_messages
    from kernelzero.tasks import load_suite
    from kernelzero.train.coder import grpo_args
    from kernelzero.train.config import load_config
    from kernelzero.train.drift import anchor_examples, anchor_nll
    from kernelzero.train.miniature import read_solutions

    torch.set_num_threads(args.threads)
    folder = args.policy
    rl, test = (load_suite(folder / "tasks" / f"{s}.jsonl").tasks for s in ("rl", "test"))
    solutions = {**read_solutions(folder / "tasks" / "rl.jsonl"), **read_solutions(folder / "tasks" / "test.jsonl")}
    tok = AutoTokenizer.from_pretrained(folder / "policy")
    anchor = anchor_examples(folder, test, tok, "triton", args.anchor)
    ds = Dataset.from_dict({"prompt": [build_messages(t, "triton") for t in rl], "task": [t.name for t in rl]})
    batches: list[dict] = []
    out = args.out
    out.write_text("")
    began = time.time()

    class Log(TrainerCallback):
        def on_train_begin(self, a, state, control, model=None, **kw):
            row = {"step": 0, "anchor_nll": anchor_nll(model, anchor, tok.pad_token_id), "wall_s": 0.0}
            with out.open("a") as f:
                f.write(json.dumps(row) + "\n")

        def on_log(self, a, state, control, logs=None, model=None, **kw):
            if not logs or "loss" not in logs:
                return
            row = {"step": state.global_step, "anchor_nll": anchor_nll(model, anchor, tok.pad_token_id)}
            row.update({k: logs[k] for k in ("entropy", "kl", "grad_norm", "clip_ratio/region_mean") if k in logs})
            if batches:
                row.update(batches.pop())
            row["wall_s"] = round(time.time() - began, 1)
            with out.open("a") as f:
                f.write(json.dumps(row) + "\n")
            print(row, flush=True)

    # the Coder's own GRPOConfig (coder.grpo_args) for configs/tiny-gpu.yaml, on CPU, with this arm's settings
    g = {"prompts_per_step": args.tasks, "gradient_accumulation_steps": args.tasks, "steps": args.updates}
    g |= {"lr": args.lr, "kl_beta": args.beta, "mask_truncated": args.mask, "num_iterations": args.iterations}
    g |= {"adam_epsilon": args.adam_epsilon}
    g |= {"save_steps": args.iterations}  # a multiple of num_iterations, as the config requires; nothing is saved
    cfg = load_config(ROOT / "configs" / "tiny-gpu.yaml", {"device": "cpu", "seed": args.seed, "grpo": g})
    config = grpo_args(cfg, out.parent / f".drift_{out.stem}", 1)
    config.save_strategy = SaveStrategy.NO  # after init: TRL's init refuses its own derived batch fields again
    trainer = GRPOTrainer(
        model=str(folder / "policy"),
        reward_funcs=[proxy_reward(solutions, batches)],
        args=config,
        train_dataset=ds,
        processing_class=tok,
        callbacks=[Log()],
    )
    trainer.train()


if __name__ == "__main__":
    main()
