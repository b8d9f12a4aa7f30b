"""The Proposer phase of one co-evolution round: GRPO on TRL with the Frontier Reward, then the Coder's band pool.

    kernelzero train proposer --config RUN/config.yaml --round 1        # what run_coevolution starts, one process
    run_proposer_phase(cfg, round_no=1, start="RUN/proposer-init/warm_start", coder="RUN/coder-init/warm_start")

The dataset is the round's API sets (coevolve_pool.round_inputs), each prompt the Proposer prompt of
proposer/prompts.py (with the Coder's failure notes for frontier sets). TRL's GRPOTrainer gets the reward
function of train/proposer_reward.py; checkpoints go to `round-r/proposer/checkpoints/` and a killed phase
resumes from the last one (the records of later steps are dropped first, so no step appears twice). The final
policy (LoRA merged) is saved in `round-r/proposer/policy/`; the band pool in `round-r/coder_tasks.jsonl`.
With `update=False` (a frozen Proposer) the same steps run without an optimizer: prompts are sampled from the
policy and scored, and nothing is trained.

`prepare_proposer_policy` builds the tiny Proposer of the CPU and miniature configs (train/tiny.py) and fits
it briefly on template proposals (proposer/generator.py), so that some of its proposals pass admission. Its
follow check (`follow_check`: sampled proposals through admission's syntax stage, sets the warm start saw and
sets it did not apart) is written to `proposer-init/follow.json`; with `proposer.warm_start.eval_every` > 0 it is
also the warm start's probe (the share of seen sets followed, logged as `probe_pass1`), which stops the fit at
the first probe at or above `stop_band`'s floor.
"""

from __future__ import annotations

import dataclasses
import json
import os
import random
from pathlib import Path
from typing import Any

from kernelzero.proposer.prompts import build_messages
from kernelzero.train.coevolve_config import CoevolveConfig
from kernelzero.train.coevolve_pool import round_inputs, write_band_pool
from kernelzero.train.logs import StepLog, TimeBudget
from kernelzero.train.proposer_reward import CoderSolver, ProposerReward, truncate_step_files
from kernelzero.train.report import read_jsonl


class ProposerStepLog(StepLog):
    """steps.jsonl of the Proposer: the reward's statistics plus TRL's metrics and the time split.

    `time_generate_s` is the Proposer's own generation, `time_verify_s` the whole reward call, split further
    into `time_admit_s`, `time_solve_generate_s` (the Coder's N samples) and `time_solve_verify_s`;
    `try_statuses` counts the verdicts of the Coder's tries at the step's admitted modules (why p is what it is)."""

    def on_reward(self, info: dict[str, Any]) -> None:
        self.pending = {**info["stats"], "reward_called_at": info["reward_called_at"], "verify_s": info["verify_s"]}
        self.signal = info["stats"].get("groups_with_signal")  # a batch without holds the weights (train/logs.py)


def _log(msg: str) -> None:
    print(f"[train proposer] {msg}", flush=True)


def prepare_proposer_policy(cfg: CoevolveConfig, root: Path) -> Path:
    """The Proposer's start policy: `proposer.model.path`, or a tiny model built and warm-started here."""
    from transformers import AutoModelForCausalLM, AutoTokenizer

    from kernelzero.proposer.generator import template_modules
    from kernelzero.train.coder import device_of
    from kernelzero.train.tiny import build_model, build_tokenizer, count_parameters, save_policy
    from kernelzero.train.warm_start import encode_examples, warm_start

    p = cfg.proposer
    if p.model.path:
        return Path(p.model.path)
    folder = root / "proposer-init"
    init, warm = folder / "policy_init", folder / "warm_start"
    if (warm if p.warm_start.steps else init).joinpath("config.json").exists():
        return warm if p.warm_start.steps else init
    pool = read_jsonl(root / "pool.jsonl")
    sets = template_modules(pool, p.warm_start_sets, p.warm_start_variants)
    # (messages, module source) of template proposals, warm_start_variants per API set
    pairs = [(build_messages(apis), source) for apis, modules in sets for source in sorted(m for _, m in modules)]
    if not pairs:
        raise ValueError("the template generator writes no module for any API set of the pool (template_only?)")
    texts = [m["content"] for msgs, _ in pairs for m in msgs] + [s for _, s in pairs]
    tok = build_tokenizer(texts, p.model.vocab_size)
    model = build_model(p.model, tok)
    save_policy(model, tok, init)
    _log(f"built a {count_parameters(model):,}-parameter Proposer, vocabulary {len(tok)} -> {init}")
    if not p.warm_start.steps:
        return init
    tok = AutoTokenizer.from_pretrained(init)
    model = AutoModelForCausalLM.from_pretrained(init, dtype="float32")
    examples = encode_examples(tok, pairs)
    _log(f"warm start on {len(examples)} template proposals of {len(sets)} API sets")
    seen, probed = {tuple(apis) for apis, _ in sets}, {}

    def probe(m: Any) -> float:  # warm_start's probe (eval_every > 0): the share of seen sets followed
        probed["last"] = follow_check(m, tok, pool, seen, cfg)
        _log(f"follow probe: {probed['last']['summary']}")
        return probed["last"]["seen_share"]

    probing = probe if p.warm_start.eval_every > 0 else None
    history = warm_start(model, tok, examples, p.warm_start, device_of(cfg.coder), cfg.coder.seed, probe=probing)
    (folder / "warm_start.jsonl").write_text("".join(json.dumps(h) + "\n" for h in history))
    tail = [h["loss"] for h in history[-20:]]
    _log(f"warm start: {len(history)} steps, mean loss of the last {len(tail)} {sum(tail) / len(tail):.4f}")
    # the fit's last step probed: that check is of the final policy already
    follow = probed["last"] if "probe_pass1" in history[-1] else follow_check(model, tok, pool, seen, cfg)
    (folder / "follow.json").write_text(json.dumps(follow, indent=1) + "\n")
    _log(f"warm start follows the asked set: {follow['summary']}")
    save_policy(model.to("cpu"), tok, warm)
    return warm


def follow_check(model: Any, tok: Any, pool: list[dict[str, Any]], seen: set[tuple], cfg: CoevolveConfig) -> dict:
    """How often one sampled proposal per API set of `pool` (at most 24 sets the warm start saw and 8 it did not; the
    phase's temperature) passes admission's syntax stage, the two kinds of set apart: a Proposer that writes other
    APIs than asked (missing_api) shows here, before any GPU time goes to its GRPO."""
    from collections import Counter

    from kernelzero.coder import extract_code
    from kernelzero.proposer.admit import check_syntax
    from kernelzero.train.probe import sample_completions

    g = cfg.proposer.grpo
    rows = [r for r in pool if tuple(r["apis"]) in seen][:24] + [r for r in pool if tuple(r["apis"]) not in seen][:8]
    texts = [
        tok.apply_chat_template(build_messages(r["apis"]), tokenize=False, add_generation_prompt=True) for r in rows
    ]
    model.eval()
    gens = sample_completions(model, tok, texts, 1, g.temperature, g.max_completion_length, seed=cfg.coder.seed)
    counts: dict[str, Counter] = {"seen": Counter(), "unseen": Counter()}
    for row, (text, _) in zip(rows, gens):
        reason, _, _ = check_syntax(extract_code(text), tuple(row["apis"]), cfg.proposer.admission.max_extra)
        counts["seen" if tuple(row["apis"]) in seen else "unseen"][reason or "passed"] += 1
    parts = [f"{k} sets {c['passed']} of {sum(c.values())}" for k, c in counts.items() if c]
    rejected = Counter(r for c in counts.values() for r in c.elements() if r != "passed")
    summary = f"{', '.join(parts)} pass the syntax stage" + (f"; rejected: {dict(rejected)}" if rejected else "")
    share = counts["seen"]["passed"] / max(1, sum(counts["seen"].values()))
    found = {"seen": dict(counts["seen"]), "unseen": dict(counts["unseen"]), "rejected": dict(rejected)}
    return {**found, "seen_share": share, "summary": summary}


def _dataset(inputs: Path, min_rows: int) -> Any:
    from datasets import Dataset

    rows = read_jsonl(inputs)
    if not rows:
        raise ValueError(f"{inputs}: no API sets")
    while len(rows) < min_rows:  # a short frontier: repeat it so that a step has enough distinct prompts
        rows = rows + rows
    return Dataset.from_dict(
        {
            "prompt": [build_messages(r["apis"], r.get("failure_notes") or ()) for r in rows],
            "apis": [list(r["apis"]) for r in rows],
            "origin": [r.get("origin", "") for r in rows],
        }
    )


def _phase_cfg(cfg: CoevolveConfig, phase_dir: Path) -> Any:
    """The Coder-shaped config coder.grpo_args reads, carrying the Proposer's model and GRPO settings."""
    return dataclasses.replace(cfg.coder, run_dir=str(phase_dir), grpo=cfg.proposer.grpo, model=cfg.proposer.model)


def run_proposer_phase(cfg: CoevolveConfig, round_no: int, start: str, coder: str, update: bool = True) -> Path:
    """Run (or resume) the round's Proposer phase; return the folder of the policy it ends with."""
    from kernelzero.service.store import VerdictStore

    if int(os.environ.get("WORLD_SIZE", "1")) > 1:
        raise ValueError("the Proposer phase runs as one process (its reward admits and solves in that process)")
    root = Path(cfg.coder.run_dir)
    phase_dir = root / f"round-{round_no}" / "proposer"
    phase_dir.mkdir(parents=True, exist_ok=True)
    inputs = round_inputs(cfg, root, round_no, coder)
    store = VerdictStore(cfg.coder.verifier.store or root / "verdicts.sqlite")
    log = ProposerStepLog(phase_dir)
    reward = ProposerReward(cfg, round_no, root, phase_dir, CoderSolver(cfg, coder, store), start, log.on_reward)
    g = cfg.proposer.grpo
    ds = _dataset(inputs, g.prompts_per_step)
    if update:
        final = _train(cfg, round_no, Path(start), phase_dir, ds, reward, log)
    else:
        final = _collect(cfg, round_no, Path(start), phase_dir, ds, reward, log)
    write_band_pool(cfg, root, round_no)
    return final


def _train(cfg: CoevolveConfig, round_no: int, start: Path, phase_dir: Path, ds: Any, reward: Any, log: Any) -> Path:
    from transformers import AutoTokenizer
    from trl import GRPOTrainer

    from kernelzero.train.coder import grpo_args, last_checkpoint, lora_config, save_trained

    phase_cfg = _phase_cfg(cfg, phase_dir)
    last, done = last_checkpoint(phase_dir / "checkpoints")
    final = phase_dir / "policy"
    if done >= cfg.proposer.grpo.steps and (final / "config.json").exists():
        return final
    truncate_step_files(Path(cfg.coder.run_dir), phase_dir, round_no, done)
    log.truncate(done)
    log.open_writer(purge_step=done + 1)
    trainer = GRPOTrainer(
        model=str(start),
        reward_funcs=[reward],
        args=grpo_args(phase_cfg, phase_dir, 1),
        train_dataset=ds,
        processing_class=AutoTokenizer.from_pretrained(start),
        peft_config=lora_config(phase_cfg),
        callbacks=[
            log.callback(cfg.proposer.grpo.hold_without_signal),
            TimeBudget(cfg.proposer.grpo.max_minutes, per_batch=cfg.proposer.grpo.num_iterations),
        ],
    )
    _log(
        f"round {round_no}: GRPO on {len(ds)} API sets, steps {done + 1}..{cfg.proposer.grpo.steps}"
        + (f" (resuming {last})" if last else "")
    )
    trainer.train(resume_from_checkpoint=last)
    log.close()
    save_trained(trainer, cfg.proposer.grpo.lora is not None, final)
    return final


def _collect(cfg: CoevolveConfig, round_no: int, start: Path, phase_dir: Path, ds: Any, reward: Any, log: Any) -> Path:
    """A frozen Proposer: the phase's steps of sampling and scoring, no update (redone whole after a kill)."""
    import time

    from transformers import AutoModelForCausalLM, AutoTokenizer

    from kernelzero.train.probe import sample_completions

    g = cfg.proposer.grpo
    truncate_step_files(Path(cfg.coder.run_dir), phase_dir, round_no, 0)
    log.truncate(0)
    tok = AutoTokenizer.from_pretrained(start)
    model = AutoModelForCausalLM.from_pretrained(start)
    rng = random.Random(cfg.coder.seed + round_no)
    for step in range(1, g.steps + 1):
        began = time.time()
        rows = [ds[i] for i in rng.sample(range(len(ds)), min(g.prompts_per_step, len(ds)))]
        texts = [tok.apply_chat_template(r["prompt"], tokenize=False, add_generation_prompt=True) for r in rows]
        gens = sample_completions(model, tok, texts, g.group_size, g.temperature, g.max_completion_length, seed=step)
        reward.collect_step = step
        rewards = reward(
            prompts=[r["prompt"] for r in rows for _ in range(g.group_size)],
            completions=[text for text, _ in gens],
            apis=[r["apis"] for r in rows for _ in range(g.group_size)],
            origin=[r["origin"] for r in rows for _ in range(g.group_size)],
        )
        log.step_started, log.step_ended = began, time.time()
        log.write(step, {"reward": sum(rewards) / len(rewards)})
    return start
