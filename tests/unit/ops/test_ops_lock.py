"""The run lock: two real processes never hold it together; a dead holder's lock is taken over."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from assay.exceptions import EXIT_LOCKED, RunLockedError
from assay.pipeline.lock import RunLock
from tests.unit.ops.conftest import cli_env

WAIT_JSON = ("--wait-lock", "forever", "--log-format", "json")
HOLDER = """
import sys
from assay.pipeline.lock import RunLock
lock = RunLock(sys.argv[1], sys.argv[2])
lock.acquire()
print("locked", flush=True)
if sys.stdin.readline().strip() == "release":
    lock.release()
    print("released", flush=True)
"""


@pytest.fixture
def holder(tmp_path: Path) -> Iterator[Callable[[str, str], subprocess.Popen[str]]]:
    """Start a process that takes a RunLock and holds it until told ``release`` on stdin."""
    procs: list[subprocess.Popen[str]] = []

    def start(state_dir: str, key: str) -> subprocess.Popen[str]:
        proc = subprocess.Popen(
            [sys.executable, "-c", HOLDER, state_dir, key],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
            env=cli_env(),
        )
        procs.append(proc)
        assert proc.stdout is not None
        assert proc.stdout.readline().strip() == "locked"
        return proc

    yield start
    for proc in procs:
        if proc.poll() is None:
            proc.kill()
        proc.wait()
        for pipe in (proc.stdin, proc.stdout):  # an unclosed pipe is an unraisable ResourceWarning at GC
            if pipe is not None:
                pipe.close()


def release(proc: subprocess.Popen[str]) -> None:
    assert proc.stdin is not None and proc.stdout is not None
    proc.stdin.write("release\n")
    proc.stdin.flush()
    assert proc.stdout.readline().strip() == "released"


def test_second_process_is_refused_with_the_holder_named(tmp_path: Path, holder) -> None:
    proc = holder(str(tmp_path), "run-a")
    lock = RunLock(tmp_path, "run-a", wait_s=0)
    with pytest.raises(RunLockedError) as info:
        lock.acquire()
    assert info.value.exit_code == EXIT_LOCKED == 6
    assert f"pid {proc.pid}" in str(info.value)
    assert "--wait-lock" in str(info.value)
    # another key is another run: not excluded
    with RunLock(tmp_path, "run-b"):
        pass
    release(proc)
    with RunLock(tmp_path, "run-a") as again:
        assert again.stale is None  # released normally: nothing stale to report


def test_lock_of_a_killed_process_is_taken_over(tmp_path: Path, holder) -> None:
    proc = holder(str(tmp_path), "run-a")
    proc.send_signal(signal.SIGKILL)
    proc.wait()
    with RunLock(tmp_path, "run-a") as lock:
        assert lock.stale is not None and lock.stale["pid"] == proc.pid
        assert json.loads(lock.path.read_text())["pid"] == os.getpid()
    assert not lock.path.exists()


def test_lock_file_left_behind_is_taken_over(tmp_path: Path) -> None:
    lock = RunLock(tmp_path, "run-a")
    lock.path.parent.mkdir(parents=True)
    lock.path.write_text(json.dumps({"pid": 999999, "host": "elsewhere", "started_at": "2026-11-20T02:00:00"}))
    with lock:
        assert lock.stale == {"pid": 999999, "host": "elsewhere", "started_at": "2026-11-20T02:00:00"}


def test_shards_of_one_run_have_distinct_keys(tmp_path: Path) -> None:
    run_file = tmp_path / "run.yaml"
    keys = {
        RunLock.key_for(run_file, "2026-11-21", None),
        RunLock.key_for(run_file, "2026-11-21", (0, 2)),
        RunLock.key_for(run_file, "2026-11-21", (1, 2)),
        RunLock.key_for(run_file, "2026-11-22", None),
    }
    assert len(keys) == 4
    assert RunLock.key_for(run_file, "2026-11-21", None) == RunLock.key_for(str(run_file), "2026-11-21", None)


def test_cli_exits_6_while_the_same_run_is_running_then_waits_with_wait_lock(quickstart: Path, holder, run_cli) -> None:
    state_dir = str(quickstart.parent / ".assay")
    proc = holder(state_dir, RunLock.key_for(quickstart, "2026-11-21", None))

    refused = run_cli("run", str(quickstart), "--ds", "2026-11-21", "-q")
    assert refused.returncode == EXIT_LOCKED, refused.stderr
    assert "already running" in refused.stderr and f"pid {proc.pid}" in refused.stderr
    assert not (quickstart.parent / "out" / "_SUMMARY.json").exists()

    # another --ds is another run
    other = run_cli("run", str(quickstart), "--ds", "2026-11-22", "-q")
    assert other.returncode == 0, other.stderr

    waiting = subprocess.Popen(
        [sys.executable, "-m", "assay.cli", "run", str(quickstart), "--ds", "2026-11-21", "-q", *WAIT_JSON],
        stderr=subprocess.PIPE,
        stdout=subprocess.DEVNULL,
        text=True,
        env=cli_env(),
    )
    try:
        assert waiting.stderr is not None
        events = []
        for line in waiting.stderr:  # the waiter says it waits, and for whom, before we release
            events.append(json.loads(line))
            if events[-1]["event"] == "lock_wait":
                break
        assert events[-1]["holder"]["pid"] == proc.pid
        release(proc)
        rest = [json.loads(line) for line in waiting.stderr]
        assert waiting.wait(timeout=100) == 0
    finally:
        if waiting.poll() is None:
            waiting.kill()
            waiting.wait()
    assert rest[-1]["event"] == "run_finished" and rest[-1]["exit_code"] == 0


def test_wait_lock_gives_up_after_its_seconds(quickstart: Path, holder, run_cli) -> None:
    holder(str(quickstart.parent / ".assay"), RunLock.key_for(quickstart, None, (0, 2)))
    result = run_cli("run", str(quickstart), "--shard", "0/2", "--wait-lock", "0.5", "-q")
    assert result.returncode == EXIT_LOCKED
    assert "waited 0.5 s" in result.stderr
    assert run_cli("run", str(quickstart), "--shard", "1/2", "-q").returncode == 0
    bad = run_cli("run", str(quickstart), "--wait-lock", "soon", "-q")
    assert bad.returncode == 2 and "--wait-lock" in bad.stderr
