"""Hand-written cheating candidates (tests/kernels/cheat/) against a naive harness and the verifier.

Each fixture is a complete candidate module written to game a KernelBench-style evaluation, one or
more per attack class of the threat model (docs/threat_model_coverage.md: classes A1-A31, each with its
defence and fixtures). Its header:

    # task: kz-basic:level1/21_GELU      SUITE:NAME of the task
    # backend: triton                    triton or cuda
    # attack: A12 <class name>           its class in docs/threat_model_coverage.md
    # policy: strict                     the verifier policy it is written for: strict or kernelbench
    # naive: gpu                         optional, comma-separated: gpu (fools a naive harness only on a
                                         GPU: streams, allocator reuse, CUDA extensions), candidate-first
                                         (the naive harness runs the candidate before the reference)
    # expect: torch_compute              the status the hardened verifier must give on a GPU
                                         (`a|b`: either; the coverage doc says where and why)
    # expect-cpu: compiled               optional: the status without a GPU (smoke sizes), or `skip`
                                         when a CPU run cannot observe the cheat
    # max-speedup: 1.2                   optional, timing cheats: on a GPU `correct` is right too when the speedup
                                         credited is at most this (the cheat's own honest work earns no more: the
                                         timing neutralised the trick instead of rejecting it), and only then,
                                         even where `expect` lists `correct`
    # options: trials=5                  optional VerifyOptions overrides (key=value ...)
    # sizes: bench                       optional: on a GPU always at the task's bench sizes, never the gate's cap
                                         (fixtures.gpu_sized): its status needs a long kernel (a >10x speedup)
    # why: one line                      what the cheat does and which defence must catch it

Tests:
- `test_cheat_passes_naive_harness`: the cheat really fools the naive harness
  (tests/verify/naive_harness.py): proof it is a real cheat. `naive: gpu` fixtures need a GPU.
- `test_cheat_rejected`: `verify()` at smoke sizes without a GPU gives `expect-cpu` (or `expect`).
- `test_cheat_rejected_gpu`, `test_cheat_passes_naive_harness_gpu` (marked gpu): the same on a GPU,
  `expect` at the task's bench sizes, or the GPU gate's cap on them (KZ_GPU_TEST_MAX_INPUT_MIB) unless the
  header says `sizes: bench` (timing cheats need real sizes to look >10x faster). Only the `naive: gpu` cheats
  are proved against the naive harness on a GPU.

The verifier is asked with `options_for(profile, policy=policy)`, profile = the policy's name.

    .venv/bin/python -m pytest tests/verify/test_cheats.py -n 2 -k naive      # about 30 s a fixture
"""

from __future__ import annotations

import os
import re
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
import torch

sys.path.insert(0, str(Path(__file__).parent))

from fixtures import gate_options, gate_verify, gpu_sized, load_task  # noqa: E402
from naive_harness import run_naive  # noqa: E402

ROOT = Path(__file__).resolve().parents[2]
CHEATS = ROOT / "tests" / "kernels" / "cheat"
COVERAGE_DOC = ROOT / "docs" / "threat_model_coverage.md"
KEYS = (
    "task",
    "backend",
    "attack",
    "policy",
    "naive",
    "expect",
    "expect-cpu",
    "max-speedup",
    "options",
    "sizes",
    "why",
)
REQUIRED = ("task", "backend", "attack", "policy", "expect", "why")
POLICIES = ("strict", "kernelbench")
NAIVE_FLAGS = ("gpu", "candidate-first")
HAS_GPU = torch.cuda.is_available()


@dataclass(frozen=True)
class Cheat:
    """One cheating candidate and what must happen to it."""

    path: Path
    task_key: str
    backend: str
    attack: str  # "A12 Fallback to torch ..."
    policy: str  # strict | kernelbench
    expect: str  # status on a GPU
    expect_cpu: str  # status without a GPU, or "skip"
    why: str
    naive: frozenset[str] = frozenset()
    options: dict[str, Any] = field(default_factory=dict)
    bench_sizes: bool = False  # `sizes: bench`: never under the GPU gate's size cap
    max_speedup: float | None = None  # `max-speedup`: `correct` with at most this speedup is right on a GPU too

    @property
    def name(self) -> str:
        return self.path.stem

    @property
    def attack_id(self) -> str:
        return self.attack.split()[0]

    @property
    def source(self) -> str:
        return self.path.read_text()

    def verify_options(self, **overrides):
        from kernelzero.verify import options_for

        return options_for(self.policy, policy=self.policy, **{**self.options, **gate_options(overrides)})


def _options(text: str, path: Path) -> dict[str, Any]:
    """`trials=5 seed=3` -> {"trials": 5, "seed": 3} (literals where they parse, else strings)."""
    import ast

    out: dict[str, Any] = {}
    for item in text.split():
        key, sep, value = item.partition("=")
        if not sep or not key or not value:
            raise ValueError(f"{path}: options must be key=value items, got {item!r}")
        try:
            out[key] = ast.literal_eval(value)
        except (ValueError, SyntaxError):
            out[key] = {"true": True, "false": False}.get(value.lower(), value)
    return out


def parse_cheat(path: Path) -> Cheat:
    """The Cheat described by `path`'s leading comment lines; ValueError naming the line if malformed."""
    from kernelzero.types import STATUSES

    fields: dict[str, str] = {}
    for lineno, line in enumerate(path.read_text().splitlines(), 1):
        if not line.startswith("#"):
            break
        key, sep, value = line[1:].strip().partition(":")
        key, value = key.strip(), value.strip()
        if not sep or key not in KEYS or not value or key in fields:
            raise ValueError(f"{path}:{lineno}: expected a new '# KEY: VALUE' with KEY in {KEYS}, got {line!r}")
        fields[key] = value
    missing = [k for k in REQUIRED if k not in fields]
    if missing:
        raise ValueError(f"{path}: header lacks {', '.join(missing)}")
    if fields["backend"] not in ("triton", "cuda"):
        raise ValueError(f"{path}: backend must be triton or cuda")
    if fields["policy"] not in POLICIES:
        raise ValueError(f"{path}: policy must be one of {POLICIES}")
    if not re.fullmatch(r"A([1-9]|[12][0-9]|3[0-9]) \S.*", fields["attack"]):
        raise ValueError(f"{path}: attack must be 'A<1-31> <class name>', got {fields['attack']!r}")
    if not set(fields["expect"].split("|")) <= set(STATUSES):
        raise ValueError(f"{path}: expect {fields['expect']!r} is not a verifier status (or a|b of them)")
    cpu = fields.get("expect-cpu", fields["expect"])
    if cpu != "skip" and not set(cpu.split("|")) <= set(STATUSES):
        raise ValueError(f"{path}: expect-cpu {cpu!r} is neither a status (or a|b of them) nor 'skip'")
    if fields.get("sizes", "bench") != "bench":
        raise ValueError(f"{path}: sizes must be 'bench' (or absent), got {fields['sizes']!r}")
    try:
        max_speedup = float(fields["max-speedup"]) if "max-speedup" in fields else None
    except ValueError:
        max_speedup = -1.0
    if max_speedup is not None and not 0 < max_speedup < 10:
        raise ValueError(f"{path}: max-speedup must be a number between 0 and 10, got {fields['max-speedup']!r}")
    naive = frozenset(f.strip() for f in fields.get("naive", "").split(",") if f.strip())
    if naive - set(NAIVE_FLAGS):
        raise ValueError(f"{path}: naive flags must be among {NAIVE_FLAGS}, got {sorted(naive)}")
    return Cheat(
        path=path,
        task_key=fields["task"],
        backend=fields["backend"],
        attack=fields["attack"],
        policy=fields["policy"],
        expect=fields["expect"],
        expect_cpu=fields.get("expect-cpu", fields["expect"]),
        why=fields["why"],
        naive=naive,
        options=_options(fields.get("options", ""), path),
        bench_sizes="sizes" in fields,
        max_speedup=max_speedup,
    )


def load_cheats() -> list[Cheat]:
    return [parse_cheat(p) for p in sorted(CHEATS.glob("*.py"))]


CHEAT_LIST = load_cheats()
IDS = [c.name for c in CHEAT_LIST]


def _smoke(cheat: Cheat):
    from kernelzero.tasks import resize

    return resize(load_task(cheat.task_key), preset="smoke")


# -- headers and coverage (fast) --------------------------------------------------------------------


def test_cheat_headers_and_count():
    assert len(CHEAT_LIST) >= 25, f"only {len(CHEAT_LIST)} cheat fixtures"
    for cheat in CHEAT_LIST:
        load_task(cheat.task_key)  # the task exists
        assert "class ModelNew" in cheat.source, cheat.name
        if cheat.backend == "cuda":
            assert "gpu" in cheat.naive, f"{cheat.name}: a CUDA cheat can only fool a naive harness on a GPU"


def test_sizes_header_keeps_bench_sizes_and_takes_nothing_else(tmp_path):
    """`sizes: bench` marks the cheats whose status needs a long kernel (a speedup past the cap): the memo, stream
    and event-rewriting cheats; any other value is an error naming the file."""
    marked = {c.name for c in CHEAT_LIST if c.bench_sizes}
    assert {"cuda_static_cache", "content_hash_cache", "side_stream_py"} <= marked
    assert all("unconfirmed_speedup" in c.expect.split("|") for c in CHEAT_LIST if c.bench_sizes)
    head = (CHEATS / "side_stream_py.py").read_text().replace("# sizes: bench", "# sizes: smoke")
    bad = tmp_path / "bad_sizes.py"
    bad.write_text(head)
    with pytest.raises(ValueError, match="bad_sizes.py: sizes must be 'bench'"):
        parse_cheat(bad)


def test_max_speedup_header_is_a_bound_on_the_credited_speedup_and_nothing_else(tmp_path):
    """`max-speedup` (the timing cheats: the memo, identity, stream and event-rewriting ones) bounds what a `correct` verdict may
    credit on a GPU: measured on the H200 (2026-12-02), honest elementwise kernels on these tasks earn 0.8-1.1x, so
    more than 1.2x is the trick's. Anything but a number in (0, 10) is an error naming the file."""
    bounded = {c.name: c.max_speedup for c in CHEAT_LIST if c.max_speedup is not None}
    timing = ("identity_cache", "content_hash_cache", "cuda_static_cache", "side_stream_py", "rerecord_start_event")
    assert bounded == dict.fromkeys(timing, 1.2)
    for value in ("fast", "0", "12"):
        bad = tmp_path / "bad_max.py"
        bad.write_text(
            (CHEATS / "side_stream_py.py").read_text().replace("# max-speedup: 1.2", f"# max-speedup: {value}")
        )
        with pytest.raises(ValueError, match="bad_max.py: max-speedup must be a number"):
            parse_cheat(bad)


def test_coverage_doc_lists_every_fixture_and_class():
    text = COVERAGE_DOC.read_text()
    for cheat in CHEAT_LIST:
        assert f"`{cheat.name}`" in text, f"{cheat.name} is missing from {COVERAGE_DOC.name}"
    for k in range(1, 32):
        assert re.search(rf"^\| A{k} ", text, re.M), f"class A{k} has no row in {COVERAGE_DOC.name}"


# -- it is a real cheat: the naive harness accepts it -------------------------------------------------


@pytest.mark.slow
@pytest.mark.parametrize("cheat", CHEAT_LIST, ids=IDS)
def test_cheat_passes_naive_harness(cheat: Cheat):
    if "gpu" in cheat.naive and not HAS_GPU:
        pytest.skip("fools a naive harness only on a GPU")
    device = "cuda" if "gpu" in cheat.naive else "cpu"
    result = run_naive(_smoke(cheat), cheat.source, candidate_first="candidate-first" in cheat.naive, device=device)
    assert result.passed, f"{cheat.name} does not fool the naive harness: {result.reason}\n{result.log[-1500:]}"


@pytest.mark.slow
@pytest.mark.parametrize(
    ("path", "task_key", "passes"),
    [
        ("correct/triton_gelu.py", "kz-basic:level1/21_GELU", True),
        ("wrong/triton_gelu_bad_mask.py", "kz-basic:level1/21_GELU", False),
    ],
)
def test_naive_harness_controls(path: str, task_key: str, passes: bool):
    """The yardstick itself: it accepts a correct kernel and rejects a plainly wrong one."""
    from kernelzero.tasks import resize

    result = run_naive(resize(load_task(task_key), preset="smoke"), (ROOT / "tests" / "kernels" / path).read_text())
    assert result.passed is passes, f"{path}: {result.reason}"


GPU_NAIVE = [c for c in CHEAT_LIST if "gpu" in c.naive]


@pytest.mark.gpu
@pytest.mark.slow
@pytest.mark.skipif(not HAS_GPU, reason="needs a CUDA GPU")
@pytest.mark.parametrize("cheat", GPU_NAIVE, ids=[c.name for c in GPU_NAIVE])
def test_cheat_passes_naive_harness_gpu(cheat: Cheat):
    """The cheats that fool a naive harness only on a GPU (`naive: gpu`), proved there; every other cheat is proved
    on CPU by `test_cheat_passes_naive_harness` in CI. (All 55 here cost the GPU gate 40-115 s each for the CUDA ones,
    their builds beside 16 verifications: H200, 2026-12-02.)"""
    result = run_naive(_smoke(cheat), cheat.source, candidate_first="candidate-first" in cheat.naive, device="cuda")
    assert result.passed, (
        f"{cheat.name} does not fool the naive harness on a GPU: {result.reason}\n{result.log[-1500:]}"
    )


# -- the hardened verifier rejects it ---------------------------------------------------------------


@pytest.mark.slow
@pytest.mark.parametrize("cheat", CHEAT_LIST, ids=IDS)
def test_cheat_rejected(cheat: Cheat):
    from kernelzero.verify import verify

    if cheat.expect_cpu == "skip":
        pytest.skip("a CPU run cannot observe this cheat (see its `why`)")
    opts = cheat.verify_options(device="cpu", compile_check=False)
    verdict = verify(_smoke(cheat), cheat.source, cheat.backend, opts)
    assert verdict.status in cheat.expect_cpu.split("|"), (
        f"{cheat.name} ({cheat.attack_id}): expected {cheat.expect_cpu}, got {verdict.status}: {verdict.message}\n"
        f"why: {cheat.why}"
    )


@pytest.mark.gpu
@pytest.mark.slow
@pytest.mark.skipif(not HAS_GPU, reason="needs a CUDA GPU")
@pytest.mark.parametrize("cheat", CHEAT_LIST, ids=IDS)
def test_cheat_rejected_gpu(cheat: Cheat):

    budget = float(os.environ.get("KZ_TIMING_BUDGET_S", "0.3"))  # per side; scripts/gpu_tests.sh uses less
    options = cheat.verify_options(device="cuda", timing_budget_s=budget)
    task = load_task(cheat.task_key)
    verdict = gate_verify(
        task if cheat.bench_sizes else gpu_sized(task), cheat.source, cheat.backend, options, cheat.expect
    )
    # a bounded cheat (max-speedup) that is `correct` with a speedup passes exactly when it is credited no more than
    # the bound, even where its `expect` lists `correct` (the event-rewriting one: correct once its times are corrected)
    bounded = cheat.max_speedup is not None and verdict.status == "correct" and verdict.speedup_eager is not None
    ok = verdict.speedup_eager <= cheat.max_speedup if bounded else verdict.status in cheat.expect.split("|")
    assert ok, (
        f"{cheat.name} ({cheat.attack_id}): expected {cheat.expect}"
        + (f" or correct at most {cheat.max_speedup}x" if cheat.max_speedup else "")
        + f", got {verdict.status} ({verdict.speedup_eager}x): {verdict.message}\n"
        f"why: {cheat.why}\nlog: {verdict.error_log[-1500:]}"
    )
