"""Hand-written candidate kernels ("fixtures") under tests/kernels/{correct,wrong} and their headers.

Every fixture file starts with a block of comment lines, then the candidate module:

    # task: kz-basic:level1/21_GELU      SUITE:NAME of the task the candidate is written for
    # backend: triton                    triton or cuda
    # expect: correct                    the status on a GPU (at the task's bench sizes, or the gate's cap: gpu_sized)
    # expect-cpu: compiled               optional: the status without a GPU (smoke sizes) when it differs
    # options: timeout_floor_s=5         optional: VerifyOptions overrides (key=value, space separated)
    # gpu: skip                          optional: the GPU status is not deterministic; say why in `why`
    # why: one line: what the candidate does, or which bug it has

`load_fixtures()` parses them all; a malformed header raises `FixtureError` naming the file and line.
`fixture.task()` loads the task (bench sizes, capped by `gpu_sized` when KZ_GPU_TEST_MAX_INPUT_MIB is set, as the
GPU gate sets it), `fixture.verify_options()` builds the options.

    PYTHONPATH=src:tests/verify python -c 'import fixtures; [print(f) for f in fixtures.load_fixtures()]'
"""

from __future__ import annotations

import ast
import functools
import os
import tempfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[2]
KERNELS = ROOT / "tests" / "kernels"
KEYS = ("task", "backend", "expect", "expect-cpu", "options", "gpu", "why")
REQUIRED = ("task", "backend", "expect", "why")
BACKENDS = ("triton", "cuda", "helion")


class FixtureError(ValueError):
    """A fixture file whose header is missing, incomplete or malformed."""


@dataclass(frozen=True)
class Fixture:
    """One candidate file and what the verifier must say about it."""

    path: Path  # the candidate file
    task_key: str  # "kz-basic:level1/21_GELU"
    backend: str  # "triton" or "cuda"
    expect: str  # status on a GPU
    expect_cpu: str  # status without a GPU (expect-cpu, or expect when the header has none)
    why: str  # what the candidate does / its bug
    options: dict[str, Any] = field(default_factory=dict)  # VerifyOptions overrides
    gpu_skip: bool = False  # "# gpu: skip": no deterministic status on a GPU

    @property
    def name(self) -> str:
        """`correct/triton_gelu`: unique, used as the test id."""
        return f"{self.path.parent.name}/{self.path.stem}"

    @property
    def source(self) -> str:
        return self.path.read_text()

    def task(self):
        """The task at its bench sizes, or at the GPU gate's cap (`gpu_sized`); apply
        `kernelzero.tasks.resize(..., preset="smoke")` for CPU."""
        return gpu_sized(load_task(self.task_key))

    def verify_options(self, **overrides):
        from kernelzero.verify import options_for

        return options_for(**{**self.options, **gate_options(overrides)})


BASELINES_ENV = "KZ_GPU_TEST_BASELINES"


def gate_options(overrides: dict) -> dict:
    """`overrides` with the GPU gate's shared solo-reference cache (`baselines_dir`) when KZ_GPU_TEST_BASELINES is
    set (scripts/gpu_tests.sh sets a fresh folder) and the verification is on a GPU. Why: every verification times
    its reference alone first, holding the whole GPU while 15 others wait (H200, 2026-12-02: 343 s of 2,330 s of
    verification in the solo reference, and the waits it caused); the gate verifies 17 tasks about 130 times. The
    cache is per task, sizes, precision, profile, torch version and GPU, as in `kernelzero eval --baselines`."""
    folder = os.environ.get(BASELINES_ENV)
    if folder and overrides.get("device") == "cuda":
        return {"baselines_dir": folder, **overrides}
    return overrides


# Statuses only a timed verification can give: a test expecting one of them verifies with timing at once.
TIMED_STATUSES = frozenset({"correct", "unconfirmed_speedup", "torch_compute"})


def gate_verify(task, source: str, backend: str, opts, expect: str):
    """The verdict of `source` on a GPU, timed only where the expected verdict can need it.

    Timing runs only after every correctness trial passed, so a verdict given before it (a static rejection, a
    mismatch, a crash: any stage but "done") is the same with or without timing. A test expecting such a verdict
    first verifies untimed, which saves the solo reference and the exclusive GPU window that timing takes (in the
    H200 gate of 2026-12-02, 40 of 58 verifications waited for one or the other, a median 10-25 s each); only when
    that verdict reached the end ("done": correct, or a policy status) is it verified again with timing, and the
    timed verdict stands (a cheat that changes behaviour when timed is judged there). `expect`: "a|b" statuses."""
    from dataclasses import replace

    from kernelzero.verify import verify

    if opts.device != "cuda" or not opts.time_it or set(expect.split("|")) & TIMED_STATUSES:
        return verify(task, source, backend, opts)
    untimed = verify(task, source, backend, replace(opts, time_it=False))
    if untimed.stage != "done":
        return untimed
    return verify(task, source, backend, opts)


def _value(text: str) -> Any:
    """`5` -> 5, `2.5` -> 2.5, `true` -> True, anything else the string itself."""
    if text.lower() in ("true", "false"):
        return text.lower() == "true"
    try:
        return ast.literal_eval(text)
    except (ValueError, SyntaxError):
        return text


def _parse_options(text: str, where: str) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for item in text.split():
        key, sep, value = item.partition("=")
        if not sep or not key or not value:
            raise FixtureError(f"{where}: options must be key=value items, got {item!r}")
        out[key] = _value(value)
    return out


def parse_header(path: Path) -> Fixture:
    """The Fixture described by `path`'s leading comment lines; FixtureError if malformed."""
    from kernelzero.types import STATUSES

    fields: dict[str, str] = {}
    for lineno, line in enumerate(path.read_text().splitlines(), 1):
        if not line.startswith("#"):
            break
        where = f"{path}:{lineno}"
        key, sep, value = line[1:].strip().partition(":")
        key, value = key.strip(), value.strip()
        if not sep or key not in KEYS:
            raise FixtureError(f"{where}: expected '# KEY: VALUE' with KEY one of {', '.join(KEYS)}, got {line!r}")
        if key in fields:
            raise FixtureError(f"{where}: {key!r} given twice")
        if not value:
            raise FixtureError(f"{where}: {key!r} has no value")
        fields[key] = value
    missing = [k for k in REQUIRED if k not in fields]
    if missing:
        raise FixtureError(
            f"{path}: header lacks {', '.join(missing)} (a fixture starts with '# task: ...', "
            f"'# backend: ...', '# expect: ...', '# why: ...' comment lines)"
        )
    if fields["backend"] not in BACKENDS:
        raise FixtureError(f"{path}: backend must be one of {', '.join(BACKENDS)}, got {fields['backend']!r}")
    for key in ("expect", "expect-cpu"):
        if key in fields and fields[key] not in STATUSES:
            raise FixtureError(f"{path}: {key} {fields[key]!r} is not a verifier status ({', '.join(STATUSES)})")
    if ":" not in fields["task"]:
        raise FixtureError(f"{path}: task must be SUITE:NAME, got {fields['task']!r}")
    if fields.get("gpu", "skip") != "skip":
        raise FixtureError(f"{path}: the only 'gpu' value is 'skip', got {fields['gpu']!r}")
    return Fixture(
        path=path,
        task_key=fields["task"],
        backend=fields["backend"],
        expect=fields["expect"],
        expect_cpu=fields.get("expect-cpu", fields["expect"]),
        why=fields["why"],
        options=_parse_options(fields.get("options", ""), str(path)),
        gpu_skip="gpu" in fields,
    )


def load_fixtures(root: Path = KERNELS) -> list[Fixture]:
    """Every fixture under `root`/correct and `root`/wrong, sorted by name."""
    paths = sorted(p for sub in ("correct", "wrong") for p in (root / sub).glob("*.py"))
    return [parse_header(p) for p in paths]


@functools.cache
def _suite(name: str):
    from kernelzero.tasks import load_suite

    return load_suite(name)


def load_task(key: str):
    """The task named SUITE:NAME (exact name), at its bench sizes; KeyError when there is none."""
    suite, _, name = key.rpartition(":")
    matches = [t for t in _suite(suite).tasks if t.name == name]
    if len(matches) != 1:
        raise KeyError(f"task {name!r} is not in suite {suite!r}")
    return matches[0]


MAX_INPUT_ENV = "KZ_GPU_TEST_MAX_INPUT_MIB"
SCALES = (0.5, 0.25, 0.125, 0.0625, 0.03125)


def gpu_sized(task):
    """`task` as a GPU test verifies it: its bench sizes, unless KZ_GPU_TEST_MAX_INPUT_MIB is set (scripts/gpu_tests.sh
    sets 32) and one input set is larger than that; then its size globals are scaled down (`resize(scale=...)`, by
    halves) until the set fits. Why: at bench sizes one kz-basic verification holds 17-34 GB of GPU memory over its
    three processes (measured on the H200, 2026-12-02), so 16 side by side waited on the memory lease for a median 73
    s and the gate finished 80 of 342 tests in 470 s. Most statuses do not depend on size; a cheat whose status needs
    a long kernel (a speedup past the 10x cap) says `sizes: bench` and is not passed through here (test_cheats.py).
    Timing fidelity at bench sizes is the benchmarks' business (bench/verify.md), not the gate's."""
    cap = os.environ.get(MAX_INPUT_ENV)
    if not cap:
        return task
    from kernelzero.tasks import resize

    limit = float(cap) * (1 << 20)
    for factor in (1, *SCALES):  # the smallest scale when none fits
        sized = task if factor == 1 else resize(task, scale=factor)
        if input_bytes(sized) <= limit:
            break
    return sized


def input_bytes(task) -> int:
    """Bytes of one input set of a (trusted, suite) task at its sizes, drawn on the meta device (nothing allocated)."""
    import torch

    from kernelzero.tasks.module import exec_module

    with tempfile.TemporaryDirectory() as folder, torch.device("meta"):
        inputs = exec_module(task.source, task.sizes, Path(folder) / "task.py", "kz_sized_task").get_inputs()
    return sum(x.numel() * x.element_size() for x in inputs if isinstance(x, torch.Tensor))


def timing_note(verdict) -> str:
    """ ", 0.123 ms, 1.45x eager" for a timed verdict, "" otherwise (the GPU fixture tests print it)."""
    if verdict.timing is None:
        return ""
    return f", {verdict.timing.median_ms:.3f} ms, {verdict.speedup_eager or 0:.2f}x eager"
