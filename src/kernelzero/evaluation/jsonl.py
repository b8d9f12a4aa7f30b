"""Append-only JSONL files that survive being killed mid-write.

A run's `samples.jsonl` and `verdicts.jsonl` are appended one record per line, flushed and synced
after each. On open, a torn last line (the process was killed while writing it) is cut off, so the
file again ends on a record boundary and a resumed run appends cleanly after it. Records are keyed;
`keys()` tells a resumed stage what is already done, so nothing is produced twice.
"""

from __future__ import annotations

import json
import os
import threading
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any


class JsonlLog:
    """An append-only JSONL file with one record per key."""

    def __init__(self, path: Path, key: Callable[[dict[str, Any]], Any]):
        self.path = Path(path)
        self.key = key
        self._lock = threading.Lock()
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self._repair()
        self._keys = {key(r) for r in self.records()}

    def _repair(self) -> None:
        """Cut a torn final line (no newline, or not JSON) left by a killed writer."""
        if not self.path.exists():
            self.path.touch()
            return
        data = self.path.read_bytes()
        end = len(data)
        if data and not data.endswith(b"\n"):
            end = data.rfind(b"\n") + 1
        good = end
        for line in data[:end].splitlines(keepends=True)[::-1][:1]:
            try:
                json.loads(line)
            except ValueError:
                good = end - len(line)
        if good != len(data):
            with open(self.path, "r+b") as fh:
                fh.truncate(good)

    def records(self) -> Iterator[dict[str, Any]]:
        with open(self.path) as fh:
            for line in fh:
                if line.strip():
                    yield json.loads(line)

    def keys(self) -> set:
        return set(self._keys)

    def __contains__(self, key: Any) -> bool:
        return key in self._keys

    def append(self, record: dict[str, Any]) -> bool:
        """Write one record (thread-safe); False (nothing written) if its key is already there."""
        k = self.key(record)
        line = json.dumps(record) + "\n"
        with self._lock:
            if k in self._keys:
                return False
            with open(self.path, "a") as fh:
                fh.write(line)
                fh.flush()
                os.fsync(fh.fileno())
            self._keys.add(k)
        return True
