"""`openai:MODEL`: any server speaking OpenAI's chat-completions API (vLLM, SGLang, llama.cpp, TGI, OpenAI).

    backend = load_backend("openai:Qwen/Qwen2.5-Coder-7B-Instruct", base_url="http://localhost:8000/v1")

Plain HTTP with the standard library (`urllib`): one JSON POST to `{base_url}/chat/completions` per
sample, from a thread pool of `concurrency` workers. The base URL and key come from the options, else
from OPENAI_BASE_URL / OPENAI_API_KEY (the variables OpenAI's own client reads), else
https://api.openai.com/v1 and no key. A base URL with no path (`http://host:8000`) gets `/v1`.

Errors: HTTP 408, 409, 429 and 5xx, connection errors and timeouts are retried up to `max_retries`
times, waiting `backoff * 2**attempt` seconds (at most `max_backoff`, or the server's Retry-After),
scaled by a random factor in [0.5, 1] so that many workers do not retry in step. Other HTTP errors
(400: prompt too long, bad parameter ...) are not retried. Either way a failed sample comes back as a
Generation with `finish_reason="error"` and the server's message, never as an exception. The one
exception: 401, 403 and 404 (bad key, wrong URL or model name) would fail every request alike, so
they raise `ServerRefused` out of `generate` at once; samples finished before it were already
passed to `on_done`.

`timeout` is the socket timeout: the longest wait for the server's next bytes. A non-streaming
request sends nothing until the completion is done, so it bounds the whole generation.

n > 1: by default each sample is its own request (seed + sample index when seeded), since many
servers ignore `n`; `use_n=True` sends one request with `n` instead. Servers then report only the
total completion tokens, so per-sample `output_tokens` is None when a request returned several choices.
Reasoning text the server returns apart from the answer (`reasoning_content` / `reasoning`) is kept
in front of it as `<think>...</think>`, which `extract_code` drops.
"""

from __future__ import annotations

import json
import os
import random
import time
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Sequence
from concurrent.futures import FIRST_COMPLETED, Future, ThreadPoolExecutor, wait
from http.client import HTTPException
from typing import Any

from kernelzero.coder.backends.base import (
    Generation,
    GenRequest,
    OnDone,
    SamplingParams,
    check_requests,
    sorted_results,
)

RETRY_STATUSES = frozenset({408, 409, 429, 500, 502, 503, 504, 520, 522, 524, 529})
# Statuses that no request of the run can get past (bad key, wrong base URL or model name): they stop
# the run with an exception instead of turning every sample into a failure.
FATAL_STATUSES = frozenset({401, 403, 404})
_ERROR_CHARS = 500  # bound on the server message kept in Generation.error


class RequestFailed(Exception):
    """A request that will not succeed (after retries, or a status not worth retrying)."""


class ServerRefused(RuntimeError):
    """The server refuses every request (401, 403, 404): raised out of `generate`."""


class _Retryable(Exception):
    def __init__(self, message: str, retry_after: float | None = None) -> None:
        super().__init__(message)
        self.retry_after = retry_after


def resolve_base_url(base_url: str | None) -> str:
    url = (base_url or os.environ.get("OPENAI_BASE_URL") or "https://api.openai.com/v1").rstrip("/")
    if urllib.parse.urlsplit(url).path in ("", "/"):
        url += "/v1"
    return url


def _server_message(body: bytes) -> str:
    text = body.decode("utf-8", "replace").strip()
    try:
        data = json.loads(text)
        error = data.get("error", data) if isinstance(data, dict) else data
        text = str(error.get("message", error) if isinstance(error, dict) else error)
    except ValueError:
        pass
    return " ".join(text.split())[:_ERROR_CHARS]  # one line, even for an HTML error page


def _retry_after(headers: Any) -> float | None:
    try:
        return float(headers.get("Retry-After")) if headers and headers.get("Retry-After") else None
    except ValueError:  # an HTTP date: not worth parsing, fall back to our own backoff
        return None


class OpenAIBackend:
    """Chat completions from an OpenAI-compatible HTTP server."""

    def __init__(
        self,
        model: str,
        *,
        base_url: str | None = None,
        api_key: str | None = None,
        concurrency: int = 8,
        timeout: float = 600.0,
        max_retries: int = 5,
        backoff: float = 1.0,
        max_backoff: float = 60.0,
        use_n: bool = False,
        extra_body: dict | None = None,
    ) -> None:
        if concurrency < 1 or max_retries < 0 or timeout <= 0:
            raise ValueError("openai backend: need concurrency >= 1, max_retries >= 0, timeout > 0")
        self.model = model
        self.spec = f"openai:{model}"
        self.url = resolve_base_url(base_url) + "/chat/completions"
        self.api_key = api_key if api_key is not None else os.environ.get("OPENAI_API_KEY", "")
        self.concurrency = concurrency
        self.timeout = timeout
        self.max_retries = max_retries
        self.backoff = backoff
        self.max_backoff = max_backoff
        self.use_n = use_n
        self.extra_body = dict(extra_body or {})  # server-specific fields: top_k, chat_template_kwargs ...
        self.warnings: list[str] = []
        self._rng = random.Random()

    # -- one HTTP exchange -------------------------------------------------------------------------
    def _post_once(self, body: dict) -> dict:
        headers = {"Content-Type": "application/json", "Accept": "application/json"}
        if self.api_key:
            headers["Authorization"] = f"Bearer {self.api_key}"
        req = urllib.request.Request(self.url, data=json.dumps(body).encode(), headers=headers, method="POST")
        try:
            with urllib.request.urlopen(req, timeout=self.timeout) as resp:
                raw = resp.read()
        except urllib.error.HTTPError as exc:
            message = f"HTTP {exc.code}: {_server_message(exc.read())}"
            if exc.code in FATAL_STATUSES:
                raise ServerRefused(f"{self.url}: {message} (check the base URL, API key and model name)") from None
            if exc.code in RETRY_STATUSES:
                raise _Retryable(message, _retry_after(exc.headers)) from None
            raise RequestFailed(message) from None
        except TimeoutError:
            raise _Retryable(f"timed out after {self.timeout:g} s") from None
        except urllib.error.URLError as exc:
            if isinstance(exc.reason, TimeoutError):
                raise _Retryable(f"timed out after {self.timeout:g} s") from None
            raise _Retryable(f"connection error: {exc.reason}") from None
        except (HTTPException, OSError) as exc:  # reset, refused, remote closed, truncated body
            raise _Retryable(f"connection error: {type(exc).__name__}: {exc}") from None
        try:
            data = json.loads(raw)
        except ValueError:
            raise RequestFailed(f"invalid JSON in the response: {raw[:200]!r}") from None
        if not isinstance(data, dict) or not data.get("choices"):
            raise RequestFailed(f"no choices in the response: {_server_message(raw)}")
        return data

    def _post(self, body: dict) -> tuple[dict, float]:
        """The response and the seconds its successful attempt took; RequestFailed when out of tries."""
        for attempt in range(self.max_retries + 1):
            start = time.monotonic()
            try:
                return self._post_once(body), time.monotonic() - start
            except _Retryable as exc:
                if attempt == self.max_retries:
                    raise RequestFailed(f"{exc} (gave up after {attempt + 1} attempts)") from None
                delay = min(
                    self.max_backoff, exc.retry_after if exc.retry_after is not None else self.backoff * 2**attempt
                )
                time.sleep(delay * self._rng.uniform(0.5, 1.0))
        raise AssertionError("unreachable")

    # -- one job: a request's sample (or all its samples with use_n) -------------------------------
    def _run_job(self, req: GenRequest, idxs: tuple[int, ...], params: SamplingParams) -> list[Generation]:
        seed = params.seed_for(idxs[0])
        body: dict[str, Any] = {
            "model": self.model,
            "messages": list(req.messages),
            "max_tokens": params.max_tokens,
            "temperature": params.temperature,
            "top_p": params.top_p,
        }
        if len(idxs) > 1:
            body["n"] = len(idxs)
        if seed is not None:
            body["seed"] = seed
        body.update(self.extra_body)
        try:
            data, seconds = self._post(body)
        except RequestFailed as exc:
            return [Generation("", finish_reason="error", sample_idx=i, seed=seed, error=str(exc)) for i in idxs]
        usage = data.get("usage") or {}
        choices = sorted(data["choices"], key=lambda c: c.get("index", 0))
        gens = []
        for k, idx in enumerate(idxs):
            if k >= len(choices):
                gens.append(
                    Generation(
                        "",
                        finish_reason="error",
                        sample_idx=idx,
                        seed=seed,
                        error=f"server returned {len(choices)} choices for n={len(idxs)}",
                    )
                )
                continue
            message = choices[k].get("message") or {}
            text = message.get("content") or ""
            reasoning = message.get("reasoning_content") or message.get("reasoning")
            if isinstance(reasoning, str) and reasoning:
                text = f"<think>{reasoning}</think>\n{text}"
            gens.append(
                Generation(
                    text=text,
                    output_tokens=usage.get("completion_tokens") if len(choices) == 1 else None,
                    prompt_tokens=usage.get("prompt_tokens"),
                    finish_reason=choices[k].get("finish_reason") or "",
                    seconds=seconds / len(idxs),
                    sample_idx=idx,
                    seed=seed,
                )
            )
        return gens

    def generate(
        self, requests: Sequence[GenRequest], params: SamplingParams, on_done: OnDone | None = None
    ) -> dict[str, list[Generation]]:
        """Every request's samples, run `concurrency` at a time; `on_done` per finished job."""
        check_requests(requests)
        self.warnings = []
        jobs = []
        for req in requests:
            idxs = req.indices(params)
            jobs += [(req, idxs)] if self.use_n else [(req, (i,)) for i in idxs]
        results: dict[str, list[Generation]] = {req.key: [] for req in requests}
        pool = ThreadPoolExecutor(max_workers=self.concurrency, thread_name_prefix="kz-openai")
        pending: dict[Future, GenRequest] = {}
        try:
            for req, idxs in jobs:
                pending[pool.submit(self._run_job, req, idxs, params)] = req
            while pending:
                done, _ = wait(pending, return_when=FIRST_COMPLETED)
                for fut in done:
                    req = pending.pop(fut)
                    gens = fut.result()
                    results[req.key].extend(gens)
                    if on_done is not None:
                        on_done(req, gens)
        finally:
            # On an interrupt (or an exception in on_done) queued jobs are dropped; requests in flight end
            # at their timeout in the background.
            pool.shutdown(wait=not pending, cancel_futures=True)
        failed = sum(1 for gens in results.values() for g in gens if not g.ok)
        if failed:
            self.warnings.append(f"{failed} of {sum(map(len, results.values()))} generations failed (see their error)")
        return sorted_results(results)
