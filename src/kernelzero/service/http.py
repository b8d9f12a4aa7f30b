"""The HTTP front of the verification service (FastAPI). `kernelzero serve` runs it with uvicorn.

    POST /v1/verify     {"requests": [{"task": {...Task...}, "candidate": str, "backend": "triton"|"cuda",
                                       "options": {...client options...}}]}  ->  {"jobs": [id, ...]}
    GET  /v1/jobs/{id}  {"id", "state": queued|running|done|failed, "verdict": {...} | null, "error": str | null}
    GET  /healthz       {"ok": true}   (never needs the token; HEAD too)
    GET  /metrics       Prometheus text: jobs per state, verdicts of done jobs per status

Clients: `tokens` maps each client's name to its token; every route but /healthz then needs `Authorization:
Bearer TOKEN` of one of them (401 otherwise), and a client reads only its own jobs: another client's job is
404, as an unknown one is, so ids reveal nothing. Without tokens (`--insecure-no-token`, loopback only) every
caller is the one client "". What a job returns is redacted: the server's own paths (kernelzero's source, the
Python installation, the temp and database folders, the home folder) become <labels>, and the traceback of a
verifier fault (an `infra_error` verdict's `error_log`, server code) stays in the database. What a client
may send is service/schema.py: options only from its allowlist, bounded and finite, strict types. Answers:
413 for a body over `max_body_bytes`, 400 for a body that is not JSON (NaN and Infinity included), 422
naming the field for one that does not validate (nesting too deep included), 422 for a job id that is not
a plain integer in range, 404 for an unknown job, 429 when the queue is full. A 5xx would be a kernelzero
bug (tests/service/test_hostile.py fuzzes for one): it answers 500 with a one-line reason, logged once.
"""

from __future__ import annotations

import asyncio
import hmac
import logging
import sys
import tempfile
from pathlib import Path

from fastapi import FastAPI, Request
from fastapi.responses import JSONResponse, PlainTextResponse, Response
from starlette.concurrency import run_in_threadpool
from starlette.requests import ClientDisconnect

from kernelzero import __version__
from kernelzero.service.jobs import STATES, JobQueue
from kernelzero.service.schema import BodyError, parse_body, parse_job_id

log = logging.getLogger(__name__)
DEFAULT_MAX_BODY_BYTES = 8 * 1024 * 1024
DEFAULT_MAX_UPLOADS = 8


def _error(code: int, detail: str) -> JSONResponse:
    headers = {"WWW-Authenticate": "Bearer"} if code == 401 else {"Retry-After": "10"} if code == 429 else None
    return JSONResponse({"detail": detail}, status_code=code, headers=headers)


def server_paths(*extra: Path) -> dict[str, str]:
    """{path: label} of the server's own folders, which a client never sees: kernelzero's source, the Python
    installation, the temp folder, the home folder, and `extra` (the database's folder) as <server>."""
    import kernelzero

    paths = {str(Path(kernelzero.__file__).resolve().parents[1]): "<kernelzero>"}
    paths |= {str(Path(p).resolve()): "<python>" for p in (sys.prefix, sys.base_prefix, sys.exec_prefix)}
    paths |= {str(Path(tempfile.gettempdir()).resolve()): "<tmp>", str(Path.home()): "<home>"}
    paths |= {str(Path(p).resolve()): "<server>" for p in extra}
    return {path: label for path, label in paths.items() if len(path) > 1}  # never "/" itself


def redact(value, paths: dict[str, str]):
    """`value` (a job as JSON data) with each of `paths` in its strings replaced by its label, longest first."""
    if isinstance(value, str):
        for path in sorted(paths, key=len, reverse=True):
            value = value.replace(path, paths[path])
        return value
    if isinstance(value, dict):
        return {k: redact(v, paths) for k, v in value.items()}
    if isinstance(value, list):
        return [redact(v, paths) for v in value]
    return value


def public_job(job: dict, paths: dict[str, str]) -> dict:
    """A job as its client sees it: server paths redacted, a verifier fault's traceback withheld."""
    verdict = job.get("verdict")
    if verdict and verdict.get("status") == "infra_error" and verdict.get("error_log"):
        job = {**job, "verdict": {**verdict, "error_log": "(the server's traceback is kept in its database)"}}
    return redact(job, paths)


def _client_of(header: bytes, expected: list[tuple[bytes, str]]) -> str | None:
    """The name whose `Bearer TOKEN` is `header`, or None; compares with every token (no early exit)."""
    found = None
    for bearer, name in expected:
        if hmac.compare_digest(header, bearer):
            found = name
    return found


def create_app(
    queue: JobQueue,
    tokens: dict[str, str] | None = None,
    max_body_bytes: int = DEFAULT_MAX_BODY_BYTES,
    private: dict[str, str] | None = None,
    max_uploads: int = DEFAULT_MAX_UPLOADS,
) -> FastAPI:
    """The service's app over `queue` (a runner verifies its jobs separately: `runner.JobRunner`).

    `tokens`: client name -> token (None: no token, one client ""); `private`: {path: label} redacted from
    what jobs return (default `server_paths()`); `max_uploads`: bodies read and parsed at once (the others
    wait, about 0.3 MiB each buffered by uvicorn), so bodies hold at most `max_uploads * max_body_bytes`.
    Long because FastAPI routes are closures over the queue and the tokens: each is a few lines, and the
    whole surface a client can reach reads best in one place.
    """
    app = FastAPI(
        title="kernelzero verification service", version=__version__, docs_url=None, redoc_url=None, openapi_url=None
    )
    expected = [(f"Bearer {token}".encode(), name) for name, token in tokens.items()] if tokens else None
    private = server_paths() if private is None else private
    if max_uploads < 1:
        raise ValueError(f"max_uploads must be at least 1, got {max_uploads}")
    uploads = asyncio.Semaphore(max_uploads)

    @app.middleware("http")
    async def guard(request: Request, call_next):
        request.state.client = ""
        if expected is not None and request.url.path != "/healthz":
            client = _client_of(request.headers.get("authorization", "").encode("latin-1", "replace"), expected)
            if client is None:
                return _error(401, "missing or wrong bearer token")
            request.state.client = client
        length = request.headers.get("content-length")
        if length is not None:
            if not (length.isascii() and length.isdigit()) or len(length) > 18:
                return _error(400, "bad Content-Length")
            if int(length) > max_body_bytes:
                return _error(413, f"request body over {max_body_bytes} bytes")
        return await call_next(request)

    @app.exception_handler(BodyError)
    async def refused(_request: Request, exc: BodyError):
        return _error(exc.code, exc.detail)

    @app.exception_handler(Exception)
    async def unexpected(_request: Request, exc: Exception):  # a kernelzero bug: say so briefly, log it once
        log.error("unexpected %s in a handler: %s", type(exc).__name__, str(exc)[:300])
        return _error(500, f"internal error ({type(exc).__name__})")

    @app.api_route("/healthz", methods=["GET", "HEAD"])
    async def healthz():
        return {"ok": True, "version": __version__}

    @app.post("/v1/verify")
    async def submit(request: Request):
        async with uploads:  # bodies in memory at once: max_uploads
            body = bytearray()
            try:
                async for chunk in request.stream():  # chunked bodies have no Content-Length: count as they come
                    body += chunk
                    if len(body) > max_body_bytes:
                        raise BodyError(413, f"request body over {max_body_bytes} bytes")
            except ClientDisconnect:  # gone, or closed by the read timeout (service/connections.py): none to answer
                return Response(status_code=400)
            parsed = await run_in_threadpool(parse_body, body)  # decoding and validation off the event loop
            del body
        ids = await run_in_threadpool(queue.submit, parsed.requests, request.state.client)
        return {"jobs": ids}

    @app.get("/v1/jobs/{job_id}")
    def job(job_id: str, request: Request):  # SQLite reads run in the thread pool, off the event loop
        found = queue.get(parse_job_id(job_id), client=request.state.client)
        if found is None:  # unknown, or another client's: the same answer
            raise BodyError(404, f"no job {job_id}")
        return public_job(found, private)

    @app.get("/metrics")
    def metrics():
        lines = ["# HELP kernelzero_jobs Verification jobs by state.", "# TYPE kernelzero_jobs gauge"]
        counts = queue.counts()
        lines += [f'kernelzero_jobs{{state="{s}"}} {counts.get(s, 0)}' for s in STATES]
        lines += ["# HELP kernelzero_verdicts Verdicts of done jobs by status.", "# TYPE kernelzero_verdicts gauge"]
        lines += [f'kernelzero_verdicts{{status="{s}"}} {n}' for s, n in sorted(queue.status_counts().items())]
        return PlainTextResponse("\n".join(lines) + "\n", media_type="text/plain; version=0.0.4; charset=utf-8")

    return app
