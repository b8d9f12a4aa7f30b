"""Training KernelZero's models on TRL's GRPOTrainer: the Coder phase (CA-GRPO), the Proposer phase, co-evolution.

    kernelzero train coder --config configs/tiny-cpu.yaml     # or kernelzero.train.coder.run_coder(load_config(path))

Modules: config (one dataclass per stage, YAML loading), reward (the TRL reward function: verify, gather whole
groups, gate), coder (warm start -> GRPO -> eval -> report), logs (steps.jsonl, TensorBoard, time budget),
miniature (generated tasks with correct Triton kernels), tiny (a small Qwen2 model and a local tokenizer),
warm_start (supervised fine-tuning), probe (held-out pass@1 of a model in memory), report (report.md and plots).

Co-evolution (`kernelzero train --config FILE.yaml`): coevolve (the loop of phase processes, state.json, resume),
coevolve_config (the proposer: and coevolution: sections, the dry run), proposer_phase (the Proposer's GRPO phase
and its tiny warm-started policy), proposer_reward (admission -> the frozen Coder's N tries -> Frontier Reward),
coevolve_pool (round inputs from the frontier, the Coder's band pool), coevolve_report (one row per round).
trl, peft and datasets are imported only where they are used (the `kernelzero` command starts without them).
"""
