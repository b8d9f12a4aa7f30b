"""The HTTP front of the verification service (FastAPI). `kernelzero serve` runs it with uvicorn.

    POST /v1/verify     {"requests": [{"task": {...Task...}, "candidate": str, "backend": "triton"|"cuda",
                                       "options": {...VerifyOptions overrides...}}]}  ->  {"jobs": [id, ...]}
    GET  /v1/jobs/{id}  {"id", "state": queued|running|done|failed, "verdict": {...} | null, "error": str | null}
    GET  /healthz       {"ok": true}   (never needs the token)
    GET  /metrics       Prometheus text: jobs per state, verdicts of done jobs per status

With a token, every route but /healthz needs `Authorization: Bearer TOKEN` (401 otherwise). A body
over `max_body_bytes` gets 413; a body that is not JSON 400; a request that does not validate
(unknown backend, unknown option name or bad option value, bad task fields) 422 with a message.
"""

from __future__ import annotations

import hmac
import json

from fastapi import FastAPI, Request
from fastapi.responses import JSONResponse, PlainTextResponse
from starlette.concurrency import run_in_threadpool

from kernelzero import __version__
from kernelzero.service.jobs import STATES, JobQueue

DEFAULT_MAX_BODY_BYTES = 8 * 1024 * 1024
MAX_REQUESTS = 4096  # per POST


class _Reject(Exception):
    def __init__(self, code: int, detail: str):
        super().__init__(detail)
        self.code, self.detail = code, detail


def _error(code: int, detail: str) -> JSONResponse:
    headers = {"WWW-Authenticate": "Bearer"} if code == 401 else None
    return JSONResponse({"detail": detail}, status_code=code, headers=headers)


def create_app(queue: JobQueue, token: str | None = None, max_body_bytes: int = DEFAULT_MAX_BODY_BYTES) -> FastAPI:
    """The service's app over `queue` (a worker verifies its jobs separately: `jobs.Worker`)."""
    app = FastAPI(
        title="kernelzero verification service", version=__version__, docs_url=None, redoc_url=None, openapi_url=None
    )
    expected = f"Bearer {token}".encode() if token else None

    @app.middleware("http")
    async def guard(request: Request, call_next):
        if expected is not None and request.url.path != "/healthz":
            given = request.headers.get("authorization", "").encode()
            if not hmac.compare_digest(given, expected):
                return _error(401, "missing or wrong bearer token")
        length = request.headers.get("content-length")
        if length is not None:
            try:
                too_big = int(length) > max_body_bytes
            except ValueError:
                return _error(400, "bad Content-Length")
            if too_big:
                return _error(413, f"request body over {max_body_bytes} bytes")
        return await call_next(request)

    @app.exception_handler(_Reject)
    async def reject(_request: Request, exc: _Reject):
        return _error(exc.code, exc.detail)

    @app.get("/healthz")
    async def healthz():
        return {"ok": True, "version": __version__}

    @app.post("/v1/verify")
    async def submit(request: Request):
        body = bytearray()
        async for chunk in request.stream():  # chunked bodies have no Content-Length: count as they come
            body += chunk
            if len(body) > max_body_bytes:
                raise _Reject(413, f"request body over {max_body_bytes} bytes")
        try:
            data = json.loads(body)
        except (ValueError, UnicodeDecodeError) as exc:
            raise _Reject(400, f"the body is not JSON: {exc}") from None
        if not isinstance(data, dict) or set(data) != {"requests"} or not isinstance(data["requests"], list):
            raise _Reject(422, 'the body must be {"requests": [...]}')
        if not data["requests"] or len(data["requests"]) > MAX_REQUESTS:
            raise _Reject(422, f"give 1 to {MAX_REQUESTS} requests")
        try:
            ids = await run_in_threadpool(queue.submit, data["requests"])  # validates every request first (all or none)
        except ValueError as exc:
            raise _Reject(422, str(exc)) from None
        return {"jobs": ids}

    @app.get("/v1/jobs/{job_id}")
    def job(job_id: int):  # SQLite reads run in the thread pool, off the event loop
        found = queue.get(job_id)
        if found is None:
            raise _Reject(404, f"no job {job_id}")
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
