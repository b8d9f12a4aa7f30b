"""Triton's driver helpers and the warm-up kernel, compiled once per machine by trusted code and copied into each
sandboxed process's fresh Triton cache (issue 26 item 3): opt-in with `KZ_TRITON_SEED=1` until gated on a GPU.

Why. Every sandboxed process gets a Triton cache of its own (`process.lay_out_workdir`), so no sample's files reach
another. A fresh cache holds nothing, so each candidate's worker rebuilds Triton's CUDA driver helpers (`cuda_utils`,
a C extension compiled with the system compiler) and compiles the standby warm-up kernel (worker/warm.py) before
its first call: in a GRPO step on the H200 at 92a41dc (bench/service.md) the worker's warm-up took a median 1.98
CPU-s of its 2.9, on a host where CPU bounds the step, and every timed sample paid it twice (its correctness pass,
then its timed pass).

What. `master()` is a folder of Triton cache entries made by `build`: a child process of our own code alone (no
candidate's or task's code is ever imported in it) that runs the warm-up with `TRITON_CACHE_DIR` pointed at a fresh
folder, which becomes the master once the warm-up succeeded (renamed into place: a half-built master is never used).
It is built once per machine and version (the folder's name holds Triton's and torch's versions), by the first
caller that gets its lock; callers that find it locked go on unseeded, so no verification waits on it beyond the one
that builds it. A failed build leaves `<master>.failed` with its reason, and nobody tries again until it is removed.
`seed(cache_fd, owner)` copies the master's regular files into a process's fresh cache folder, given to the
process's user, while root lays the folder out (before the process starts). Triton finds the entries under their
keys (a hash of the source and the platform, or of the kernel and its target) and loads them instead of compiling.
Anything else the process compiles goes into its own copy, as before.

Boundaries. The master is written by root's trusted child and read by root; the sandbox gets copies, never the
master: what a candidate writes into its cache stays in its own folder, which dies with it. Links, devices and
anything but regular files and folders in the master are skipped; a master over MAX_BYTES is not copied. Nothing
here changes what a candidate's own kernels compile to: their cache keys are theirs. Off (the default), or where no
GPU is visible, nothing is built or copied. The build's child holds a CUDA context for a few seconds once per machine
and version, outside the GPU memory ledger (verify/judge/memory.py), like the health probe's.
"""

from __future__ import annotations

import fcntl
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

from kernelzero.verify.sandbox import safe_fs

ENV = "KZ_TRITON_SEED"
DIR_ENV = "KZ_TRITON_SEED_DIR"  # where masters live (default ~/.cache/kernelzero/triton-seed)
MAX_BYTES = 64 << 20  # a master larger than this is not copied (a helper and one kernel are well under 1 MiB)
MAX_DEPTH = 4  # folders below the cache folder (Triton uses one: <key>/<file>)
BUILD_TIMEOUT_S = 180.0
_failed: set[str] = set()  # masters whose build failed in this process: not tried again


def enabled() -> bool:
    """Whether sandboxed processes get the master's entries (`KZ_TRITON_SEED`: 1 on, 0 or unset off)."""
    raw = os.environ.get(ENV, "").strip()
    if raw not in ("", "0", "1"):
        raise ValueError(f"{ENV} must be 0 or 1, got {raw!r}")
    return raw == "1"


def master_path() -> Path:
    """The master's folder for this machine's Triton and torch (it may not exist yet)."""
    import torch
    import triton

    root = Path(os.environ.get(DIR_ENV) or Path.home() / ".cache" / "kernelzero" / "triton-seed")
    return root / f"triton-{triton.__version__}-torch-{torch.__version__}".replace("+", "_")


def build(target: Path, timeout_s: float = BUILD_TIMEOUT_S) -> str:
    """Make the master at `target` in a child process that runs the standby warm-up alone; '' when built, else why
    not. The child's cache folder becomes `target` only after it exited cleanly."""
    target.parent.mkdir(parents=True, exist_ok=True)
    scratch = Path(tempfile.mkdtemp(prefix=".building-", dir=target.parent))
    env = {**os.environ, "TRITON_CACHE_DIR": str(scratch / "cache")}
    env.pop("TRITON_INTERPRET", None)
    argv = [sys.executable, "-m", "kernelzero.verify.sandbox.triton_seed", "build"]
    try:
        done = subprocess.run(argv, env=env, capture_output=True, text=True, timeout=timeout_s)
        if done.returncode != 0 or not (scratch / "cache").is_dir():
            return f"the warm-up child failed ({done.returncode}): {(done.stderr or done.stdout)[-400:]}"
        os.rename(scratch / "cache", target)
        return ""
    except (OSError, subprocess.TimeoutExpired) as exc:
        return f"the warm-up child did not finish: {exc}"
    finally:
        shutil.rmtree(scratch, ignore_errors=True)


def master() -> Path | None:
    """The master to copy from, built first when missing (by the caller that gets its lock; the others go on
    without one); None when seeding is off, no GPU is visible, or the master cannot be had now."""
    if not enabled():
        return None
    import torch

    if not torch.cuda.is_available():
        return None
    target = master_path()
    if target.is_dir():
        return target
    # a build failed on this machine: not tried again (remove the marker to retry)
    failed = target.parent / f"{target.name}.failed"
    if str(target) in _failed or failed.exists():
        return None
    target.parent.mkdir(parents=True, exist_ok=True)
    lock = safe_fs.open_lock(target.parent / f"{target.name}.lock", 0o600)
    try:
        try:
            fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:  # another caller builds it: go on without it this time
            return None
        why = "" if target.is_dir() else build(target)
        if why:
            _failed.add(str(target))
            failed.write_text(why + "\n")
            return None
        return target
    finally:
        os.close(lock)


def _entries(folder: Path, depth: int = 0):
    """(path relative to the master, is a folder) of every regular file and folder, folders first; links skipped."""
    for entry in sorted(os.scandir(folder), key=lambda e: e.name):
        if entry.is_symlink():
            continue
        if entry.is_dir(follow_symlinks=False) and depth < MAX_DEPTH:
            yield Path(entry.name), True
            yield from ((Path(entry.name) / sub, is_dir) for sub, is_dir in _entries(Path(entry.path), depth + 1))
        elif entry.is_file(follow_symlinks=False):
            yield Path(entry.name), False


def seed(cache_fd: int, owner: tuple[int, int] | None, source: Path | None = None) -> int:
    """Copy the master's (or `source`'s) entries into the fresh cache folder open at `cache_fd`, each given to
    `owner`; the number of files copied (0 when there is no master or it is too large)."""
    source = source if source is not None else master()
    if source is None or not source.is_dir():
        return 0
    entries = list(_entries(source))
    if sum((source / rel).stat().st_size for rel, is_dir in entries if not is_dir) > MAX_BYTES:
        return 0
    folders = {Path("."): cache_fd}
    copied = 0
    try:
        for rel, is_dir in entries:
            parent = folders[rel.parent]
            if is_dir:
                safe_fs.make_folder(parent, rel.name, owner)
                folders[rel] = os.open(rel.name, os.O_RDONLY | os.O_DIRECTORY | safe_fs.OPEN_FLAGS, dir_fd=parent)
            elif rel.parent in folders:
                data = safe_fs.read_regular(source / rel, MAX_BYTES)
                safe_fs.write_new(parent, rel.name, data, 0o644, owner)
                copied += 1
    finally:
        for rel, fd in folders.items():
            if rel != Path("."):
                os.close(fd)
    return copied


def main(argv: list[str]) -> int:
    """`python -m kernelzero.verify.sandbox.triton_seed build`: the warm-up alone, into TRITON_CACHE_DIR."""
    if argv != ["build"]:
        print("usage: python -m kernelzero.verify.sandbox.triton_seed build", file=sys.stderr)
        return 2
    from kernelzero.verify.worker.warm import warm_gpu

    print(warm_gpu(triton=True))
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
