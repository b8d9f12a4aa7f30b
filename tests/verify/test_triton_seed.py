"""The Triton cache seed (verify/sandbox/triton_seed.py, KZ_TRITON_SEED): a master of trusted entries copied into each
sandboxed process's fresh cache folder as it is laid out; links and oversized masters never copied; off by default
and without a GPU; a failed build leaves no master. On a GPU: a seeded worker's warm-up compiles nothing."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
import torch

from kernelzero.verify.sandbox import triton_seed
from kernelzero.verify.sandbox.box import DEFAULT_UIDS
from kernelzero.verify.sandbox.process import lay_out_workdir, plan_sandbox, release_role, role_plan

GPU = torch.cuda.is_available()


def fake_master(root: Path) -> Path:
    master = root / "master"
    (master / "abc123").mkdir(parents=True)
    (master / "abc123" / "cuda_utils.so").write_bytes(b"\x7fELF helper")
    (master / "def456").mkdir()
    (master / "def456" / "kz_warm_touch.cubin").write_bytes(b"cubin")
    (master / "def456" / "kz_warm_touch.json").write_text("{}")
    (root / "secret").write_text("root's")
    (master / "def456" / "planted").symlink_to(root / "secret")  # never followed, never copied
    (master / "linked").symlink_to(root)
    return master


def test_the_masters_regular_files_are_copied_into_a_fresh_cache_and_links_are_not(tmp_path):
    master = fake_master(tmp_path)
    cache = tmp_path / "cache"
    cache.mkdir()
    fd = os.open(cache, os.O_RDONLY | os.O_DIRECTORY)
    try:
        assert triton_seed.seed(fd, None, master) == 3
    finally:
        os.close(fd)
    got = sorted(str(p.relative_to(cache)) for p in cache.rglob("*"))
    assert got == [
        "abc123",
        "abc123/cuda_utils.so",
        "def456",
        "def456/kz_warm_touch.cubin",
        "def456/kz_warm_touch.json",
    ]
    assert (cache / "abc123" / "cuda_utils.so").read_bytes() == b"\x7fELF helper"
    assert not any(p.is_symlink() for p in cache.rglob("*"))
    # a copy: what the process writes into its cache never reaches the master
    (cache / "abc123" / "cuda_utils.so").write_bytes(b"changed")
    assert (master / "abc123" / "cuda_utils.so").read_bytes() == b"\x7fELF helper"


def test_an_oversized_or_missing_master_copies_nothing(tmp_path, monkeypatch):
    master = fake_master(tmp_path)
    cache = tmp_path / "cache"
    cache.mkdir()
    fd = os.open(cache, os.O_RDONLY | os.O_DIRECTORY)
    try:
        monkeypatch.setattr(triton_seed, "MAX_BYTES", 8)
        assert triton_seed.seed(fd, None, master) == 0
        assert triton_seed.seed(fd, None, tmp_path / "none") == 0
    finally:
        os.close(fd)
    assert list(cache.iterdir()) == []


def test_seeding_is_off_by_default_and_refuses_a_bad_setting(monkeypatch):
    monkeypatch.delenv(triton_seed.ENV, raising=False)
    assert not triton_seed.enabled() and triton_seed.master() is None
    monkeypatch.setenv(triton_seed.ENV, "yes")
    with pytest.raises(ValueError, match="KZ_TRITON_SEED must be 0 or 1"):
        triton_seed.enabled()


@pytest.mark.skipif(GPU, reason="the GPU test below builds a real master")
def test_without_a_gpu_no_master_is_built_or_copied(tmp_path, monkeypatch):
    monkeypatch.setenv(triton_seed.ENV, "1")
    monkeypatch.setenv(triton_seed.DIR_ENV, str(tmp_path / "seeds"))
    assert triton_seed.master() is None and not (tmp_path / "seeds").exists()
    # a build that fails (here: no CUDA for the warm-up) says why and leaves no master and no scratch behind
    target = tmp_path / "seeds" / "m"
    why = triton_seed.build(target, timeout_s=300)
    assert why.startswith("the warm-up child failed") and not target.exists()
    assert list((tmp_path / "seeds").iterdir()) == []


def test_a_failed_build_is_not_tried_again_on_the_machine(tmp_path, monkeypatch):
    monkeypatch.setenv(triton_seed.ENV, "1")
    monkeypatch.setenv(triton_seed.DIR_ENV, str(tmp_path / "seeds"))
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(triton_seed, "_failed", set())
    builds = []
    monkeypatch.setattr(triton_seed, "build", lambda target, timeout_s=0: builds.append(target) or "no compiler")
    assert triton_seed.master() is None and len(builds) == 1
    marker = triton_seed.master_path().parent / f"{triton_seed.master_path().name}.failed"
    assert marker.read_text() == "no compiler\n"
    monkeypatch.setattr(triton_seed, "_failed", set())  # another process: the marker stops it
    assert triton_seed.master() is None and len(builds) == 1
    marker.unlink()
    assert triton_seed.master() is None and len(builds) == 2  # removed: tried again


def test_a_laid_out_workdir_gets_the_masters_entries_when_seeding_is_on(tmp_path, monkeypatch):
    seeds = tmp_path / "seeds"
    seeds.mkdir()
    monkeypatch.setenv(triton_seed.ENV, "1")
    monkeypatch.setenv(triton_seed.DIR_ENV, str(seeds))
    master = triton_seed.master_path()
    fake = fake_master(tmp_path)
    fake.rename(master)
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)  # a GPU host as far as the seed can tell
    plan = role_plan(plan_sandbox(DEFAULT_UIDS, False))
    try:
        env, fd = lay_out_workdir(tmp_path / "work", plan)
        os.close(fd)
        cache = Path(env["TRITON_CACHE_DIR"])
        copy = cache / "abc123" / "cuda_utils.so"
        assert copy.read_bytes() == b"\x7fELF helper"
        if plan.uid is not None:  # the copies are the sandbox user's, like the rest of its folder
            assert copy.stat().st_uid == plan.uid and (cache / "abc123").stat().st_uid == plan.uid
        monkeypatch.setenv(triton_seed.ENV, "0")
        env, fd = lay_out_workdir(tmp_path / "plain", plan)
        os.close(fd)
        assert list(Path(env["TRITON_CACHE_DIR"]).iterdir()) == []
    finally:
        release_role(plan)


@pytest.mark.gpu
@pytest.mark.skipif(not GPU, reason="needs a CUDA GPU")
def test_a_seeded_warm_up_compiles_nothing(tmp_path):
    """On a GPU: the master is built by the warm-up alone; a fresh process whose cache is a seeded copy warms up
    without writing a single new cache entry (Triton found the driver helpers and the kernel under their keys)."""
    master = tmp_path / "master"
    assert triton_seed.build(master) == ""
    cache = tmp_path / "cache"
    cache.mkdir()
    fd = os.open(cache, os.O_RDONLY | os.O_DIRECTORY)
    try:
        copied = triton_seed.seed(fd, None, master)
    finally:
        os.close(fd)
    assert copied >= 2
    before = sorted(str(p.relative_to(cache)) for p in cache.rglob("*"))
    env = {**os.environ, "TRITON_CACHE_DIR": str(cache)}
    env.pop("TRITON_INTERPRET", None)
    code = "from kernelzero.verify.worker.warm import warm_gpu; print(warm_gpu())"
    done = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-2000:]
    assert sorted(str(p.relative_to(cache)) for p in cache.rglob("*")) == before, done.stdout
