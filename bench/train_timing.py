"""The Coder phase's scale measurements, run through `bench/train_gpu.py timing7b` and `verify-rate` (issue 24 item 6):
a few GRPO steps of a randomly initialised Qwen2.5-Coder-7B-architecture model, and the pool's verified samples
per hour on miniature tasks. bench/train.md has the commands and results."""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path

from gpu_out import out_dir, table


def timing7b(args: argparse.Namespace) -> None:
    """A few GRPO steps of a randomly initialised Qwen2.5-Coder-7B-architecture model (bf16, LoRA, HF generation)."""
    import torch
    from transformers import Qwen2Config, Qwen2ForCausalLM

    from kernelzero.train import coder
    from kernelzero.train.config import load_config
    from kernelzero.train.report import read_jsonl

    overrides = {
        "run_dir": args.run,
        "device": "auto",
        "warm_start": {"steps": 0},
        "eval": {"enabled": False},
        "model": {"path": str(Path(args.run) / "policy_init"), "dtype": "bfloat16"},
        "grpo": {
            "steps": args.steps,
            "prompts_per_step": args.prompts,
            "group_size": args.group,
            "lr": 1e-5,
            "max_completion_length": args.max_new,
            "gradient_checkpointing": True,
            "save_steps": 1000,
            "lora": {"r": 64, "lora_alpha": 128, "target_modules": "all-linear"},
        },
    }
    cfg = load_config(args.config, overrides)
    run = coder._start(cfg)
    splits, _ = coder.prepare_tasks(cfg, run)
    init = run / "policy_init"
    if not (init / "config.json").exists():
        from kernelzero.train.tiny import build_tokenizer, save_policy

        tok = build_tokenizer(
            [coder.prompt_text_plain(t, cfg.backend) for t in splits["rl"]] + [t.source for t in splits["sft"]], 4096
        )
        # Qwen2.5-Coder-7B's architecture (its config.json); --small-arch: a CPU check of this code path
        shape = (152064, 3584, 18944, 28, 28, 4) if not args.small_arch else (4096, 64, 128, 2, 4, 2)
        config = Qwen2Config(
            vocab_size=shape[0],
            hidden_size=shape[1],
            intermediate_size=shape[2],
            num_hidden_layers=shape[3],
            num_attention_heads=shape[4],
            num_key_value_heads=shape[5],
            max_position_embeddings=32768,
            rope_theta=1_000_000.0,
            tie_word_embeddings=False,
            eos_token_id=tok.eos_token_id,
            pad_token_id=tok.pad_token_id,
            bos_token_id=None,
        )
        torch.set_default_dtype(torch.bfloat16)
        with torch.device("cuda" if torch.cuda.is_available() else "cpu"):
            model = Qwen2ForCausalLM(config)
        torch.set_default_dtype(torch.float32)
        print(f"7B architecture: {sum(p.numel() for p in model.parameters()) / 1e9:.2f} B parameters", flush=True)
        save_policy(model, tok, init)
        del model
        torch.cuda.empty_cache()
    t0 = time.monotonic()
    coder.run_grpo(cfg, run, init, splits, save=False)
    steps = read_jsonl(run / "steps.jsonl")
    keys = ["step", "samples", "completion_tokens", "time_generate_s", "time_verify_s", "time_update_s", "time_step_s"]
    print(table(steps, keys))
    cuda = torch.cuda.is_available()
    result = {
        "steps": steps,
        "wall_s": time.monotonic() - t0,
        "peak_mem_gb": torch.cuda.max_memory_allocated() / 2**30 if cuda else 0.0,
        "gpu": torch.cuda.get_device_name() if cuda else "cpu",
        "args": vars(args),
    }
    (out_dir(args) / f"timing7b_{args.prompts}x{args.group}x{args.max_new}.json").write_text(
        json.dumps(result, indent=1, default=str)
    )
    print(f"peak GPU memory {result['peak_mem_gb']:.1f} GiB")


def verify_rate(args: argparse.Namespace) -> None:
    """Verified samples per hour of the pool on miniature tasks (distinct candidates: no store, no repeats)."""
    from kernelzero.service.pool import PoolStats, VerifyRequest, verify_many
    from kernelzero.train.config import load_config
    from kernelzero.train.miniature import answer_text, make_tasks
    from kernelzero.types import Task
    from kernelzero.verify import options_for

    cfg = load_config(args.config)
    t = cfg.tasks
    tasks = make_tasks(400, seed=99, rows=t.rows, cols=t.cols, max_steps=t.max_steps)
    opts = options_for("default", policy="strict", **cfg.verifier.options)
    stats = PoolStats()
    deadline = time.monotonic() + args.seconds

    def requests():
        for i, m in enumerate(tasks):
            if time.monotonic() > deadline:
                return
            yield VerifyRequest(Task(name=m.name, source=m.source), answer_text(m) + f"\n# {i}", "triton", opts)

    statuses: dict[str, int] = {}
    cpu: dict[str, list[float]] = {}  # CPU seconds per process role (stage_seconds cpu_s_*): where the host goes
    for _, verdict in verify_many(requests(), per_gpu=args.per_gpu, stats=stats):
        statuses[verdict.status] = statuses.get(verdict.status, 0) + 1
        for key, value in verdict.stage_seconds.items():
            if key.startswith("cpu_s_"):
                cpu.setdefault(key, []).append(value)
    medians = {key: round(sorted(v)[len(v) // 2], 2) for key, v in sorted(cpu.items())}
    summary = {**stats.summary(), "statuses": statuses, "per_gpu": args.per_gpu, "median_cpu_s": medians}
    print(table([summary], ["samples", "wall_s", "samples_per_hour", "per_gpu", "statuses", "median_cpu_s"]))
    (out_dir(args) / f"verify_rate_{args.per_gpu}.json").write_text(json.dumps(summary, indent=1, default=str))
