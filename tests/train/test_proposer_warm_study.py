"""bench/proposer_warm_study.py: one row a warm-start setting (steps run, the follow check of seen and unseen sets),
the table written as each setting ends, and a setting not started once the time left is under the last one's."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

pytest.importorskip("transformers")

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "bench"))

import proposer_warm_study as study  # noqa: E402


@pytest.fixture(scope="module")
def pool(tmp_path_factory) -> Path:
    from kernelzero.train.coevolve import freeze_run_config
    from kernelzero.train.coevolve_pool import write_base_pool

    root = tmp_path_factory.mktemp("pool")
    overrides = {"run_dir": str(root), "proposer": {"pool": {"pairs": 3}, "admission": {"benchmark_dedup": False}}}
    cfg, _ = freeze_run_config(ROOT / "configs" / "tiny-cpu.yaml", overrides)
    return write_base_pool(cfg, root)


def test_a_row_for_each_setting_run(tmp_path, pool):
    args = ["--config", str(ROOT / "configs" / "tiny-cpu.yaml"), "--pool", str(pool), "--work", str(tmp_path / "w")]
    settings = ["--setting", "steps=2", "--setting", "steps=3,lr=1e-4"]
    assert study.main([*args, *settings, "--out", str(tmp_path / "out"), "--budget-s", "600"]) == 0
    rows = (tmp_path / "out" / "proposer_warm.md").read_text().splitlines()[2:]
    assert [r.split(" | ")[0:2] for r in rows] == [["| steps=2", "2"], ["| steps=3,lr=1e-4", "3"]]
    assert all(" of " in r.split(" | ")[4] for r in rows)  # "k of n" seen sets followed


def test_a_setting_is_not_started_without_the_time_it_needs(tmp_path, pool, capsys):
    args = ["--config", str(ROOT / "configs" / "tiny-cpu.yaml"), "--pool", str(pool), "--work", str(tmp_path / "w")]
    assert study.main([*args, "--setting", "steps=2", "--out", str(tmp_path / "out"), "--budget-s", "0"]) == 0
    assert "| steps=2 | not run:" in capsys.readouterr().out
    assert not (tmp_path / "out" / "proposer_warm.md").exists()


@pytest.mark.parametrize("bad", ["steps", "stepz=3", "lr=fast"])
def test_a_malformed_setting_is_refused_before_any_work(tmp_path, pool, capsys, bad):
    with pytest.raises(SystemExit):
        study.main(["--pool", str(pool), "--setting", "steps=2", "--setting", bad, "--work", str(tmp_path / "w")])
    assert f"--setting '{bad}'" in capsys.readouterr().err
    assert not (tmp_path / "w").exists()  # refused before the first setting ran
