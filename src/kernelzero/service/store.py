"""A verdict store on disk: identical verification requests are answered once, across runs.

    store = VerdictStore()                      # ~/.cache/kernelzero/verdicts.sqlite (XDG_CACHE_HOME)
    key = request_key(task, source, "triton", opts, device="NVIDIA H200")
    verdict = store.get(key) or store.put(key, verify(task, source, "triton", opts))

A request's key is the full identity of what was verified: every field of the Task (its name, source,
sizes, presets, tolerances, note and `tie_prone` alike: a field that is not in the key could make the
store answer a request it never verified), the candidate's extracted source (all `verify()` reads of a
completion), the backend, every field of the VerifyOptions, the device's name and the versions of
Python, torch, Triton, kernelzero and the verifier's own code. tests/service/test_store_pool.py walks
`dataclasses.fields` of Task and VerifyOptions, so a field added later enters the key by construction. The store is one SQLite file in WAL mode with a busy timeout, so several
processes (eval runs, training workers) can read and write it at once; a write is one
`INSERT OR IGNORE`, so two writers of the same key keep the first verdict.

A run's JSONL files stay the record of that run; this store is the shared cache across runs.
"""

from __future__ import annotations

import functools
import hashlib
import json
import os
import sqlite3
import threading
import time
from dataclasses import asdict
from pathlib import Path

from kernelzero import __version__
from kernelzero.extract import extract_code
from kernelzero.types import Task, Verdict, is_skipped, to_dict, verdict_from_dict
from kernelzero.verify.options import VerifyOptions
from kernelzero.verify.verdicts import versions

SCHEMA = """
CREATE TABLE IF NOT EXISTS verdicts (
    key TEXT PRIMARY KEY,
    task TEXT NOT NULL,
    status TEXT NOT NULL,
    verdict TEXT NOT NULL,
    created REAL NOT NULL
)
"""


def default_path() -> Path:
    """The store's default file, under the user's cache folder (XDG_CACHE_HOME or ~/.cache)."""
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "kernelzero" / "verdicts.sqlite"


@functools.cache
def verifier_hash() -> str:
    """Hash of the verifier's own code: a changed verifier never reuses an old verdict."""
    digest = hashlib.sha256()
    root = Path(__file__).resolve().parents[1] / "verify"
    for path in sorted(root.rglob("*.py")):
        digest.update(path.read_bytes())
    return digest.hexdigest()[:16]


def library_versions() -> dict[str, str]:
    """What a stored verdict depends on beside the request: the verifier's code and the libraries it ran with
    (verify/verdicts.versions: python, torch, triton, helion)."""
    return {**versions(), "kernelzero": __version__, "verifier": verifier_hash()}


def request_key(task: Task, candidate: str, backend: str, opts: VerifyOptions, device: str) -> str:
    """The store key of one verification request (sha256, hex)."""
    payload = {
        "task": to_dict(task),
        "source": extract_code(candidate),
        "backend": backend,
        "options": asdict(opts),
        "device": device,
        "versions": library_versions(),
    }
    return hashlib.sha256(json.dumps(payload, sort_keys=True).encode()).hexdigest()


class VerdictStore:
    """Verdicts keyed by `request_key`, in one SQLite file shared by processes and threads."""

    def __init__(self, path: str | Path | None = None, timeout_s: float = 60.0):
        self.path = Path(path) if path else default_path()
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self.timeout_s = timeout_s
        self._local = threading.local()
        with self._connect() as db:
            db.execute("PRAGMA journal_mode=WAL")
            db.execute(SCHEMA)

    def _connect(self) -> sqlite3.Connection:
        db = getattr(self._local, "db", None)
        if db is None:
            db = sqlite3.connect(self.path, timeout=self.timeout_s, isolation_level=None)
            db.execute(f"PRAGMA busy_timeout={int(self.timeout_s * 1000)}")
            self._local.db = db
        return db

    def get(self, key: str) -> Verdict | None:
        row = self._connect().execute("SELECT verdict FROM verdicts WHERE key = ?", (key,)).fetchone()
        return verdict_from_dict(json.loads(row[0])) if row else None

    def put(self, key: str, verdict: Verdict) -> Verdict:
        """Store a verdict (the first one stored for a key wins); return the stored verdict.

        A verdict that is not the candidate's (`types.SKIPPED_STATUSES`: `infra_error`, `task_broken`), or about
        the verifier itself failing (stage "judge"; "runner": a runner died twice, no healthy GPU; "gpu_health":
        the GPU failed its health probe), is returned but not stored: the next request verifies afresh.
        """
        if is_skipped(verdict) or verdict.stage in ("judge", "runner", "gpu_health"):
            return verdict
        self._connect().execute(
            "INSERT OR IGNORE INTO verdicts (key, task, status, verdict, created) VALUES (?, ?, ?, ?, ?)",
            (key, verdict.task, verdict.status, json.dumps(to_dict(verdict)), time.time()),
        )
        return self.get(key) or verdict

    def __len__(self) -> int:
        return self._connect().execute("SELECT COUNT(*) FROM verdicts").fetchone()[0]

    def counts(self) -> dict[str, int]:
        """Stored verdicts per status."""
        rows = self._connect().execute("SELECT status, COUNT(*) FROM verdicts GROUP BY status").fetchall()
        return dict(rows)
