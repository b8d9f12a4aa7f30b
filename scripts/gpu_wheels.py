"""The GPU gate's wheel set (scripts/gpu_wheels.txt): slim Ray's wheel after download, check wheels and installs.

    python3 scripts/gpu_wheels.py slim .gpu/wheels       # after download (gpu_wheels.sh): drop ray/jars/ from Ray's wheel
    python3 scripts/gpu_wheels.py files .gpu/wheels      # before install: one wheel per listed name==version, names the missing
    python3 scripts/gpu_wheels.py check                  # after install: each listed package imports at its version

Ray's wheel is 79 MB, and one device call carries at most 64 MiB; 32 MB of it is `ray/jars/ray_dist.jar`, the
runtime of Ray's Java workers, which kernelzero never starts. `slim` rewrites the wheel without that folder (and
without its lines in RECORD, so the wheel stays valid); everything Python imports is unchanged.
"""

from __future__ import annotations

import importlib
import importlib.metadata
import re
import sys
import zipfile
from pathlib import Path

LIST = Path(__file__).with_name("gpu_wheels.txt")
DROP = {"ray": ("ray/jars/",)}  # distribution -> folders its wheel carries that the gate never loads
IMPORT_NAME = {"opentelemetry-api": "opentelemetry.trace", "rpds-py": "rpds"}  # where not the name with `_`


def _key(name: str) -> str:
    return re.sub(r"[-_.]+", "_", name).lower()


def listed(path: Path = LIST) -> list[tuple[str, str]]:
    """(name, version) for each `name==version` line."""
    pins = []
    for line in path.read_text().splitlines():
        line = line.split("#")[0].strip()
        if line:
            name, sep, version = line.partition("==")
            if not sep:
                raise SystemExit(f"{path}: {line!r} is not name==version")
            pins.append((name.strip(), version.strip()))
    return pins


def wheel_of(folder: Path, name: str, version: str) -> Path | None:
    for wheel in folder.glob("*.whl"):
        dist, ver = wheel.name.split("-")[:2]
        if _key(dist) == _key(name) and ver == version:
            return wheel
    return None


def slim(folder: Path) -> None:
    for name, version in listed():
        prefixes = DROP.get(_key(name).replace("_", "-"))
        wheel = wheel_of(folder, name, version) if prefixes else None
        if wheel is None:
            continue
        with zipfile.ZipFile(wheel) as src:
            if not any(i.filename.startswith(prefixes) for i in src.infolist()):
                continue  # already slim
            tmp = wheel.with_suffix(".tmp")
            with zipfile.ZipFile(tmp, "w", zipfile.ZIP_DEFLATED) as dst:
                for info in src.infolist():
                    if info.filename.startswith(prefixes):
                        continue
                    data = src.read(info)
                    if info.filename.endswith(".dist-info/RECORD"):
                        kept = [r for r in data.decode().splitlines(keepends=True) if not r.startswith(prefixes)]
                        data = "".join(kept).encode()
                    dst.writestr(info, data)
        before = wheel.stat().st_size
        tmp.replace(wheel)
        print(
            f"slimmed {wheel.name}: {before / 2**20:.1f} -> {wheel.stat().st_size / 2**20:.1f} MiB (without {prefixes})"
        )


def files(folder: Path) -> int:
    missing = [f"{n}=={v}" for n, v in listed() if wheel_of(folder, n, v) is None]
    if missing:
        print(
            f"{folder}: no wheel for {', '.join(missing)} (run `bash scripts/gpu_wheels.sh` on a machine with network)"
        )
    return 1 if missing else 0


def check() -> int:
    bad = []
    for name, version in listed():
        try:
            found = importlib.metadata.version(name)
        except importlib.metadata.PackageNotFoundError:
            found = None
        module = IMPORT_NAME.get(name, _key(name))
        try:
            importlib.import_module(module)
            error = ""
        except Exception as exc:  # any import failure names the package; the gate stops
            error = f"import {module}: {type(exc).__name__}: {exc}"
        if found != version or error:
            bad.append(f"{name}=={version}: found {found or 'none'} {error}".strip())
    print(f"{len(listed()) - len(bad)} of {len(listed())} listed packages import at their version")
    for line in bad:
        print(f"  WRONG {line}")
    return 1 if bad else 0


def main(argv: list[str]) -> int:
    commands = {
        "slim": lambda a: slim(Path(a[0])) or 0,
        "files": lambda a: files(Path(a[0])),
        "check": lambda a: check(),
    }
    if not argv or argv[0] not in commands:
        print(f"usage: gpu_wheels.py {{{','.join(commands)}}} [FOLDER]")
        return 2
    return commands[argv[0]](argv[1:])


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
