"""What a client may send (service/schema.py), without a server: allowlist, bounds, strict types, ids."""

import json

import pytest

pytest.importorskip("pydantic")  # the service extra (not on every GPU image)

from kernelzero.service.schema import CLIENT_OPTIONS, MAX_DEPTH, BodyError, parse_body, parse_job_id  # noqa: E402

TASK = {"name": "t", "source": "import torch\n"}


def _body(options=None, **request) -> bytes:
    req = {"task": TASK, "candidate": "c", "backend": "triton", "options": options or {}, **request}
    return json.dumps({"requests": [req]}, allow_nan=True).encode()


def _refused(raw: bytes) -> tuple[int, str]:
    with pytest.raises(BodyError) as err:
        parse_body(raw)
    return err.value.code, err.value.detail


def test_the_allowlist_within_bounds_is_accepted():
    options = {"profile": "strict", "precision": "bf16", "atol": 0.1, "rtol": 0, "trials": 20, "timed_calls": 1000}
    [req] = parse_body(_body({**options, "warmup_calls": 0})).requests
    assert req.options.overrides() == {**options, "rtol": 0.0, "warmup_calls": 0}
    assert set(req.options.overrides()) == set(CLIENT_OPTIONS)


@pytest.mark.parametrize(
    "options, field",
    [
        ({"atol": 0.11}, "options.atol"),
        ({"atol": -1e-9}, "options.atol"),
        ({"rtol": float("nan")}, "options.rtol"),
        ({"trials": 21}, "options.trials"),
        ({"trials": True}, "options.trials"),
        ({"trials": 2.0}, "options.trials"),
        ({"timed_calls": 1001}, "options.timed_calls"),
        ({"profile": "lenient"}, "options.profile"),
        ({"precision": "fp8"}, "options.precision"),
        ({"gpu_index": 0}, "options.gpu_index: not settable by clients"),
        ({"speedup_cap": 1e9}, "options.speedup_cap: not settable by clients"),
    ],
)
def test_out_of_bounds_or_server_only_options_name_the_field(options, field):
    code, detail = _refused(_body(options))
    assert code == 422 and field in detail


def test_task_and_candidate_fields_are_typed_and_bounded():
    assert "task.sizes.N" in _refused(_body(task={**TASK, "sizes": {"N": "abc"}}))[1]
    assert "task.sizes.N" in _refused(_body(task={**TASK, "sizes": {"N": 2**40}}))[1]
    assert "task.atol" in _refused(_body(task={**TASK, "atol": 1e308}))[1]
    assert "task.surplus" in _refused(_body(task={**TASK, "surplus": 1}))[1]
    assert "candidate" in _refused(_body(candidate="a\x00b"))[1]
    assert "candidate" in _refused(_body(candidate="\ud800"))[1]
    assert "candidate" in _refused(_body(candidate="x" * (256 * 1024 + 1)))[1]
    assert "requests[0].backend" in _refused(_body(backend="opencl"))[1]


def test_body_shape_depth_and_json():
    assert _refused(b"{not json")[0] == 400
    assert _refused(b'{"reqs": []}')[0] == 422
    assert _refused(b'{"requests": []}')[0] == 422
    for depth in (MAX_DEPTH + 1, 970, 100_000):
        code, detail = _refused(b'{"requests": ' + b"[" * depth + b"]" * depth + b"}")
        assert code == 422 and "nested deeper" in detail


@pytest.mark.parametrize("text", ["1.0", "+1", "1_0", "-1", "0", "01", " 1", "1e3", "\u0661", "9223372036854775808"])
def test_job_ids_are_plain_integers_in_range(text):
    with pytest.raises(BodyError) as err:
        parse_job_id(text)
    assert err.value.code == 422


def test_a_valid_job_id():
    assert parse_job_id("9223372036854775807") == 2**63 - 1 and parse_job_id("7") == 7


def test_shapes_other_than_one_requests_list_are_refused():
    one = json.loads(_body())["requests"][0]
    assert _refused(b'{"requests": [' + json.dumps(one).encode() + b'], "x": 1}')[0] == 422
    assert _refused(b'{"requests": [], "requests": []}')[0] == 422
    assert _refused(b'[{"requests": []}]')[0] == 422
    assert _refused(b'{"requests": 5}')[0] == 422
    assert _refused(b"{}")[0] == 422
    assert _refused(_body() + b" x")[0] == 400  # trailing bytes
    assert _refused(_body()[:-5])[0] == 400  # cut short
    assert _refused(b'{"requests": [\xff]}')[0] == 400  # not UTF-8
    assert _refused(b'{"requests": [' + json.dumps(one).encode() + b",]}")[0] == 400
    assert len(parse_body(b' \n{ "requests" : [ ' + json.dumps(one).encode() + b" ] } \n").requests) == 1


def test_the_request_count_is_capped_before_the_body_is_decoded_whole():
    """Issue 27: an 8 MiB body `{"requests":[{},{},...]}` (2.8 million objects) took 19 s of CPU and raised the
    server's peak memory by 741 MiB when decoded whole; read a request at a time it is refused at the first."""
    import time
    import tracemalloc

    n = (8 * 1024 * 1024 - 20) // 3
    body = b'{"requests":[' + b",".join([b"{}"] * n) + b"]}"
    tracemalloc.start()
    started = time.process_time()
    try:
        code, detail = _refused(body)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert code == 422 and detail.startswith("requests[0].task: Field required")
    assert time.process_time() - started < 1.0
    assert peak < 2 * len(body), f"{peak / 2**20:.0f} MiB"  # the decoded text and one request at a time


def test_more_than_max_requests_are_refused_at_the_first_surplus():
    from kernelzero.service.schema import MAX_REQUESTS

    one = json.dumps(json.loads(_body())["requests"][0]).encode()
    assert len(parse_body(b'{"requests": [' + b",".join([one] * MAX_REQUESTS) + b"]}").requests) == MAX_REQUESTS
    body = b'{"requests": [' + b",".join([one] * (MAX_REQUESTS + 1)) + b", not json at all"
    code, detail = _refused(body)  # refused before the bytes that are not JSON are reached
    assert code == 422 and f"at most {MAX_REQUESTS} requests" in detail
