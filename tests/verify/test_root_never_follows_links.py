"""Root never follows a link, or reads a FIFO, that a sandboxed process could plant (sandbox/safe_fs.py).

The verifier runs as root and drops candidates and task code to an unprivileged user, who owns their folders. One
test per attack: a link planted where root lays out a folder (the compile check's chown), a FIFO or a link in place
of a file root reads (the capture's result), the worker's log (it comes back through the judge's pipe now), and a
standby's candidate file rewritten over a planted link.

Where the drop to `nobody` does not work (a venv under /root: the candidate runs as root and could do anything),
the attacks are still meaningful: the candidate plants the link itself, and the tests assert on what the trusted
side did (it did not follow it), never on what the candidate could not do.

    PYTHONPATH=src python -m pytest -q tests/verify/test_root_never_follows_links.py -n 1
"""

from __future__ import annotations

import json
import os
import pwd
import shutil
import sys
import threading
from dataclasses import asdict
from pathlib import Path

import pytest
from judges import shared_folder_root

from kernelzero.verify import options_for, verify
from kernelzero.verify.backends.cuda.capture import CaptureError, capture_load_inline
from kernelzero.verify.sandbox import safe_fs
from kernelzero.verify.sandbox.process import SandboxPlan, prepare_workdir

sys.path.insert(0, str(Path(__file__).parent))

from fixtures import load_task  # noqa: E402

KERNELS = Path(__file__).resolve().parents[1] / "kernels"
GELU = (KERNELS / "correct" / "triton_gelu.py").read_text()
SECRET = "kz-secret-4f1c9e: never in a verdict"
ROOT_ONLY = pytest.mark.skipif(os.geteuid() != 0, reason="only root hands a folder to another user (chown)")


def _gelu():
    """GELU at its smoke sizes (CPU: the Triton interpreter)."""
    from kernelzero.tasks import resize

    return resize(load_task("kz-basic:level1/21_GELU"), preset="smoke")


def _nobody() -> SandboxPlan:
    """A plan naming the sandbox user (a real uid: root chowns to it whether or not it may run Python here)."""
    try:
        entry = pwd.getpwnam("nobody")
    except KeyError:
        pytest.skip("no user 'nobody' on this machine")
    return SandboxPlan(entry.pw_uid, entry.pw_gid, netns=False)


def _secret_file(tmp_path: Path, text: str = SECRET) -> Path:
    secret = tmp_path / "secret"
    secret.write_text(text)
    secret.chmod(0o600)
    return secret


@ROOT_ONLY
def test_a_link_planted_in_a_folder_the_sandbox_owns_is_not_chowned_through(tmp_path):
    """The old compile check laid out its worker's folder again in the candidate's own: root chowned `home`, a
    link the candidate had planted there, and so the link's target (here a root folder) became the sandbox's."""
    plan = _nobody()
    target = tmp_path / "etc"
    target.mkdir(mode=0o755)
    folder = tmp_path / "kz-cand"
    folder.mkdir(mode=0o700)
    os.symlink(target, folder / "home")
    os.chown(folder, plan.uid, plan.gid)  # as after the candidate's worker ran in it
    with pytest.raises(safe_fs.UnsafePath):
        prepare_workdir(folder, plan)
    assert target.stat().st_uid == 0


@ROOT_ONLY
def test_a_link_planted_before_hand_over_is_refused_not_followed(tmp_path):
    """Even in a folder that is still root's, a name already there (a link) makes the layout fail: nothing is
    created, written or chowned through it."""
    plan = _nobody()
    target = tmp_path / "etc"
    target.mkdir(mode=0o755)
    folder = tmp_path / "kz-cand"
    folder.mkdir(mode=0o700)
    os.symlink(target, folder / "tmp")
    with pytest.raises(FileExistsError):
        prepare_workdir(folder, plan, {"candidate.py": "x = 1\n"})
    assert target.stat().st_uid == 0 and not list(target.iterdir())


def test_the_compile_check_runs_in_a_folder_of_its_own(tmp_path):
    """A correct Triton candidate whose first worker replaces folders of its own with links (to a place that does
    not exist): the compile check's worker starts in a fresh folder, root lays out nothing in the candidate's (the
    old layout there met the links: mkdir on them failed here, chown followed them where the drop works)."""
    shared = shared_folder_root() / f".kz-cwds-{os.getpid()}-{tmp_path.name}"  # not in the private /tmp
    shared.mkdir(mode=0o1777)
    shared.chmod(0o1777)
    plant = f"""
import os as _os
with open({str(shared)!r} + f"/cwd-{{_os.getuid()}}", "a") as _f:  # each role its own uid: its own file
    _f.write(_os.getcwd() + "\\n")
if _os.environ.get("TRITON_INTERPRET") == "1":  # the first worker: the compile check's runs without it
    for _name in ("home", "tmp"):
        _os.rename(_name, _name + ".old")
        _os.symlink({str(tmp_path / "missing")!r}, _name)
"""
    try:
        task = _gelu()
        verdict = verify(task, GELU + plant, "triton", options_for(device="cpu", static_checks=False, trials=1))
        assert verdict.status == "correct", verdict.message
        assert any(note.startswith("compiled for sm_") for note in verdict.notes), verdict.notes
        first, second = [line for p in sorted(shared.iterdir()) for line in p.read_text().split()]
    finally:
        shutil.rmtree(shared, ignore_errors=True)
    assert (
        Path(first) != Path(second)
        and Path(first) not in Path(second).parents
        and Path(second) not in Path(first).parents
    )
    assert not (tmp_path / "missing").exists()


def test_worker_output_reaches_error_log_through_the_judges_pipe(tmp_path):
    """The worker's prints reach the verdict's error_log, and a candidate that replaces every entry of its folder
    (a link to a secret where the old log file was, FIFOs, its own source) changes neither error_log nor status."""
    secret = _secret_file(tmp_path)
    crash = f"""
print("kz-mark: the worker's own words", flush=True)
import os as _os
for _name in _os.listdir("."):
    _os.rename(_name, _name + ".old")
for _name in ("worker.log", "candidate.py", "home", "tmp"):
    _os.symlink({str(secret)!r}, _name)
for _name in ("result.json", "capture.json", "output.log"):
    _os.mkfifo(_name)

def _die(self, *args):
    _os._exit(3)

ModelNew.forward = _die
"""
    task = _gelu()
    verdict = verify(task, GELU + crash, "triton", options_for(device="cpu", static_checks=False, trials=1))
    assert verdict.status == "crash", verdict.message
    assert "kz-mark: the worker's own words" in verdict.error_log
    assert SECRET not in json.dumps(asdict(verdict))


def _capture_in_thread(path: Path, timeout_s: float) -> BaseException | list:
    """capture_load_inline's outcome, run in a thread so that a read blocked on a FIFO fails the test, not hangs."""
    outcome: list = []

    def run() -> None:
        try:
            outcome.append(capture_load_inline(str(path), timeout_s=timeout_s))
        except BaseException as exc:  # noqa: BLE001 - the outcome is the test's to check
            outcome.append(exc)

    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    thread.join(timeout_s + 60)
    assert outcome, "the capture hung: root opened a FIFO the candidate put in place of its result"
    return outcome[0]


def test_a_fifo_in_place_of_the_capture_result_is_refused_without_a_hang(tmp_path):
    candidate = tmp_path / "candidate.py"
    candidate.write_text('import os\nos.mkfifo("capture.json")\nos._exit(0)\n')
    outcome = _capture_in_thread(candidate, 60)
    assert isinstance(outcome, CaptureError) and outcome.kind == "crash", outcome


def test_a_link_in_place_of_the_capture_result_is_not_followed(tmp_path):
    forged = {"ok": False, "exc_type": "ValueError", "message": SECRET, "traceback": SECRET}
    secret = _secret_file(tmp_path, json.dumps(forged))
    candidate = tmp_path / "candidate.py"
    candidate.write_text(f'import os\nos.symlink({str(secret)!r}, "capture.json")\nos._exit(0)\n')
    outcome = _capture_in_thread(candidate, 60)
    assert isinstance(outcome, CaptureError) and outcome.kind == "crash", outcome
    assert SECRET not in outcome.message and SECRET not in outcome.traceback_tail


def test_a_standby_candidate_file_is_replaced_not_written_through_a_link(tmp_path):
    """A standby worker's candidate file is rewritten when its request comes (launch.py, rewrite_candidate): a link
    or a hard link planted at that name meanwhile is replaced, its target untouched."""
    secret = _secret_file(tmp_path)
    folder = tmp_path / "box"
    folder.mkdir()
    os.symlink(secret, folder / "candidate.py")
    os.link(secret, folder / "hard.py")
    fd = safe_fs.open_folder(folder)
    try:
        safe_fs.replace_file(fd, "candidate.py", b"x = 1\n")
        safe_fs.replace_file(fd, "hard.py", b"x = 2\n")
    finally:
        os.close(fd)
    assert secret.read_text() == SECRET
    assert not (folder / "candidate.py").is_symlink() and (folder / "candidate.py").read_text() == "x = 1\n"
    assert (folder / "hard.py").read_text() == "x = 2\n"


def test_a_fifo_or_link_is_refused_by_read_regular_at_once(tmp_path):
    secret = _secret_file(tmp_path)
    os.mkfifo(tmp_path / "fifo")
    os.symlink(secret, tmp_path / "link")
    for name in ("fifo", "link"):
        with pytest.raises(safe_fs.UnsafePath):
            safe_fs.read_regular(tmp_path / name, 1 << 20)
    assert safe_fs.read_regular(secret, 10) == SECRET.encode()[:10]


def test_a_link_planted_as_the_gpu_lock_folder_is_not_chmodded_through(tmp_path, monkeypatch):
    """The GPU lease's folder sits in /tmp, open to every user: a sandbox user who makes it first as a link to a
    folder of root's must not get that folder made world-writable (chmod 1777 through the link)."""
    from kernelzero.verify.judge import lease

    target = tmp_path / "etc"
    target.mkdir(mode=0o755)
    os.symlink(target, tmp_path / "locks")
    monkeypatch.setattr(lease, "LOCK_DIR", tmp_path / "locks")
    with pytest.raises(safe_fs.UnsafePath):
        lease._open(lease.lock_path("gpu-x"))
    assert target.stat().st_mode & 0o7777 == 0o755 and not list(target.iterdir())


def test_a_link_planted_as_the_memory_ledger_does_not_get_its_files_removed(tmp_path, monkeypatch):
    """The memory ledger sweeps entries no live process holds (it unlinks them): a ledger folder planted as a link
    to another folder must not make root remove that folder's files."""
    from kernelzero.verify.judge import memory

    target = tmp_path / "etc"
    target.mkdir()
    (target / "passwd").write_text("root:x:0:0\n")
    locks = tmp_path / "locks"
    locks.mkdir()
    os.symlink(target, locks / "gpu-x.mem")
    monkeypatch.setattr(memory, "LOCK_DIR", locks)
    with pytest.raises(safe_fs.UnsafePath):
        memory.leased_bytes("gpu-x")
    assert (target / "passwd").read_text() == "root:x:0:0\n"
