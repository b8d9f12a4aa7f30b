"""What an eval run is (`EvalConfig`) and the pieces its one-shot and multi-turn stages share.

    cfg = EvalConfig(suite="kz-basic", model="replay:completions.jsonl", backend="triton", out="runs/demo")
    run_config(cfg)             # the "config" of run.json (a one-shot run's has no "turns": as before turns existed)
    verify_options(cfg, "strict")   # the verifier options of its checks under a policy

run.py runs the one-shot protocol (`turns == 1`), multiturn.py episodes of several turns; both read this.
"""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass, field
from typing import Any

from kernelzero.service.store import VerdictStore
from kernelzero.verify import VerifyOptions, options_for

# Settings a resumed run must share with the run folder's run.json (more samples per task extend a run).
MATCHING = ("suite", "model", "backend", "levels", "tasks", "preset", "scale", "sizes", "profile", "turns")
DEFAULTS = {"turns": 1}  # the value of a setting absent from an older run.json


@dataclass(frozen=True)
class EvalConfig:
    """One evaluation run."""

    suite: str  # kz-basic, a KernelBench folder, a .py, .jsonl or .parquet file
    model: str  # model spec: openai:MODEL, hf:PATH, vllm:PATH, replay:FILE.jsonl
    backend: str  # the kernel language asked for: "triton" or "cuda"
    out: str  # the run folder
    samples: int = 1  # samples per task (n of pass@k)
    levels: tuple[int, ...] = ()  # only these levels (empty: all)
    tasks: tuple[str, ...] = ()  # only tasks matching these globs or ids (empty: all)
    preset: str | None = None  # named size set, e.g. "smoke"
    scale: float | None = None  # multiply size globals >= 16 by this
    sizes: dict[str, int] = field(default_factory=dict)  # explicit size overrides
    temperature: float = 1.0  # sampling temperature
    top_p: float = 1.0  # nucleus mass
    max_tokens: int = 8192  # completion tokens per sample
    seed: int | None = None  # base sampling seed
    concurrency: int = 8  # requests in flight (openai backend)
    profile: str = "default"  # verifier profile
    device: str = "auto"  # verification device: auto, cuda, cpu
    jobs: int = 2  # verifications run side by side (without a GPU; see service/pool.py)
    per_gpu: int = 2  # with GPUs: verifications in flight per GPU (a timed one still holds its GPU alone)
    pool: str = "local"  # "local" (this machine: build stage + one lane per GPU) or "ray" (a Ray cluster)
    ray_address: str | None = (
        None  # with pool "ray": the cluster (None: RAY_ADDRESS, a local `ray start`, or a new instance)
    )
    baselines: str | None = None  # folder caching reference timings per GPU
    store: str | None = "default"  # verdict store file shared across runs; "default": the user cache; None: off
    compile_baseline: bool = False  # also time torch.compile (slow)
    unsafe_no_sandbox: bool = False  # UNSAFE: candidates run without the sandbox (trusted local use; verdicts say so)
    turns: int = 1  # 1: the one-shot protocol; T > 1: each sample an episode of up to T turns with feedback

    def __post_init__(self) -> None:
        if self.per_gpu < 1:
            raise ValueError(f"per_gpu must be at least 1, got {self.per_gpu}")
        if self.turns < 1:
            raise ValueError(f"turns must be at least 1, got {self.turns}")


def run_config(cfg: EvalConfig) -> dict[str, Any]:
    """The config as run.json records it; "turns" only when above 1, so a one-shot run.json reads as it always did."""
    mine = asdict(cfg)
    if cfg.turns == 1:
        mine.pop("turns")
    return mine


def differing(old: dict[str, Any], mine: dict[str, Any]) -> list[str]:
    """The MATCHING settings in which a stored run.json config and this run's differ."""

    def value(config: dict[str, Any], key: str) -> str:
        return json.dumps(config.get(key, DEFAULTS.get(key)))

    return [k for k in MATCHING if value(old, k) != value(mine, k)]


def verdict_store(cfg: EvalConfig) -> VerdictStore | None:
    """The verdict store the config names (None: off)."""
    return None if cfg.store is None else VerdictStore(None if cfg.store == "default" else cfg.store)


def verify_options(cfg: EvalConfig, policy: str) -> VerifyOptions:
    """The verifier options of a run's checks under `policy` ("kernelbench" one-shot, "strict" multi-turn)."""
    return options_for(
        cfg.profile,
        policy=policy,
        device=cfg.device,
        baselines_dir=cfg.baselines,
        compile_baseline=cfg.compile_baseline,
        unsafe_no_sandbox=cfg.unsafe_no_sandbox,
    )
