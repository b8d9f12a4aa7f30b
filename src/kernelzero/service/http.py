"""The HTTP front of the verification service (FastAPI). `kernelzero serve` runs it with uvicorn.

    POST /v1/verify     {"requests": [{"task": {...Task...}, "candidate": str, "backend": "triton"|"cuda",
                                       "options": {...client options...}}]}  ->  {"jobs": [id, ...]}
    GET  /v1/jobs/{id}  {"id", "state": queued|running|done|failed, "verdict": {...} | null, "error": str | null}
    GET  /healthz       {"ok": true}   (never needs the token; HEAD too)
    GET  /metrics       Prometheus text: jobs per state, verdicts of done jobs per status

With a token, every route but /healthz needs `Authorization: Bearer TOKEN` (401 otherwise). What a client
may send is service/schema.py: options only from its allowlist, bounded and finite, strict types. Answers:
413 for a body over `max_body_bytes`, 400 for a body that is not JSON (NaN and Infinity included), 422
naming the field for one that does not validate (nesting too deep included), 422 for a job id that is not
a plain integer in range, 404 for an unknown job, 429 when the queue is full. A 5xx would be a kernelzero
bug (tests/service/test_hostile.py fuzzes for one): it answers 500 with a one-line reason, logged once.
"""

from __future__ import annotations

import hmac
import logging

from fastapi import FastAPI, Request
from fastapi.responses import JSONResponse, PlainTextResponse
from starlette.concurrency import run_in_threadpool

from kernelzero import __version__
from kernelzero.service.jobs import STATES, JobQueue
from kernelzero.service.schema import BodyError, parse_body, parse_job_id

log = logging.getLogger(__name__)
DEFAULT_MAX_BODY_BYTES = 8 * 1024 * 1024


def _error(code: int, detail: str) -> JSONResponse:
    headers = {"WWW-Authenticate": "Bearer"} if code == 401 else {"Retry-After": "10"} if code == 429 else None
    return JSONResponse({"detail": detail}, status_code=code, headers=headers)


def create_app(queue: JobQueue, token: str | None = None, max_body_bytes: int = DEFAULT_MAX_BODY_BYTES) -> FastAPI:
    """The service's app over `queue` (a runner verifies its jobs separately: `jobs.JobRunner`).

    Long because FastAPI routes are closures over the queue and the token: each is a few lines, and the
    whole surface a client can reach reads best in one place.
    """
    app = FastAPI(
        title="kernelzero verification service", version=__version__, docs_url=None, redoc_url=None, openapi_url=None
    )
    expected = f"Bearer {token}".encode() if token else None

    @app.middleware("http")
    async def guard(request: Request, call_next):
        if expected is not None and request.url.path != "/healthz":
            given = request.headers.get("authorization", "").encode("latin-1", "replace")
            if not hmac.compare_digest(given, expected):
                return _error(401, "missing or wrong bearer token")
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
        body = bytearray()
        async for chunk in request.stream():  # chunked bodies have no Content-Length: count as they come
            body += chunk
            if len(body) > max_body_bytes:
                raise BodyError(413, f"request body over {max_body_bytes} bytes")
        parsed = await run_in_threadpool(parse_body, bytes(body))  # decoding and validation off the event loop
        ids = await run_in_threadpool(queue.submit, parsed.requests)
        return {"jobs": ids}

    @app.get("/v1/jobs/{job_id}")
    def job(job_id: str):  # SQLite reads run in the thread pool, off the event loop
        found = queue.get(parse_job_id(job_id))
        if found is None:
            raise BodyError(404, f"no job {job_id}")
        return found

    @app.get("/metrics")
    def metrics():
        lines = ["# HELP kernelzero_jobs Verification jobs by state.", "# TYPE kernelzero_jobs gauge"]
        counts = queue.counts()
        lines += [f'kernelzero_jobs{{state="{s}"}} {counts.get(s, 0)}' for s in STATES]
        lines += ["# HELP kernelzero_verdicts Verdicts of done jobs by status.", "# TYPE kernelzero_verdicts gauge"]
        lines += [f'kernelzero_verdicts{{status="{s}"}} {n}' for s, n in sorted(queue.status_counts().items())]
        return PlainTextResponse("\n".join(lines) + "\n", media_type="text/plain; version=0.0.4; charset=utf-8")

    return app
