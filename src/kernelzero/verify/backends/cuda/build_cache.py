"""The build cache: built `load_inline` libraries by key, shared by the pool's builders and the workers.

`BuildCache(root)` holds `root/<key[:2]>/<key>/<name>.so` plus `meta.json`; an entry appears atomically
(written in a temporary folder, then renamed), and the first writer of a key wins. `export`/`install`
ship entries to another machine as tar blobs (the Ray pool), accepting only plain files inside the
entry's own folder. Keys and builds are in build.py; the precompiled headers under `root/pch/` in pch.py.

Ownership (who writes, who reads). The single-sample path and the pool share one cache folder, under root
and the unprivileged sandbox uids the workers run as (sandbox/box.py), in either order. The rule:

- only trusted code writes the shared cache: the pool's builders (`build.prebuild`), the Ray runner's
  `install_artifacts`, pch.py's header builds, all in the judge's or pool's own identity;
- a worker only reads it: a library the cache does not hold, and the binding header when no shared
  precompiled one exists, are built in the worker's own folder (hook.py, pch.py `scratch`), so a worker
  never creates a folder in the shared cache, whoever made the folders before it;
- what trusted code creates is readable by everyone whatever the umask: folders 0755, files 0644, libraries
  0755 (`make_dirs`, `DIR_MODE` ...), and writable only by its owner;
- a reader uses an entry only when it is `trusted`: owned by root or by the reader itself and writable by
  nobody else (no group or other write bit, no symbolic link). So a folder planted by the sandbox user (in a
  world-writable place such as /var/tmp, before any trusted process made the cache) is never loaded by a
  trusted process, and `put` replaces such an entry instead of returning it;
- root's default cache is /var/cache/kernelzero/builds, in a folder only root can create entries in, so the
  sandbox user cannot create the cache first; `ensure_readable` (run by trusted code before use) refuses a
  cache folder, or a folder above it, that another user owns or could replace (`CacheOwnershipError`).

Why read-only workers rather than a shared writable folder: a candidate runs in the worker, and a library
or header it could write to the shared cache would be loaded by every later sample with the same key (or
compiled into it): cache poisoning. What remains: a worker that could not drop to another user (a venv under
/root) runs as root and can write the cache; the verdict notes the missing user drop (sandbox/process.py).

    PYTHONPATH=src python -m pytest -p no:xdist tests/verify/test_cache_ownership.py
"""

from __future__ import annotations

import io
import json
import os
import shutil
import stat
import tarfile
import tempfile
from pathlib import Path

DIR_MODE = 0o755  # folders trusted code creates: everyone traverses and lists, only the owner writes
FILE_MODE = 0o644  # metadata, headers, precompiled headers
LIB_MODE = 0o755  # built libraries


class CacheOwnershipError(PermissionError):
    """A shared cache folder that another user owns or could replace: trusted code must not use it."""


def default_cache_dir() -> Path:
    """The shared build cache: the user's cache folder, or for root one only root can create (whose sandboxed
    workers run as another user and must read it)."""
    if os.environ.get("KZ_BUILD_CACHE"):
        return Path(os.environ["KZ_BUILD_CACHE"])
    if os.geteuid() == 0:
        return Path("/var/cache/kernelzero/builds")
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "kernelzero" / "builds"


def trusted(path: Path) -> bool:
    """`path` exists, is not a symbolic link, belongs to root or to this process's user, and no one else may
    write it. What a reader requires of every cache folder and file it uses."""
    try:
        st = os.lstat(path)
    except OSError:
        return False
    if stat.S_ISLNK(st.st_mode) or st.st_uid not in (0, os.geteuid()):
        return False
    return not st.st_mode & (stat.S_IWGRP | stat.S_IWOTH)


def make_dirs(path: Path) -> Path:
    """Create `path` and its missing parents with `DIR_MODE` (explicitly: the umask may be 077); folders that
    already exist are left as they are."""
    missing = [p for p in [path, *path.parents] if not p.exists()]
    for folder in reversed(missing):
        try:
            folder.mkdir(mode=DIR_MODE)
        except FileExistsError:  # another process made it meanwhile
            continue
        folder.chmod(DIR_MODE)
    return path


def _replaceable(folder: Path) -> bool:
    """Another user could remove or replace `folder`'s entries: it is theirs, or they may write it and no
    sticky bit stops them renaming ours."""
    st = folder.stat()
    if st.st_uid not in (0, os.geteuid()):
        return True
    return bool(st.st_mode & (stat.S_IWGRP | stat.S_IWOTH)) and not st.st_mode & stat.S_ISVTX


def ensure_readable(root: Path) -> Path:
    """Create the cache folder for trusted use, readable (not writable) by the sandbox user.

    As root (whose workers run as the sandbox user), raises `CacheOwnershipError` when the folder is not
    root's own (another user made it, or may write it), or when a folder above it lets another user replace
    it. Another user's workers run as that user (no user drop without root): there is no line to keep.
    """
    root = Path(root)
    make_dirs(root)
    if os.geteuid() != 0:
        return root
    if not trusted(root):
        st = root.stat()
        raise CacheOwnershipError(
            f"build cache {root} belongs to uid {st.st_uid} (mode {stat.filemode(st.st_mode)}): a process of "
            f"another user may have planted libraries in it; remove it or choose another folder (build_cache)"
        )
    for folder in root.parents:
        if _replaceable(folder):
            raise CacheOwnershipError(
                f"build cache {root}: {folder} above it can be changed by another user (uid "
                f"{folder.stat().st_uid}, mode {stat.filemode(folder.stat().st_mode)}); choose another folder"
            )
    for folder in [root, *root.parents]:  # the sandbox user must reach the cache through root's folders
        if str(folder) in ("/", "/var", "/var/tmp", "/tmp", "/var/cache"):
            break
        folder.chmod(folder.stat().st_mode | 0o755)
    return root


class BuildCache:
    """Libraries by key: `root/<key[:2]>/<key>/<name>.so` plus `meta.json`; entries appear atomically."""

    def __init__(self, root: str | Path | None = None):
        self.root = Path(root) if root else default_cache_dir()

    def entry(self, key: str) -> Path:
        return self.root / key[:2] / key

    def get(self, key: str) -> Path | None:
        """The library built for `key`, when the cache holds a complete, `trusted` entry for it."""
        entry = self.entry(key)
        meta = entry / "meta.json"
        if not all(trusted(p) for p in (entry.parent, entry, meta)):
            return None
        try:
            name = str(json.loads(meta.read_text()).get("library", ""))
        except (OSError, ValueError, AttributeError):  # unreadable or not a JSON object: not an entry
            return None
        lib = entry / name
        if not name or "/" in name or not trusted(lib) or not lib.is_file():
            return None
        return lib

    def _clear(self, key: str) -> None:
        """Remove an entry that is there but not usable (not `trusted`): a trusted writer replaces it."""
        entry = self.entry(key)
        if os.path.lexists(entry) and self.get(key) is None:
            aside = entry.with_name(f".untrusted-{key}-{os.getpid()}")
            try:
                os.rename(entry, aside)
            except OSError:
                return
            shutil.rmtree(aside, ignore_errors=True)

    def _stage(self, key: str) -> Path:
        """A fresh temporary folder beside the entry, with the modes a finished entry has."""
        make_dirs(self.entry(key).parent)
        tmp = Path(tempfile.mkdtemp(prefix=".tmp-", dir=self.entry(key).parent))
        tmp.chmod(DIR_MODE)
        return tmp

    def _publish(self, tmp: Path, key: str) -> None:
        try:
            os.rename(tmp, self.entry(key))
        except OSError:  # another writer won the race: theirs stands
            shutil.rmtree(tmp, ignore_errors=True)

    def put(self, key: str, library: Path, meta: dict) -> Path:
        """Store `library` under `key` (trusted code only); the path of the library the cache now holds."""
        hit = self.get(key)
        if hit is not None:
            return hit
        self._clear(key)
        tmp = self._stage(key)
        shutil.copyfile(library, tmp / library.name)
        (tmp / library.name).chmod(LIB_MODE)
        (tmp / "meta.json").write_text(json.dumps({**meta, "library": library.name}))
        (tmp / "meta.json").chmod(FILE_MODE)
        self._publish(tmp, key)
        return self.entry(key) / library.name

    def export(self, keys: list[str]) -> dict[str, bytes]:
        """{key: a tar of the entry} for shipping built libraries to another machine (Ray)."""
        out = {}
        for key in keys:
            if self.get(key) is None:
                continue
            buf = io.BytesIO()
            with tarfile.open(fileobj=buf, mode="w") as tar:
                tar.add(self.entry(key), arcname=key)
            out[key] = buf.getvalue()
        return out

    def install(self, artifacts: dict[str, bytes]) -> None:
        """Unpack `export`ed entries (each a folder named by its key, plain files only)."""
        for key, blob in artifacts.items():
            if self.get(key) is not None:
                continue
            self._clear(key)
            tmp = self._stage(key)
            with tarfile.open(fileobj=io.BytesIO(blob)) as tar:
                for m in tar.getmembers():
                    if not m.isfile() or not m.name.startswith(key + "/") or ".." in m.name or m.name.count("/") != 1:
                        continue
                    target = tmp / Path(m.name).name
                    target.write_bytes(tar.extractfile(m).read())
                    target.chmod(LIB_MODE if target.suffix == ".so" else FILE_MODE)
            self._publish(tmp, key)


def install_artifacts(artifacts: dict[str, bytes], cache_dir: str | Path) -> None:
    """Install `export`ed entries into the cache at `cache_dir`, readable by the sandbox user."""
    BuildCache(ensure_readable(Path(cache_dir))).install(artifacts)
