"""optimize/report.py: the report of a GPU run (timings and their spread) and the kernel file, from made-up verdicts.

Run: `.venv/bin/python -m pytest -q -p no:xdist tests/optimize/test_optimize_report.py`
"""

from __future__ import annotations

from kernelzero.optimize.choose import Candidate
from kernelzero.optimize.report import Outcome, compile_range, kernel_file_name, write_outputs
from kernelzero.types import Timing, Verdict, to_dict

CODE = "import torch\n\n\nclass ModelNew(torch.nn.Module):\n    pass\n"


def _timed(speedup: float) -> Verdict:
    return Verdict(
        "correct",
        "gelu",
        "h",
        "abc",
        "triton",
        "default",
        "NVIDIA H200",
        "done",
        trials=20,
        trials_passed=20,
        timing=Timing(1.0, 1.0, 0.9, 1.2, 100),
        ref_eager=Timing(1.5, 1.5, 1.4, 1.6, 100),
        ref_compile=Timing(1.2, 1.2, 1.08, 1.32, 100),
        speedup_eager=speedup,
        speedup_compile=1.2,
        speedup_ci=(1.41, 1.58),
        policy_status={"strict": "correct"},
    )


def test_the_report_gives_both_speedups_with_their_spread_and_the_kernel_file_is_the_code(tmp_path):
    chosen = Candidate("abc", CODE, 2, 3, 4, 1.45)
    wrong = Candidate("def", CODE.replace("pass", "x = 1"), 0, 1, 0, 2.5)
    bad = Verdict("mismatch", "gelu", "h", "def", "triton", "default", "NVIDIA H200", "done", message="trial 0: off")
    outcome = Outcome(
        module="gelu.py",
        task_name="gelu",
        facts=["model: m"],
        sizes={"original": "rows=8192", "double": "rows=16384"},
        chosen=chosen,
        finalists=[wrong, chosen],
        results={
            "abc": {"original": _timed(1.5), "double": _timed(1.4)},
            "def": {"original": _timed(2.6), "double": bad},
        },
        history=[{"sample_idx": 2, "turn": 3, "verdict": to_dict(_timed(1.45))}],
        tokens={(2, 3): 812},
    )
    report, kernel = write_outputs(tmp_path, outcome)
    text = report.read_text()
    assert "| PyTorch eager | 1.5 ms | 1.4-1.6 ms | 1.50x | 1.41-1.58x (95% interval) |" in text
    assert "| torch.compile | 1.2 ms | 1.08-1.32 ms | 1.20x | 0.90-1.47x (p10/p90) |" in text
    assert "| def | 0/1 | 0 | 2.50x | correct (20/20 trials) | mismatch: trial 0: off | 2.60x |  |" in text
    assert "| 1 | 2 | 3 | correct | 1.45x | 812 | abc |" in text
    assert kernel.name == kernel_file_name("gelu") and kernel.read_text().endswith(CODE)
    assert all(line.startswith("#") for line in kernel.read_text()[: -len(CODE)].splitlines() if line)
    assert compile_range(Verdict("correct", "t", "h", "c", "triton", "default", "cpu", "done")) == "n/a"
