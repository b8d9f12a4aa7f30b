"""The caller's side of a judge: start a judge process (or take a ready standby one), give it the request, read
its result. The judge runs in its own process so that a crash of the reference, of torch or of the GPU context
cannot take the caller down; it writes its result to a file and closes its output, so the caller does not wait for
its teardown. The result file lives in a temporary folder of the caller's own (mode 0700), which no sandboxed process
can write; it is read without following a link and only when it is a regular file (safe_fs.read_regular).
"""

from __future__ import annotations

import importlib.util
import json
import os
import select
import subprocess
import sys
import tempfile
import threading
import time
from dataclasses import asdict, replace
from pathlib import Path

from kernelzero.types import Backend, Task, Verdict, to_dict, verdict_from_dict
from kernelzero.verify.backends.cuda.build_cache import default_cache_dir, ensure_readable
from kernelzero.verify.judge.launch import on_gpu
from kernelzero.verify.judge.standby import Standby
from kernelzero.verify.options import VerifyOptions
from kernelzero.verify.sandbox.process import physical_gpu, source_root
from kernelzero.verify.sandbox.safe_fs import read_regular
from kernelzero.verify.verdicts import early_verdict

RESULT_LIMIT = 64 << 20  # bytes of a judge's result file read (a verdict is a few KB; error logs are bounded)


def _standby_judge(
    standby: Standby | None, env: dict[str, str], opts: VerifyOptions, request: Path, result: Path
) -> subprocess.Popen | None:
    """A ready judge from `standby`, given this request; None when there is none (or it just died)."""
    proc = standby.take(env, opts, on_gpu(opts)) if standby is not None else None
    if proc is None:
        return None
    try:
        proc.stdin.write(f"{request}\n{result}\n".encode())
        proc.stdin.close()
        proc.stdin = None  # closed: communicate() must not flush it
    except OSError:  # it died between the check and now
        if proc.poll() is None:
            os.killpg(proc.pid, 9)
        proc.wait()
        return None
    return proc


def _judge_output(proc: subprocess.Popen, timeout_s: float, limit: int = 1 << 20) -> bytes:
    """The judge's output until it closes it (launch.py does so once its result is written); the last `limit`
    bytes. Raises TimeoutExpired after `timeout_s`."""
    deadline = time.monotonic() + timeout_s
    fd, out = proc.stdout.fileno(), b""
    while True:
        left = deadline - time.monotonic()
        if left <= 0:
            raise subprocess.TimeoutExpired(proc.args, timeout_s)
        if select.select([fd], [], [], left)[0]:
            data = os.read(fd, 1 << 16)
            if not data:
                proc.stdout.close()
                return out
            out = (out + data)[-limit:]


def import_roots(backend: Backend) -> list[str]:
    """The folders the judge and worker need on their import path: kernelzero's, and the backend package's when
    it lives elsewhere (a backend registered from outside kernelzero)."""
    roots = [str(source_root())]
    spec = importlib.util.find_spec(backend.package.split(".")[0])
    for location in (spec.submodule_search_locations or []) if spec else []:
        root = str(Path(location).resolve().parent)
        if root not in roots:
            roots.append(root)
    return roots


def _judge_env(backend: Backend, opts: VerifyOptions) -> dict[str, str]:
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(import_roots(backend))}
    if opts.gpu_index is not None:
        env["CUDA_VISIBLE_DEVICES"] = physical_gpu(opts.gpu_index)
    cache = Path(opts.build_cache) if opts.build_cache else default_cache_dir()
    env["KZ_BUILD_CACHE"] = str(ensure_readable(cache))  # any backend: one standby kind per lane
    return env


def run_judge(
    task: Task, source: str, backend: Backend, opts: VerifyOptions, standby: Standby | None = None
) -> Verdict:
    """Verify `source` in a judge process (a standby one when `standby` has one ready).

    A judge that dies or runs past its budget, or that reports a fault another tenant of the GPU may have caused
    (judge/faults.py), is run once more in a fresh process with `gpu_alone` (its memory lease waits until it is
    alone on the GPU); if that one dies too, the verdict is `infra_error` (never the candidate's `crash`)."""
    start = time.monotonic()
    verdict, why, log = _judge_once(task, source, backend, opts, standby)
    if why is not None:
        verdict, again, log = _judge_once(task, source, backend, replace(opts, gpu_alone=True), None)
        if again is not None:
            message = f"{again} (and before, on the first try: {why})"[:1500]
            return early_verdict(task, source, backend.name, opts, "infra_error", "judge", message, error_log=log)
        verdict = replace(verdict, notes=(*verdict.notes, f"verified again alone on the GPU after: {why[:300]}"))
    return replace(verdict, stage_seconds={**verdict.stage_seconds, "total": round(time.monotonic() - start, 3)})


def _judge_once(
    task: Task, source: str, backend: Backend, opts: VerifyOptions, standby: Standby | None
) -> tuple[Verdict | None, str | None, str]:
    """One judge process: (its verdict, None, "") or (None, why it is to be retried alone, its output's tail)."""
    budget = opts.build_timeout_s + (opts.trials + 6) * opts.timeout_floor_s + 300
    with tempfile.TemporaryDirectory(prefix="kz-verify-") as tmp:
        request, result = Path(tmp, "request.json"), Path(tmp, "result.json")
        request.write_text(
            json.dumps({"task": to_dict(task), "source": source, "backend": to_dict(backend), "options": asdict(opts)})
        )
        proc = _standby_judge(standby, _judge_env(backend, opts), opts, request, result)
        if proc is None:
            argv = ["-m", "kernelzero.verify.judge.launch", "--parent", str(os.getpid()), str(request), str(result)]
            proc = subprocess.Popen(
                [sys.executable, *argv],
                stdin=subprocess.DEVNULL,
                stdout=subprocess.PIPE,
                stderr=subprocess.STDOUT,
                start_new_session=True,
                env=_judge_env(backend, opts),
            )
        try:
            out = _judge_output(proc, budget)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, 9)
            proc.communicate()
            return None, f"the verifier's judge process took over {budget:.0f} s", ""
        if result.exists():  # the judge closed its output after writing it: its own teardown is not waited for
            threading.Thread(target=proc.wait, daemon=True).start()
        else:
            try:
                proc.wait(timeout=30)
            except subprocess.TimeoutExpired:
                os.killpg(proc.pid, 9)
                proc.wait()
            tail = out.decode(errors="replace")[-1500:]
            return None, f"the verifier's judge process died (exit {proc.returncode})", tail
        payload = json.loads(read_regular(result, RESULT_LIMIT))  # a regular file, not through a link
    if "error" in payload:
        raise ValueError(payload["error"])
    if "retry_alone" in payload:
        return None, str(payload["retry_alone"]), ""
    return verdict_from_dict(payload["verdict"]), None, ""
