"""`kernelzero serve`: the verification service over HTTP (FastAPI + uvicorn).

    kernelzero serve --host 127.0.0.1 --port 8765 --db service.sqlite --jobs 2 --token-file token.txt

Jobs and verdicts live in one SQLite file (`--db`: tables `jobs` and `verdicts`), so a restart,
even after SIGKILL, loses no job and verifies no finished job again. Routes: kernelzero.service.http.
Also runs as `python -m kernelzero.cli.serve ...`.
"""

from __future__ import annotations

import argparse
import logging
import os
import sys
from pathlib import Path

from kernelzero.service.store import default_path


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
    p.add_argument("--token-file", type=Path, help="file holding the bearer token clients must send")
    p.add_argument("--max-body-mb", type=float, default=8.0, help="largest request body accepted (MiB)")


def run(args: argparse.Namespace) -> int:
    try:
        import uvicorn

        from kernelzero.service.http import create_app
    except ImportError as exc:
        raise ValueError(f"kernelzero serve needs fastapi and uvicorn ({exc}); pip install fastapi uvicorn") from None
    from kernelzero.service.jobs import JobQueue, Worker
    from kernelzero.service.store import VerdictStore

    token = None
    if args.token_file:
        token = args.token_file.read_text().strip()
        if not token:
            raise ValueError(f"{args.token_file} is empty")
    if args.host not in ("127.0.0.1", "localhost", "::1") and token is None:
        print(
            "warning: serving beyond localhost without --token-file; anyone who can reach it can run code",
            file=sys.stderr,
        )
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    queue = JobQueue(args.db)  # puts jobs a killed server left running back to queued
    worker = Worker(queue, jobs=args.jobs, store=VerdictStore(args.db)).start()
    app = create_app(queue, token=token, max_body_bytes=int(args.max_body_mb * 1024 * 1024))
    print(
        f"kernelzero serve: http://{args.host}:{args.port} db={args.db} jobs={args.jobs} pid={os.getpid()}",
        file=sys.stderr,
        flush=True,
    )
    try:
        uvicorn.run(app, host=args.host, port=args.port, log_level="warning")
    finally:
        worker.stop(timeout=5)
    return 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="kernelzero serve", description="the verification service over HTTP")
    _arguments(parser)
    args = parser.parse_args(argv)
    try:
        return run(args)
    except ValueError as exc:
        print(f"kernelzero serve: error: {exc}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
