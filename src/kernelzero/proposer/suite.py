"""The admitted suite: a JSONL file that `kernelzero.tasks.load_suite` loads like the KernelBench dataset.

Each line holds the dataset's columns, `code`, `level` (null: proposed modules have no KernelBench level),
`name` (`kzp00012_gelu_layer_norm_linear`) and `problem_id` (1, 2, ... in admission order), plus a
`provenance` object that `load_suite` ignores and the Proposer's later stages read:

| field | meaning |
|---|---|
| apis | the sampled API set the module was written for |
| proposal_id | the proposal's id (`<api set key>#<sample_idx>`) |
| model, prompt_version | who wrote it and with which proposer prompt (or `template`) |
| origin | where the API set came from: `cooccurrence`, `frontier`, `include` |
| corpus | the catalog's corpus: its specs and whether KernelBench was mined |
| exact_key, near_key | dedup.py's keys |
| forward_ms, device, scale | the eager forward time measured in admission, where, at which size scale |
| benchmarks | the benchmark suites it was checked against |
| admitted | date and time of admission |
"""

from __future__ import annotations

import datetime
from pathlib import Path
from typing import Any

from kernelzero.proposer.dedup import exact_key, near_key
from kernelzero.proposer.records import AppendLog


class SuiteWriter:
    """Appends admitted modules to a suite file; knows the keys of those already there."""

    def __init__(self, path: Path, benchmarks: list[str]):
        self.log = AppendLog(path, key=lambda r: r["name"])
        self.benchmarks = list(benchmarks)
        self.next_id = 1 + max((int(r.get("problem_id") or 0) for r in self.log.records()), default=0)

    def keys(self) -> list[tuple[str | None, str | None, str]]:
        """(exact_key, near_key, name) of every module in the suite."""
        out = []
        for row in self.log.records():
            prov = row.get("provenance") or {}
            try:
                exact = prov.get("exact_key") or exact_key(row["code"])
                near = prov.get("near_key") or near_key(row["code"])
            except SyntaxError:
                continue
            out.append((exact, near, row["name"]))
        return out

    def add(
        self, proposal: dict[str, Any], keys: tuple[str, str | None], result: dict[str, Any], device: str, options: Any
    ) -> str:
        """Append one admitted proposal; return its task name."""
        apis = list(proposal["apis"])
        name = f"kzp{self.next_id:05d}_{'_'.join(apis)}"
        provenance = {
            "apis": apis,
            "proposal_id": proposal["id"],
            "model": proposal.get("model", ""),
            "prompt_version": proposal.get("prompt_version", ""),
            "origin": proposal.get("origin", ""),
            "corpus": proposal.get("corpus") or {},
            "exact_key": keys[0],
            "near_key": keys[1],
            "forward_ms": result.get("forward_ms"),
            "device": device,
            "scale": options.scale,
            "benchmarks": self.benchmarks,
            "admitted": datetime.datetime.now().isoformat(timespec="seconds"),
        }
        self.log.append(
            {
                "code": proposal["code"],
                "level": None,
                "name": name,
                "problem_id": self.next_id,
                "provenance": provenance,
            }
        )
        self.next_id += 1
        return name
