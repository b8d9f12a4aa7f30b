"""Append-only, resumable JSONL files for the Proposer's stages (proposals, admission decisions, suites).

    log = AppendLog(Path("proposals.jsonl"), key=lambda r: r["id"])
    if "gelu+linear#0" not in log:
        log.append({"id": "gelu+linear#0", ...})

The same behaviour as an eval run's files (kernelzero/evaluation/jsonl.py, which this package may not import:
evaluation sits above proposer): each record is one line, flushed and synced as it is written; on open, a
torn last line left by a killed writer is cut off, so a resumed stage appends on a record boundary; keys of
the records already written tell the stage what not to do again.
"""

from __future__ import annotations

import json
import os
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any


class AppendLog:
    """An append-only JSONL file holding at most one record per key."""

    def __init__(self, path: Path, key: Callable[[dict[str, Any]], Any]):
        self.path = Path(path)
        self.key = key
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self._repair()
        self._keys = {key(r) for r in self.records()}

    def _repair(self) -> None:
        """Cut a final line that has no newline or is not JSON (a writer killed mid-line)."""
        if not self.path.exists():
            self.path.touch()
            return
        data = self.path.read_bytes()
        good = data.rfind(b"\n") + 1 if data and not data.endswith(b"\n") else len(data)
        lines = data[:good].splitlines(keepends=True)
        if lines:
            try:
                json.loads(lines[-1])
            except ValueError:
                good -= len(lines[-1])
        if good != len(data):
            with open(self.path, "r+b") as fh:
                fh.truncate(good)

    def records(self) -> Iterator[dict[str, Any]]:
        with open(self.path, encoding="utf-8") as fh:
            for line in fh:
                if line.strip():
                    yield json.loads(line)

    def __contains__(self, key: Any) -> bool:
        return key in self._keys

    def __len__(self) -> int:
        return len(self._keys)

    def append(self, record: dict[str, Any]) -> bool:
        """Write one record; False (nothing written) when its key is already there."""
        k = self.key(record)
        if k in self._keys:
            return False
        with open(self.path, "a", encoding="utf-8") as fh:
            fh.write(json.dumps(record) + "\n")
            fh.flush()
            os.fsync(fh.fileno())
        self._keys.add(k)
        return True


def jsonl_rows(path: str | Path) -> Iterator[tuple[int, Any]]:
    """(line number, parsed JSON) for each non-blank line of a JSONL file; a line that is not JSON raises
    ValueError naming the file and line."""
    for lineno, line in enumerate(Path(path).read_text().splitlines(), 1):
        if not line.strip():
            continue
        try:
            yield lineno, json.loads(line)
        except ValueError as exc:
            raise ValueError(f"{path}:{lineno}: not JSON ({exc})") from None
