"""A careless or hostile client against a real `kernelzero serve` on localhost (loopback only, bounded).

The cases of issue 15 (each answered 4xx naming the field, or isolated to its own job), half-open
connections, then a seeded fuzz of 300 generated malformed requests while valid jobs run: no 5xx, the
valid jobs' verdicts unchanged, /healthz answering throughout, the server's memory bounded.
"""

import json
import random
import socket
import time
from dataclasses import fields, replace
from urllib.parse import quote

import pytest

pytest.importorskip("fastapi")
pytest.importorskip("uvicorn")

from serving import GELU, NO_KERNEL, free_port, gelu_task, post, raw, rss_mb, start, stop  # noqa: E402

from kernelzero.service.client import Client, request_dict  # noqa: E402
from kernelzero.service.schema import CLIENT_OPTIONS  # noqa: E402
from kernelzero.verify import VerifyOptions  # noqa: E402

TOKEN = "hostile-test-token"
FUZZ = 300


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("hostile")
    (tmp / "token").write_text(TOKEN)
    port = free_port()
    args = ("--token-file", str(tmp / "token"), "--max-body-mb", "0.25", "--jobs", "2")
    proc = start(tmp / "service.sqlite", port, tmp / "tmp", *args)
    yield {"url": f"http://127.0.0.1:{port}", "proc": proc, "tmp": tmp / "tmp"}
    stop(proc)


def _valid(**options) -> dict:
    return request_dict(gelu_task(), NO_KERNEL, "triton", options)


def _with(path: tuple, value) -> dict:
    """A valid request with the value at `path` replaced."""
    request = _valid()
    node = request
    for key in path[:-1]:
        node = node[key]
    node[path[-1]] = value
    return request


ISSUE_CASES = [  # (request, field named in the 422)
    (_with(("options", "device"), "cuda"), "options.device: not settable by clients"),
    (_with(("options", "atol"), [1]), "options.atol"),
    (_with(("options", "atol"), float("inf")), "options.atol"),
    (_with(("options", "atol"), float("nan")), "options.atol"),
    (_with(("options", "atol"), 1e308), "options.atol"),
    (_with(("task", "sizes"), {"N": "abc"}), "task.sizes.N"),
    (_with(("candidate",), "\ud800"), "candidate"),
    (_with(("options", "static_checks"), False), "options.static_checks: not settable"),
    (_with(("options", "isolate_network"), False), "options.isolate_network: not settable"),
    (_with(("options", "unsafe_no_sandbox"), True), "options.unsafe_no_sandbox: not settable"),
    (_with(("options", "sandbox_uids"), "0:1"), "options.sandbox_uids: not settable"),
    (_with(("options", "baselines_dir"), "/"), "options.baselines_dir: not settable"),
    (_with(("options", "trials"), 10**9), "options.trials"),
    (_with(("options", "timed_calls"), 10**9), "options.timed_calls"),
    (_with(("options", "trials"), "yes"), "options.trials"),
    (_with(("options", "trials"), -5), "options.trials"),
    (_with(("options",), []), "options"),
    (_with(("options",), ""), "options"),
    (_with(("options",), 0), "options"),
    (_with(("task", "atol"), 1e308), "task.atol"),
]


@pytest.mark.parametrize("request_, named", ISSUE_CASES, ids=[c[1].split(":")[0] for c in ISSUE_CASES])
def test_issue_cases_are_refused_with_a_4xx_naming_the_field(server, request_, named):
    status, text = raw(server["url"] + "/v1/verify", json.dumps({"requests": [request_]}).encode(), TOKEN)
    assert status == 422, text
    assert named in json.loads(text)["detail"]


ALLOWED = {"profile": "strict", "precision": "fp16", "atol": 1e-3, "rtol": 0.0, "trials": 2, "timed_calls": 30}


def test_every_option_but_the_allowlist_is_server_configuration(server):
    assert set(ALLOWED) | {"warmup_calls"} == set(CLIENT_OPTIONS)
    for field in fields(VerifyOptions):  # each at a value the verifier takes (its default), all but 7 refused
        value = ALLOWED.get(field.name, field.default)
        status, text = post(server["url"], {"requests": [_with(("options", field.name), value)]}, TOKEN)
        assert (status == 200) == (field.name in CLIENT_OPTIONS), (field.name, status, text)


def test_job_ids_deep_json_and_head(server):
    url = server["url"]
    for bad in ("1.0", "+1", "1_0", "-1", "0", "01", "9223372036854775808", "1e3", "%201"):
        assert raw(f"{url}/v1/jobs/{bad}", token=TOKEN)[0] == 422, bad
    assert raw(f"{url}/v1/jobs/9223372036854775807", token=TOKEN)[0] == 404
    deep = b'{"requests": ' + b"[" * 970 + b"]" * 970 + b"}"
    assert raw(url + "/v1/verify", deep, TOKEN)[0] == 422
    deeper = b'{"requests": ' + b"[" * 20000 + b"]" * 20000 + b"}"
    assert raw(url + "/v1/verify", deeper, TOKEN)[0] == 422
    assert raw(url + "/v1/verify", b'{"requests": [{"task": NaN}]}', TOKEN)[0] == 422
    assert raw(url + "/healthz", method="HEAD")[0] == 200


def test_valid_jobs_complete_beside_requests_that_make_the_verifier_raise(server):
    """A task whose reference raises on import passes validation but makes the verifier raise: its job gets the
    verdict `task_broken`, with the reason; the valid jobs in the same POST and beside it complete. Issue 27: a
    120 KB candidate `1+1+...` made the server's own ast.parse raise RecursionError and stranded a neighbour
    `running`; it is `format_error` now, and its neighbours complete."""
    client = Client(server["url"], token=TOKEN)
    task = gelu_task()
    broken = replace(
        task, name="broken", source=task.source + "\nraise RuntimeError('this reference cannot be imported')\n"
    )
    deep = "class ModelNew:\n    pass\n\nx = " + "+".join(["1"] * 60_000) + "\n"
    ids = client.submit([(task, GELU, "triton", {"trials": 1}), (broken, GELU, "triton", {})])
    ids += client.submit([(task, NO_KERNEL, "triton", {"trials": 2}), (task, "not python (", "triton", {})])
    ids += client.submit([(task, deep, "triton", {}), (task, NO_KERNEL, "triton", {"trials": 3})])
    deadline = time.monotonic() + 120
    while any(client.job(i)["state"] in ("queued", "running") for i in ids):
        assert time.monotonic() < deadline
        time.sleep(0.2)
    jobs = [client.job(i) for i in ids]
    assert [j["state"] for j in jobs] == ["done"] * 6
    statuses = ["correct", "task_broken", "no_kernel", "format_error", "format_error", "no_kernel"]
    assert [j["status"] for j in jobs] == statuses
    assert "nested too deeply" in jobs[4]["verdict"]["message"]
    broken_verdict = client.result(ids[1])  # the client reads it as any verdict: no ServiceError
    assert broken_verdict.message.startswith("the task itself is broken") and broken_verdict.stage == "reference"
    assert "cannot be imported" in broken_verdict.message and "Not your fault" in broken_verdict.feedback


def _half_open(port: int, n: int) -> list[socket.socket]:
    socks = []
    for _ in range(n):
        s = socket.create_connection(("127.0.0.1", port))
        s.sendall(b"POST /v1/verify HTTP/1.1\r\nHost: x\r\nContent-Length: 100\r\n")  # never finished
        socks.append(s)
    return socks


def _mutant(rng: random.Random) -> tuple[str, str, bytes | None]:
    """(method, path, body) of one generated malformed (or, by chance, valid) request."""
    values = [None, True, -5, 0, 2**64, 1e308, -1e-9, "yes", "", [], {}, [1], {"a": {"b": [1]}}, "x" * 5000]
    paths = [("options", o) for o in ("atol", "rtol", "trials", "timed_calls", "warmup_calls", "profile")]
    paths += [("options", f.name) for f in fields(VerifyOptions) if f.name not in CLIENT_OPTIONS]
    paths += [("task", k) for k in ("name", "source", "sizes", "presets", "atol", "level", "extra")]
    paths += [("candidate",), ("backend",), ("options",), ("task",), ("surplus",)]
    kind = rng.randrange(7)
    if kind <= 2:  # one field set to a hostile value
        body = {"requests": [_with(rng.choice(paths), rng.choice(values))]}
        text = json.dumps(body, allow_nan=True)
        if rng.random() < 0.3:
            text = text.replace("yes", "\\ud800" if rng.random() < 0.5 else "NaN")
        return "POST", "/v1/verify", text.encode()
    if kind == 3:  # a valid body cut, or bytes flipped
        text = bytearray(json.dumps({"requests": [_valid()]}).encode())
        if rng.random() < 0.5:
            return "POST", "/v1/verify", bytes(text[: rng.randrange(len(text))])
        for _ in range(rng.randint(1, 5)):
            text[rng.randrange(len(text))] = rng.randrange(256)
        return "POST", "/v1/verify", bytes(text)
    if kind == 4:  # nesting and shapes
        depth = rng.choice([17, 100, 2000, 50000])
        shape = rng.choice([b"[", b'{"a":'])
        close = b"]" if shape == b"[" else b"}"
        return "POST", "/v1/verify", shape * depth + close * depth
    if kind == 5:  # odd ids, routes and methods
        path = rng.choice(["/v1/jobs/", "/v1/jobs/-", "/v1/verify/", "/metrics/", "/v1/jobs/1/x", "/%00"])
        return rng.choice(["GET", "POST", "PUT", "DELETE", "PATCH"]), path + quote(str(rng.choice(values))[:30]), None
    return "POST", "/v1/verify", json.dumps(rng.choice([[], {}, {"requests": []}, {"requests": [1] * 5000}])).encode()


def test_fuzz_no_5xx_valid_jobs_unaffected_memory_bounded(server):
    url, pid = server["url"], server["proc"].pid
    client = Client(url, token=TOKEN)
    task = gelu_task()
    client.wait(client.submit([(task, NO_KERNEL, "triton", {"warmup_calls": 7})]), timeout_s=60)  # imports torch
    valid = client.submit([(task, GELU, "triton", {"trials": 2}), (task, NO_KERNEL, "triton", {"trials": 3})])
    socks = _half_open(int(url.rsplit(":", 1)[1]), 100)
    base, rng, codes, slowest = rss_mb(pid), random.Random(15), {}, 0.0
    try:
        for i in range(FUZZ):
            method, path, body = _mutant(rng)
            status, text = raw(url + path, body, TOKEN, method)
            assert status < 500, (i, method, path, (body or b"")[:300], text[:300])
            codes[status] = codes.get(status, 0) + 1
            if i % 25 == 0:
                start = time.monotonic()
                assert raw(url + "/healthz")[0] == 200
                slowest = max(slowest, time.monotonic() - start)
    finally:
        for s in socks:
            s.close()
    grown = rss_mb(pid) - base
    assert grown < 64, f"the server grew by {grown:.0f} MiB over the fuzz"
    assert slowest < 2.0, f"/healthz took {slowest:.2f} s during the fuzz"
    assert sum(n for c, n in codes.items() if 400 <= c < 500) > FUZZ * 0.8, codes
    verdicts = client.wait(valid, timeout_s=120, poll_s=0.2)
    assert [v.status for v in verdicts] == ["correct", "no_kernel"]
    deadline = time.monotonic() + 120  # a mutant that happens to be a valid request is verified too: let it finish
    while True:
        metrics = raw(url + "/metrics", token=TOKEN)[1]
        idle = 'kernelzero_jobs{state="queued"} 0' in metrics and 'kernelzero_jobs{state="running"} 0' in metrics
        if idle or time.monotonic() > deadline:
            break
        time.sleep(0.5)
    assert idle, metrics
