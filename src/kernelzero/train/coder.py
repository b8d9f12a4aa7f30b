"""The Coder phase: warm start, CA-GRPO on TRL's GRPOTrainer, held-out evaluation, report.

    kernelzero train coder --config configs/tiny-cpu.yaml        # or: run_coder(load_config(path))

Stages, each resumable from the run folder (`run_dir`):
1. tasks: the miniature generator's three splits, `tasks/{sft,rl,test}.jsonl` (suite files with solutions);
2. policy: `policy_init/` (a local Qwen2-architecture model and tokenizer) unless `model.path` names one;
3. warm start: `warm_start/` and `warm_start.jsonl` (supervised, on the sft split), skipped when done;
4. GRPO: TRL's GRPOTrainer with `CoderReward` (train/reward.py), checkpoints in `checkpoints/checkpoint-N`,
   per-step `steps.jsonl` and `tb/`; a run that finds checkpoints resumes from the last one (after a kill,
   too), and a larger `grpo.steps` extends a finished run;
5. evaluation through `kernelzero eval` (evaluation/run.py) of the warm start and the final policy on the
   held-out split: `eval/warm/`, `eval/step-N/` (pass@k, fast_1, tokens);
6. `report.md` with per-step plots (train/report.py).
Nothing here forks the trainer: it gets a reward function, callbacks and a config.
"""

from __future__ import annotations

import datetime
import json
import os
import platform
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from kernelzero.coder.prompts import build_messages
from kernelzero.evaluation.run import EvalConfig, run_eval
from kernelzero.tasks import load_suite, resize, select
from kernelzero.train.config import CoderTrainConfig, to_plain
from kernelzero.train.drift import anchor_callbacks
from kernelzero.train.logs import StepLog, TimeBudget
from kernelzero.train.miniature import draw_splits, read_solutions, tokenizer_code, write_split
from kernelzero.train.report import write_train_report
from kernelzero.train.reward import CoderReward, run_reward
from kernelzero.types import Task

# config keys a resumed run may change: how long it trains, how it is evaluated, where it runs (and the folder moves)
MUTABLE: dict[str, tuple | None] = dict.fromkeys(("eval", "verifier", "device", "cpu_threads", "run_dir"))  # all
MUTABLE["grpo"] = ("steps", "max_minutes", "stop_format_share")  # of the section, these keys only


def _log(msg: str) -> None:
    print(f"[train coder] {msg}", flush=True)


def _check_run_json(cfg: CoderTrainConfig, run: Path) -> None:
    """Write run.json; a run folder holding another configuration is refused (listing what differs)."""
    path = run / "run.json"
    mine = json.loads(json.dumps(to_plain(cfg)))  # as run.json holds it (tuples become lists)
    if path.exists():
        old = json.loads(path.read_text())["config"]
        diff = []
        for section, value in mine.items():
            rule = MUTABLE.get(section, ())
            if rule is None or section not in old:
                continue
            if isinstance(value, dict):
                diff += [f"{section}.{k}" for k, v in value.items() if k not in rule and old[section].get(k) != v]
            elif old[section] != value:
                diff.append(section)
        if diff:
            raise ValueError(f"{run} holds a run with other settings ({', '.join(diff)}); use another run_dir")
    import torch
    import trl

    meta = {
        "config": mine,
        "date": datetime.datetime.now().isoformat(timespec="seconds"),
        "versions": {"python": platform.python_version(), "torch": torch.__version__, "trl": trl.__version__},
    }
    path.write_text(json.dumps(meta, indent=1))


def prepare_tasks(cfg: CoderTrainConfig, run: Path) -> tuple[dict[str, list[Task]], dict[str, str]]:
    """The three splits (written once as suite files; one that is missing, as a carry leaves a file over its size
    limit behind, is drawn again from the same seed) and every task's solution."""
    t, folder = cfg.tasks, run / "tasks"
    missing = [s for s in ("sft", "rl", "test") if not (folder / f"{s}.jsonl").exists()]
    drawn = draw_splits(t) if missing else {}
    for split in missing:
        write_split(drawn[split], folder / f"{split}.jsonl")
    splits, solutions = {}, {}
    for split in ("sft", "rl", "test"):
        path = folder / f"{split}.jsonl"
        splits[split] = load_suite(path).tasks if path.stat().st_size else []
        solutions.update(read_solutions(path))
    for split, spec, levels in (("rl", t.suite, None), ("test", t.test_suite, t.test_levels)):
        if spec:  # a real suite replaces the generated split (it has no solutions: GRPO and eval need none)
            chosen = select(load_suite(spec).tasks, levels)
            splits[split] = [resize(task, preset=t.preset, scale=t.scale) for task in chosen]
    return splits, solutions


def _is_main() -> bool:
    """Process 0 of a `torchrun` / `accelerate launch` job (or the only process): it alone writes logs and evaluates."""
    return os.environ.get("RANK", "0") == "0"


def device_of(cfg: CoderTrainConfig) -> str:
    import torch

    return ("cuda" if torch.cuda.is_available() else "cpu") if cfg.device == "auto" else cfg.device


def prepare_policy(cfg: CoderTrainConfig, run: Path, splits: dict, solutions: dict[str, str]) -> Path:
    """The folder GRPO starts from: the warm-started policy, or the initial one when there is no warm start."""
    from transformers import AutoModelForCausalLM, AutoTokenizer

    from kernelzero.train.tiny import build_model, build_tokenizer, count_parameters, save_policy
    from kernelzero.train.warm_start import sft_examples, warm_start

    init = Path(cfg.model.path) if cfg.model.path else run / "policy_init"
    if cfg.model.path is None and not (init / "config.json").exists():
        corpus = [prompt_text_plain(x, cfg.backend) for x in splits["sft"][:64]] + tokenizer_code(
            cfg.tasks, splits, solutions
        )
        tok = build_tokenizer(corpus, cfg.model.vocab_size)
        model = build_model(cfg.model, tok)
        save_policy(model, tok, init)
        _log(f"built a {count_parameters(model):,}-parameter Qwen2 policy, vocabulary {len(tok)} -> {init}")
    if cfg.warm_start.steps == 0:
        return init
    warm = run / "warm_start"
    if (warm / "config.json").exists():
        return warm
    tok = AutoTokenizer.from_pretrained(init)
    model = AutoModelForCausalLM.from_pretrained(init, dtype="float32")
    examples = sft_examples(splits["sft"], solutions, tok, cfg.backend)
    lengths = sorted(len(ids) for ids, _ in examples)
    _log(f"warm start on {len(examples)} examples ({lengths[0]}-{lengths[-1]} tokens), {cfg.warm_start.steps} steps")
    records = run / "warm_start.jsonl"
    records.unlink(missing_ok=True)

    def on_log(record: dict[str, Any]) -> None:
        with records.open("a") as f:
            f.write(json.dumps(record) + "\n")
        if record["step"] % 50 == 0 or "probe_pass1" in record:
            _log(f"warm start step {record['step']}: {record}")

    probe, reward = _warm_probe(cfg, run, splits, tok) if cfg.warm_start.eval_every > 0 else (None, None)
    try:
        warm_start(model, tok, examples, cfg.warm_start, device_of(cfg), cfg.seed, probe=probe, on_log=on_log)
    finally:
        if reward is not None:
            reward.close()  # its kept judges end before GRPO starts its own
    save_policy(model.to("cpu"), tok, warm)
    return warm


def _warm_probe(
    cfg: CoderTrainConfig, run: Path, splits: dict[str, list[Task]], tokenizer: Any
) -> tuple[Any, CoderReward]:
    """The warm start's stopping probe (pass@1 on the first `probe_tasks` tasks of the rl split) and the reward it
    verifies through, whose kept pool the caller closes."""
    from kernelzero.train.probe import probe_pass1

    w = cfg.warm_start
    tasks = (splits["rl"] or splits["sft"])[: w.probe_tasks]
    reward = run_reward(cfg, run, tasks, w.probe_samples)  # its judges stay ready between probes

    def probe(model: Any) -> float:  # untimed: only its pass@1 is used
        g = cfg.grpo
        result = probe_pass1(
            model, tokenizer, tasks, reward, w.probe_samples, g.temperature, g.max_completion_length, timed=False
        )
        _log(f"warm-start probe: { {k: v for k, v in result.items() if k != 'per_task'} }")
        record_probe_time(run, "warm-start probe", len(tasks) * w.probe_samples, result)
        return result["pass1"]

    return probe, reward


def record_probe_time(run: Path, label: str, samples: int, result: dict[str, Any]) -> None:
    """Append a pass@1 probe's cost to run/probe_times.jsonl (samples, generation and verification seconds): what a
    caller with a time budget reads before it starts the next probe (bench/train_gpu.py)."""
    row = {"label": label, "samples": samples, "generate_s": result["generate_s"], "verify_s": result["verify_s"]}
    with (run / "probe_times.jsonl").open("a") as f:
        f.write(json.dumps(row) + "\n")


def prompt_text_plain(task: Task, backend: str) -> str:
    """The prompt's messages as plain text (tokenizer corpus)."""
    return "\n".join(m["content"] for m in build_messages(task, backend))


def grpo_args(cfg: CoderTrainConfig, run: Path, world: int) -> Any:
    """TRL's GRPOConfig for this run (constant learning rate, so a resumed run may extend `grpo.steps`)."""
    from trl import GRPOConfig

    g = cfg.grpo
    total = g.prompts_per_step * g.group_size
    ga = g.gradient_accumulation_steps
    if ga < 1 or total % (world * ga):
        raise ValueError(
            f"prompts_per_step x group_size = {total} completions do not split over {world} process(es) x "
            f"{ga} accumulation step(s)"
        )
    device = device_of(cfg)
    vllm = {}
    if g.use_vllm:
        vllm = {
            "use_vllm": True,
            "vllm_mode": g.vllm_mode,
            "vllm_gpu_memory_utilization": g.vllm_gpu_memory_utilization,
            "vllm_tensor_parallel_size": g.vllm_tensor_parallel_size,
            "vllm_server_base_url": g.vllm_server_base_url,
        }
    return GRPOConfig(
        output_dir=str(run / "checkpoints"),
        max_steps=g.steps,
        # one generation batch of `total` completions a step, its update in `ga` micro-batches (the activations of
        # one micro-batch at a time: 128 x 2,200 tokens at once took 60 GiB for the miniature's 23M model)
        per_device_train_batch_size=total // (world * ga),
        steps_per_generation=ga,
        num_generations=g.group_size,
        gradient_accumulation_steps=ga,
        learning_rate=g.lr,
        adam_epsilon=g.adam_epsilon,
        lr_scheduler_type="constant",
        warmup_steps=0,
        temperature=g.temperature,
        max_completion_length=g.max_completion_length,
        loss_type=g.loss_type,
        scale_rewards=g.scale_rewards,
        beta=g.kl_beta,
        epsilon=g.epsilon,
        num_iterations=g.num_iterations,
        mask_truncated_completions=g.mask_truncated,
        logging_steps=1,
        save_strategy="steps",
        save_steps=g.save_steps,
        save_total_limit=g.save_total_limit,
        report_to="none",
        seed=cfg.seed,
        use_cpu=device == "cpu",
        bf16=device != "cpu" and cfg.model.dtype == "bfloat16",
        gradient_checkpointing=g.gradient_checkpointing,
        model_init_kwargs={"dtype": cfg.model.dtype},
        disable_tqdm=True,
        **vllm,
    )


def lora_config(cfg: CoderTrainConfig) -> Any:
    """The peft LoraConfig of `grpo.lora` (None: full fine-tuning)."""
    if cfg.grpo.lora is None:
        return None
    from peft import LoraConfig

    fields = {"r": 16, "lora_alpha": 32, "lora_dropout": 0.05, "target_modules": "all-linear", **cfg.grpo.lora}
    return LoraConfig(task_type="CAUSAL_LM", **fields)


def last_checkpoint(ckpt_dir: Path) -> tuple[str | None, int]:
    """The last checkpoint folder under `ckpt_dir` (None when there is none) and the step it holds (0)."""
    from transformers.trainer_utils import get_last_checkpoint

    last = get_last_checkpoint(str(ckpt_dir)) if ckpt_dir.is_dir() else None
    return last, int(last.rsplit("-", 1)[1]) if last else 0


def save_trained(trainer: Any, lora: bool, final: Path) -> None:
    """Save a GRPOTrainer's policy (LoRA merged when `lora`) and tokenizer to `final`, the step in step.txt."""
    model = trainer.model
    if lora:
        model = trainer.accelerator.unwrap_model(model).merge_and_unload()
    model.save_pretrained(final)
    trainer.processing_class.save_pretrained(final)
    (final / "step.txt").write_text(str(trainer.state.global_step))


def run_grpo(cfg: CoderTrainConfig, run: Path, start: Path, splits: dict[str, list[Task]], save: bool = True) -> Path:
    """GRPO from `start` (resuming from the last checkpoint when there is one); return the final policy folder
    (`save=False`: not written, for timing runs)."""
    from datasets import Dataset
    from transformers import AutoTokenizer
    from trl import GRPOTrainer

    world = int(os.environ.get("WORLD_SIZE", "1"))  # set by torchrun / accelerate launch
    tasks = splits[cfg.grpo.train_split]
    if not tasks:
        raise ValueError(f"no {cfg.grpo.train_split} tasks to train on")
    while len(tasks) < cfg.grpo.prompts_per_step:  # a small pool (co-evolution's band pool): repeat it to fill a step
        tasks = tasks + tasks
    ds = Dataset.from_dict({"prompt": [build_messages(t, cfg.backend) for t in tasks], "task": [t.name for t in tasks]})
    log = StepLog(run)
    reward = run_reward(cfg, run, tasks, cfg.grpo.group_size, log.on_reward)
    last, done = last_checkpoint(run / "checkpoints")
    if done >= cfg.grpo.steps and (run / "policy" / "config.json").exists():
        _log(f"GRPO already ran {done} of {cfg.grpo.steps} steps")
        return run / "policy"
    if _is_main():
        log.truncate(done)
        log.open_writer(purge_step=done + 1)  # events of steps after the checkpoint are redone
    tok = AutoTokenizer.from_pretrained(start)
    trainer = GRPOTrainer(
        model=str(start),
        reward_funcs=[reward],
        args=grpo_args(cfg, run, world),
        train_dataset=ds,
        processing_class=tok,
        peft_config=lora_config(cfg),
        callbacks=[
            log.callback(cfg.grpo.hold_without_signal, cfg.grpo.stop_format_share, cfg.grpo.num_iterations),
            TimeBudget(cfg.grpo.max_minutes, per_batch=cfg.grpo.num_iterations),
        ]
        + anchor_callbacks(cfg, run, splits, tok, log),
    )
    _log(
        f"GRPO on {len(tasks)} {cfg.grpo.train_split} tasks, steps {done + 1}..{cfg.grpo.steps}"
        + (f" (resuming {last})" if last else "")
    )
    try:
        trainer.train(resume_from_checkpoint=last)
    finally:
        reward.close()
    log.close()
    final = run / "policy"
    if save and trainer.accelerator.is_main_process:
        save_trained(trainer, cfg.grpo.lora is not None, final)
    return final


def evaluate(cfg: CoderTrainConfig, run: Path, policy: Path, name: str) -> dict[str, Any]:
    """One-shot evaluation of `policy` on the held-out split through `kernelzero eval`."""
    e = cfg.eval
    suite = run / "tasks" / f"{e.split}.jsonl"
    preset, levels = None, ()
    if e.split == "test" and cfg.tasks.test_suite:
        suite, preset, levels = Path(cfg.tasks.test_suite), cfg.tasks.preset, tuple(cfg.tasks.test_levels or ())
    out = run / "eval" / name
    _log(f"evaluating {policy.name} on {suite.name}: {e.samples} samples per task -> {out}")
    metrics = run_eval(
        EvalConfig(
            suite=str(suite),
            levels=levels,
            preset=preset,
            model=f"hf:{policy}",
            backend=cfg.backend,
            out=str(out),
            samples=e.samples,
            temperature=e.temperature,
            max_tokens=e.max_tokens,
            seed=cfg.seed,
            jobs=cfg.verifier.jobs,
            per_gpu=cfg.verifier.per_gpu,  # as the reward's verifications (1.45 s a sample at 2, H100, 2026-12-07)
            store=cfg.verifier.store or str(run / "verdicts.sqlite"),
        )
    )
    return metrics


def _start(cfg: CoderTrainConfig) -> Path:
    """The run folder, checked against its run.json; CPU threads set as configured."""
    import torch

    if cfg.backend == "cuda" and device_of(cfg) == "cpu" and not cfg.reward.compiled_counts:
        raise ValueError("backend cuda without a GPU: CUDA is only compile-checked here; see reward.compiled_counts")
    run = Path(cfg.run_dir)
    run.mkdir(parents=True, exist_ok=True)
    _check_run_json(cfg, run)
    if cfg.cpu_threads and device_of(cfg) == "cpu":
        torch.set_num_threads(cfg.cpu_threads)  # verifications run beside training: fewer threads fight less
    return run


def prepare_only(cfg: CoderTrainConfig, sft: Sequence[tuple[Task, str]] = (), keep_sft: bool = False) -> Path:
    """Write the tasks and the start policy (warm start included) and stop: run this once before launching
    GRPO on several processes, so that they do not race to write them. `sft`: (task, kernel) pairs the
    warm start fits instead of the sft split (co-evolution's template modules), or beside it with `keep_sft`."""
    run = _start(cfg)
    splits, solutions = prepare_tasks(cfg, run)
    if sft:
        splits["sft"] = (splits["sft"] if keep_sft else []) + [task for task, _ in sft]
        solutions.update({task.name: kernel for task, kernel in sft})
    return prepare_policy(cfg, run, splits, solutions)


def run_coder(cfg: CoderTrainConfig) -> dict[str, Any]:
    """Run (or resume) the whole Coder phase; return a summary (also in `summary.json`)."""
    run = _start(cfg)
    splits, solutions = prepare_tasks(cfg, run)
    start = prepare_policy(cfg, run, splits, solutions)
    main = _is_main()
    if main and cfg.eval.enabled and not (run / "eval" / "warm" / "metrics.json").exists():
        evaluate(cfg, run, start, "warm")
    final = run_grpo(cfg, run, start, splits)
    step = (final / "step.txt").read_text().strip() if (final / "step.txt").exists() else str(cfg.grpo.steps)
    if not main:
        return {"run_dir": str(run), "policy": str(final), "steps": int(step), "report": ""}
    if cfg.eval.enabled:
        evaluate(cfg, run, final, f"step-{step}")
    report = write_train_report(run)
    summary = {"run_dir": str(run), "policy": str(final), "steps": int(step), "report": str(report)}
    (run / "summary.json").write_text(json.dumps(summary, indent=1))
    _log(f"done: {report}")
    return summary
