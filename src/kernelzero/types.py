"""Records that pass between kernelzero's stages.

Every record that crosses a stage boundary (and so may be written to JSONL, sent over HTTP or cached)
is a frozen dataclass here, with one comment per field. Records are built by their owning package
(`tasks/` builds `Task` and `TaskCheck`, `verify/` builds `Verdict`) and only read elsewhere.

`to_dict()` / `from_dict()` give plain JSON-ready dicts; unknown keys in `from_dict` are an error,
so a record written by a newer version fails loudly instead of losing fields.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from typing import Any, TypeVar

R = TypeVar("R")


def to_dict(record: Any) -> dict[str, Any]:
    """A JSON-ready dict of a record (tuples become lists)."""
    return dataclasses.asdict(record)


def from_dict(cls: type[R], data: dict[str, Any]) -> R:
    """Rebuild a record of type `cls` from `to_dict` output; unknown keys raise ValueError."""
    names = {f.name for f in dataclasses.fields(cls)}  # type: ignore[arg-type]
    unknown = set(data) - names
    if unknown:
        raise ValueError(f"{cls.__name__}: unknown fields {sorted(unknown)}")
    kwargs = {k: tuple(v) if isinstance(v, list) else v for k, v in data.items()}
    return cls(**kwargs)


@dataclass(frozen=True)
class Task:
    """A reference problem in KernelBench format: `Model`, `get_inputs()`, `get_init_inputs()`.

    The source is kept exactly as loaded; size overrides live beside it in `sizes` and are applied
    to the module's globals before `get_inputs()` / `get_init_inputs()` run, so the text a Coder
    sees and the sizes it is tested at stay separate.
    """

    name: str  # unique within its suite: "level1/19_ReLU", "kz-basic/level2/3_Gemm_Gelu"
    source: str  # the reference module's Python source, unchanged
    suite: str = ""  # where it came from: "kz-basic", "kernelbench", a folder or file path
    level: int | None = None  # KernelBench level (1-4) when known
    problem_id: int | None = None  # id from the file name ("19_ReLU.py" -> 19) when known
    sizes: dict[str, int] = field(default_factory=dict)  # module globals overridden before inputs are made
    presets: dict[str, dict[str, int]] = field(default_factory=dict)  # named size sets, e.g. {"smoke": {...}}
    atol: float | None = None  # per-task absolute tolerance; None = the verifier's default
    rtol: float | None = None  # per-task relative tolerance; None = the verifier's default
    note: str = ""  # why the task carries a quirk (tolerance, sizes), shown in reports
    tie_prone: dict[str, str] = field(default_factory=dict)  # index outputs judged by what they select (module.py)

    @property
    def key(self) -> str:
        """`suite:name`, unique across suites."""
        return f"{self.suite}:{self.name}" if self.suite else self.name


@dataclass(frozen=True)
class TaskCheck:
    """What the contract check found out about one task (run in a child process)."""

    name: str  # Task.name
    ok: bool  # the task satisfies the contract (and, when asked, is not degenerate)
    error: str = ""  # error kind when not ok, one of tasks.check.ERROR_KINDS
    message: str = ""  # short human-readable explanation, bounded in length
    task_hash: str = ""  # tasks.hashing.task_hash of the checked task
    sizes: dict[str, int] = field(default_factory=dict)  # the size globals actually used (after overrides)
    input_shapes: tuple[str, ...] = ()  # "float32[128, 4096]" per input, in order
    output_shapes: tuple[str, ...] = ()  # the same for the output(s)
    degenerate: tuple[str, ...] = ()  # reasons a trivial answer would pass ("zeros", "constant", ...)
    seconds: float = 0.0  # wall time of the whole check, child start-up included
    forward_ms: float | None = None  # one eager forward on the checking device, after a warm-up
    device: str = "cpu"  # where the forward ran


# Verdict statuses, a closed set. `verify/__init__.py` documents which failure maps to which.
STATUSES = (
    "correct",  # every correctness trial matched within tolerance
    "compiled",  # no GPU here: the CUDA source compiled for the target GPU, nothing could run
    "format_error",  # no code, not valid Python, or no `ModelNew` class
    "compile_error",  # the CUDA extension or a Triton kernel failed to compile
    "runtime_error",  # an exception while importing, constructing or calling ModelNew
    "timeout",  # the sample ran past its time limit and was killed
    "crash",  # the process died (signal, illegal memory access, exit without a result)
    "oom",  # out of GPU memory, or past the host-memory limit
    # not the candidate's verdict (SKIPPED_STATUSES): rewards and metrics leave these samples out
    "infra_error",  # the verification could not be carried out, for a reason outside the candidate and the task
    "task_broken",  # the task's own reference code fails alone in a clean retry; no candidate was judged
    "shape_mismatch",  # wrong number, type or shape of outputs
    "dtype_mismatch",  # an output has the wrong dtype
    "nan_or_inf",  # an output holds NaN or Inf where the reference does not
    "mismatch",  # outputs differ beyond the tolerance
    "input_mutated",  # the candidate changed its inputs
    # anti-cheat statuses (verify/anticheat*.py)
    "static_violation",  # a static check found a forbidden construct (the message names the rule)
    "no_kernel",  # a forward call launched none of the candidate's own kernels
    "torch_compute",  # a PyTorch compute op ran inside forward (strict policy)
    "bad_output",  # an output is not a plain dense tensor owning its memory (subclass, alias, expanded)
    "tampered",  # the harness detected tampering (patched torch or timers, sys.modules, the result channel)
    "unconfirmed_speedup",  # an implausible speedup was not confirmed by a stricter second verification
)
# Statuses that say nothing about the candidate: rewards give such a sample no reward (None) and metrics leave it
# out of every rate and mean (they count it apart, per status).
SKIPPED_STATUSES = ("infra_error", "task_broken")


def is_skipped(verdict: Verdict | dict[str, Any]) -> bool:
    """Whether a verdict (a Verdict or its `to_dict` dict) is not the candidate's: its own status is skipped."""
    status = verdict.get("status") if isinstance(verdict, dict) else verdict.status
    return status in SKIPPED_STATUSES


@dataclass(frozen=True)
class Mismatch:
    """The worst disagreement between a candidate output and the reference."""

    trial: int  # correctness trial (0-based); -1 for outputs checked during timing
    output: int  # index of the output tensor
    index: tuple[int, ...]  # position of the worst element
    expected: float  # reference value there
    got: float  # candidate value there
    max_abs_err: float  # over the whole output
    max_rel_err: float  # over the whole output, |got - expected| / (|expected| + 1e-12)
    bad_fraction: float  # share of elements outside the tolerance


@dataclass(frozen=True)
class Timing:
    """Device-time statistics of one function over timed calls, in milliseconds."""

    median_ms: float  # the reported number
    mean_ms: float  # for KernelBench's protocol, which reports the mean
    p10_ms: float  # spread: 10th percentile
    p90_ms: float  # spread: 90th percentile
    calls: int  # timed calls (warm-up excluded)


@dataclass(frozen=True)
class KernelTime:
    """Device time of one kernel over a profiled forward call (verify/profile.py; feedback, not a verdict)."""

    name: str  # the kernel's name as the profiler reports it
    ms: float  # total device time of its launches in one forward, milliseconds
    calls: int = 1  # launches in one forward


@dataclass(frozen=True)
class Verdict:
    """The verifier's judgement of one candidate on one task. JSON-serialisable via `to_dict`."""

    status: str  # one of STATUSES
    task: str  # Task.name
    task_hash: str  # tasks.hashing.task_hash of the task as verified (sizes included)
    candidate_hash: str  # sha256 (16 hex) of the candidate source as run
    backend: str  # "cuda" or "triton"
    profile: str  # verifier profile: "default", "strict", "events" or "kernelbench" (types.PROFILES)
    device: str  # "cpu" or the GPU's name
    stage: str  # how far verification got: extract, load, build, init, correctness, timing, done
    message: str = ""  # one-line summary of the failure ("" when correct)
    feedback: str = ""  # a few lines a Coder could act on in a multi-turn loop
    error_log: str = ""  # compiler log tail or traceback tail, bounded
    exit_signal: str = ""  # e.g. "SIGSEGV" when the candidate's process died from a signal
    exit_code: int | None = None  # the candidate process's exit code when it exited without a result
    mismatch: Mismatch | None = None  # the worst disagreement, for mismatch-type statuses
    trials: int = 0  # correctness trials that ran
    trials_passed: int = 0  # correctness trials that matched
    params: str = ""  # "loaded" (Model's state_dict loaded strictly into ModelNew) or "seeded" (same seed only)
    atol: float = 0.0  # tolerance used
    rtol: float = 0.0  # tolerance used
    precision: str = "fp32"  # fp32, fp16 or bf16
    timing: Timing | None = None  # the candidate's timing (correct candidates on a GPU only)
    ref_eager: Timing | None = None  # the reference's eager timing
    ref_compile: Timing | None = None  # the reference under torch.compile, when asked for
    speedup_eager: float | None = None  # ref_eager / timing (median; mean in the kernelbench profile)
    speedup_compile: float | None = None  # ref_compile / timing
    speedup_ci: tuple[float, float] | None = None  # 95% bootstrap interval of speedup_eager over the timed calls
    timing_check: str = ""  # how the judge's own clock bounded the reported times ("confirmed ...", "corrected ...")
    timing_note: str = ""  # why timing fields are empty (no GPU, not correct, ...)
    notes: tuple[str, ...] = ()  # caveats: bf16 run in the interpreter, sandbox without user drop ...
    policy: str = "strict"  # anti-cheat policy the status was decided under: "strict" or "kernelbench"
    policy_status: dict[str, str] = field(default_factory=dict)  # the status under each policy
    own_kernels: dict[str, int] = field(default_factory=dict)  # the candidate's kernels launched in one forward
    torch_ops: tuple[str, ...] = ()  # PyTorch compute ops seen inside forward (allowed under "kernelbench")
    task_degenerate: tuple[str, ...] = ()  # trivial answers that would pass on this task (tasks/quality.py)
    stage_seconds: dict[str, float] = field(
        default_factory=dict
    )  # wall time per stage; gpu_lease_at: epoch s the GPU lease was taken
    versions: dict[str, str] = field(default_factory=dict)  # torch, triton, python, kernelzero


@dataclass(frozen=True)
class Sample:
    """One completion of the Coder for one task (a line of a run's samples.jsonl)."""

    task: str  # Task.name
    task_hash: str  # tasks.hashing.task_hash of the task as prompted (sizes included)
    sample_idx: int  # 0..n-1 within the task
    level: int | None  # Task.level, for per-level metrics
    backend: str  # "cuda" or "triton": what the prompt asked for
    model: str  # the model spec string, e.g. "openai:qwen2.5-coder-7b", "replay:file.jsonl"
    prompt_version: str  # coder prompt template version, e.g. "triton-v1"
    completion: str  # the raw completion text
    code: str  # the code extracted from it (coder.extract.extract_code)
    output_tokens: int | None = None  # completion tokens as counted by the backend
    prompt_tokens: int | None = None  # prompt tokens as counted by the backend
    finish_reason: str = ""  # "stop", "length", ... as reported by the backend
    seconds: float = 0.0  # generation wall time of this sample (its share of a batch)
    seed: int | None = None  # sampling seed, when the backend takes one


def verdict_from_dict(data: dict) -> Verdict:
    """Rebuild a Verdict from `to_dict` output (nested records included)."""
    data = dict(data)
    if data.get("mismatch"):
        data["mismatch"] = Mismatch(**{**data["mismatch"], "index": tuple(data["mismatch"]["index"])})
    for key in ("timing", "ref_eager", "ref_compile"):
        if data.get(key):
            data[key] = Timing(**data[key])
    for key in ("notes", "torch_ops", "task_degenerate", "speedup_ci"):  # tuples, which JSON made lists
        if data.get(key) is not None:
            data[key] = tuple(data[key])
    return Verdict(**data)


# -- registries of the verifier's choices (data only: the CLI, the service and the metrics read them) -----------

POLICIES = ("strict", "kernelbench")  # anti-cheat policies: strict forbids PyTorch compute inside forward
PRECISIONS = ("fp32", "fp16", "bf16")  # dtypes of floating inputs and parameters


@dataclass(frozen=True)
class Profile:
    """A verification protocol: tolerances, seeds, mode and timing statistic (`PROFILES`)."""

    name: str
    fp32_tol: float  # atol = rtol for fp32 outputs (fp16/bf16: `low_precision_tol`)
    low_precision_tol: float = 1e-2  # atol = rtol for fp16 and bf16
    seed: int | None = None  # None: a secret random seed per run; else this fixed seed (inputs are predictable)
    eval_mode: bool = True  # Model and ModelNew in eval mode
    timed_calls: int = 30  # timed calls after warm-up
    warmup_calls: int = 3  # untimed calls before timing
    input_sets: int = 0  # 0: every call gets an input set of its own; 1: one set for all calls (KernelBench)
    statistic: str = "median"  # "median" or "mean" of the timed calls decides the speedup
    host_check: bool = True  # time = max(event interval, host interval) (work hidden on other streams counts)
    note: str = ""  # where the protocol comes from


PROFILES = {
    p.name: p
    for p in (
        Profile("default", fp32_tol=1e-2, note="KernelBench's original tolerance and the KernelZero paper's"),
        Profile("strict", fp32_tol=1e-4, note="fp32 outputs within 1e-4"),
        Profile(
            "events",
            fp32_tol=1e-2,
            host_check=False,
            note="the default profile timed by each call's event interval alone; work a call leaves past its end "
            "event is flagged (unconfirmed_speedup), not added; the judge's clock bounds every block as before",
        ),
        Profile(
            "kernelbench",
            fp32_tol=1e-4,
            seed=42,
            eval_mode=False,
            timed_calls=100,
            input_sets=1,
            statistic="mean",
            host_check=False,
            note="KernelBench's current protocol (since its PR #80): fixed seed, no eval mode, mean of 100 calls",
        ),
    )
}


@dataclass(frozen=True)
class Backend:
    """A kernel language the verifier knows (`kernelzero.verify.backends.BACKENDS`).

    Data only, so it travels in a verification request to the judge and worker processes. The language's
    code lives in the package `package`, in modules with fixed names (see `verify/backends/__init__.py`).
    """

    name: str  # what users pass as --backend
    package: str  # the package holding the language's modules, e.g. kernelzero.verify.backends.triton
    kernel_hint: str  # what a candidate must contain (the `no_kernel` message names it)
    without_gpu: str  # "interpret": the worker runs it through an interpreter; "compile": compile check only
    build_stage: bool = False  # GPU-bound candidates are built on CPU cores before a GPU runner takes them
