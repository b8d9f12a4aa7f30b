"""A client of the verification service (`kernelzero serve`), standard library only.

client = Client("http://127.0.0.1:8765", token=None)
verdict = client.verify(task, completion, "triton", trials=3)                  # submit, poll, Verdict
verdicts = client.verify_batch([(task, completion, "triton", {}), ...])       # one POST, in order
ids = client.submit([(task, completion, "triton", {"profile": "strict"})])
client.result(ids[0])     # None while queued or running, else the Verdict
"""

from __future__ import annotations

import json
import time
import urllib.error
import urllib.request
from collections.abc import Iterable

from kernelzero.types import Task, Verdict, to_dict, verdict_from_dict


class ServiceError(RuntimeError):
    """The service answered with an error (`code` is the HTTP status) or a job failed."""

    def __init__(self, code: int, detail: str):
        super().__init__(f"{code}: {detail}")
        self.code, self.detail = code, detail


def request_dict(task: Task | dict, candidate: str, backend: str, options: dict | None = None) -> dict:
    """One request of POST /v1/verify."""
    return {
        "task": task if isinstance(task, dict) else to_dict(task),
        "candidate": candidate,
        "backend": backend,
        "options": dict(options or {}),
    }


class Client:
    def __init__(self, url: str, token: str | None = None, http_timeout_s: float = 30.0):
        self.url = url.rstrip("/")
        self.token = token
        self.http_timeout_s = http_timeout_s

    def _call(self, method: str, path: str, body: dict | None = None) -> dict:
        data = json.dumps(body).encode() if body is not None else None
        req = urllib.request.Request(self.url + path, data=data, method=method)
        if data is not None:
            req.add_header("Content-Type", "application/json")
        if self.token:
            req.add_header("Authorization", f"Bearer {self.token}")
        try:
            with urllib.request.urlopen(req, timeout=self.http_timeout_s) as resp:
                return json.loads(resp.read())
        except urllib.error.HTTPError as exc:
            raw = exc.read().decode(errors="replace")
            try:
                detail = json.loads(raw).get("detail", raw)
            except (ValueError, AttributeError):
                detail = raw
            raise ServiceError(exc.code, str(detail)) from None

    def health(self) -> dict:
        return self._call("GET", "/healthz")

    def submit(self, requests: Iterable[tuple | dict]) -> list[int]:
        """Enqueue requests, each a dict of POST /v1/verify or (task, candidate, backend[, options]); job ids."""
        body = [r if isinstance(r, dict) else request_dict(*r) for r in requests]
        return self._call("POST", "/v1/verify", {"requests": body})["jobs"]

    def job(self, job_id: int) -> dict:
        """The job as the service returns it (state, verdict as a dict, error)."""
        return self._call("GET", f"/v1/jobs/{job_id}")

    def result(self, job_id: int) -> Verdict | None:
        """The job's Verdict, or None while it is queued or running; ServiceError if it failed."""
        job = self.job(job_id)
        if job["state"] == "done":
            return verdict_from_dict(job["verdict"])
        if job["state"] == "failed":
            raise ServiceError(500, f"job {job_id} failed: {job.get('error')}")
        return None

    def wait(self, job_ids: list[int], timeout_s: float = 900.0, poll_s: float = 0.5) -> list[Verdict]:
        """Poll until every job is done; verdicts in the order of `job_ids`. TimeoutError past `timeout_s`."""
        deadline = time.monotonic() + timeout_s
        results: dict[int, Verdict] = {}
        while True:
            for job_id in job_ids:
                if job_id not in results:
                    verdict = self.result(job_id)
                    if verdict is not None:
                        results[job_id] = verdict
            if len(results) == len(job_ids):
                return [results[j] for j in job_ids]
            if time.monotonic() > deadline:
                raise TimeoutError(f"{len(job_ids) - len(results)} job(s) not done after {timeout_s:.0f} s")
            time.sleep(poll_s)

    def verify_batch(
        self, items: Iterable[tuple | dict], timeout_s: float = 900.0, poll_s: float = 0.5
    ) -> list[Verdict]:
        """Submit many requests in one POST and wait for all; verdicts in order."""
        return self.wait(self.submit(items), timeout_s, poll_s)

    def verify(
        self, task: Task | dict, candidate: str, backend: str, timeout_s: float = 900.0, poll_s: float = 0.5, **options
    ) -> Verdict:
        """Verify one candidate through the service (client options as keywords: service/schema.CLIENT_OPTIONS)."""
        return self.verify_batch([request_dict(task, candidate, backend, options)], timeout_s, poll_s)[0]
