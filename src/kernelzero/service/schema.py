"""What a client of the verification service may send: typed, bounded request models (pydantic).

    body = parse_body(raw_bytes)          # BodyError (4xx, naming the field) or a VerifyBody
    job_id = parse_job_id("42")           # BodyError(422) unless a plain decimal integer in SQLite's range

Why: the service runs for many trainers at once, and every request reaches the verifier. So a client
chooses *what* is checked and only within bounds (the allowlist, `CLIENT_OPTIONS`: the profile, the
precision, tolerances up to `MAX_TOLERANCE`, trial and call counts up to their caps); *how* and *where*
it runs (sandbox, network, users, paths, caches, GPU choice, limits, device, compile checks) is server
configuration (`kernelzero serve --option NAME=VALUE`). Types are strict (no "yes" for a bool, no
"5" for an int), numbers finite, strings valid UTF-8 without NUL, sizes bounded, JSON nesting bounded;
a refusal names the field. Parsing is bounded by the request count as well as the body's size: a body is
read one request at a time, each validated before the next is decoded, and refused at the first invalid
request or at request MAX_REQUESTS + 1. Nothing here runs code or touches the queue.
"""

from __future__ import annotations

import json
from typing import Annotated, Literal

from pydantic import BaseModel, ConfigDict, Field, StringConstraints, ValidationError, field_validator

from kernelzero.types import PRECISIONS, PROFILES
from kernelzero.verify import BACKENDS

CLIENT_OPTIONS = ("profile", "precision", "atol", "rtol", "trials", "timed_calls", "warmup_calls")
MAX_TOLERANCE = 0.1  # atol and rtol, client's and task's: looser than this lets wrong kernels pass
MAX_TRIALS, MAX_TIMED_CALLS, MAX_WARMUP_CALLS = 20, 1000, 100
MAX_SOURCE_CHARS = 256 * 1024  # a candidate or a task source
MAX_REQUESTS = 4096  # per POST
MAX_DEPTH = 16  # JSON nesting of a body (a valid one needs 5)
MAX_JOB_ID = 2**63 - 1  # SQLite's INTEGER

Name = Annotated[str, StringConstraints(max_length=200)]
Size = Annotated[int, Field(ge=0, le=2**31 - 1)]
Tolerance = Annotated[float, Field(ge=0.0, le=MAX_TOLERANCE, allow_inf_nan=False)]
Sizes = Annotated[dict[Name, Size], Field(max_length=64)]


class BodyError(ValueError):
    """A request refused at the door: `code` is the HTTP status, `detail` names the field."""

    def __init__(self, code: int, detail: str):
        super().__init__(detail)
        self.code, self.detail = code, detail


def _text(value: str) -> str:
    """Strings must survive UTF-8 (SQLite, files, the judge): no lone surrogates, no NUL."""
    try:
        value.encode("utf-8")
    except UnicodeEncodeError:
        raise ValueError("not valid UTF-8 text (a lone surrogate)") from None
    if "\x00" in value:
        raise ValueError("contains a NUL character")
    return value


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", strict=True, frozen=True)

    @field_validator("*", mode="after")
    @classmethod
    def _valid_text(cls, value):
        if isinstance(value, str):
            return _text(value)
        if isinstance(value, dict):  # sizes, presets: their keys are strings too
            for key in value:
                _text(key)
        return value


class TaskIn(_Strict):
    """`kernelzero.types.Task` as a client sends it (`to_dict(task)`)."""

    name: Annotated[str, StringConstraints(min_length=1, max_length=200)]
    source: Annotated[str, StringConstraints(min_length=1, max_length=MAX_SOURCE_CHARS)]
    suite: Name = ""
    level: Annotated[int, Field(ge=0, le=100)] | None = None
    problem_id: Annotated[int, Field(ge=0, le=10**9)] | None = None
    sizes: Sizes = {}
    presets: Annotated[dict[Name, Sizes], Field(max_length=16)] = {}
    atol: Tolerance | None = None
    rtol: Tolerance | None = None
    note: Annotated[str, StringConstraints(max_length=2000)] = ""
    tie_prone: Annotated[
        dict[Annotated[str, StringConstraints(max_length=8)], Annotated[str, StringConstraints(max_length=64)]],
        Field(max_length=16),
    ] = {}  # outputs judged by what they select (verify/judge/compare.py)


class OptionsIn(_Strict):
    """The verifier options a client may set (CLIENT_OPTIONS); None or absent: the profile's own."""

    profile: Literal[tuple(PROFILES)] = "default"
    precision: Literal[PRECISIONS] | None = None
    atol: Tolerance | None = None
    rtol: Tolerance | None = None
    trials: Annotated[int, Field(ge=1, le=MAX_TRIALS)] | None = None
    timed_calls: Annotated[int, Field(ge=1, le=MAX_TIMED_CALLS)] | None = None
    warmup_calls: Annotated[int, Field(ge=0, le=MAX_WARMUP_CALLS)] | None = None

    def overrides(self) -> dict:
        """The options as `options_for` keywords, unset ones left out."""
        return {k: v for k, v in self.model_dump().items() if v is not None}


class RequestIn(_Strict):
    """One verification request of POST /v1/verify."""

    task: TaskIn
    candidate: Annotated[str, StringConstraints(max_length=MAX_SOURCE_CHARS)]
    backend: Literal[tuple(BACKENDS)]
    options: OptionsIn = OptionsIn()


class VerifyBody(_Strict):
    requests: Annotated[list[RequestIn], Field(min_length=1, max_length=MAX_REQUESTS)]


def _depth(data) -> int:
    """Nesting depth of decoded JSON, without recursion."""
    deepest, todo = 0, [(data, 1)]
    while todo:
        node, depth = todo.pop()
        deepest = max(deepest, depth)
        if depth > MAX_DEPTH:
            return depth
        children = node.values() if isinstance(node, dict) else node if isinstance(node, list) else ()
        todo += [(child, depth + 1) for child in children if isinstance(child, (dict, list))]
    return deepest


def _where(loc: tuple) -> str:
    out = ""
    for part in loc:
        out += f"[{part}]" if isinstance(part, int) else f".{part}" if out else str(part)
    return out


def _explain(exc: ValidationError, where: tuple = ()) -> str:
    """The first few errors, each naming its field (under `where`); the refused input itself is not echoed."""
    lines = []
    for err in exc.errors(include_input=False, include_url=False)[:5]:
        loc = where + tuple(err["loc"])
        if err["type"] == "extra_forbidden" and len(loc) > 1 and loc[-2] == "options":
            allowed = ", ".join(CLIENT_OPTIONS)
            lines.append(f"{_where(loc)}: not settable by clients (server configuration); clients may set {allowed}")
        else:
            lines.append(f"{_where(loc)}: {err['msg']}")
    more = exc.error_count() - len(lines)
    return "; ".join(lines) + (f"; and {more} more" if more > 0 else "")


def parse_request(data: object, where: tuple = ()) -> RequestIn:
    """One request (a decoded JSON object) as a RequestIn; BodyError(422) naming the field otherwise."""
    try:
        return RequestIn.model_validate(data)
    except ValidationError as exc:
        raise BodyError(422, _explain(exc, where)) from None


_DECODER = json.JSONDecoder()  # NaN, Infinity and 1e999 decode, then fail their field's finite-number check
_SPACE = " \t\n\r"
_SHAPE = 'the body must be {"requests": [...]}'
_VALUE_START = set('{["-0123456789tfnNI')


class _Scan:
    """A cursor over the body's text: its structural characters one at a time, its values one at a time."""

    def __init__(self, text: str):
        self.text, self.at = text, 0

    def peek(self) -> str:
        while self.at < len(self.text) and self.text[self.at] in _SPACE:
            self.at += 1
        return self.text[self.at : self.at + 1]

    def expect(self, char: str) -> None:
        """Step over `char`; else 422 where the text is JSON of another shape, 400 where it is not JSON."""
        found = self.peek()
        if found != char:
            raise BodyError(422 if found in _VALUE_START | set(",:]}") else 400, _SHAPE)
        self.at += 1

    def value(self):
        """The next JSON value, decoded alone (400 if it is not JSON, 422 if nested too deep)."""
        self.peek()
        try:
            value, self.at = _DECODER.raw_decode(self.text, self.at)
        except RecursionError:
            raise BodyError(422, f"the body is nested deeper than {MAX_DEPTH} levels") from None
        except ValueError as exc:  # ints of over 4300 digits too
            raise BodyError(400, f"the body is not JSON: {str(exc)[:200]}") from None
        return value


def parse_body(raw: bytes | bytearray) -> VerifyBody:
    """The body of POST /v1/verify; BodyError 400 (not JSON) or 422 (does not validate), naming the field.

    Bounded by the request count, not only by the body's size: the body is read one request at a time (each
    decoded and validated before the next is decoded), and the scan stops at the first request that does not
    validate or at request MAX_REQUESTS + 1. So a body of millions of tiny elements costs at most MAX_REQUESTS
    decodings, never a tree of millions of objects.
    """
    try:
        scan = _Scan(raw.decode("utf-8"))
    except UnicodeDecodeError as exc:
        raise BodyError(400, f"the body is not JSON: {str(exc)[:200]}") from None
    scan.expect("{")
    if scan.peek() != '"':
        raise BodyError(422 if scan.peek() == "}" else 400, _SHAPE)
    if scan.value() != "requests":
        raise BodyError(422, _SHAPE)
    scan.expect(":")
    scan.expect("[")
    requests: list[RequestIn] = []
    while scan.peek() != "]":
        if requests:
            scan.expect(",")
        if len(requests) == MAX_REQUESTS:
            raise BodyError(422, f"requests: at most {MAX_REQUESTS} requests in one body")
        data = scan.value()
        if _depth(data) > MAX_DEPTH - 2:  # the body's own object and list are two levels
            raise BodyError(422, f"the body is nested deeper than {MAX_DEPTH} levels")
        requests.append(parse_request(data, ("requests", len(requests))))
    scan.expect("]")
    scan.expect("}")
    if scan.peek():
        raise BodyError(400 if scan.peek() not in _VALUE_START else 422, _SHAPE)
    if not requests:
        raise BodyError(422, "requests: at least one request")
    return VerifyBody.model_construct(requests=requests)  # each request validated above


def parse_job_id(text: str) -> int:
    """A job id from a URL: decimal digits only (no sign, point, exponent, underscore or leading zero)."""
    if not (text.isascii() and text.isdigit()) or (len(text) > 1 and text[0] == "0") or len(text) > 19:
        raise BodyError(422, f"job id must be a positive decimal integer, got {text[:40]!r}")
    job_id = int(text)
    if not 1 <= job_id <= MAX_JOB_ID:
        raise BodyError(422, f"job id must be between 1 and {MAX_JOB_ID}")
    return job_id
