"""Shared pieces of the kernel-environment tests: a small Triton task, kernels that fail and pass it, a pool
verifier whose verdicts are kept for the whole session (each distinct kernel is verified for real once), and a
stand-in verifier for tests about the environment's own logic.

Run: `.venv/bin/python -m pytest -q -p no:xdist tests/env`
"""

from __future__ import annotations

import pytest
from env_helpers import KERNELS, ScriptedVerifier, fenced

from kernelzero.env import Verifier
from kernelzero.service.store import VerdictStore
from kernelzero.tasks import load_suite, resize, select
from kernelzero.verify import options_for


@pytest.fixture(scope="session")
def gelu_task():
    (task,) = select(load_suite("kz-basic").tasks, names=["level1/21_GELU"])
    return resize(task, preset="smoke")


@pytest.fixture(scope="session")
def good() -> str:
    """A correct Triton GELU, as a completion."""
    return fenced((KERNELS / "correct" / "triton_gelu.py").read_text())


@pytest.fixture(scope="session")
def wrong() -> str:
    """A Triton GELU whose mask covers only the first row: `mismatch`, as a completion."""
    return fenced((KERNELS / "wrong" / "triton_gelu_bad_mask.py").read_text(), "First try.")


@pytest.fixture(scope="session")
def pool_verifier(tmp_path_factory) -> Verifier:
    """The local pool on CPU (Triton's interpreter, no sm_90 compile check), verdicts kept in a session store."""
    store = VerdictStore(tmp_path_factory.mktemp("env-store") / "verdicts.sqlite")
    return Verifier.pool(options_for("default", policy="strict", compile_check=False, trials=2), jobs=2, store=store)


@pytest.fixture
def scripted() -> ScriptedVerifier:
    return ScriptedVerifier()
