"""A process's own standby judges (verify/api.py `own_standby`, KZ_STANDBY): `verify()` calls without a standby of
their own use them, one after another; a standby's kind ignores pytest's current test; a standby judge waiting on a
GPU stands its CUDA contexts in the memory ledger (`memory.standing_base`, tested here on a ledger of its own)."""

from __future__ import annotations

import pytest

from kernelzero.verify import api
from kernelzero.verify.judge.standby import Standby


def test_it_is_off_without_the_variable_and_refuses_what_is_not_a_count(monkeypatch):
    monkeypatch.delenv("KZ_STANDBY", raising=False)
    assert api.own_standby() is None
    monkeypatch.setenv("KZ_STANDBY", "0")
    assert api.own_standby() is None
    monkeypatch.setenv("KZ_STANDBY", "some")
    with pytest.raises(ValueError, match="KZ_STANDBY must be a whole number"):
        api.own_standby()


def test_a_standbys_kind_ignores_the_current_test_and_nothing_else():
    spec = {"uids": None}
    one = Standby._key({"A": "1", "PYTEST_CURRENT_TEST": "t.py::a (call)"}, spec)
    assert one == Standby._key({"A": "1", "PYTEST_CURRENT_TEST": "t.py::b (call)"}, spec)
    assert one != Standby._key({"A": "2", "PYTEST_CURRENT_TEST": "t.py::a (call)"}, spec)


def test_verify_takes_the_processes_own_standby_one_request_after_another(monkeypatch):
    from test_standby import _case, _wait_started

    from kernelzero.verify import options_for, verify

    monkeypatch.setenv("KZ_STANDBY", "1")
    task, good = _case("correct/triton_gelu.py")
    opts = options_for(compile_check=False)
    standby = api.own_standby()
    assert standby is not None and api.own_standby() is standby  # one per process
    try:
        cold = verify(task, good, "triton", opts)  # none ready yet: judged cold, one standby started
        _wait_started(standby, 1)
        warm = verify(task, good, "triton", opts)
        assert standby.taken == 1
        assert (
            (warm.status, warm.candidate_hash) == (cold.status, cold.candidate_hash) == ("correct", cold.candidate_hash)
        )
    finally:
        standby.close()
        api._own.clear()


def test_a_standing_base_is_counted_while_it_stands(tmp_path, monkeypatch):
    from kernelzero.verify.judge import memory

    monkeypatch.setattr(memory, "LOCK_DIR", tmp_path)
    with memory.standing_base(5 << 20, "gpu-s"):
        assert memory.leased_bytes("gpu-s") == (5 << 20, 0)  # counted, and not a data lease
    assert memory.leased_bytes("gpu-s") == (0, 0)


def test_standby_none_is_a_cold_judge_even_where_the_process_keeps_its_own(monkeypatch):
    """The pool's retry after a fault wants a fresh judge, never a standby one (service/pool.py)."""
    from test_standby import _case

    from kernelzero.verify import options_for, verify
    from kernelzero.verify.judge.standby import NONE

    monkeypatch.setenv("KZ_STANDBY", "1")
    task, good = _case("correct/triton_gelu.py")
    own = api.own_standby()
    try:
        verdict = verify(task, good, "triton", options_for(compile_check=False), standby=NONE)
        assert verdict.status == "correct" and (own.started, own.taken) == (0, 0)
    finally:
        own.close()
        api._own.clear()
