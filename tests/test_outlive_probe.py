"""The outlive probe (bench/outlive_probe.py) without a GPU: it says so and stops before any work, and its child
reports a hold that cannot run as an error row, not a crash of the probe."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest
import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "bench"))

import outlive_probe  # noqa: E402

pytestmark = pytest.mark.skipif(torch.cuda.is_available(), reason="the GPU host runs the probe instead")


def test_without_a_gpu_the_probe_says_so_and_writes_nothing(tmp_path, capsys):
    out = tmp_path / "probe.md"
    assert outlive_probe.main(["--processes", "1", "--out", str(out)]) == 2
    assert "needs a CUDA GPU" in capsys.readouterr().out and not out.exists()


def test_a_child_that_cannot_time_is_an_error_row():
    got = outlive_probe._one(1, 2, 1024)
    assert set(got) == {"error"} and got["error"], got


def test_conditions_are_load_hold_and_path_and_a_bad_one_is_named():
    assert outlive_probe._conditions("idle:0:main,busy:200:runner") == [
        ("idle", 0.0, "main"),
        ("busy", 200.0, "runner"),
    ]
    for bad in ("idle:0", "warm:0:main", "idle:0:thread"):
        with pytest.raises(SystemExit, match=bad):
            outlive_probe._conditions(bad)


def test_the_runner_path_child_without_a_gpu_is_an_error_row_too():
    got = outlive_probe._one(1, 2, 1024, 200.0, "runner")
    assert set(got) == {"error"} and got["error"], got
