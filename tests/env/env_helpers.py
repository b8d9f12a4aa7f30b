"""Helpers of the kernel-environment tests (imported by conftest.py and the tests): completions, verdicts as the
verifier writes them, and a stand-in verifier scripted by markers in the completion text."""

from __future__ import annotations

from pathlib import Path

from kernelzero.env import Verifier
from kernelzero.types import Timing, Verdict

KERNELS = Path(__file__).resolve().parents[1] / "kernels"


def fenced(source: str, prose: str = "Here is my kernel.") -> str:
    """A completion as a model writes it: some prose and one python block."""
    return f"{prose}\n\n```python\n{source}```\n"


def make_verdict(status: str, task: str = "t", speedup: float | None = None, **extra) -> Verdict:
    """A verdict as the verifier writes it (timed when `speedup` is given, as on a GPU)."""
    timing = {}
    if speedup is not None:
        ref = Timing(2.0, 2.0, 1.9, 2.1, 30)
        mine = Timing(2.0 / speedup, 2.0 / speedup, 1.9 / speedup, 2.1 / speedup, 30)
        timing = {"timing": mine, "ref_eager": ref, "speedup_eager": speedup}
    return Verdict(
        status=status,
        task=task,
        task_hash="h",
        candidate_hash="c",
        backend="triton",
        profile="default",
        device="NVIDIA H200" if speedup is not None else "cpu",
        stage="done",
        message="" if status == "correct" else "details of the failure",
        policy_status={"strict": status, "kernelbench": status},
        **timing,
        **extra,
    )


class ScriptedVerifier:
    """A stand-in verifier: the verdict of a completion is looked up by a marker in its text ("@correct:2.0",
    "@mismatch"); every batch is recorded."""

    def __init__(self) -> None:
        self.batches: list[list[str]] = []

    def run(self, items):
        self.batches.append([text for _, text, _ in items])
        out = []
        for task, text, _ in items:
            marker = text.split("@", 1)[1].split()[0] if "@" in text else "format_error"
            status, _, speed = marker.partition(":")
            out.append(make_verdict(status, task.name, float(speed) if speed else None))
        return out

    def verifier(self) -> Verifier:
        return Verifier(self.run, name="scripted")
