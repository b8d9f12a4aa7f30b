"""The build cache: built `load_inline` libraries by key, shared by the pool's builders and the workers.

`BuildCache(root)` holds `root/<key[:2]>/<key>/<name>.so` plus `meta.json`; an entry appears atomically
(written in a temporary folder, then renamed), and the first writer of a key wins. `export`/`install`
ship entries to another machine as tar blobs (the Ray pool), accepting only plain files inside the
entry's own folder. Keys and builds are in cuda_build.py. Only trusted code writes a shared cache; as
root the cache is readable, not writable, by the sandbox user the workers run as.
"""

from __future__ import annotations

import io
import json
import os
import shutil
import tarfile
import tempfile
from pathlib import Path


def default_cache_dir() -> Path:
    """The shared build cache: the user's cache folder, or a world-readable one for root (whose sandboxed
    workers run as another user and must read it)."""
    if os.environ.get("KZ_BUILD_CACHE"):
        return Path(os.environ["KZ_BUILD_CACHE"])
    if os.geteuid() == 0:
        return Path("/var/tmp/kernelzero/builds")
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "kernelzero" / "builds"


def ensure_readable(root: Path) -> Path:
    """Create the cache folder; as root, readable (not writable) by the sandbox user."""
    root.mkdir(parents=True, exist_ok=True)
    if os.geteuid() == 0:
        for folder in [root, *root.parents]:
            if str(folder) in ("/", "/var", "/var/tmp", "/tmp"):
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
        meta = self.entry(key) / "meta.json"
        if not meta.exists():
            return None
        lib = self.entry(key) / json.loads(meta.read_text())["library"]
        return lib if lib.exists() else None

    def put(self, key: str, library: Path, meta: dict) -> Path:
        final = self.entry(key)
        if (final / "meta.json").exists():
            return final / library.name
        final.parent.mkdir(parents=True, exist_ok=True)
        final.parent.chmod(0o755)
        tmp = Path(tempfile.mkdtemp(prefix=".tmp-", dir=final.parent))
        tmp.chmod(0o755)
        shutil.copy2(library, tmp / library.name)
        (tmp / "meta.json").write_text(json.dumps({**meta, "library": library.name}))
        try:
            os.rename(tmp, final)
        except OSError:  # another writer won the race: theirs stands
            shutil.rmtree(tmp, ignore_errors=True)
        return final / library.name

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
            self.entry(key).parent.mkdir(parents=True, exist_ok=True)
            with tarfile.open(fileobj=io.BytesIO(blob)) as tar:
                members = [
                    m
                    for m in tar.getmembers()
                    if m.isfile() and m.name.startswith(key + "/") and ".." not in m.name and m.name.count("/") == 1
                ]
                tmp = Path(tempfile.mkdtemp(prefix=".tmp-", dir=self.entry(key).parent))
                tmp.chmod(0o755)  # the sandboxed worker (another user) reads it
                for m in members:
                    target = tmp / Path(m.name).name
                    target.write_bytes(tar.extractfile(m).read())
                    target.chmod(0o755 if target.suffix == ".so" else 0o644)
            try:
                os.rename(tmp, self.entry(key))
            except OSError:
                shutil.rmtree(tmp, ignore_errors=True)


def install_artifacts(artifacts: dict[str, bytes], cache_dir: str | Path) -> None:
    """Install `export`ed entries into the cache at `cache_dir`, readable by the sandbox user."""
    BuildCache(ensure_readable(Path(cache_dir))).install(artifacts)
