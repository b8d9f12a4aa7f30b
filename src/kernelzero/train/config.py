"""Configuration of the Coder phase (`kernelzero train coder --config FILE.yaml`): one dataclass per part.

    cfg = load_config("configs/tiny-cpu.yaml")            # CoderTrainConfig; unknown keys or bad values raise
    cfg = load_config("configs/tiny-cpu.yaml", overrides={"run_dir": "/tmp/run", "grpo": {"steps": 3}})

A YAML file holds the sections below (each optional; a missing key keeps its default). The loader names the file,
the section and the valid keys when something is wrong, and checks values that would otherwise only fail deep inside
TRL or on a GPU (vLLM settings included, though vLLM cannot run on the project's machines).
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

LOSS_TYPES = ("grpo", "dr_grpo", "dapo", "bnpo", "cispo", "sapo")
SCALE_REWARDS = ("group", "batch", "none")
VERIFY_VIA = ("pool", "ray", "http")
SPLITS = ("sft", "rl", "test")
VLLM_MODES = ("colocate", "server")
DTYPES = ("float32", "bfloat16", "float16")
BACKENDS = ("triton", "cuda")  # kernel languages the Coder phase trains (prompts, extraction, verifier)


@dataclass(frozen=True)
class TaskConfig:
    """Where tasks come from: the miniature generator (train/miniature.py) split three ways."""

    seed: int = 0  # generator seed: the same seed gives the same tasks
    rows: int = 64  # size globals of every task
    cols: int = 256
    max_steps: int = 4  # longest chain of elementwise steps
    n_sft: int = 1000  # tasks for the supervised warm start
    n_rl: int = 64  # tasks for GRPO (unseen by the warm start)
    n_test: int = 64  # held-out tasks for evaluation (unseen by both)
    # "forward": splits differ by forward only; "api_set": no held-out task's API set (ops and reduction) is in sft
    # or rl (miniature.make_splits); "api_set_rl": nor an rl task's in sft (GRPO on combinations never fitted)
    disjoint: str = "forward"
    suite: str | None = None  # GRPO on this suite instead of the rl split (kz-basic, a KernelBench folder, a .jsonl)
    test_suite: str | None = None  # evaluate on this suite instead of the test split
    test_levels: list[int] | None = None  # only these levels of test_suite (KernelBench: [1, 2]); None: all
    preset: str | None = None  # size preset applied to suite tasks (e.g. "smoke")
    scale: float | None = None  # shrink the size globals of suite tasks by this factor (CPU runs of proposed modules)


@dataclass(frozen=True)
class ModelConfig:
    """The policy: a local model folder, or a Qwen2-architecture model built here with a local tokenizer."""

    path: str | None = None  # a transformers model folder (or a cached hub id); None: build from the fields below
    vocab_size: int = 1024  # byte-level BPE vocabulary fitted on prompts and solutions
    hidden_size: int = 64
    layers: int = 2
    heads: int = 4
    kv_heads: int = 2
    intermediate_size: int = 128
    max_positions: int = 4096
    dtype: str = "float32"  # training dtype: float32, bfloat16, float16
    seed: int = 0  # initialisation seed


@dataclass(frozen=True)
class WarmStartConfig:
    """Supervised fine-tuning on the sft split before GRPO (skipped when steps = 0)."""

    steps: int = 200  # optimizer steps
    batch_size: int = 8
    lr: float = 3e-3
    weight_decay: float = 0.0
    lr_schedule: str = "cosine"  # cosine (decay to 10%) or constant, both after a 5% linear warm-up
    adam_epsilon: float = 1e-8  # AdamW's eps (as grpo.adam_epsilon)
    stop_loss: float | None = None  # stop once a step's training loss is below this
    max_minutes: float | None = None  # stop (and save) after this much time
    eval_every: int = 0  # > 0: every this many steps, held-out pass@1 on `probe_tasks`; stop once >= band floor
    probe_tasks: int = 32  # tasks of the rl split probed (the sft split when rl is empty)
    probe_samples: int = 2  # samples per probed task, at the GRPO temperature
    stop_band: tuple[float, float] = (0.2, 0.6)  # the wanted start: stop at the first probe >= 0.2 (logs if <= 0.6)


@dataclass(frozen=True)
class GRPOSettings:
    """The GRPO run on TRL's GRPOTrainer (names follow GRPOConfig where they map one to one)."""

    steps: int = 20  # optimizer steps (the paper: 20 per round)
    prompts_per_step: int = 8  # distinct tasks per step
    group_size: int = 8  # completions per task (TRL's num_generations), >= 2
    lr: float = 1e-5
    adam_epsilon: float = 1e-8  # AdamW's eps: far below the gradients (1e-8), every weight moves ~lr a step (README)
    temperature: float = 1.0
    max_completion_length: int = 1024
    loss_type: str = "dapo"  # one of LOSS_TYPES
    scale_rewards: str = "group"  # group, batch, or none (Dr. GRPO)
    kl_beta: float = 0.0  # TRL's beta: KL weight against the start model (0: no reference model)
    epsilon: float = 0.2  # clip range
    num_iterations: int = 1  # updates per generation batch (mu)
    mask_truncated: bool = False  # TRL's mask_truncated_completions: a completion cut at the length limit adds no loss
    hold_without_signal: bool = True  # skip the updates of a batch whose groups all have equal rewards (train/logs.py)
    stop_format_share: float = 0.0  # > 0: stop after two batches in a row with more format_error (train/logs.py)
    anchor_tasks: int = 0  # log the NLL of this many held-out tasks' known kernels every step (train/drift.py)
    gradient_accumulation_steps: int = 1  # micro-batches of a step's update (a step: prompts x group completions)
    lora: dict[str, Any] | None = None  # None: full fine-tuning; else peft LoraConfig fields (r, lora_alpha, ...)
    gradient_checkpointing: bool = False
    save_steps: int = 1  # checkpoint every this many steps (resume after a kill starts from the last)
    save_total_limit: int = 2
    train_split: str = "rl"  # which split GRPO trains on: rl (unseen by the warm start) or sft
    max_minutes: float | None = None  # stop cleanly (with a checkpoint) after this much training time
    use_vllm: bool = False  # vLLM generation (checked only; GPU runs here use HF generation)
    vllm_mode: str = "colocate"  # colocate or server
    vllm_gpu_memory_utilization: float = 0.3
    vllm_tensor_parallel_size: int = 1
    vllm_server_base_url: str | None = None  # server mode: http://host:port


TIMED_PASSES = ("gated", "one_pass")  # reward.timed_pass
DISJOINT = ("forward", "api_set", "api_set_rl")  # tasks.disjoint


@dataclass(frozen=True)
class RewardConfig:
    """CA-GRPO (kernelzero.rewards.ca_grpo_rewards) and its ablation switches."""

    alpha: float = 0.5  # gate threshold on the group's correctness rate
    beta: float = 0.1  # weight of the speedup term
    gate: bool = True  # False: the speedup always counts (ablation "gate off")
    correctness_only: bool = False  # True: beta is ignored (ablation "correctness only")
    baseline: str = "eager"  # speedup against PyTorch eager or torch.compile ("compile": slower verification)
    form: str = "log"  # speedup normalisation (rewards.speedup_score): log or linear
    cap: float = 4.0  # speedup at which S reaches 1
    compiled_counts: bool = False  # CUDA on CPU: c_i = 1 for `compiled` (static checks + nvcc for sm_90; nothing ran)
    # With the gate on, how the gate-open groups' speed is measured (train/reward.py): "gated" checks every sample's
    # correctness first and verifies the gate-open groups' correct samples again with timing; "one_pass" times every
    # correct sample in its one verification (the judge times only what passed correctness) and keeps the speed
    # term where the gate opens: no second verification, at the cost of timing the gate-shut groups' correct samples
    timed_pass: str = "gated"


@dataclass(frozen=True)
class VerifierConfig:
    """How completions are verified: the local pool, a Ray cluster, or the HTTP service (`kernelzero serve`)."""

    via: str = "pool"  # pool, ray or http
    url: str | None = None  # http: the service's base URL
    token: str | None = None  # http: bearer token
    ray_address: str | None = None  # ray: the cluster's address
    jobs: int = 2  # pool without a GPU: verifications side by side
    per_gpu: int = 4  # pool with GPUs: verifications in flight per GPU
    standby: int | None = None  # pool: judges kept ready per GPU between steps (None: per_gpu; 0: none)
    serves: int | None = None  # pool: requests each standby judge serves (None: KZ_STANDBY_SERVES, else 8)
    timeout_s: float = 900.0  # http: wait at most this long for one step's verdicts
    store: str | None = None  # verdict store file (identical requests answered once); None: the run's own
    options: dict[str, Any] = field(default_factory=dict)  # VerifyOptions overrides (profile stays "default")


@dataclass(frozen=True)
class EvalSettings:
    """The one-shot held-out evaluation at the end (through `kernelzero eval`)."""

    enabled: bool = True
    split: str = "test"  # which split is evaluated
    samples: int = 10  # samples per task (pass@1/5/10 need 10)
    temperature: float = 1.0
    max_tokens: int = 1024
    batch_size: int = 64  # generation batch of the in-memory probe (bench/train_gpu.py; eval batches its own)
    # The in-memory probe times the correct samples of gate-open groups for a held-out mean reward; off (default):
    # correctness only, pass@1 and the gate's share without holding the GPU alone (the mean reward is the steps')
    probe_timed: bool = False


@dataclass(frozen=True)
class CoderTrainConfig:
    """One Coder phase: warm start (optional), CA-GRPO steps, held-out evaluation, report."""

    run_dir: str = "runs/coder"  # everything the run writes goes here
    seed: int = 0
    backend: str = "triton"  # kernel language asked for: triton or cuda (the miniature's kernels are Triton)
    device: str = "auto"  # training device: auto, cpu or cuda
    cpu_threads: int | None = None  # torch threads when training on CPU (None: torch's default)
    tasks: TaskConfig = field(default_factory=TaskConfig)
    model: ModelConfig = field(default_factory=ModelConfig)
    warm_start: WarmStartConfig = field(default_factory=WarmStartConfig)
    grpo: GRPOSettings = field(default_factory=GRPOSettings)
    reward: RewardConfig = field(default_factory=RewardConfig)
    verifier: VerifierConfig = field(default_factory=VerifierConfig)
    eval: EvalSettings = field(default_factory=EvalSettings)


# sections of a co-evolution config (train/coevolve_config.py) that the Coder phase leaves to that loader
OTHER_PHASES = ("proposer", "coevolution")

SECTIONS = {
    "tasks": TaskConfig,
    "model": ModelConfig,
    "warm_start": WarmStartConfig,
    "grpo": GRPOSettings,
    "reward": RewardConfig,
    "verifier": VerifierConfig,
    "eval": EvalSettings,
}


def _check_type(where: str, value: Any, default: Any, annotation: str) -> Any:
    """Coerce YAML scalars to the field's type (ints for floats, lists for tuples); raise on mismatches."""
    if value is None:
        if "None" in annotation:
            return None
        raise ValueError(f"{where} may not be null")
    if isinstance(default, bool) or annotation == "bool":
        if not isinstance(value, bool):
            raise ValueError(f"{where} must be true or false, got {value!r}")
        return value
    if annotation.startswith("float") or isinstance(default, float):
        if isinstance(value, str):  # YAML 1.1 reads 3e-4 (no dot) as a string
            try:
                return float(value)
            except ValueError:
                pass
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            raise ValueError(f"{where} must be a number, got {value!r}")
        return float(value)
    if annotation.startswith("int") or isinstance(default, int):
        if isinstance(value, bool) or not isinstance(value, int):
            raise ValueError(f"{where} must be an integer, got {value!r}")
        return value
    if annotation.startswith("str"):
        if not isinstance(value, str):
            raise ValueError(f"{where} must be a string, got {value!r}")
        return value
    if annotation.startswith("tuple"):
        if not isinstance(value, (list, tuple)) or len(value) != 2:
            raise ValueError(f"{where} must be a list of two numbers, got {value!r}")
        return tuple(float(v) for v in value)
    if annotation.startswith("dict") and not isinstance(value, dict):
        raise ValueError(f"{where} must be a mapping, got {value!r}")
    return value


def build_section(cls: type, data: dict[str, Any], where: str) -> Any:
    """The dataclass `cls` from a config mapping; unknown keys and wrongly typed values raise naming `where`."""
    if not isinstance(data, dict):
        raise ValueError(f"{where} must be a mapping, got {type(data).__name__}")
    fields = {f.name: f for f in dataclasses.fields(cls)}
    unknown = sorted(set(data) - set(fields))
    if unknown:
        raise ValueError(f"{where}: unknown key(s) {unknown}; valid: {sorted(fields)}")
    kwargs = {}
    for name, value in data.items():
        f = fields[name]
        if name in SECTIONS and cls is CoderTrainConfig:
            kwargs[name] = build_section(SECTIONS[name], value or {}, f"{where}.{name}")
            continue
        default = f.default if f.default is not dataclasses.MISSING else None
        kwargs[name] = _check_type(f"{where}.{name}", value, default, str(f.type))
    return cls(**kwargs)


def _merge(base: dict[str, Any], extra: dict[str, Any]) -> dict[str, Any]:
    out = dict(base)
    for key, value in extra.items():
        out[key] = _merge(out.get(key) or {}, value) if isinstance(value, dict) and key in SECTIONS else value
    return out


def _one_of(where: str, value: str, valid: tuple[str, ...]) -> None:
    if value not in valid:
        raise ValueError(f"{where} must be one of {', '.join(valid)}, got {value!r}")


def _backend_checks(cfg: CoderTrainConfig) -> list[tuple[bool, str]]:
    """What a CUDA Coder needs: no warm start on the miniature's Triton kernels, and on CPU the explicit
    compile-check reward (`reward.compiled_counts`, with the compile check on)."""
    r, cuda_cpu = cfg.reward, cfg.backend == "cuda" and cfg.device == "cpu"
    return [
        (
            cfg.backend == "triton" or cfg.warm_start.steps == 0 or bool(cfg.model.path),
            "the warm start fits the miniature's Triton kernels: backend cuda needs warm_start.steps 0 (or model.path)",
        ),
        (
            not cuda_cpu or r.compiled_counts,
            "backend cuda on CPU: the verifier only compile-checks CUDA there (status `compiled`, nothing runs); set "
            "reward.compiled_counts: true to train on that signal",
        ),
        (
            not r.compiled_counts or cuda_cpu,
            "reward.compiled_counts is for backend cuda with device cpu (a GPU verifies CUDA kernels for real)",
        ),
        (
            not r.compiled_counts or cfg.verifier.options.get("compile_check", True),
            "reward.compiled_counts needs the compile check (verifier.options.compile_check true): without it "
            "`compiled` means only that the module imported",
        ),
    ]


def validate(cfg: CoderTrainConfig, where: str = "config") -> CoderTrainConfig:
    """Check values TRL or the verifier would reject late; return the config unchanged."""
    g, r, v, m, t = cfg.grpo, cfg.reward, cfg.verifier, cfg.model, cfg.tasks
    _one_of(f"{where}.grpo.loss_type", g.loss_type, LOSS_TYPES)
    _one_of(f"{where}.grpo.scale_rewards", g.scale_rewards, SCALE_REWARDS)
    _one_of(f"{where}.grpo.train_split", g.train_split, ("sft", "rl"))
    _one_of(f"{where}.grpo.vllm_mode", g.vllm_mode, VLLM_MODES)
    _one_of(f"{where}.eval.split", cfg.eval.split, SPLITS)
    _one_of(f"{where}.verifier.via", v.via, VERIFY_VIA)
    _one_of(f"{where}.model.dtype", m.dtype, DTYPES)
    _one_of(f"{where}.device", cfg.device, ("auto", "cpu", "cuda"))
    _one_of(f"{where}.backend", cfg.backend, BACKENDS)
    _one_of(f"{where}.reward.baseline", r.baseline, ("eager", "compile"))
    _one_of(f"{where}.reward.form", r.form, ("log", "linear"))
    _one_of(f"{where}.reward.timed_pass", r.timed_pass, TIMED_PASSES)
    _one_of(f"{where}.tasks.disjoint", cfg.tasks.disjoint, DISJOINT)
    _one_of(f"{where}.warm_start.lr_schedule", cfg.warm_start.lr_schedule, ("cosine", "constant"))
    checks = [
        (g.group_size >= 2, "grpo.group_size must be >= 2 (GRPO compares samples within a group)"),
        (g.steps >= 1 and g.prompts_per_step >= 1, "grpo.steps and grpo.prompts_per_step must be >= 1"),
        (g.max_completion_length >= 1 and g.temperature > 0, "grpo.max_completion_length >= 1, temperature > 0"),
        (g.lr > 0 and cfg.warm_start.lr > 0, "learning rates must be > 0"),
        (g.adam_epsilon > 0 and cfg.warm_start.adam_epsilon > 0, "grpo.adam_epsilon must be > 0 (and warm_start's)"),
        (g.save_steps >= 1 and g.anchor_tasks >= 0, "grpo.save_steps must be >= 1, grpo.anchor_tasks >= 0"),
        (0.0 <= g.stop_format_share < 1.0, "grpo.stop_format_share must lie in [0, 1) (0: off)"),
        (
            g.num_iterations >= 1 and g.epsilon > 0 and g.save_steps % max(1, g.num_iterations) == 0,
            "grpo: num_iterations >= 1, epsilon > 0, save_steps a multiple of num_iterations (a resume starts a batch)",
        ),
        (0.0 < g.vllm_gpu_memory_utilization <= 1.0, "grpo.vllm_gpu_memory_utilization must lie in (0, 1]"),
        (g.vllm_tensor_parallel_size >= 1, "grpo.vllm_tensor_parallel_size must be >= 1"),
        (not (g.use_vllm and g.vllm_mode == "server" and not g.vllm_server_base_url), "vllm server mode needs url"),
        (0.0 <= r.alpha <= 1.0 and r.beta >= 0 and r.cap > 1.0, "reward: alpha in [0, 1], beta >= 0, cap > 1"),
        (v.via != "http" or bool(v.url), "verifier.via http needs verifier.url"),
        (v.per_gpu >= 1 and (v.standby is None or v.standby >= 0), "verifier: per_gpu >= 1, standby >= 0"),
        (v.serves is None or v.serves >= 1, "verifier.serves: requests a standby judge serves, at least 1"),
        (v.options.get("profile", "default") == "default", "verifier.options.profile: CA-GRPO reads 'default'"),
        (v.options.get("policy", "strict") == "strict", "verifier.options.policy: CA-GRPO reads 'strict'"),
        (m.hidden_size % m.heads == 0 and m.heads % m.kv_heads == 0, "model: heads divide hidden, kv_heads heads"),
        ((m.hidden_size // m.heads) % 2 == 0, "model: the head dimension must be even"),
        (min(t.n_sft, t.n_test) >= 1 and t.n_rl >= 0, "tasks: n_sft and n_test >= 1, n_rl >= 0"),
        (g.train_split != "rl" or t.n_rl >= 1 or bool(t.suite), "grpo.train_split rl needs tasks.n_rl or suite"),
        (cfg.eval.samples >= 1, "eval.samples must be >= 1"),
        (t.test_levels is None or bool(t.test_suite), "tasks.test_levels filters tasks.test_suite: set it too"),
        (
            t.test_levels is None or (bool(t.test_levels) and all(x in (1, 2, 3) for x in t.test_levels)),
            "tasks.test_levels must be a non-empty list of KernelBench levels 1, 2, 3",
        ),
    ]
    for ok, message in checks + _backend_checks(cfg):
        if not ok:
            raise ValueError(f"{where}: {message}")
    if refused := service_refusals(v.options) if v.via == "http" else []:
        raise ValueError(f"{where}: the verification service (verifier.via http) would refuse: " + "; ".join(refused))
    known = {"r", "lora_alpha", "lora_dropout", "target_modules", "bias"}
    if unknown := sorted(set(g.lora or {}) - known):
        raise ValueError(f"{where}.grpo.lora: unknown key(s) {unknown}; valid: {sorted(known)}")
    return cfg


def service_refusals(options: dict[str, Any]) -> list[str]:
    """Why `kernelzero serve` would refuse these verifier options from a client (service/schema.py's OptionsIn,
    checked as the reward sends them: `policy` left out, the profile `default`); [] when it would take them."""
    from pydantic import ValidationError

    from kernelzero.service.schema import CLIENT_OPTIONS, OptionsIn

    try:
        OptionsIn.model_validate({"profile": "default", **{k: x for k, x in options.items() if k != "policy"}})
    except ValidationError as exc:
        out = []
        for err in exc.errors(include_input=False, include_url=False):
            name = "verifier.options." + ".".join(str(part) for part in err["loc"])
            if err["type"] == "extra_forbidden":
                out.append(
                    f"{name} is server configuration (set it where `kernelzero serve` runs); a client may set "
                    f"only {', '.join(CLIENT_OPTIONS)}"
                )
            else:
                out.append(f"{name}: {err['msg']}")
        return out
    return []


def load_config(path: str | Path, overrides: dict[str, Any] | None = None) -> CoderTrainConfig:
    """Read a YAML config (plus `overrides`, merged per section) into a validated CoderTrainConfig."""
    path = Path(path)
    if not path.is_file():
        raise FileNotFoundError(f"{path}: no such config file")
    try:
        data = yaml.safe_load(path.read_text()) or {}
    except yaml.YAMLError as exc:
        raise ValueError(f"{path}: not valid YAML ({exc})") from None
    if not isinstance(data, dict):
        raise ValueError(f"{path}: the top level must be a mapping of sections")
    data = {k: v for k, v in _merge(data, overrides or {}).items() if k not in OTHER_PHASES}
    return validate(build_section(CoderTrainConfig, data, str(path)), str(path))


def to_plain(cfg: CoderTrainConfig) -> dict[str, Any]:
    """The config as plain data (for run.json and the resume check)."""
    return dataclasses.asdict(cfg)
