"""The report's tables show skipped samples (`infra_error`, `task_broken`) apart from the metrics they are left
out of: a "skipped" column, one "(skipped)" column per status that occurs, and a line among the run's facts."""

from __future__ import annotations

from kernelzero.metrics import summarise
from kernelzero.report.tables import run_facts, status_table, summary_table
from kernelzero.types import Verdict


def _record(idx: int, status: str) -> dict:
    v = Verdict(status, "t", "h", "c", "triton", "default", "cpu", "done")
    return {"task": "t", "sample_idx": idx, "level": 1, "verdict": v}


def test_skipped_samples_have_columns_of_their_own():
    summary = summarise([], [_record(0, "correct"), _record(1, "infra_error"), _record(2, "mismatch")], ks=(1,))
    table = summary_table(summary)
    row = dict(zip(table.header, table.rows[0]))
    assert (row["n"], row["pass@1"], row["correct"], row["skipped"]) == ("2", "50.0", "1/2", "1")
    statuses = status_table(summary)
    assert statuses.header == ("level", "correct", "mismatch", "total", "infra_error (skipped)")
    assert statuses.rows == (("level 1", "1", "1", "2", "1"),)
    facts = run_facts({}, summary)
    assert any(f.startswith("skipped samples") and f.endswith("infra_error 1") for f in facts)
    plain = status_table(summarise([], [_record(0, "correct")], ks=(1,)))
    assert plain.header == ("level", "correct", "total")  # no skipped sample: no column for one


def test_a_run_without_the_sandbox_says_so_first_in_its_report():
    summary = summarise([], [_record(0, "correct")], ks=(1,))
    assert run_facts({"config": {"unsafe_no_sandbox": True}}, summary)[0].startswith("UNSAFE: verified without")
    assert not any("UNSAFE" in f for f in run_facts({"config": {"unsafe_no_sandbox": False}}, summary))
