"""Configuration of KernelZero's co-evolution (`kernelzero train --config FILE.yaml`) and its dry run.

    cfg = load_coevolve_config("configs/tiny-cpu.yaml")              # CoevolveConfig; bad keys or values raise
    problems = dry_run(cfg)                                          # [] when the config can run here

One YAML file holds everything: the Coder phase's sections (train/config.py: run_dir, tasks, model, warm_start,
grpo, reward, verifier, eval), a `proposer:` section (this file's ProposerConfig, with sub-sections `model`,
`warm_start`, `grpo` of the same shapes as the Coder's, and `pool`, `admission`, `reward`, `solve`) and a
`coevolution:` section (rounds and ablation switches). `kernelzero train coder` reads the same file and ignores
the last two. `coevolution.run_dir` (else the top-level `run_dir`) is the run folder of the whole loop; each
phase gets a folder inside it.

The dry run needs no GPU and loads no model: it checks the config, that every model path is a local folder
with a `config.json` or shaped like a hub id (`org/name`), that the benchmark index admission de-duplicates
against (`proposer.admission.benchmark_index`, a KernelBench jsonl) loads with tasks (config load already fails,
naming it, when the file is missing, unless `benchmark_dedup: false`), and, when verification goes through HTTP,
that the service answers its health check.
"""

from __future__ import annotations

import dataclasses
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from kernelzero.train.config import (
    CoderTrainConfig,
    GRPOSettings,
    ModelConfig,
    WarmStartConfig,
    build_section,
    load_config,
)

INPUTS = ("cooccurrence", "frontier", "mix")
HUB_ID = re.compile(r"^[A-Za-z0-9][\w.-]*/[\w.-]+$")


@dataclass(frozen=True)
class PoolSettings:
    """Where the Proposer's API sets come from (proposer/corpus.py, cooccur.py, frontier.py)."""

    corpus: str = "default"  # catalog corpus spec: default (torch.nn + transformers + kz-basic), kz-basic, a folder
    pairs: int = 2000  # co-occurrence pairs in the round-1 pool (the paper: 2,000 pairs and 2,000 triples)
    triples: int = 2000
    template_only: bool = False  # only APIs the template generator writes (the warm start needs them)
    vocabulary: list[str] | None = None  # only these APIs (None: every sampleable API of the catalog)
    temperature: float = 1.0  # co-occurrence sampling temperature
    seed: int = 0
    inputs: str = "mix"  # rounds > 1: cooccurrence only, frontier only, or a mix
    frontier_share: float = 0.5  # share of frontier sets in a mixed pool
    threshold: float = 0.5  # modules the Coder solves less often than this are the frontier


@dataclass(frozen=True)
class AdmissionSettings:
    """proposer/admit.py's AdmitOptions for admission inside the Proposer's reward."""

    device: str = "auto"  # where proposed modules run: auto, cuda or cpu
    jobs: int = 2  # proposals checked side by side
    timeout_s: float = 180.0
    mem_gb: float = 16.0
    scale: float | None = None  # shrink size globals before running (CPU runs)
    max_extra: int = 2
    window_us: tuple[float, float] = (50.0, 20000.0)  # eager forward time window on a GPU (microseconds)
    benchmark_index: str | None = "../shared/data/kernelbench.jsonl"  # KernelBench jsonl: its tasks never admitted
    benchmark_dedup: bool = True  # false: no benchmark de-duplication (every proposal record of the run says so)
    benchmarks: list[str] | None = None  # more suites never to duplicate


@dataclass(frozen=True)
class FrontierRewardSettings:
    """kernelzero.rewards.frontier_reward and the success band of the Coder's task pool."""

    form: str = "linear"  # linear (1 - 2|p - 0.5|), variance or unbiased
    rho: float = -1.0  # reward of a proposal that fails admission
    duplicate_penalty: float = 0.0  # > 0: repeated near-duplicates within a step lose this much
    band: tuple[float, float] = (0.25, 0.75)  # admitted modules with p in the band join the Coder's pool
    min_tasks: int = 8  # a band with fewer modules is topped up with the nearest admitted ones


@dataclass(frozen=True)
class SolveSettings:
    """How the frozen Coder solves admitted modules (p = correct share of N samples)."""

    samples: int = 8  # N
    model: str | None = None  # a generation spec (openai:M for a served Coder); None: hf on the Coder checkpoint
    device: str | None = None  # hf: where the Coder generates (None: cuda when available); e.g. cuda:1
    temperature: float = 1.0
    max_tokens: int = 1024
    batch_size: int = 16  # hf generation batch


@dataclass(frozen=True)
class ProposerConfig:
    """The Proposer phase: its policy, warm start, GRPO settings and reward pipeline."""

    model: ModelConfig = field(default_factory=ModelConfig)
    # eval_every > 0 probes the share of sets followed (proposer_phase.follow_check), not pass@1
    warm_start: WarmStartConfig = field(default_factory=lambda: WarmStartConfig(steps=0))
    warm_start_sets: int = 4  # API sets whose template modules the warm start fits (tiny models)
    warm_start_variants: int = 1  # template modules per set (seeds 0..n-1: another order of steps, other shapes)
    grpo: GRPOSettings = field(default_factory=GRPOSettings)
    pool: PoolSettings = field(default_factory=PoolSettings)
    admission: AdmissionSettings = field(default_factory=AdmissionSettings)
    reward: FrontierRewardSettings = field(default_factory=FrontierRewardSettings)
    solve: SolveSettings = field(default_factory=SolveSettings)


@dataclass(frozen=True)
class LoopSettings:
    """The alternation and its ablation switches."""

    rounds: int = 4  # the paper: 4 rounds of 20 steps per phase
    freeze_proposer_after: int | None = None  # no Proposer update after this round (0: never trained)
    coder_warm_start: bool = True  # the Coder starts from the warm start of the Coder config (tiny models)
    coder_warm_templates: bool = False  # that warm start fits the Proposer's warm-start template modules instead
    coder_warm_keep_sft: bool = False  # ...beside the Coder config's sft split rather than instead of it
    python: str | None = None  # interpreter of the phase processes (None: this one)
    run_dir: str | None = None  # the loop's run folder (None: the top-level run_dir); --set run_dir=... wins


@dataclass(frozen=True)
class CoevolveConfig:
    """The whole loop: the Coder phase's config, the Proposer's and the loop's."""

    coder: CoderTrainConfig
    proposer: ProposerConfig
    loop: LoopSettings
    path: str = ""  # the YAML file it was read from


PROPOSER_SECTIONS = {
    "model": ModelConfig,
    "warm_start": WarmStartConfig,
    "grpo": GRPOSettings,
    "pool": PoolSettings,
    "admission": AdmissionSettings,
    "reward": FrontierRewardSettings,
    "solve": SolveSettings,
}


def _proposer(data: Any, where: str) -> ProposerConfig:
    if not isinstance(data, dict):
        raise ValueError(f"{where} must be a mapping, got {type(data).__name__}")
    scalars = ("warm_start_sets", "warm_start_variants")
    known = set(PROPOSER_SECTIONS) | set(scalars)
    unknown = sorted(set(data) - known)
    if unknown:
        raise ValueError(f"{where}: unknown key(s) {unknown}; valid: {sorted(known)}")
    kwargs: dict[str, Any] = {}
    for name, cls in PROPOSER_SECTIONS.items():
        if name in data:
            sub = data[name] or {}
            if name == "warm_start" and isinstance(sub, dict):
                sub = {"steps": 0, **sub}
            kwargs[name] = build_section(cls, sub, f"{where}.{name}")
    for name in scalars:
        if name in data:
            kwargs[name] = getattr(build_section(ProposerConfig, {name: data[name]}, where), name)
    return ProposerConfig(**kwargs)


def validate_proposer(p: ProposerConfig, loop: LoopSettings, where: str) -> None:
    """Check values the phase would only reject late."""
    r, s, pool, g = p.reward, p.solve, p.pool, p.grpo
    checks = [
        (pool.inputs in INPUTS, f"proposer.pool.inputs must be one of {', '.join(INPUTS)}"),
        (0 < pool.frontier_share <= 1, "proposer.pool.frontier_share must lie in (0, 1]"),
        (pool.pairs + pool.triples >= 1, "proposer.pool: pairs + triples must be >= 1"),
        (r.form in ("linear", "variance", "unbiased"), "proposer.reward.form: linear, variance or unbiased"),
        (r.rho < 0, "proposer.reward.rho must be negative"),
        (r.duplicate_penalty >= 0, "proposer.reward.duplicate_penalty must be >= 0"),
        (0 <= r.band[0] <= r.band[1] <= 1, "proposer.reward.band must be [lo, hi] with 0 <= lo <= hi <= 1"),
        (r.min_tasks >= 1, "proposer.reward.min_tasks must be >= 1"),
        (s.samples >= 1 and s.max_tokens >= 1 and s.batch_size >= 1, "proposer.solve: samples, max_tokens >= 1"),
        (s.samples >= 2 or r.form != "unbiased", "proposer.solve.samples must be >= 2 for the unbiased form"),
        (g.group_size >= 2 and g.steps >= 1, "proposer.grpo: group_size >= 2 and steps >= 1"),
        (not g.stop_format_share, "proposer.grpo.stop_format_share: the Coder's drift stop (its grpo section)"),
        (p.admission.device in ("auto", "cpu", "cuda"), "proposer.admission.device: auto, cpu or cuda"),
        (p.admission.jobs >= 1, "proposer.admission.jobs must be >= 1"),
        (p.warm_start_sets >= 1, "proposer.warm_start_sets must be >= 1"),
        (p.warm_start_variants >= 1, "proposer.warm_start_variants must be >= 1"),
        (loop.rounds >= 1, "coevolution.rounds must be >= 1"),
        (loop.freeze_proposer_after is None or loop.freeze_proposer_after >= 0, "freeze_proposer_after >= 0"),
        (not loop.coder_warm_templates or loop.coder_warm_start, "coevolution.coder_warm_templates: warm start off"),
        (not loop.coder_warm_keep_sft or loop.coder_warm_templates, "coevolution.coder_warm_keep_sft: templates off"),
    ]
    for ok, message in checks:
        if not ok:
            raise ValueError(f"{where}: {message}")
    for name, value in (("pool.vocabulary", pool.vocabulary), ("admission.benchmarks", p.admission.benchmarks)):
        if value is not None and not (isinstance(value, list) and all(isinstance(v, str) for v in value)):
            raise ValueError(f"{where}: proposer.{name} must be a list of strings")
    a = p.admission
    if a.benchmark_dedup and not (a.benchmark_index and Path(a.benchmark_index).is_file()):
        raise ValueError(
            f"{where}: proposer.admission.benchmark_index: {a.benchmark_index} is not a file (the KernelBench jsonl "
            "that admission de-duplicates against, e.g. ../shared/data/kernelbench.jsonl from the working folder); "
            "give its path, or set proposer.admission.benchmark_dedup: false to run without de-duplication"
        )
    if p.model.path is None and p.warm_start.steps > 0 and not pool.template_only:
        raise ValueError(
            f"{where}: a tiny Proposer's warm start fits template modules: set proposer.pool.template_only"
        )


def validate_coder(coder: CoderTrainConfig, where: str) -> None:
    """Coder settings co-evolution cannot use."""
    if coder.reward.compiled_counts:
        raise ValueError(
            f"{where}: reward.compiled_counts: co-evolution measures p as the share of verified-correct tries, and a "
            "CUDA Coder on CPU is only compile-checked (use a GPU, or backend triton)"
        )


def load_coevolve_config(path: str | Path, overrides: dict[str, Any] | None = None) -> CoevolveConfig:
    """Read a co-evolution YAML config (plus `overrides`, nested like the file) into a CoevolveConfig."""
    path = Path(path)
    coder = load_config(path, overrides)  # checks the file, the YAML and the Coder's sections
    data = yaml.safe_load(path.read_text()) or {}
    extra = overrides or {}
    proposer_data = {**(data.get("proposer") or {})}
    for key, value in (extra.get("proposer") or {}).items():
        both = isinstance(value, dict) and isinstance(proposer_data.get(key), dict)
        proposer_data[key] = {**proposer_data[key], **value} if both else value
    if "proposer" not in data:
        raise ValueError(f"{path}: no proposer section (a Coder-only config: run `kernelzero train coder`)")
    loop_data = {**(data.get("coevolution") or {}), **(extra.get("coevolution") or {})}
    proposer = _proposer(proposer_data, f"{path}.proposer")
    loop = build_section(LoopSettings, loop_data, f"{path}.coevolution")
    validate_proposer(proposer, loop, str(path))
    validate_coder(coder, str(path))
    if loop.run_dir and "run_dir" not in extra:  # a Coder-only run of the same file keeps its own folder
        coder = dataclasses.replace(coder, run_dir=loop.run_dir)
    return CoevolveConfig(coder, proposer, loop, str(path))


def check_model_path(where: str, path: str | None) -> str:
    """'' when `path` is None (built here), a local model folder, or shaped like a hub id; else the problem."""
    if path is None:
        return ""
    local = Path(path)
    if local.exists():
        return "" if (local / "config.json").is_file() else f"{where}: {path} holds no config.json (not a model folder)"
    if path.startswith((".", "/", "~")) or not HUB_ID.match(path):
        return f"{where}: {path} is neither an existing folder nor a hub id (org/name)"
    return ""


def check_benchmark_index(a: AdmissionSettings) -> str:
    """'' when de-duplication is off or its index loads with at least one task; else the problem."""
    if not a.benchmark_dedup:
        return ""
    from kernelzero.proposer.dedup import BenchmarkIndex

    try:
        count = BenchmarkIndex().add_suite(a.benchmark_index or "")
    except Exception as exc:  # any failure to read it is the finding
        return f"proposer.admission.benchmark_index: {a.benchmark_index} does not load as a suite ({exc})"
    return "" if count else f"proposer.admission.benchmark_index: {a.benchmark_index} holds no task"


def dry_run(cfg: CoevolveConfig, health_timeout_s: float = 5.0) -> list[str]:
    """Problems that would stop the run here (empty when none); loads no model and needs no GPU."""
    problems = [
        check_model_path("model.path", cfg.coder.model.path),
        check_model_path("proposer.model.path", cfg.proposer.model.path),
    ]
    spec = cfg.proposer.solve.model
    if spec is not None and not spec.startswith(("openai:", "hf:", "vllm:")):
        problems.append(f"proposer.solve.model: {spec!r} is not an openai:, hf: or vllm: spec")
    if spec is not None and spec.startswith(("hf:", "vllm:")):
        problems.append(check_model_path("proposer.solve.model", spec.partition(":")[2]))
    problems.append(check_benchmark_index(cfg.proposer.admission))
    v = cfg.coder.verifier
    if v.via == "http":
        from kernelzero.service.client import Client

        try:
            Client(v.url or "", token=v.token, http_timeout_s=health_timeout_s).health()
        except Exception as exc:  # any failure to reach it is the finding
            problems.append(f"verifier: the service at {v.url} did not answer its health check ({exc})")
    return [p for p in problems if p]
