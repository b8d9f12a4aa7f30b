"""The Helion fixtures (tests/kernels/{correct,wrong,cheat}/helion/) get the status their header names.

Headers as in tests/kernels/README.md (`fixtures.py` for correct/wrong, test_cheats.py's format for cheat/).

- `test_header_*`, `test_fixture_set_*`: headers parse, name known statuses and existing tasks (fast).
- `test_static_status`: every fixture through the pre-checks (format + static, no process): the ones the static
  check must reject get their status there, the others pass it (fast, no Helion needed).
- `test_helion_fixture_cpu` (slow): through the real verifier without a GPU (Triton's interpreter runs Helion's
  generated kernels, then the sm_90 compile check), smoke sizes. By default one fixture, the fused GEMM + bias +
  GELU (about 30 s: Helion's import in two sandboxed workers); `KZ_HELION_FIXTURES=all` runs every fixture and
  every cheat that the static check does not stop (about 10 minutes on 2 cores).
- `test_helion_fixture_gpu[NAME]` (marker `gpu`): one test per fixture and cheat at bench sizes, against
  `expect`; correct ones must report a timing and a speedup (scripts/gpu_tests.sh runs them side by side).

    .venv/bin/python -m pytest -q -p no:xdist tests/verify/test_helion_fixtures.py
    KZ_HELION_FIXTURES=all .venv/bin/python -m pytest -q -n 2 tests/verify/test_helion_fixtures.py -k cpu
    PYTHONPATH=src python3 -m pytest -q -n 8 tests/verify/test_helion_fixtures.py -m gpu   # GPU host
"""

from __future__ import annotations

import importlib.util
import os
import re
import time
from dataclasses import dataclass
from pathlib import Path

import fixtures as fx
import pytest

from kernelzero.types import STATUSES

HELION_DIRS = [fx.KERNELS / kind / "helion" for kind in ("correct", "wrong", "cheat")]
FIXTURES = [fx.parse_header(p) for d in HELION_DIRS[:2] for p in sorted(d.glob("*.py"))]
STATIC = ("format_error", "no_kernel", "static_violation")  # statuses decided before anything runs
CPU_DEFAULT = {"correct/helion/helion_gemm_bias_gelu"}


@dataclass(frozen=True)
class Case:
    """One Helion fixture or cheat: what to verify and what the verifier must say."""

    path: Path
    task_key: str
    expect: str  # on a GPU, bench sizes
    expect_cpu: str  # without a GPU, smoke sizes
    options: dict
    policy: str | None  # cheats name the policy they are written for

    @property
    def name(self) -> str:
        return str(self.path.relative_to(fx.KERNELS).with_suffix(""))

    def verify_options(self, **overrides):
        from kernelzero.verify import options_for

        overrides = fx.gate_options(overrides)
        if self.policy:
            return options_for(self.policy, policy=self.policy, **{**self.options, **overrides})
        return options_for(**{**self.options, **overrides})


def parse_cheat(path: Path) -> Case:
    """A cheat's header (test_cheats.py's format, backend helion); ValueError naming what is wrong."""
    fields = {}
    for line in path.read_text().splitlines():
        if not line.startswith("#"):
            break
        key, _, value = line[1:].strip().partition(":")
        fields[key.strip()] = value.strip()
    missing = [k for k in ("task", "backend", "attack", "policy", "expect", "why") if not fields.get(k)]
    if missing or fields["backend"] != "helion" or fields["policy"] not in ("strict", "kernelbench"):
        raise ValueError(f"{path}: header lacks {missing} or names another backend or policy")
    if not re.fullmatch(r"A([1-9]|[12][0-9]|3[01]) \S.*", fields["attack"]):
        raise ValueError(f"{path}: attack must be 'A<1-31> <class name>'")
    options = fx._parse_options(fields.get("options", ""), str(path))
    cpu = fields.get("expect-cpu", fields["expect"])
    return Case(path, fields["task"], fields["expect"], cpu, options, fields["policy"])


def case_of(f: fx.Fixture) -> Case:
    return Case(f.path, f.task_key, f.expect, f.expect_cpu, f.options, None)


CHEATS = [parse_cheat(p) for p in sorted(HELION_DIRS[2].glob("*.py"))]
CASES = [case_of(f) for f in FIXTURES] + CHEATS


def _ids(items: list[Case]) -> list[str]:
    return [c.name for c in items]


def _describe(c: Case, verdict, want: str) -> str:
    return (
        f"{c.name} ({c.task_key}): got {verdict.status}, want {want}\n  message: {verdict.message}\n"
        f"  notes: {verdict.notes}\n  stages: {verdict.stage_seconds}\n  error_log:\n{verdict.error_log[-3000:]}"
    )


# -- headers and the static check ------------------------------------------------------------------
def test_fixture_set_covers_the_task_kinds_and_the_statuses():
    correct = {f.task_key.split(":")[1] for f in FIXTURES if f.expect == "correct"}
    kinds = {"level1/21_GELU", "level1/11_Sum_Over_Dim", "level1/2_Rectangular_Matmul", "level1/18_RMSNorm"}
    assert kinds | {"level2/1_Gemm_Bias_Gelu"} <= correct  # elementwise, reduction, GEMM, normalisation, fusion
    statuses = {"format_error", "no_kernel", "static_violation", "compile_error", "runtime_error", "timeout"}
    statuses |= {"crash", "oom", "shape_mismatch", "dtype_mismatch", "nan_or_inf", "mismatch", "input_mutated"}
    missing = statuses - {f.expect for f in FIXTURES if f.expect != "correct"}
    assert not missing, f"no wrong Helion fixture reaches {sorted(missing)}"
    assert len({c.name for c in CASES}) == len(CASES) and len(CHEATS) >= 8


@pytest.mark.parametrize("c", CASES, ids=_ids(CASES))
def test_header(c: Case):
    assert {c.expect, c.expect_cpu} <= set(STATUSES) and c.path.name.startswith("helion_")
    if c.path.parent.parent.name == "correct":
        assert c.expect == c.expect_cpu == "correct"
    else:
        assert "correct" not in (c.expect, c.expect_cpu)
    fx.load_task(c.task_key)  # KeyError when the task does not exist
    c.verify_options()  # ValueError for an unknown option


def test_cheat_header_errors(tmp_path: Path):
    path = tmp_path / "helion_x.py"
    good = "# task: kz-basic:level1/21_GELU\n# backend: helion\n# attack: A12 Fallback\n# policy: strict\n"
    good += "# expect: no_kernel\n# why: x\nimport torch\n"
    path.write_text(good)
    assert parse_cheat(path).expect_cpu == "no_kernel"
    for bad in (good.replace("helion\n", "triton\n"), good.replace("A12", "B12"), good.replace("# why: x\n", "")):
        path.write_text(bad)
        with pytest.raises(ValueError, match=str(path)):
            parse_cheat(path)


def _runs(c: Case) -> bool:
    """Does the verdict come from running the candidate (else from the pre-checks)?"""
    return c.expect_cpu not in STATIC or c.options.get("static_checks") is False


@pytest.mark.parametrize("c", CASES, ids=_ids(CASES))
def test_static_status(c: Case):
    from kernelzero.tasks import resize
    from kernelzero.verify.api import precheck

    task = resize(fx.load_task(c.task_key), preset="smoke")
    verdict = precheck(task, c.path.read_text(), "helion", c.verify_options(device="cpu"))
    if not _runs(c):
        assert verdict is not None and verdict.status == c.expect_cpu, verdict
    else:
        assert verdict is None, (verdict.status, verdict.message)


# -- CPU: the real verifier ------------------------------------------------------------------------
def _cpu_selected() -> list[Case]:
    todo = [c for c in CASES if _runs(c)]
    return todo if os.environ.get("KZ_HELION_FIXTURES") == "all" else [c for c in todo if c.name in CPU_DEFAULT]


@pytest.mark.slow
@pytest.mark.parametrize("c", _cpu_selected(), ids=_ids(_cpu_selected()))
def test_helion_fixture_cpu(c: Case):
    if importlib.util.find_spec("helion") is None:
        pytest.skip("helion is not installed (pip install -e '.[helion]')")
    from kernelzero.tasks import resize
    from kernelzero.verify import verify

    task = resize(fx.load_task(c.task_key), preset="smoke")
    verdict = verify(task, c.path.read_text(), "helion", c.verify_options(device="cpu"))
    assert verdict.status == c.expect_cpu, _describe(c, verdict, c.expect_cpu)
    if c.expect_cpu == "correct":
        assert verdict.trials_passed == verdict.trials > 0
        assert any(n.startswith("compiled for sm_90: _helion_") for n in verdict.notes), verdict.notes
        assert any("Helion: autotuning off" in n for n in verdict.notes), verdict.notes


# -- GPU -------------------------------------------------------------------------------------------
def _cuda_available() -> bool:
    import torch

    return torch.cuda.is_available()


@pytest.mark.gpu
@pytest.mark.skipif(not _cuda_available(), reason="needs a CUDA GPU")
@pytest.mark.parametrize("c", CASES, ids=_ids(CASES))
def test_helion_fixture_gpu(c: Case):
    """One Helion fixture or cheat at bench sizes (or the gate's cap: fixtures.gpu_sized) against `expect` (one test
    each: xdist spreads them, the gate's table has a row for each; select some with `-k`); a correct one must report
    a timing and a speedup."""
    pytest.importorskip("helion")

    start = time.monotonic()
    opts = c.verify_options(device="cuda", timing_budget_s=float(os.environ.get("KZ_TIMING_BUDGET_S", "0.3")))
    verdict = fx.gate_verify(fx.gpu_sized(fx.load_task(c.task_key)), c.path.read_text(), "helion", opts, c.expect)
    print(f"{c.name}: {verdict.status} (want {c.expect}) in {time.monotonic() - start:.1f} s{fx.timing_note(verdict)}")
    assert verdict.status == c.expect, _describe(c, verdict, c.expect)
    if c.expect == "correct":
        assert verdict.timing is not None and verdict.speedup_eager is not None, (
            f"{c.name}: correct but no timing/speedup ({verdict.timing_note})"
        )


def test_the_bundled_replay_is_built_from_these_fixtures(monkeypatch):
    """src/kernelzero/data/kz_basic_helion_replay.jsonl is what scripts/build_helion_replay.py writes today."""
    import importlib
    import json

    monkeypatch.syspath_prepend(str(fx.ROOT / "scripts"))
    build = importlib.import_module("build_helion_replay")
    rows = [json.loads(line) for line in build.OUT.read_text().splitlines()]
    planned = [(task, idx, spec) for task, specs in build.PLAN for idx, spec in enumerate(specs)]
    assert [(r["task"], r["sample_idx"]) for r in rows] == [(t, i) for t, i, _ in planned]
    for row, (_, idx, spec) in zip(rows, planned, strict=True):
        assert (row["completion"], row["finish_reason"]) == build.completion(spec, idx), spec
    assert not any("# expect" in r["completion"] for r in rows)  # no fixture header leaks into a completion
