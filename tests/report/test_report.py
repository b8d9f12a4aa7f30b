"""Tests of report/ and `kernelzero report`: markdown and HTML tables and plots from a run folder.

Run: `PYTHONPATH=src .venv/bin/python -m pytest tests/test_report.py -q`
Each test writes a small run folder (run.json, samples.jsonl, verdicts.jsonl) into tmp_path from
hand-written Samples and Verdicts; the expected numbers are worked out next to the data.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

import pytest

from kernelzero import report
from kernelzero.cli import report as report_cmd
from kernelzero.report import compare_runs, load_run, write_report
from kernelzero.types import Sample, Verdict, to_dict

# (task, level, [(status, speedup vs eager, output tokens) per sample]), 5 samples a task, on a GPU.
# level 1: a: c=3, b: c=1 -> pass@1 (0.6 + 0.2) / 2 = 40.0 %; first samples: a 1.5x, b wrong -> fast_1 50.0 %
#          fast_1@1: a {1.5, 3.0} 2/5, b {2.0} 1/5 -> 30.0 %; geomean (1.5 * 1.0 * 3.0 * 2.0) ** (1/4) = 1.73x
#          tokens (5 * 100 + 5 * 300) / 10 = 200
# level 2: c: c=4 -> pass@1 80.0 %; first sample 0.5x -> fast_1 0.0 %, fast_0 100.0 %
#          fast_1@1: {4.0, 1.25} -> 40.0 %; geomean (0.5 * 0.8 * 4.0 * 1.25) ** (1/4) = 2 ** 0.25 = 1.19x
#          tokens: 400 (one sample without a count)
# all: pass@1 (0.6 + 0.2 + 0.8) / 3 = 53.3 %; pass@5 100.0 %; pass@10 not estimated (n = 5)
GPU_RUN = [
    (
        "level1/1_a",
        1,
        [
            ("correct", 1.5, 100),
            ("correct", 1.0, 100),
            ("mismatch", None, 100),
            ("runtime_error", None, 100),
            ("correct", 3.0, 100),
        ],
    ),
    (
        "level1/2_b",
        1,
        [
            ("mismatch", None, 300),
            ("correct", 2.0, 300),
            ("timeout", None, 300),
            ("mismatch", None, 300),
            ("compile_error", None, 300),
        ],
    ),
    (
        "level2/1_c",
        2,
        [
            ("correct", 0.5, None),
            ("correct", 0.8, 400),
            ("correct", 4.0, 400),
            ("correct", 1.25, 400),
            ("mismatch", None, 400),
        ],
    ),
]
CPU_RUN = [("level1/1_a", 1, [("correct", None, 80), ("compiled", None, 90), ("mismatch", None, 100)])]


@pytest.fixture
def no_plots(monkeypatch):
    """Reports without plots (each PNG costs ~0.3 s of CPU): for tests that read only the tables."""
    monkeypatch.setattr(report.plots, "matplotlib_available", lambda: False)
    monkeypatch.setattr(report, "matplotlib_available", lambda: False)


def write_run(folder: Path, tasks: list, device: str = "NVIDIA H200", model: str = "test-model") -> Path:
    folder.mkdir(parents=True)
    samples, verdicts = [], []
    for task, level, outcomes in tasks:
        for idx, (status, speedup, tokens) in enumerate(outcomes):
            samples.append(
                Sample(
                    task=task,
                    task_hash="h",
                    sample_idx=idx,
                    level=level,
                    backend="triton",
                    model=model,
                    prompt_version="triton-v1",
                    completion="```python\n```",
                    code="",
                    output_tokens=tokens,
                )
            )
            v = Verdict(
                status=status,
                task=task,
                task_hash="h",
                candidate_hash=f"c{idx}",
                backend="triton",
                profile="default",
                device=device,
                stage="done",
                speedup_eager=speedup,
            )
            verdicts.append(
                {
                    "task": task,
                    "sample_idx": idx,
                    "level": level,
                    "verdict": to_dict(v),
                    "policies": {"kernelbench": status, "strict": "mismatch"},
                }
            )
    (folder / "samples.jsonl").write_text("".join(json.dumps(to_dict(s)) + "\n" for s in samples))
    (folder / "verdicts.jsonl").write_text("".join(json.dumps(r) + "\n" for r in verdicts))
    run = {
        "config": {"model": model, "backend": "triton", "suite": "kz-basic", "samples": 5, "profile": "default"},
        "date": "2026-11-29T17:52:24",
        "versions": {"torch": "2.13.0"},
    }  # as `kernelzero eval` writes it
    (folder / "run.json").write_text(json.dumps(run))
    return folder


def row(text: str, first_cell: str) -> list[str]:
    """The cells of the markdown table row whose first cell is `first_cell` (the first such row)."""
    for line in text.splitlines():
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if line.startswith("|") and cells[0] == first_cell:
            return cells
    raise AssertionError(f"no row {first_cell!r} in:\n{text}")


def cells_by_header(text: str, first_cell: str) -> dict[str, str]:
    """Header -> cell for the row `first_cell`, using the header line of the table that holds it."""
    lines = text.splitlines()
    for i, line in enumerate(lines):
        if line.startswith("|") and [c.strip() for c in line.strip("|").split("|")][0] == first_cell:
            j = i
            while lines[j - 1].startswith("|"):
                j -= 1
            header = [c.strip() for c in lines[j].strip("|").split("|")]
            return dict(zip(header, row(line, first_cell)))
    raise AssertionError(f"no row {first_cell!r}")


def test_run_report_markdown_has_the_hand_computed_numbers(tmp_path, no_plots):
    run = write_run(tmp_path / "gpu", GPU_RUN)
    text = write_report(run).read_text()
    l1, l2, everything = (cells_by_header(text, g) for g in ("level 1", "level 2", "all"))
    assert (l1["tasks"], l1["n"], l1["pass@1"], l1["pass@5"], l1["pass@10"]) == ("2", "5", "40.0", "100.0", "–")
    assert (l1["fast_1"], l1["fast_0"], l1["fast_1.5"], l1["geomean vs eager"]) == ("50.0", "50.0", "0.0", "1.73x")
    assert (l1["geomean vs compile"], l1["avg tokens"], l1["correct"]) == ("n/a", "200", "4/10")
    assert (l2["pass@1"], l2["fast_1"], l2["fast_0"]) == ("80.0", "0.0", "100.0")
    fast_at_k = text[text.index("### fast_p@k") : text.index("### Statuses")]
    assert row(fast_at_k, "level 1")[1:4] == ["0", "40.0", "100.0"]  # p = 0: fast_0@1 is pass@1
    level1_rows = [line.split("|")[2:4] for line in fast_at_k.splitlines() if line.startswith("| level 1 ")]
    assert [[c.strip() for c in r] for r in level1_rows] == [["0", "40.0"], ["1", "30.0"], ["1.5", "20.0"]]  # fast_p@1
    assert (l2["geomean vs eager"], l2["avg tokens"]) == ("1.19x", "400")
    assert everything["pass@1"] == "53.3" and everything["tasks"] == "3"
    assert "# kernelzero eval: test-model" in text and "- samples: 5" in text and "- versions: torch 2.13.0" in text
    assert "status policy: verdict status" in text


def test_run_report_status_breakdown(tmp_path, no_plots):
    text = write_report(write_run(tmp_path / "gpu", GPU_RUN)).read_text()
    statuses = text[text.index("### Statuses") :]
    l1 = cells_by_header(statuses, "level 1")
    assert (l1["correct"], l1["mismatch"], l1["timeout"], l1["total"]) == ("4", "3", "1", "10")
    assert cells_by_header(statuses, "level 2")["runtime_error"] == "0"


def test_cpu_run_shows_na_for_speed_metrics(tmp_path, no_plots):
    text = write_report(write_run(tmp_path / "cpu", CPU_RUN, device="cpu")).read_text()
    l1 = cells_by_header(text, "level 1")
    assert l1["pass@1"] == "33.3"  # `compiled` is not correct
    assert all(l1[h] == "n/a" for h in ("fast_0", "fast_1", "geomean vs eager", "geomean vs compile"))
    assert "### fast_p@k" not in text  # a table of n/a only is left out
    assert "no timings in this run" in text and "| 0.0 |" not in text


def test_plots_written_when_matplotlib_present(tmp_path):
    pytest.importorskip("matplotlib")
    run = write_run(tmp_path / "gpu", GPU_RUN)
    text = write_report(run).read_text()
    for name in ("speedups.png", "pass_fast_at_k.png", "statuses.png"):
        assert (run / name).read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
        assert f"]({name})" in text


def test_cpu_run_has_no_speedup_plot(tmp_path):
    pytest.importorskip("matplotlib")
    run = write_run(tmp_path / "cpu", CPU_RUN, device="cpu")
    write_report(run)
    assert not (run / "speedups.png").exists() and (run / "statuses.png").exists()


def test_plots_skipped_without_matplotlib(tmp_path, no_plots):
    run = write_run(tmp_path / "gpu", GPU_RUN)
    text = write_report(run).read_text()
    assert "Plots skipped: matplotlib is not installed" in text and not list(run.glob("*.png"))


def test_compare_runs_one_table_per_level_one_row_per_run(tmp_path):
    gpu, cpu = write_run(tmp_path / "gpu", GPU_RUN), write_run(tmp_path / "cpu", CPU_RUN, device="cpu")
    text = compare_runs([gpu, cpu])
    assert [line for line in text.splitlines() if line.startswith("### ")] == ["### level 1", "### level 2", "### all"]
    level1 = text[text.index("### level 1") : text.index("### level 2")]
    assert cells_by_header(level1, "gpu")["pass@1"] == "40.0" and cells_by_header(level1, "cpu")["pass@1"] == "33.3"
    assert cells_by_header(level1, "cpu")["fast_1"] == "n/a" and cells_by_header(level1, "cpu")["fast_1@1"] == "n/a"
    assert cells_by_header(level1, "gpu")["fast_1@1"] == "30.0" and cells_by_header(level1, "cpu")["pass@5"] == "–"
    level2 = text[text.index("### level 2") : text.index("### all")]
    assert "| cpu |" not in level2 and cells_by_header(level2, "gpu")["pass@1"] == "80.0"


def test_compare_runs_policy(tmp_path):
    text = compare_runs([write_run(tmp_path / "gpu", GPU_RUN)], policy="strict")
    assert cells_by_header(text, "gpu")["pass@1"] == "0.0" and "status policy: strict" in text


def test_compare_runs_html_is_a_self_contained_page(tmp_path):
    page = compare_runs([write_run(tmp_path / "a&b", GPU_RUN)], fmt="html")
    assert page.startswith("<!DOCTYPE html>") and page.count("<table>") == 3
    assert "<td>a&amp;b</td>" in page and "<td>40.0</td>" in page
    assert "<script" not in page and "http" not in page


def test_compare_runs_names_repeated_folders_by_path(tmp_path):
    a, b = write_run(tmp_path / "x" / "run", CPU_RUN), write_run(tmp_path / "y" / "run", CPU_RUN)
    text = compare_runs([a, b])
    assert f"| {a} |" in text and f"| {b} |" in text


def test_load_run_errors(tmp_path):
    with pytest.raises(FileNotFoundError, match="no verdicts.jsonl"):
        load_run(tmp_path)
    run = write_run(tmp_path / "r", CPU_RUN)
    (run / "verdicts.jsonl").write_text((run / "verdicts.jsonl").read_text() + "{truncated\n")
    with pytest.raises(ValueError, match=r"verdicts.jsonl:4"):
        load_run(run)
    with pytest.raises(ValueError, match="fmt"):
        compare_runs([run], fmt="pdf")


def parse(argv: list[str]) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="kernelzero")
    report_cmd.add_parser(parser.add_subparsers(dest="command"), "report")
    return parser.parse_args(["report", *argv])


def test_cli_prints_markdown_and_writes_files(tmp_path, capsys, no_plots):
    gpu, cpu = write_run(tmp_path / "gpu", GPU_RUN), write_run(tmp_path / "cpu", CPU_RUN, device="cpu")
    args = parse([str(gpu), str(cpu)])
    assert args.run(args) == 0
    out = capsys.readouterr().out
    assert "### level 1" in out and "| gpu |" in out and "| cpu |" in out
    html_out, md_out = tmp_path / "c.html", tmp_path / "c.md"
    args = parse([str(gpu), "--html", str(html_out), "--md", str(md_out), "--speed", "compile", "--write"])
    assert args.run(args) == 0
    assert html_out.read_text().startswith("<!DOCTYPE html>") and "speed vs compile" in md_out.read_text()
    assert (gpu / "report.md").is_file()


def test_print_summary_shows_the_metrics_on_the_terminal(tmp_path):
    from rich.console import Console

    from kernelzero.metrics import summarise

    _, samples, records = load_run(write_run(tmp_path / "gpu", GPU_RUN))
    console = Console(record=True, width=250)
    report.print_summary(summarise(samples, records), console)
    text = console.export_text()
    assert "40.0" in text and "1.73x" in text and "mismatch" in text

    cpu_console = Console(record=True, width=250)
    report.print_summary(summarise(*load_run(write_run(tmp_path / "cpu", CPU_RUN, device="cpu"))[1:]), cpu_console)
    header = cpu_console.export_text().splitlines()
    assert "no timings" in "\n".join(header) and not any("geomean" in line or "pass@5" in line for line in header)
