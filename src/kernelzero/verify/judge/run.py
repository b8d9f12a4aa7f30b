"""The caller's side of a judge: start a judge process (or take a ready standby one), give it the request, read
its result. The judge runs in its own process so that a crash of the reference, of torch or of the GPU context
cannot take the caller down; it writes its result to a file and closes its output, so the caller does not wait for
its teardown. The result file lives in a temporary folder of the caller's own (mode 0700), which no sandboxed process
can write; it is read without following a link and only when it is a regular file (safe_fs.read_regular).

A standby judge may serve several requests (judge/serving.py): the caller takes its answer on the judge's ANSWERED
line (judge/judge_io.py) for its own result file, and hands a judge that answered `again` back to its `Standby`.
"""

from __future__ import annotations

import contextlib
import importlib.util
import json
import math
import os
import select
import subprocess
import tempfile
import threading
import time
from dataclasses import asdict, replace
from pathlib import Path

from kernelzero.types import Backend, Task, Verdict, to_dict, verdict_from_dict
from kernelzero.verify.backends.cuda.build_cache import default_cache_dir, ensure_readable
from kernelzero.verify.judge.judge_io import ANSWERED, answered_line, on_gpu
from kernelzero.verify.judge.standby import Standby, start_judge
from kernelzero.verify.judge.turns import reference_key
from kernelzero.verify.options import VerifyOptions
from kernelzero.verify.sandbox import zygote_client
from kernelzero.verify.sandbox.process import physical_gpu, source_root
from kernelzero.verify.sandbox.safe_fs import read_regular
from kernelzero.verify.verdicts import early_verdict

RESULT_LIMIT = 64 << 20  # bytes of a judge's result file read (a verdict is a few KB; error logs are bounded)


def _standby_judge(
    standby: Standby | None, env: dict[str, str], opts: VerifyOptions, paths: tuple[Path, Path], affinity: str
) -> subprocess.Popen | None:
    """A ready judge from `standby`, given this request (`paths`: request and result); None when there is none (or
    it just died). Its stdin stays open: a serving judge reads its next request there."""
    proc = standby.take(env, opts, on_gpu(opts), affinity) if standby is not None else None
    if proc is None:
        return None
    try:
        proc.stdin.write(f"{paths[0]}\n{paths[1]}\n".encode())
        proc.stdin.flush()
    except OSError:  # it died between the check and now
        if proc.poll() is None:
            os.killpg(proc.pid, 9)
        proc.wait()
        standby.returned(proc, False)
        return None
    return proc


def _judge_output(
    proc: subprocess.Popen, timeout_s: float, marker: Path, result: Path, limit: int = 1 << 20
) -> tuple[bytes, bool]:
    """The judge's output until its ANSWERED line for `result` or the end of its output (launch.py ends it once its
    last result is written): (the last `limit` bytes, whether it said it serves again). Raises TimeoutExpired
    `timeout_s` after the judge touched `marker` (it holds its GPU memory lease), or MAX_LEASE_WAIT_S after the start
    if it never does."""
    started = time.monotonic()
    fd, out = proc.stdout.fileno(), b""
    lines = {answered_line(result, again): again for again in (True, False)}
    ready = select.poll()  # not select(): it fails on descriptors above 1023 (a server with many connections)
    ready.register(fd, select.POLLIN)
    while True:
        leased = marker.stat().st_mtime - time.time() + time.monotonic() if marker.exists() else None
        deadline = leased + timeout_s if leased is not None else started + MAX_LEASE_WAIT_S
        left = deadline - time.monotonic()
        if left <= 0:
            raise subprocess.TimeoutExpired(proc.args, timeout_s if leased is not None else MAX_LEASE_WAIT_S)
        if ready.poll(math.ceil(min(left, 1.0) * 1000)):  # readable, or closed (POLLHUP)
            data = os.read(fd, 1 << 16)
            if not data:
                proc.stdout.close()
                return out, False
            out = (out + data)[-limit:]
            if ANSWERED.encode() in out:
                for line, again in lines.items():
                    if line in out:
                        return out, again


def import_roots(backend: Backend) -> list[str]:
    """The folders the judge and worker need on their import path: kernelzero's, the backend package's when it
    lives elsewhere (a backend registered from outside kernelzero), then the caller's own PYTHONPATH entries made
    absolute (packages a user or the GPU gate installed there, e.g. helion: the judge and the sandboxed worker run
    from other folders)."""
    roots = [str(source_root())]
    spec = importlib.util.find_spec(backend.package.split(".")[0])
    for location in (spec.submodule_search_locations or []) if spec else []:
        roots.append(str(Path(location).resolve().parent))
    roots += [str(Path(entry).resolve()) for entry in os.environ.get("PYTHONPATH", "").split(os.pathsep) if entry]
    return list(dict.fromkeys(roots))


def _judge_env(backend: Backend, opts: VerifyOptions) -> dict[str, str]:
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(import_roots(backend))}
    if opts.gpu_index is not None:
        env["CUDA_VISIBLE_DEVICES"] = physical_gpu(opts.gpu_index)
    cache = Path(opts.build_cache) if opts.build_cache else default_cache_dir()
    env["KZ_BUILD_CACHE"] = str(ensure_readable(cache))  # any backend: one standby kind per lane
    if not opts.unsafe_no_sandbox:  # this process's fork server: the judge's workers start from it (zygote.py)
        env[zygote_client.SOCKET_ENV] = zygote_client.address()
    return env


def run_judge(
    task: Task, source: str, backend: Backend, opts: VerifyOptions, standby: Standby | None = None
) -> Verdict:
    """Verify `source` in a judge process (a standby one when `standby` has one ready).

    A judge killed by a signal, or one that reports a fault another tenant of the GPU may have caused
    (judge/faults.py), is run once more in a fresh process with `gpu_alone` (its memory lease waits until it is
    alone on the GPU); a second such end is `infra_error` (never the candidate's `crash`). A judge that exits with
    an error of its own is `infra_error` at once (a verifier bug is not retried: it would fail again)."""
    start = time.monotonic()
    verdict, why, log = _judge_once(task, source, backend, opts, standby)
    if why is not None and why.startswith(STALE):  # a serving judge gone between its answers: a fresh one
        verdict, why, log = _judge_once(task, source, backend, opts, None)
    if why is not None and why.startswith(RETRY):
        verdict, again, log = _judge_once(task, source, backend, replace(opts, gpu_alone=True), None)
        if again is None:
            note = f"verified again alone on the GPU after: {why.removeprefix(RETRY)[:300]}"
            verdict, why = replace(verdict, notes=(*verdict.notes, note)), None
        else:
            why = f"{again.removeprefix(RETRY)} (and before, on the first try: {why.removeprefix(RETRY)})"
    if why is not None:
        message = why.removeprefix(RETRY)[:1500]
        return early_verdict(task, source, backend.name, opts, "infra_error", "judge", message, error_log=log)
    return replace(verdict, stage_seconds={**verdict.stage_seconds, "total": round(time.monotonic() - start, 3)})


def budget_s(opts: VerifyOptions) -> float:
    """The wall time one judge may take once it holds its GPU memory lease: the build, each trial's and the other
    stages' run-time floor, and a margin for start-up."""
    return opts.build_timeout_s + (opts.trials + 6) * opts.timeout_floor_s + 300


def _let_go(proc: subprocess.Popen, standby: Standby | None, again: bool, key: str) -> None:
    """After an answer: a judge that serves again goes back to its standby; any other is left to end (its stdin
    closed, so one that meant to serve again exits too), reaped in the background."""
    if again and standby is not None and standby.returned(proc, True, key):
        return
    if standby is not None and not again:
        standby.returned(proc, False)
    for pipe in (proc.stdin, proc.stdout):  # closed now, not when the process object is collected
        with contextlib.suppress(OSError, AttributeError):
            pipe.close()
    threading.Thread(target=proc.wait, daemon=True).start()


def _lost(standby: Standby | None, proc: subprocess.Popen) -> None:
    """A judge that ended without an answer: its standby (if it came from one) starts another in its place."""
    if standby is not None:
        standby.returned(proc, False)


RETRY = "retry: "  # _judge_once's reason for a fault worth a second try alone
STALE = "stale: "  # its reason when a judge that said it serves again ended without answering: a fresh judge next
MAX_LEASE_WAIT_S = 3600.0  # a judge waits this long for its GPU memory lease at most (then: infra_error)


def _judge_once(
    task: Task, source: str, backend: Backend, opts: VerifyOptions, standby: Standby | None
) -> tuple[Verdict | None, str | None, str]:
    """One judge process: (its verdict, None, "") or (None, why not, its output's tail); `why` starts with RETRY
    when the fault is worth a second try alone. The time budget counts from when the judge holds its memory lease
    (it touches the lease marker), so waiting for memory is never the candidate's time."""
    budget = budget_s(opts)
    with tempfile.TemporaryDirectory(prefix="kz-verify-") as tmp:
        request, result, marker = Path(tmp, "request.json"), Path(tmp, "result.json"), Path(tmp, "leased")
        payload = {"task": to_dict(task), "source": source, "backend": to_dict(backend), "options": asdict(opts)}
        request.write_text(json.dumps({**payload, "lease_marker": str(marker)}))
        env = _judge_env(backend, opts)
        key = reference_key(payload)
        proc = _standby_judge(standby, env, opts, (request, result), key)
        if proc is None:
            proc = start_judge(["--parent", str(os.getpid()), str(request), str(result)], env)
        try:
            out, again = _judge_output(proc, budget, marker, result)
        except subprocess.TimeoutExpired as exc:
            os.killpg(proc.pid, 9)
            proc.communicate()
            _lost(standby, proc)
            if not marker.exists():
                return None, f"the judge waited over {exc.timeout:.0f} s for GPU memory", ""
            verdict = early_verdict(
                task, source, backend.name, opts, "timeout", "judge", f"verification took over {budget:.0f} s"
            )
            return verdict, None, ""
        except BaseException:  # the caller was interrupted (a test's time limit, Ctrl-C): the judge goes too
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.killpg(proc.pid, 9)
            _lost(standby, proc)
            raise
        if result.exists():  # the judge said its answer is written: its own teardown is never waited for
            _let_go(proc, standby, again, key)
        else:
            try:
                proc.wait(timeout=30)
            except subprocess.TimeoutExpired:
                os.killpg(proc.pid, 9)
                proc.wait()
            _lost(standby, proc)
            tail = out.decode(errors="replace")[-1500:]
            why = f"the verifier's judge process died (exit {proc.returncode})"
            if getattr(proc, "kz_served", False):  # it had answered `again`: it may have ended before this request
                return None, STALE + why, tail
            return None, (RETRY + why if proc.returncode < 0 else why), tail
        answer = json.loads(read_regular(result, RESULT_LIMIT))  # a regular file, not through a link
    if "error" in answer:
        raise ValueError(answer["error"])
    if "retry_alone" in answer:
        return None, RETRY + str(answer["retry_alone"]), ""
    return verdict_from_dict(answer["verdict"]), None, ""
