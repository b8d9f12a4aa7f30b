"""The shared build cache under root and the sandbox user, in either order (build_cache.py, pch.py).

A forked child drops to `nobody` the way the sandbox drops to a uid of its own (sandbox/enter.py: groups, gid,
uid; any uid but root's is "other" to the cache) and does what a worker does with the shared cache: look a library
up, look a precompiled header up, fall back to its own folder. Root does what the pool's builders do. CI runs as root; elsewhere (or without a usable `nobody`)
these tests skip.

    PYTHONPATH=src python -m pytest -p no:xdist tests/verify/test_cache_ownership.py
"""

from __future__ import annotations

import json
import os
import pwd
import shutil
import stat
import tempfile
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from kernelzero.verify.backends.cuda import pch
from kernelzero.verify.backends.cuda.build_cache import BuildCache, CacheOwnershipError, ensure_readable, trusted

KEY = "ab" + "0" * 62
FAKE_CXX = '#!/bin/sh\nwhile [ $# -gt 0 ]; do if [ "$1" = -o ]; then shift; echo gch > "$1"; fi; shift; done\n'


def _nobody() -> tuple[int, int] | None:
    if os.geteuid() != 0:
        return None
    try:
        entry = pwd.getpwnam("nobody")
    except KeyError:
        return None
    return entry.pw_uid, entry.pw_gid


def as_nobody(fn: Callable, *args):
    """`fn(*args)` in a forked child dropped to `nobody`; its JSON-able result, or the child's error re-raised."""
    uid, gid = _nobody()
    read, write = os.pipe()
    pid = os.fork()
    if pid == 0:  # the child: never returns into pytest
        try:
            os.close(read)
            os.setgroups([])
            os.setgid(gid)
            os.setuid(uid)
            out = {"value": fn(*args)}
        except BaseException as exc:  # noqa: BLE001 - everything goes back to the parent
            out = {"error": f"{type(exc).__name__}: {exc}"}
        os.write(write, json.dumps(out).encode())
        os._exit(0)
    os.close(write)
    with os.fdopen(read, "rb") as pipe:
        data = pipe.read()
    os.waitpid(pid, 0)
    out = json.loads(data)
    if "error" in out:
        raise AssertionError(f"as nobody: {out['error']}")
    return out["value"]


def _usable_nobody() -> bool:
    return _nobody() is not None and as_nobody(os.geteuid) == _nobody()[0]


pytestmark = pytest.mark.skipif(not _usable_nobody(), reason="needs root and a usable `nobody` user")


@pytest.fixture
def base() -> Iterator[Path]:
    """A folder everyone can traverse (pytest's own are root's alone), with a world-writable sticky one in it
    (like /var/tmp) and a folder of the sandbox user's own (its workdir)."""
    root = Path(tempfile.mkdtemp(prefix="kz-own-", dir="/tmp"))
    root.chmod(0o755)
    (root / "public").mkdir(mode=0o1777)
    (root / "public").chmod(0o1777)
    (root / "worker").mkdir()
    os.chown(root / "worker", *_nobody())
    (root / "cxx").write_text(FAKE_CXX)
    (root / "cxx").chmod(0o755)
    yield root
    shutil.rmtree(root, ignore_errors=True)


def _root_builds(cache_dir: Path, cxx: Path) -> Path:
    """What the pool's builders do, under a umask that would leave everything private to root."""
    old = os.umask(0o077)
    try:
        cache = BuildCache(ensure_readable(cache_dir))
        lib = cache_dir.parent / "built.so"
        lib.write_bytes(b"\x7fELF library")
        cache.put(KEY, lib, {"name": "ext"})
        folder, ready, _ = pch.precompiled(cache_dir, "bindings", str(cxx), "-O2", "", 10.0)
        assert ready and folder == cache_dir / "pch" / folder.name
        return folder
    finally:
        os.umask(old)


def _worker_reads(cache_dir: str, scratch: str, cxx: str, flags: str) -> dict:
    """What a worker does with the shared cache (run as nobody)."""
    lib = BuildCache(cache_dir).get(KEY)
    folder, ready, _ = pch.precompiled(Path(cache_dir), "bindings", cxx, flags, "", 10.0, False, Path(scratch))
    out = {"lib": str(lib) if lib else None, "pch": str(folder), "ready": ready, "lib_bytes": ""}
    if lib:
        out["lib_bytes"] = lib.read_bytes().decode(errors="replace")
    if ready:
        out["gch"] = (folder / "kernelzero" / "bindings.h.gch").read_text()
    writes = []
    for target in (Path(cache_dir) / "planted", Path(cache_dir) / "pch" / "planted"):
        try:
            target.mkdir()
            writes.append(str(target))
        except (PermissionError, FileNotFoundError):
            pass
    out["writes"] = writes
    return out


def test_sandbox_user_reads_what_root_built_and_cannot_write_it(base: Path):
    cache_dir = base / "cache" / "builds"
    shared_pch = _root_builds(cache_dir, base / "cxx")
    got = as_nobody(_worker_reads, str(cache_dir), str(base / "worker"), str(base / "cxx"), "-O2")
    assert got["lib"] == str(BuildCache(cache_dir).entry(KEY) / "built.so") and got["lib_bytes"] == "\x7fELF library"
    assert got["pch"] == str(shared_pch) and got["ready"] and got["gch"] == "gch\n"
    assert got["writes"] == [], "the sandbox user could write the shared cache"


def test_sandbox_user_with_other_flags_builds_privately_without_touching_root_pch(base: Path):
    """The bug seen on the H200: a worker's private build created a folder under root's pch/ (PermissionError)."""
    cache_dir = base / "cache" / "builds"
    _root_builds(cache_dir, base / "cxx")
    before = sorted(p.name for p in (cache_dir / "pch").iterdir())
    got = as_nobody(_worker_reads, str(cache_dir), str(base / "worker"), str(base / "cxx"), "-O3 -DOTHER")
    assert got["pch"] == str(base / "worker" / "kz-include") and not got["ready"]
    assert (base / "worker" / "kz-include" / "kernelzero" / "bindings.h").read_text() == pch.BINDINGS
    assert sorted(p.name for p in (cache_dir / "pch").iterdir()) == before


def test_sandbox_user_first_leaves_nothing_root_then_uses(base: Path):
    """The reverse order: a worker before any pool run creates nothing in the shared place; root then builds."""
    cache_dir = base / "public" / "kernelzero" / "builds"
    got = as_nobody(_worker_reads, str(cache_dir), str(base / "worker"), str(base / "cxx"), "-O2")
    assert got["lib"] is None and not got["ready"] and got["pch"] == str(base / "worker" / "kz-include")
    assert not (base / "public" / "kernelzero").exists(), "the sandbox user created folders in the shared place"
    _root_builds(cache_dir, base / "cxx")
    assert os.stat(cache_dir / "pch").st_uid == 0 and trusted(BuildCache(cache_dir).entry(KEY) / "built.so")
    assert as_nobody(_worker_reads, str(cache_dir), str(base / "worker"), str(base / "cxx"), "-O2")["ready"]


def _plant(cache_dir: str, cxx: str) -> None:
    """A candidate's attempt at poisoning: a cache made first by the sandbox user, in a world-writable place,
    with a library under a key and a precompiled header where root's builds would look."""
    entry = BuildCache(cache_dir).entry(KEY)
    entry.mkdir(parents=True)
    (entry / "evil.so").write_bytes(b"evil")
    (entry / "meta.json").write_text(json.dumps({"library": "evil.so"}))
    folder = pch.folder_for(Path(cache_dir), "bindings", cxx, "-O2", "")
    (folder / "kernelzero").mkdir(parents=True)
    (folder / "kernelzero" / "bindings.h").write_text("#error evil")
    (folder / "kernelzero" / "bindings.h.gch").write_text("evil")


def test_cache_planted_by_sandbox_user_is_refused_and_never_used(base: Path):
    cache_dir = base / "public" / "builds"
    as_nobody(_plant, str(cache_dir), str(base / "cxx"))
    assert os.stat(cache_dir).st_uid == _nobody()[0]
    with pytest.raises(CacheOwnershipError, match="belongs to uid"):
        ensure_readable(cache_dir)
    assert BuildCache(cache_dir).get(KEY) is None
    for may_build in (False, True):  # neither a reader nor a builder uses or builds into the planted folder
        scratch = base / f"scratch{int(may_build)}"
        folder, ready, took = pch.precompiled(
            cache_dir, "bindings", str(base / "cxx"), "-O2", "", 10.0, may_build, scratch
        )
        assert (folder, ready, took) == (scratch / "kz-include", False, 0.0)
        assert (folder / "kernelzero" / "bindings.h").read_text() == pch.BINDINGS


def test_cache_under_a_folder_others_may_replace_is_refused(base: Path):
    (base / "open").mkdir(mode=0o777)
    (base / "open").chmod(0o777)  # world-writable without the sticky bit: our folder could be renamed away
    with pytest.raises(CacheOwnershipError, match="can be changed by another user"):
        ensure_readable(base / "open" / "builds")


def test_put_replaces_an_entry_others_may_write(base: Path):
    cache = BuildCache(ensure_readable(base / "cache"))
    entry = cache.entry(KEY)
    entry.mkdir(parents=True)
    (entry / "evil.so").write_bytes(b"evil")
    (entry / "meta.json").write_text(json.dumps({"library": "evil.so"}))
    entry.chmod(0o777)
    assert cache.get(KEY) is None
    lib = base / "good.so"
    lib.write_bytes(b"good")
    stored = cache.put(KEY, lib, {})
    assert stored == entry / "good.so" and cache.get(KEY) == stored and stored.read_bytes() == b"good"
    assert stat.S_IMODE(entry.stat().st_mode) == 0o755 and not (entry / "evil.so").exists()
