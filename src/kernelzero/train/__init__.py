"""Training KernelZero's models on TRL's GRPOTrainer: the Coder phase with the CA-GRPO reward.

    kernelzero train coder --config configs/tiny-cpu.yaml     # or kernelzero.train.coder.run_coder(load_config(path))

Modules: config (one dataclass per stage, YAML loading), reward (the TRL reward function: verify, gather whole
groups, gate), coder (warm start -> GRPO -> eval -> report), logs (steps.jsonl, TensorBoard, time budget),
miniature (generated tasks with correct Triton kernels), tiny (a small Qwen2 model and a local tokenizer),
warm_start (supervised fine-tuning), probe (held-out pass@1 of a model in memory), report (report.md and plots).
trl, peft and datasets are imported only where they are used (the `kernelzero` command starts without them).
"""
