"""A pytest plugin for the GPU gate: the results table written as the run goes, and the gate's selection.

    python3 -m pytest -p gpu_table --gpu-table OUT/gpu_table.md [--gate-all PATH ...] TESTS   (scripts/ on sys.path)

`--gpu-table PATH` appends one markdown row per finished test (test id, outcome, seconds, the first line of the
skip or failure reason, when it finished in seconds from the session's start) and flushes it at once (each failure's full report goes to `<table>_failures.md`), so a run stopped by a wall-clock limit still leaves every row it
finished; at the end, a summary (counts, seconds, torch and Triton versions, GPU, commit, date). Under
pytest-xdist only the controller writes: `pytest_runtest_logreport` there sees every worker's reports.

A test skipped because a module is missing (`could not import 'fastapi'`, `No module named ...`, `... is not
installed`) is written `skipped (missing package)` and fails the run: the gate carries every package it needs.

`--gate-all PATH` (repeatable): keep only the tests marked `gpu` and every test under one of these paths (the
service, Ray and Helion tests, which run on the GPU machine too although most of them need no GPU).

`--gate-durations FILE` (scripts/gate_durations.json: a test cell -> seconds, from earlier gates' tables:
`python3 scripts/gpu_table.py durations TABLE... > FILE`): the longest tests first (`gate_order`), a test the file
does not know counted as long as the longest, and xdist's scheduler set to hand out one test at a time
(`maxschedchunk`). Why: xdist's default first hands each worker a run of ten consecutive tests, and at a451387
(H200, 2026-12-04) one worker got the ten slowest (nvcc builds, the bench-size check) in a row: 335 of 343 tests
passed in the main phase, the 8 left were that worker's and the two behind it, while the other seven had finished.

`--gate-resume TABLE`: leave out the tests that TABLE (an earlier run's table, or several appended) shows passed,
matched by their row's test cell, so a gate cut by the wall limit goes on in the next call (scripts/gpu_tests.sh,
KZ_GATE_RESUME). Test ids with spaces or newlines match too.

With `--gpu-table`, the controller starts one fork server for all of its workers (`_share_fork_server`).

`--gate-wait-for FILE`: the session starts (xdist's workers start, import and collect) but no test runs before FILE
exists; the table's header is written with its first row (scripts/gpu_tests.sh starts the main phase this way
while the exclusive phase runs, and touches FILE when that phase ends).
"""

from __future__ import annotations

import datetime
import json
import os
import re
import subprocess
import time

import pytest

MISSING = re.compile(r"could not import|No module named|is not installed|ModuleNotFoundError", re.IGNORECASE)
DETAIL_CHARS = 6000  # of a failure's report kept in the details file (TABLE_failures.md beside the table)
HEADER = "| test | outcome | seconds | reason | done at s |\n|---|---|---|---|---|\n"


def pytest_addoption(parser):
    group = parser.getgroup("gpu_table", "the GPU gate's table (scripts/gpu_table.py)")
    group.addoption("--gpu-table", default=None, help="append one markdown row per finished test to this file")
    group.addoption(
        "--gate-all",
        action="append",
        default=[],
        help="keep the `gpu` tests and every test under this path (repeatable); without it nothing is deselected",
    )
    group.addoption("--gate-resume", default=None, help="leave out the tests this earlier table shows passed")
    group.addoption("--gate-durations", default=None, help="run the longest tests first (a JSON file: cell -> s)")
    group.addoption("--gate-wait-for", default=None, help="start no test before this file exists (workers start)")


def pytest_configure(config):
    if config.getoption("--gate-durations") and hasattr(config.option, "maxschedchunk"):  # xdist 3.4 and later
        config.option.maxschedchunk = 1  # one test at a time to each worker, in gate_order's order
    path = config.getoption("--gpu-table")
    if path and not hasattr(config, "workerinput"):  # an xdist worker reports to the controller, which writes
        config.pluginmanager.register(Table(path), "gpu_table_writer")
        _share_fork_server()


@pytest.hookimpl(hookwrapper=True, tryfirst=True)
def pytest_runtestloop(session):
    """--gate-wait-for FILE: no test starts before FILE exists. Under xdist the workers have started and collected
    by then (they start at session start), so the gate's main phase gets its start-up done while the exclusive
    phase runs (about 15 s of each gate); then the first tests go out as soon as FILE appears."""
    flag = session.config.getoption("--gate-wait-for")
    if flag and not hasattr(session.config, "workerinput"):
        start = time.monotonic()
        while not os.path.exists(flag):
            time.sleep(0.1)
        print(f"\n--gate-wait-for: {flag} appeared after {time.monotonic() - start:.1f} s", flush=True)
    yield


def _share_fork_server() -> None:
    """One fork server (verify/sandbox/zygote.py) for the whole gate, started here before the xdist workers, which
    inherit its socket: not one per worker, each importing torch and Triton while the first tests start cold."""
    try:
        from kernelzero.verify.sandbox import zygote_client
    except ImportError:
        return
    path = zygote_client.address()
    if path:
        os.environ[zygote_client.SOCKET_ENV] = path


def passed_cells(table: str) -> set[str]:
    """The test cells of the rows of `table` whose outcome is `passed` (as `_cell` wrote them)."""
    with open(table, encoding="utf-8") as file:
        return {row["cell"] for row in map(ROW.match, file) if row and row["outcome"] == "passed"}


def pytest_collection_modifyitems(config, items):
    resume = config.getoption("--gate-resume")
    if resume:
        done = passed_cells(resume)
        passed = [item for item in items if _cell(item.nodeid) in done]
        if passed:
            config.hook.pytest_deselected(items=passed)
            items[:] = [item for item in items if _cell(item.nodeid) not in done]
    prefixes = [p.rstrip("/") for p in config.getoption("--gate-all")]
    if prefixes:
        keep, drop = [], []
        for item in items:
            path = item.nodeid.split("::")[0]
            under = any(path == p or path.startswith(p + "/") for p in prefixes)
            (keep if under or item.get_closest_marker("gpu") else drop).append(item)
        if drop:
            config.hook.pytest_deselected(items=drop)
        items[:] = keep
    durations = config.getoption("--gate-durations")
    if durations:
        with open(durations, encoding="utf-8") as file:
            known = {str(k): float(v) for k, v in json.load(file).items()}
        # an xdist worker knows the count from its controller; numprocesses is the controller's (-n)
        workers = getattr(config, "workerinput", {}).get("workercount") or config.getoption("numprocesses", None)
        items[:] = gate_order(items, known, workers if isinstance(workers, int) else 1)


def gate_order(items: list, known: dict[str, float], workers: int) -> list:
    """`items` longest first by `known` seconds (by `_cell(nodeid)`; unknown: as long as the longest known, since a
    new test or one an earlier gate never reached may be slow), equal ones in their collected order. Then the first
    2 x `workers` are paired, the k-th longest with the (2 x workers - 1 - k)-th, because xdist's load scheduler
    starts each worker with two consecutive tests even at `maxschedchunk` 1: worker k gets the pair at 2k, 2k + 1."""
    longest = max(known.values(), default=0.0)
    ranked = sorted(items, key=lambda item: -known.get(_cell(item.nodeid), longest))  # sorted() is stable
    head, tail = ranked[: 2 * workers], ranked[2 * workers :]
    if workers <= 1 or len(head) < 2 * workers:
        return ranked
    paired = []
    for k in range(workers):
        paired += [head[k], head[2 * workers - 1 - k]]
    return paired + tail


def durations(tables: list[str]) -> dict[str, float]:
    """Each test cell's seconds in these tables (gpu_table.md files; a later table's row wins), for
    --gate-durations: every row with a number of seconds, whatever its outcome (a failed test took its time too)."""
    seconds: dict[str, float] = {}
    for table in tables:
        with open(table, encoding="utf-8") as file:
            seconds.update({row["cell"]: float(row["seconds"]) for row in map(ROW.match, file) if row})
    return seconds


# A test's row as Table._row writes it (older tables have no "done at" column): its cell, outcome and seconds.
ROW = re.compile(r"^\| (?P<cell>.+?::.+?) \| (?P<outcome>passed|failed|error|skipped[^|]*) \| (?P<seconds>[0-9.]+) \|")


def _cell(text: str) -> str:
    return text.replace("|", "\\|").replace("\n", " ")[:240]


def reason_of(report) -> str:
    """The first line of why a test was skipped or failed ("" when it passed)."""
    if report.passed:
        return ""
    longrepr = report.longrepr
    if isinstance(longrepr, tuple):  # a skip: (path, line, "Skipped: reason")
        return str(longrepr[2]).removeprefix("Skipped: ").strip().splitlines()[0] if longrepr[2] else ""
    crash = getattr(longrepr, "reprcrash", None)
    if crash is not None and crash.message:
        return crash.message.strip().splitlines()[0]
    lines = [line for line in str(longrepr).splitlines() if line.strip()]
    errors = [line for line in lines if line.startswith("E ")]
    return (errors or lines or [""])[0].removeprefix("E ").strip()


class Table:
    """Rows as tests finish, the summary at the end; one file, flushed after every write."""

    def __init__(self, path: str):
        self.path = path
        self.start = time.monotonic()
        self.counts = {"passed": 0, "failed": 0, "error": 0, "skipped": 0, "missing": 0}
        self.seconds: dict[str, float] = {}
        self.outcome: dict[str, tuple[str, str]] = {}
        self.missing: list[str] = []
        os.makedirs(os.path.dirname(os.path.abspath(path)), exist_ok=True)
        self.file = open(path, "a", encoding="utf-8")  # noqa: SIM115 (open for the whole session)
        self.headed = False  # the header goes with the first row: a run started early (--gate-wait-for) writes
        # nothing while another phase appends its rows to the same table
        details = os.path.splitext(path)[0] + "_failures.md"
        self.details = open(details, "a", encoding="utf-8")  # noqa: SIM115 (open for the whole session)

    def _write(self, text: str) -> None:
        if not self.headed:
            self.headed = True
            self.file.write(f"\n## GPU gate, started {_now()}\n\n{HEADER}")
        self.file.write(text)
        self.file.flush()

    def _detail(self, nodeid: str, report) -> None:
        """A failure's full report (its last DETAIL_CHARS characters) and captured output, in the details file."""
        text = str(report.longrepr)[-DETAIL_CHARS:]
        for name, content in getattr(report, "sections", []):
            text += f"\n--- {name} ---\n{content[-DETAIL_CHARS // 2 :]}"
        self.details.write(f"\n## {nodeid} ({report.when})\n\n```\n{text}\n```\n")
        self.details.flush()

    def _row(self, nodeid: str, outcome: str, seconds: float, reason: str) -> None:
        if outcome == "skipped" and MISSING.search(reason):
            outcome = "skipped (missing package)"
            self.missing.append(nodeid)
            self.counts["missing"] += 1
        else:
            self.counts[outcome] += 1
        done = time.monotonic() - self.start  # when the row came, from this phase's start: the run's tail shows
        self._write(f"| {_cell(nodeid)} | {outcome} | {seconds:.1f} | {_cell(reason)} | {done:.0f} |\n")

    def pytest_collectreport(self, report):
        if report.skipped or report.failed:  # a whole module skipped (importorskip) or failing to import
            outcome = "skipped" if report.skipped else "error"
            self._row(report.nodeid or "(collection)", outcome, 0.0, reason_of(report))

    def pytest_runtest_logreport(self, report):
        nodeid = report.nodeid
        self.seconds[nodeid] = self.seconds.get(nodeid, 0.0) + (report.duration or 0.0)
        if report.when == "call" or not report.passed:  # the first failing phase decides; a setup skip too
            if nodeid not in self.outcome or (report.failed and self.outcome[nodeid][0] != "failed"):
                outcome = "error" if report.failed and report.when != "call" else report.outcome
                self.outcome[nodeid] = (outcome, reason_of(report))
            if report.failed:
                self._detail(nodeid, report)
        if report.when in ("teardown", "???"):  # "???": xdist's report for a worker that died in the test
            outcome, reason = self.outcome.pop(nodeid, ("passed", ""))
            if report.when == "???":
                outcome, reason = "failed", reason or "the xdist worker died"
            self._row(nodeid, outcome, self.seconds.pop(nodeid, 0.0), reason)

    @pytest.hookimpl(trylast=True)
    def pytest_sessionfinish(self, session, exitstatus):
        if self.missing and session.exitstatus == 0:
            session.exitstatus = pytest.ExitCode.TESTS_FAILED
        c = self.counts
        lines = [
            "",
            f"**{c['passed']} passed, {c['failed']} failed, {c['error']} errors, {c['skipped']} skipped, "
            f"{c['missing']} skipped for a missing package** in {time.monotonic() - self.start:.0f} s "
            f"(pytest exit {int(session.exitstatus)}).",
            f"{_versions()}; commit {_commit()}; {_now()}.",
        ]
        if self.missing:
            lines.append(f"The gate fails: {len(self.missing)} tests skipped for a missing package (carry its wheel).")
        self._write("\n".join(lines) + "\n")
        self.file.close()
        self.details.close()


def _now() -> str:
    return datetime.datetime.now(datetime.UTC).strftime("%Y-%m-%d %H:%M UTC")


def _versions() -> str:
    try:
        import torch
        import triton

        gpu = torch.cuda.get_device_name() if torch.cuda.is_available() else "no GPU"
        return f"torch {torch.__version__}, Triton {triton.__version__}, {gpu}"
    except Exception as exc:  # the table must close whatever the environment lacks
        return f"versions unknown ({type(exc).__name__}: {exc})"


def _commit() -> str:
    if os.environ.get("KZ_GIT_COMMIT"):
        return os.environ["KZ_GIT_COMMIT"]
    try:
        run = subprocess.run(["git", "rev-parse", "--short", "HEAD"], capture_output=True, text=True, timeout=10)
        return run.stdout.strip() or "unknown"
    except (OSError, subprocess.SubprocessError):
        return "unknown"


if __name__ == "__main__":
    import sys

    if len(sys.argv) < 3 or sys.argv[1] != "durations":
        sys.exit("usage: python3 scripts/gpu_table.py durations TABLE... > scripts/gate_durations.json")
    print(json.dumps(durations(sys.argv[2:]), indent=0, sort_keys=True))
