"""The `openai:` backend against a real HTTP server started here (tests/coder/fake_openai.py).

Run: `PYTHONPATH=src .venv/bin/python -m pytest tests/coder/test_backend_openai.py -q` (about 3 s).
"""

from __future__ import annotations

import socket
import threading
import time

import pytest
from fake_openai import FakeOpenAI, completion_for, usage_for

from kernelzero.coder import extract_code
from kernelzero.coder.backends import GenRequest, SamplingParams, load_backend
from kernelzero.coder.backends.openai import ServerRefused, resolve_base_url

FAST = {"backoff": 0.01, "max_backoff": 0.05}  # retries without waiting seconds


@pytest.fixture(autouse=True)
def _no_proxy(monkeypatch):
    # A proxy set in the environment must not swallow requests to 127.0.0.1.
    monkeypatch.setenv("no_proxy", "*")
    monkeypatch.setenv("NO_PROXY", "*")


def requests_for(*contents: str) -> list[GenRequest]:
    system = {"role": "system", "content": "be brief"}
    return [GenRequest(c, [system, {"role": "user", "content": c}]) for c in contents]


def test_retries_after_429_and_500_succeed_and_usage_is_captured():
    with FakeOpenAI(flaky=True) as server:
        backend = load_backend("openai:tiny", base_url=server.url, concurrency=4, **FAST)
        reqs = requests_for("p0", "p1", "p2", "p3")
        done: list[tuple[str, list[int]]] = []

        def on_done(req, gens):
            assert threading.current_thread() is threading.main_thread()  # callers need no locks
            done.append((req.key, [g.sample_idx for g in gens]))

        results = backend.generate(reqs, SamplingParams(n=2, seed=100, max_tokens=64), on_done=on_done)
    # 8 jobs (4 prompts x 2 samples); the first try of every other one failed (two 429s, two 500s).
    assert server.total_attempts == 8 + 4
    assert sorted(done) == sorted((key, [i]) for key in ("p0", "p1", "p2", "p3") for i in (0, 1))
    for req in reqs:
        gens = results[req.key]
        assert [g.sample_idx for g in gens] == [0, 1]
        for g in gens:
            assert g.ok and g.finish_reason == "stop"
            assert g.seed == 100 + g.sample_idx
            assert g.text == completion_for(req.key, 100 + g.sample_idx)  # sample i was drawn with seed + i
            assert g.prompt_tokens == usage_for(list(req.messages))
            assert g.output_tokens == len(g.text.split())
    assert backend.warnings == []


def test_permanent_400_is_a_failed_generation_with_the_message():
    with FakeOpenAI() as server:
        backend = load_backend("openai:tiny", base_url=server.url, concurrency=2, **FAST)
        results = backend.generate(requests_for("good", "bad prompt"), SamplingParams(n=2))
    bad = results["bad prompt"]
    assert [g.sample_idx for g in bad] == [0, 1]
    for g in bad:
        assert not g.ok and g.finish_reason == "error" and g.text == ""
        assert "HTTP 400" in g.error and "prompt is too long" in g.error
    assert server.attempts[("bad prompt", None)] == 2  # one per sample: a 400 is not retried
    assert all(g.ok for g in results["good"])
    assert backend.warnings == ["2 of 4 generations failed (see their error)"]


def test_timeout_is_retried_then_reported_without_stopping_the_batch():
    with FakeOpenAI(slow_s=3.0) as server:
        backend = load_backend("openai:tiny", base_url=server.url, timeout=0.3, max_retries=1, **FAST)
        start = time.monotonic()
        results = backend.generate(requests_for("slow one", "quick one"), SamplingParams(n=1))
        elapsed = time.monotonic() - start
    (slow,) = results["slow one"]
    assert slow.finish_reason == "error" and "timed out after 0.3 s" in slow.error and "2 attempts" in slow.error
    assert server.attempts[("slow one", None)] == 2
    assert results["quick one"][0].ok
    assert elapsed < 2.5  # the client gave up; it did not wait for the server's 3 s


def test_concurrency_bounds_requests_in_flight():
    with FakeOpenAI(delay_s=0.2) as server:
        backend = load_backend("openai:tiny", base_url=server.url, concurrency=3)
        start = time.monotonic()
        results = backend.generate(requests_for(*[f"q{i}" for i in range(9)]), SamplingParams(n=1))
        elapsed = time.monotonic() - start
    assert all(g.ok for gens in results.values() for g in gens)
    assert server.peak_in_flight == 3
    assert elapsed < 9 * 0.2 * 0.75  # about 3 rounds of 0.2 s, not 9


def test_connection_refused_is_retried_then_reported():
    with socket.socket() as s:  # a port nobody listens on
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    backend = load_backend("openai:tiny", base_url=f"http://127.0.0.1:{port}/v1", max_retries=2, **FAST)
    (g,) = backend.generate(requests_for("p"), SamplingParams(n=1))["p"]
    assert g.finish_reason == "error" and "connection error" in g.error and "3 attempts" in g.error


def test_use_n_sends_one_request_per_prompt():
    with FakeOpenAI() as server:
        backend = load_backend("openai:tiny", base_url=server.url, use_n=True)
        gens = backend.generate(requests_for("p"), SamplingParams(n=3, seed=7))["p"]
    assert len(server.bodies) == 1 and server.bodies[0]["n"] == 3 and server.bodies[0]["seed"] == 7
    assert [g.sample_idx for g in gens] == [0, 1, 2]
    assert all(g.output_tokens is None for g in gens)  # the server reports one total for all choices
    assert all(g.prompt_tokens == usage_for(list(requests_for("p")[0].messages)) for g in gens)


def test_resumed_run_asks_only_for_missing_samples():
    with FakeOpenAI() as server:
        backend = load_backend("openai:tiny", base_url=server.url)
        req = GenRequest("p", [{"role": "user", "content": "p"}], sample_idxs=(3, 4))
        gens = backend.generate([req], SamplingParams(n=5, seed=0))["p"]
    assert [g.sample_idx for g in gens] == [3, 4]
    assert sorted(b["seed"] for b in server.bodies) == [3, 4]


def test_request_body_carries_sampling_params_and_extra_body():
    with FakeOpenAI() as server:
        backend = load_backend("openai:my/model", base_url=server.url, extra_body={"top_k": 20})
        backend.generate(requests_for("p"), SamplingParams(n=1, temperature=0.6, top_p=0.9, max_tokens=123))
    (body,) = server.bodies
    assert body["model"] == "my/model" and body["max_tokens"] == 123 and body["top_k"] == 20
    assert body["temperature"] == 0.6 and body["top_p"] == 0.9 and "seed" not in body and "n" not in body


def test_base_url_and_key_come_from_the_standard_variables(monkeypatch):
    with FakeOpenAI() as server:
        monkeypatch.setenv("OPENAI_BASE_URL", server.url.removesuffix("/v1"))  # no path: /v1 is added
        monkeypatch.setenv("OPENAI_API_KEY", "sk-test")
        backend = load_backend("openai:tiny")
        (g,) = backend.generate(requests_for("p"), SamplingParams(n=1))["p"]
    assert g.ok
    assert server.headers[0]["Authorization"] == "Bearer sk-test"


def test_no_key_sends_no_authorization(monkeypatch):
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    with FakeOpenAI() as server:
        load_backend("openai:tiny", base_url=server.url).generate(requests_for("p"), SamplingParams(n=1))
    assert "Authorization" not in server.headers[0]


def test_reasoning_content_is_kept_as_a_think_section():
    with FakeOpenAI() as server:
        backend = load_backend("openai:tiny", base_url=server.url)
        (g,) = backend.generate(requests_for("think"), SamplingParams())["think"]
    assert g.text.startswith("<think>let me think about the kernel</think>\n")
    assert extract_code(g.text) == "# answer to think seed=None\n"


def test_exception_in_on_done_propagates_and_drops_queued_jobs():
    with FakeOpenAI(delay_s=0.05) as server:
        backend = load_backend("openai:tiny", base_url=server.url, concurrency=1)

        def on_done(req, gens):
            raise KeyboardInterrupt  # as if the user pressed Ctrl-C while results were being written

        with pytest.raises(KeyboardInterrupt):
            backend.generate(requests_for(*[f"q{i}" for i in range(20)]), SamplingParams(n=1), on_done=on_done)
        time.sleep(0.2)
    assert len(server.bodies) < 5  # the queued requests were never sent


def test_resolve_base_url():
    assert resolve_base_url("http://h:8000") == "http://h:8000/v1"
    assert resolve_base_url("http://h:8000/") == "http://h:8000/v1"
    assert resolve_base_url("http://h:8000/v1/") == "http://h:8000/v1"
    assert resolve_base_url("https://example.com/api/openai/v1") == "https://example.com/api/openai/v1"


def test_wrong_model_or_key_stops_the_run_with_a_clear_error():
    with FakeOpenAI() as server:
        backend = load_backend("openai:tiny", base_url=server.url + "/nowhere", concurrency=2)
        with pytest.raises(ServerRefused, match="HTTP 404.*check the base URL, API key and model name"):
            backend.generate(requests_for(*[f"q{i}" for i in range(10)]), SamplingParams(n=1))
