"""The service's SQLite file (`kernelzero serve --db`): one server at a time, private to it, and kept bounded.

    lock = hold(db)                          # DatabaseBusy (naming the holder's pid) when another server has it
    prepare(db)                              # mode 0600, auto_vacuum INCREMENTAL (a VACUUM, once, for an old file)
    retention = Retention(db, keep_days=30, max_db_mb=4096)
    retention.prune()                        # {"jobs": n, "verdicts": m, "mb": size after}
    retention.make_room()                    # BodyError(429) when the file stays over max_db_mb after a prune

- **One server per database**: an exclusive `flock` on `<db>.lock` beside the file (mode 0600; it holds the
  holder's pid, for the message), taken before the server reads the queue (before `JobQueue.recover`) and held
  for the server's life by its own process only (the descriptor is not inherited by its children, PEP 446); the
  kernel drops it when that process ends, however it ends. Two servers on one file verified each other's jobs
  under their own options, and one's start-up put the other's running jobs back in the queue.
- **Private**: the database, its WAL and shared-memory files (SQLite gives them the database's mode) and the
  lock are readable by the server's user only: the file holds every client's code and verdicts.
- **Retention**: jobs `done` or `failed` that finished over `keep_days` ago and verdicts stored over
  `keep_days` ago are deleted; while the file is over `max_db_mb`, the oldest of them go first until it is under
  90% of it. Jobs `queued` or `running` are never deleted (work not done yet): when they alone fill the file,
  `make_room` refuses new jobs (429) until they are done. Freed pages go back to the file system
  (`incremental_vacuum`, then a WAL checkpoint that truncates the log). `size_mb` counts the file and its WAL.
  A deleted job's id answers 404; a deleted verdict is verified again when asked for.
"""

from __future__ import annotations

import fcntl
import os
import sqlite3
import threading
import time
from pathlib import Path

from kernelzero.service.schema import BodyError

CHUNK = 500  # rows deleted per step while the file is over its bound
LOW_WATER = 0.9  # a prune for size stops under this share of max_db_mb


class DatabaseBusy(ValueError):
    """Another server holds the database's lock."""


def lock_path(db: Path) -> Path:
    return db.with_name(db.name + ".lock")


def hold(db: Path) -> int:
    """Take the database's lock for this process's life; return its descriptor (keep it open).

    Raises DatabaseBusy naming the holder when another process holds it."""
    path = lock_path(db)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW, 0o600)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        holder = os.pread(fd, 32, 0).decode(errors="replace").strip() or "unknown"
        os.close(fd)
        raise DatabaseBusy(
            f"another kernelzero serve (pid {holder}) is using the database {db} (it holds {path}); "
            "stop it first, or give this server another --db"
        ) from None
    os.fchmod(fd, 0o600)
    os.ftruncate(fd, 0)
    os.pwrite(fd, f"{os.getpid()}\n".encode(), 0)
    return fd


def prepare(db: Path) -> None:
    """Make the database file private (0600) and give it incremental auto-vacuum (a VACUUM, once, on a file made
    without it), before the queue and the store create their tables."""
    db.parent.mkdir(parents=True, exist_ok=True)
    os.close(os.open(db, os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW, 0o600))
    for path in (db, db.with_name(db.name + "-wal"), db.with_name(db.name + "-shm")):
        if path.exists():
            os.chmod(path, 0o600)
    con = sqlite3.connect(db, isolation_level=None)
    try:
        if con.execute("PRAGMA auto_vacuum").fetchone()[0] != 2:  # SQLite changes it only outside WAL mode
            con.execute("PRAGMA journal_mode = DELETE")
            con.execute("PRAGMA auto_vacuum = INCREMENTAL")
            con.execute("VACUUM")  # applies the mode to an existing file (instant for a new, empty one)
        con.execute("PRAGMA journal_mode = WAL")
    finally:
        con.close()


class Retention:
    """The retention policy of one service database (see the module docstring); thread-safe."""

    def __init__(self, db: Path, keep_days: float = 30.0, max_db_mb: float = 4096.0, timeout_s: float = 60.0):
        if keep_days <= 0 or max_db_mb <= 0:
            raise ValueError(f"--keep-days and --max-db-mb must be positive, got {keep_days} and {max_db_mb}")
        self.db, self.keep_s, self.max_mb = Path(db), keep_days * 86400.0, max_db_mb
        self.timeout_s = timeout_s
        self.every_s = min(60.0, self.keep_s / 4)  # how often the runner prunes
        self.last = 0.0
        self._lock = threading.Lock()
        self._local = threading.local()

    def _connect(self) -> sqlite3.Connection:
        con = getattr(self._local, "db", None)
        if con is None:
            con = sqlite3.connect(self.db, timeout=self.timeout_s, isolation_level=None, check_same_thread=False)
            self._local.db = con
        return con

    def size_mb(self) -> float:
        """The database's bytes on disk (the file and its WAL), in MiB."""
        total = 0
        for path in (self.db, self.db.with_name(self.db.name + "-wal")):
            try:
                total += path.stat().st_size
            except FileNotFoundError:
                pass
        return total / (1 << 20)

    def due(self) -> bool:
        """Whether a periodic prune is due (`every_s` since the last one)."""
        return time.monotonic() - self.last >= self.every_s

    def prune(self) -> dict:
        """Delete what the policy lets go and give the space back; {"jobs", "verdicts", "mb"}."""
        with self._lock:
            con, cutoff = self._connect(), time.time() - self.keep_s
            jobs = con.execute("DELETE FROM jobs WHERE state IN ('done', 'failed') AND finished < ?", (cutoff,))
            verdicts = con.execute("DELETE FROM verdicts WHERE created < ?", (cutoff,))
            counts = {"jobs": jobs.rowcount, "verdicts": verdicts.rowcount}
            self._reclaim(con)
            while self.size_mb() > self.max_mb * LOW_WATER:
                oldest_jobs = "SELECT id FROM jobs WHERE state IN ('done', 'failed') ORDER BY id LIMIT ?"
                jobs = con.execute(f"DELETE FROM jobs WHERE id IN ({oldest_jobs})", (CHUNK,)).rowcount
                oldest = "SELECT rowid FROM verdicts ORDER BY rowid LIMIT ?"
                verdicts = con.execute(f"DELETE FROM verdicts WHERE rowid IN ({oldest})", (CHUNK,)).rowcount
                counts = {"jobs": counts["jobs"] + jobs, "verdicts": counts["verdicts"] + verdicts}
                self._reclaim(con)
                if jobs + verdicts == 0:  # only unfinished jobs are left
                    break
            self.last = time.monotonic()
            return {**counts, "mb": round(self.size_mb(), 3)}

    @staticmethod
    def _reclaim(con: sqlite3.Connection) -> None:
        con.executescript("PRAGMA incremental_vacuum;")  # stepped to the end (execute() frees one page)
        con.execute("PRAGMA wal_checkpoint(TRUNCATE)")

    def make_room(self) -> None:
        """Before new jobs are taken: prune when the file is over its bound; BodyError(429) when it still is."""
        if self.size_mb() <= self.max_mb:
            return
        self.prune()
        if self.size_mb() > self.max_mb:
            raise BodyError(
                429,
                f"the service's database is full ({self.size_mb():.0f} MiB of unfinished jobs, at most "
                f"{self.max_mb:g} MiB: --max-db-mb); retry later",
            )
