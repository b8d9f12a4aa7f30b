"""Verifier options: `VerifyOptions`, built from a profile (`kernelzero.types.PROFILES`) with `options_for`.

| profile | tolerance (fp32) | trials | seeds | eval mode | timing statistic |
|---|---|---|---|---|---|
| default | atol = rtol = 1e-2 (KernelBench's original, the KernelZero paper) | 5 | secret per run | yes | median |
| strict | atol = rtol = 1e-4 | 5 | secret per run | yes | median |
| kernelbench | 1e-4 fp32, 1e-2 fp16/bf16 (KernelBench since PR #80) | 5 | fixed (42) | no | mean of 100 |

fp16 and bf16 tolerances are 1e-2 in every profile except where the task sets its own. Precedence of the
tolerances (`tolerances`): an explicit option, then the task's own, then the profile's. To add a profile, add
one `Profile` record to `PROFILES` in types.py: the options, the timing stage and the CLI read it from there.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, replace

from kernelzero.types import POLICIES, PRECISIONS, PROFILES, Profile


@dataclass(frozen=True)
class VerifyOptions:
    """How one candidate is verified. Build with `options_for(profile, **overrides)`."""

    profile: str = "default"  # one of PROFILES
    policy: str = "strict"  # what counts as the candidate's own work, one of POLICIES (see anti-cheat docs)
    speedup_cap: float = 10.0  # a speedup over eager above this is re-verified more strictly before it counts
    confirming: bool = False  # set on the stricter second verification itself
    static_checks: bool = True  # run verify/static.py before anything runs (off only to test the sandbox)
    precision: str = "fp32"  # dtype of floating inputs and parameters: fp32, fp16, bf16
    atol: float | None = None  # None: the profile's tolerance for the precision (or the task's)
    rtol: float | None = None  # None: as atol
    trials: int = 5  # correctness trials, each with fresh inputs
    seed: int | None = None  # None: a secret random seed per run; kernelbench profile: 42
    eval_mode: bool = True  # put Model and ModelNew in eval mode (KernelBench does not)
    ref_fp64: bool = False  # compute the expected outputs in float64 where inputs are floating
    device: str = "auto"  # "auto" (cuda when available), "cuda" or "cpu"
    time_it: bool = True  # time correct candidates (GPU only)
    timed_calls: int = 30  # timed calls per side at least, after warm-up
    timing_budget_s: float = 0.3  # per side: more calls (up to 200) until their time fills this
    warmup_calls: int = 3  # untimed calls before timing
    input_sets: int = 0  # 0: a fresh input set for every call; 1: one set for all (KernelBench's protocol)
    compile_baseline: bool = False  # also time the reference under torch.compile (slow to compile)
    timeout_floor_s: float = 60.0  # run-time limit floor, build excluded
    timeout_scale: float = 200.0  # run-time limit = max(floor, scale x reference forward time x calls)
    build_timeout_s: float = 600.0  # limit for compiling the candidate (load_inline, Triton)
    host_mem_gb: float = 32.0  # the candidate process is killed past this resident memory
    gpu_mem_fraction: float = 0.9  # cap on the candidate's share of GPU memory
    compile_check: bool = True  # on CPU: compile Triton kernels for sm_90, CUDA sources with nvcc
    target_arch: int = 90  # compute capability for compile checks without a GPU
    sandbox_uids: str = "1900000000:8192"  # FIRST:COUNT, each sandboxed process gets a uid of its own from it
    isolate_network: bool = True  # give every sandboxed process an empty network namespace
    unsafe_no_sandbox: bool = False  # run candidates and task code without the sandbox (trusted local use only)
    baselines_dir: str | None = None  # where reference timings are cached; None: no cache
    # Where a verification runs (not what it decides; left out of the verdict store's key):
    build_cache: str = (
        ""  # prebuilt load_inline libraries (verify/backends/cuda/build.py); "": the default cache folder
    )
    gpu_index: int | None = None  # pin the judge and worker to this visible GPU (pool runners); None: inherit
    cuda_ipc: bool = True  # hand GPU tensors between judge and worker through CUDA IPC where it works (cuda_ipc.py)
    gpu_mem_gb: float | None = None  # GPU memory all verifications on one GPU may lease together; None: 92% of it
    gpu_alone: bool = False  # lease the whole GPU's memory (the retry after a fault another tenant may have caused)


def profile_of(opts: VerifyOptions) -> Profile:
    """The `Profile` record these options were built from."""
    return PROFILES[opts.profile]


def default_tolerance(profile: str, precision: str) -> float:
    """The profile's atol = rtol for a precision."""
    record = PROFILES[profile]
    return record.fp32_tol if precision == "fp32" else record.low_precision_tol


def options_for(profile: str = "default", **overrides) -> VerifyOptions:
    """Options of a profile, with explicit overrides; unknown names or values raise ValueError."""
    if profile not in PROFILES:
        raise ValueError(f"unknown profile {profile!r}; choose one of {', '.join(PROFILES)}")
    record = PROFILES[profile]
    base = VerifyOptions(
        profile=profile,
        seed=record.seed,
        eval_mode=record.eval_mode,
        timed_calls=record.timed_calls,
        warmup_calls=record.warmup_calls,
        input_sets=record.input_sets,
    )
    fields = set(VerifyOptions.__dataclass_fields__)
    unknown = sorted(set(overrides) - fields)
    if unknown:
        raise ValueError(f"unknown verify option(s) {unknown}; known: {sorted(fields)}")
    opts = replace(base, **{k: v for k, v in overrides.items() if v is not None})
    if opts.policy not in POLICIES:
        raise ValueError(f"policy must be one of {', '.join(POLICIES)}, got {opts.policy!r}")
    if opts.precision not in PRECISIONS:
        raise ValueError(f"precision must be one of {', '.join(PRECISIONS)}, got {opts.precision!r}")
    if opts.trials < 1 or opts.timed_calls < 1 or opts.input_sets not in (0, 1):
        raise ValueError("trials and timed_calls must be at least 1; input_sets 0 (fresh per call) or 1")
    return opts


def tolerances(opts: VerifyOptions, task_atol: float | None, task_rtol: float | None) -> tuple[float, float]:
    """(atol, rtol): explicit options win, then the task's own, then the profile's default."""
    default = default_tolerance(opts.profile, opts.precision)
    atol = opts.atol if opts.atol is not None else task_atol if task_atol is not None else default
    rtol = opts.rtol if opts.rtol is not None else task_rtol if task_rtol is not None else atol
    return atol, rtol


def parse_overrides(items: list[str], flag: str = "--option") -> dict:
    """`KEY=VALUE` items (a command line's `flag`) as VerifyOptions overrides: VALUE read as JSON, else kept as a
    string. A malformed item raises ValueError naming `flag`."""
    options = {}
    for item in items:
        key, sep, value = item.partition("=")
        if not sep or not key:
            raise ValueError(f"{flag} wants KEY=VALUE, got {item!r}")
        try:
            options[key] = json.loads(value)
        except ValueError:
            options[key] = value
    return options
