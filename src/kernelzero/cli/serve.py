"""`kernelzero serve`: the verification service over HTTP (FastAPI + uvicorn).

    kernelzero serve --host 127.0.0.1 --port 8765 --db service.sqlite --jobs 2 --tokens-file tokens.txt \\
        --option device=cpu --option compile_check=false

Clients: `--tokens-file` names them, one `NAME TOKEN` a line (`#` comments); each reads only its own jobs.
`--token-file` holds one token shared by all clients (one client). Without either, the server refuses to
start unless told `--insecure-no-token`, which serves loopback addresses only and says so at start-up.

Jobs and verdicts live in one SQLite file (`--db`: tables `jobs` and `verdicts`), so a restart,
even after SIGKILL, loses no job and verifies no finished job again. One server per file: a second
`kernelzero serve` on the same `--db` stops at start-up naming the first (service/database.py, a lock
beside the file). The file is kept bounded (`--keep-days`, `--max-db-mb`: old finished jobs and verdicts
are deleted and the space given back) and private to the server's user (mode 0600). The server refuses
to start where the sandbox cannot be set up (every task's and candidate's code runs in it), unless
`--unsafe-no-sandbox`. Routes: kernelzero.service.http;
what clients may send: kernelzero.service.schema. `--option NAME=VALUE` sets the server's own verifier
options (any VerifyOptions field; the value is read as JSON, else as a string): sandbox, device, limits
and the rest that clients may not set.

No leftovers: every temp folder of the server, its judges and their workers lies under one folder of
its own (`$TMPDIR/kz-serve-PID`, made the TMPDIR its children inherit). A small reaper process, started
in its own session and holding the read end of a pipe whose write end only the server holds, wakes when
the server is gone however it ended (SIGKILL included): it ends any process still working in that folder,
removes the folder and the shared-memory transfer folders of dead judges, and exits. A server that finds
a `kz-serve-PID` folder of a dead server removes it. Also runs as `python -m kernelzero.cli.serve ...`.
"""

from __future__ import annotations

import argparse
import logging
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from kernelzero.cli.serve_access import client_tokens, connection_limits
from kernelzero.service.store import default_path
from kernelzero.verify.options import parse_overrides


def add_parser(sub: argparse._SubParsersAction, name: str) -> None:
    p = sub.add_parser(name, help="run the verification service over HTTP")
    _arguments(p)
    p.set_defaults(run=run)


def _arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--host", default="127.0.0.1", help="address to listen on (default 127.0.0.1)")
    p.add_argument("--port", type=int, default=8765)
    p.add_argument(
        "--db",
        type=Path,
        default=default_path().with_name("service.sqlite"),
        help="SQLite file of jobs and verdicts (default ~/.cache/kernelzero/service.sqlite)",
    )
    p.add_argument("--jobs", type=int, default=2, help="verifications side by side")
    p.add_argument("--token-file", type=Path, help="file holding the one bearer token all clients send")
    p.add_argument(
        "--tokens-file",
        type=Path,
        help="file of one client a line, `NAME TOKEN` (# comments); each client reads only its own jobs",
    )
    p.add_argument(
        "--insecure-no-token",
        action="store_true",
        help="INSECURE: serve without a token (loopback only; any local user can then run code)",
    )
    p.add_argument("--max-body-mb", type=float, default=8.0, help="largest request body accepted (MiB)")
    p.add_argument(
        "--max-uploads", type=int, default=8, help="request bodies read and parsed at once; others wait their turn"
    )
    p.add_argument("--max-queued", type=int, default=100_000, help="queued jobs at most; more get 429")
    p.add_argument(
        "--max-connections",
        type=int,
        help="open connections at most (default 1024, fewer where RLIMIT_NOFILE is low); past it the longest-idle "
        "connection is closed",
    )
    p.add_argument(
        "--idle-timeout-s", type=float, default=5.0, help="seconds a connection may wait before sending a request"
    )
    p.add_argument(
        "--read-timeout-s",
        type=float,
        default=30.0,
        help="seconds a client has to send a whole request (headers and body) from then",
    )
    p.add_argument(
        "--option",
        action="append",
        default=[],
        metavar="NAME=VALUE",
        help="a server-side verifier option (VerifyOptions field), e.g. device=cpu; repeatable",
    )
    _database_arguments(p)
    p.add_argument(
        "--unsafe-no-sandbox",
        action="store_true",
        help="UNSAFE: run clients' candidates without the sandbox (never beyond a trusted machine); verdicts say so",
    )


def _database_arguments(p: argparse.ArgumentParser) -> None:
    """The database's bounds (issue 27: it only grew, about 13 MiB/s under one sequential client)."""
    p.add_argument(
        "--keep-days",
        type=float,
        default=30.0,
        help="finished jobs and stored verdicts older than this are deleted (default 30 days)",
    )
    p.add_argument(
        "--max-db-mb",
        type=float,
        default=4096.0,
        help="the database's size bound (MiB, its WAL included): past it the oldest finished jobs and verdicts "
        "are deleted first; new jobs get 429 while unfinished ones alone fill it (default 4096)",
    )


def open_database(db: Path, keep_days: float, max_db_mb: float):
    """The server's hold on `db` (its lock, kept for the process's life; DatabaseBusy when another server has it)
    and its retention policy, before anything reads the queue."""
    from kernelzero.service.database import Retention, hold, prepare

    retention = Retention(db, keep_days=keep_days, max_db_mb=max_db_mb)  # bad bounds fail before the lock
    lock = hold(db)
    prepare(db)
    return lock, retention


def _pid_alive(pid: int) -> bool:
    """Whether `pid` runs (a zombie, dead but not yet reaped by its new parent, does not)."""
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except (OSError, IndexError):
        return False
    return state not in ("Z", "X")


def _sweep(base: Path, pattern: str) -> None:
    """Remove folders `<prefix>-PID-...` or `<prefix>-PID` under `base` whose process is gone."""
    for stale in base.glob(pattern):
        pid = stale.name.split("-")[2] if stale.name.count("-") >= 2 else ""
        if pid.isdigit() and not _pid_alive(int(pid)):
            shutil.rmtree(stale, ignore_errors=True)


def private_tmp() -> Path:
    """This server's temp folder, made the TMPDIR of the process and of everything it starts."""
    base = Path(tempfile.gettempdir())
    _sweep(base, "kz-serve-*")
    root = base / f"kz-serve-{os.getpid()}"
    shutil.rmtree(root, ignore_errors=True)  # a dead server's, whose pid this one got
    root.mkdir(mode=0o711)
    root.chmod(0o711)  # a sandboxed worker's user must reach its own folder inside
    os.environ["TMPDIR"] = str(root)
    tempfile.tempdir = str(root)
    return root


def start_reaper(root: Path) -> int:
    """Start the reaper of `root` (see the module docstring); return the pipe end the server keeps open."""
    read_end, write_end = os.pipe()  # not inherited by the server's other children (PEP 446)
    subprocess.Popen(
        [sys.executable, "-m", "kernelzero.cli.serve", "--reap", str(root)],
        stdin=read_end,
        stdout=subprocess.DEVNULL,
        start_new_session=True,  # outside the server's group and session: a kill of those spares it
    )
    os.close(read_end)
    return write_end


def _working_in(root: Path) -> list[int]:
    """Processes (other than this one) whose command line, working folder or TMPDIR lies in `root`."""
    found, mark = [], str(root)
    for proc in Path("/proc").glob("[0-9]*"):
        pid = int(proc.name)
        if pid == os.getpid():
            continue
        try:
            if mark in (proc / "cmdline").read_bytes().decode(errors="replace"):
                found.append(pid)
                continue
        except OSError:
            continue
        for name in ("cwd", "environ"):
            try:
                where = os.readlink(proc / name) if name == "cwd" else (proc / name).read_bytes().decode("latin-1")
            except OSError:  # another user's, or gone
                continue
            if mark in where:
                found.append(pid)
                break
    return found


def reap(root: Path, grace_s: float = 5.0) -> int:
    """The reaper: wait for the server to be gone, then leave nothing of it behind."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # a Ctrl-C meant for the server
    sys.stdin.buffer.read()  # returns at end of file: the server has exited or was killed
    deadline = time.monotonic() + grace_s
    while (left := _working_in(root)) and time.monotonic() < deadline:
        time.sleep(0.1)  # judges and workers end on their own death signals first
    for _ in range(50):
        if not left:
            break
        for pid in left:
            try:
                os.kill(pid, signal.SIGKILL)
            except (ProcessLookupError, PermissionError):
                pass
        time.sleep(0.1)
        left = _working_in(root)
    shutil.rmtree(root, ignore_errors=True)
    _sweep(Path("/dev/shm"), "kz-xfer-*-*")
    _sweep(Path(tempfile.gettempdir()), "kz-xfer-*-*")
    return 0


def run(args: argparse.Namespace) -> int:
    tokens = client_tokens(args)  # before anything starts
    try:
        import uvicorn

        from kernelzero.service.connections import MAX_HEADER_BYTES, guarded_protocol
        from kernelzero.service.http import create_app, server_paths
    except ImportError as exc:
        raise ValueError(f"kernelzero serve needs fastapi and uvicorn ({exc}); pip install fastapi uvicorn") from None
    from kernelzero.service.jobs import JobQueue
    from kernelzero.service.runner import JobRunner
    from kernelzero.service.store import VerdictStore

    limits = connection_limits(args)

    if tokens is None:
        print(
            f"kernelzero serve: INSECURE: --insecure-no-token: no token; bound to {args.host} (loopback) only, "
            "where any local user can submit code",
            file=sys.stderr,
            flush=True,
        )
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    options = parse_overrides(args.option)
    if args.unsafe_no_sandbox:
        options["unsafe_no_sandbox"] = True
    from kernelzero.verify import options_for
    from kernelzero.verify.sandbox.process import plan_for

    plan_for(options_for(**options))  # SandboxUnavailable: the server refuses to start, nothing runs
    db = args.db.resolve()
    _lock, retention = open_database(db, args.keep_days, args.max_db_mb)
    root = private_tmp()
    keep = start_reaper(root)
    # puts jobs a killed server left running back to queued (or fails those lost twice)
    queue = JobQueue(db, max_queued=args.max_queued, retention=retention)
    runner = JobRunner(queue, jobs=args.jobs, store=VerdictStore(db), options=options).start()
    private = server_paths(db.parent, root.parent)
    max_body = int(args.max_body_mb * 1024 * 1024)
    app = create_app(queue, tokens, max_body, private, max_uploads=args.max_uploads)
    print(
        f"kernelzero serve: http://{args.host}:{args.port} db={db} jobs={args.jobs} pid={os.getpid()} tmp={root} "
        f"connections<={limits.max_connections} idle<={limits.idle_s:g}s request<={limits.read_s:g}s",
        file=sys.stderr,
        flush=True,
    )
    try:
        uvicorn.run(
            app,
            host=args.host,
            port=args.port,
            log_level="warning",
            http=guarded_protocol(limits),
            timeout_keep_alive=max(1, int(limits.idle_s)),
            h11_max_incomplete_event_size=MAX_HEADER_BYTES,
        )
    finally:
        runner.stop(timeout=5)
        os.close(keep)  # the reaper removes what is left once this process is gone
    return 0


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    if argv[:1] == ["--reap"]:
        return reap(Path(argv[1]))
    parser = argparse.ArgumentParser(prog="kernelzero serve", description="the verification service over HTTP")
    _arguments(parser)
    args = parser.parse_args(argv)
    from kernelzero.verify.sandbox.box import SandboxUnavailable

    try:
        return run(args)
    except SandboxUnavailable as exc:  # as `kernelzero serve` answers it (cli/__init__.py)
        print(f"kernelzero serve: refused: {exc}", file=sys.stderr)
        return 3
    except ValueError as exc:
        print(f"kernelzero serve: error: {exc}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
