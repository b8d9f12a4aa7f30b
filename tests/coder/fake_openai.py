"""A small OpenAI-compatible chat-completions server for tests: real HTTP on 127.0.0.1, a free port.

What it answers depends on the last message's content:
- `bad ...`: HTTP 400 with an OpenAI-style error body, every time;
- `slow ...`: waits `slow_s` seconds before answering (longer than the client's timeout);
- `think ...`: the answer comes with a separate `reasoning_content`;
- anything else: a canned completion that echoes the content and the seed it was asked with.
Flaky mode fails the first attempt of every other distinct request (alternating 429 with Retry-After
and 500), so every retry path is taken. Each answer waits `delay_s` first, so concurrency shows.
The server records every attempt, the peak number of requests in flight and the headers seen.
"""

from __future__ import annotations

import json
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer


def completion_for(content: str, seed: int | None) -> str:
    return f"```python\n# answer to {content} seed={seed}\n```"


def usage_for(messages: list[dict]) -> int:
    """The prompt-token count the server reports: characters // 4."""
    return sum(len(m["content"]) for m in messages) // 4


class FakeOpenAI:
    def __init__(self, *, flaky: bool = False, delay_s: float = 0.0, slow_s: float = 3.0) -> None:
        self.flaky = flaky
        self.delay_s = delay_s
        self.slow_s = slow_s
        self.lock = threading.Lock()
        self.attempts: dict[tuple, int] = {}  # (content, seed) -> attempts seen
        self.order: list[tuple] = []  # distinct requests in arrival order (decides which are flaky)
        self.bodies: list[dict] = []
        self.headers: list[dict] = []
        self.in_flight = 0
        self.peak_in_flight = 0
        self.server = ThreadingHTTPServer(("127.0.0.1", 0), self._handler())
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.server.server_address[1]}/v1"

    @property
    def total_attempts(self) -> int:
        return sum(self.attempts.values())

    def __enter__(self) -> FakeOpenAI:
        self.thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self.server.shutdown()
        self.server.server_close()

    def _respond(self, handler: BaseHTTPRequestHandler, body: dict) -> tuple[int, dict, dict]:
        content = body["messages"][-1]["content"]
        seed = body.get("seed")
        key = (content, seed)
        with self.lock:
            self.attempts[key] = self.attempts.get(key, 0) + 1
            attempt = self.attempts[key]
            if attempt == 1:
                self.order.append(key)
            position = self.order.index(key)
        if self.delay_s:
            time.sleep(self.delay_s)
        if content.startswith("bad"):
            error = {"message": "prompt is too long: 99999 tokens > 32768", "type": "invalid_request_error"}
            return 400, {}, {"error": error}
        if content.startswith("slow"):
            time.sleep(self.slow_s)
        if self.flaky and attempt == 1 and position % 2 == 1:
            if position % 4 == 1:
                return 429, {"Retry-After": "0"}, {"error": {"message": "rate limited"}}
            return 500, {}, {"error": {"message": "internal error"}}
        n = int(body.get("n") or 1)
        message: dict = {"role": "assistant", "content": completion_for(content, seed)}
        if content.startswith("think"):
            message["reasoning_content"] = "let me think about the kernel"
        choices = [{"index": i, "message": message, "finish_reason": "stop"} for i in range(n)]
        out_tokens = len(message["content"].split()) * n
        prompt = usage_for(body["messages"])
        usage = {"prompt_tokens": prompt, "completion_tokens": out_tokens, "total_tokens": prompt + out_tokens}
        return (
            200,
            {},
            {"id": "cmpl-1", "object": "chat.completion", "model": body["model"], "choices": choices, "usage": usage},
        )

    def _handler(self) -> type[BaseHTTPRequestHandler]:
        fake = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args) -> None:  # keep test output clean
                pass

            def do_POST(self) -> None:
                if self.path != "/v1/chat/completions":
                    self.send_error(404)
                    return
                body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
                with fake.lock:
                    fake.bodies.append(body)
                    fake.headers.append(dict(self.headers))
                    fake.in_flight += 1
                    fake.peak_in_flight = max(fake.peak_in_flight, fake.in_flight)
                try:
                    status, headers, payload = fake._respond(self, body)
                finally:
                    with fake.lock:
                        fake.in_flight -= 1
                data = json.dumps(payload).encode()
                try:
                    self.send_response(status)
                    for k, v in {"Content-Type": "application/json", **headers}.items():
                        self.send_header(k, v)
                    self.send_header("Content-Length", str(len(data)))
                    self.end_headers()
                    self.wfile.write(data)
                except (BrokenPipeError, ConnectionResetError):  # the client gave up (timeout)
                    pass

        return Handler
