"""Stopping a run with real signals: the first SIGINT/SIGTERM drains in-flight work for at most
the grace period and ends as soon as nothing is in flight; a second one abandons in-flight work at
once; calls abandoned that way are counted apart, never as judge errors.

The grace periods here are long (10 minutes): each run ending within the test's own timeout is the
proof that it did not wait for them (no test measures a duration)."""

from __future__ import annotations

import json
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from assay.testing.judge_server import JudgeServerThread
from tests.conftest import agent_messages

LONG_GRACE = 600


def judged_run_file(tmp_path: Path, url: str) -> Path:
    recs = [
        {"id": f"t{i}", "inputs": f"q{i}", "messages": agent_messages(final=f"a{i}"), "reference_outputs": f"a{i}"}
        for i in range(40)
    ]
    (tmp_path / "corpus.jsonl").write_text("".join(json.dumps(r) + "\n" for r in recs))
    cfg = {
        "source": {"path": "corpus.jsonl"},
        "judges": {"standin": {"provider": "openai", "base_url": f"{url}/v1", "model": "judge-1", "timeout": 300}},
        "evaluators": [{"name": "llm_judge", "params": {"prompt": "correctness", "judge": "standin"}}],
        "sink": {"path": "out/"},
        "limits": {"batch_size": 4, "grace_period_s": LONG_GRACE},
    }
    f = tmp_path / "run.yaml"
    f.write_text(json.dumps(cfg))
    return f


def start(f: Path, *extra: str, **kw: Any) -> subprocess.Popen[str]:
    """The run, its stderr going to ``err.txt`` beside the run file (read while it runs)."""
    cmd = [sys.executable, "-m", "assay.cli", "run", str(f), "-q", "--no-cache", *extra]
    err = (f.parent / "err.txt").open("w")
    return subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=err, text=True, cwd=f.parent, **kw)


def stderr_of(f: Path) -> str:
    return (f.parent / "err.txt").read_text()


def reading_stdin(pid: int) -> bool:
    """Whether a thread of the process is blocked in read(0, ...): Linux's /proc/PID/task/*/syscall
    holds the syscall number (0 is read on x86-64, 63 on arm64) and its first argument (the fd)."""
    read_numbers = {"0", "63"}
    for task in Path(f"/proc/{pid}/task").glob("*"):
        try:
            fields = (task / "syscall").read_text().split()
        except OSError:
            continue
        if len(fields) > 1 and fields[0] in read_numbers and int(fields[1], 16) == 0:
            return True
    return False


def wait_for(predicate: Any, what: str) -> None:
    deadline = time.monotonic() + 60
    while not predicate():
        assert time.monotonic() < deadline, f"never: {what}"
        time.sleep(0.05)


@pytest.mark.parametrize("workers", ["1", "2"])
def test_a_second_signal_abandons_in_flight_work_at_once(tmp_path: Path, workers: str) -> None:
    """Every judge call hangs: the first SIGINT leaves them the (long) grace period, the second
    abandons them; the run still writes its summary, exits 130, and counts the hung calls as
    abandoned, not as judge errors."""
    with JudgeServerThread(latency=0.01, seed=5, hang_rate=1.0) as s:
        f = judged_run_file(tmp_path, s.url)
        proc = start(f, "--workers", workers)
        wait_for(lambda: s.stats.requests >= 2, "judge requests")
        proc.send_signal(signal.SIGINT)
        wait_for(lambda: "assay: stopping: reading no more" in stderr_of(f), "the stop message")
        proc.send_signal(signal.SIGINT)
        proc.wait(timeout=120)
    err = stderr_of(f)
    assert proc.returncode == 130, err
    assert "stopping now: abandoning" in err and "Traceback" not in err
    summary = json.loads((tmp_path / "out" / "_SUMMARY.json").read_text())
    assert summary["status"] == "interrupted" and summary["exit_code"] == 130
    judge = summary["judges"]["standin"]
    assert judge["errors"] == 0 and summary["totals"]["errors"] == 0
    assert judge["abandoned"] >= 2
    assert not (tmp_path / "out" / "_SUCCESS").exists()


def test_a_stop_with_nothing_in_flight_does_not_wait_for_the_grace_period(tmp_path: Path) -> None:
    """Reading stdin that sends nothing: SIGTERM finds nothing in flight, so the run ends at once
    (the blocked read is abandoned) instead of after its ten-minute grace period."""
    f = tmp_path / "run.yaml"
    cfg = {
        "source": {"path": "-"},
        "evaluators": ["exact_match"],
        "sink": {"path": "out/"},
        "limits": {"grace_period_s": LONG_GRACE},
    }
    f.write_text(json.dumps(cfg))
    proc = start(f, stdin=subprocess.PIPE)
    wait_for(lambda: (tmp_path / ".assay" / "locks").is_dir(), "the run to start")
    wait_for(lambda: reading_stdin(proc.pid), "the run to block in a read of stdin")
    proc.send_signal(signal.SIGTERM)
    proc.wait(timeout=120)
    err = stderr_of(f)
    assert proc.returncode == 130, err
    assert "finishing 0 in-flight records" in err
    assert json.loads((tmp_path / "out" / "_SUMMARY.json").read_text())["status"] == "interrupted"


CRASH_IN_SECOND_HALF = """
import os, time

def slow(trace, **kwargs):
    if int(trace.id[1:]) >= 100:  # the second worker's shard: it dies (kill -9 would do the same)
        time.sleep(1.0)
        os._exit(3)
    time.sleep(0.1)
    return 1.0
"""


def test_a_stop_no_signal_asked_for_says_why_and_promises_no_second_signal(tmp_path: Path) -> None:
    """One of two workers dies: the parent stops the other, which drains and says why; nothing
    tells the user that a second signal would do anything (no signal was sent)."""
    (tmp_path / "crashmod.py").write_text(CRASH_IN_SECOND_HALF)
    recs = [{"id": f"t{i}", "messages": agent_messages(final=f"a{i}")} for i in range(200)]
    (tmp_path / "corpus.jsonl").write_text("".join(json.dumps(r) + "\n" for r in recs))
    cfg = {
        "source": {"path": "corpus.jsonl"},
        "evaluators": [{"name": "python", "params": {"function": "crashmod:slow"}}],
        "sink": {"path": "out/"},
        "limits": {"batch_size": 2, "grace_period_s": LONG_GRACE},
    }
    f = tmp_path / "run.yaml"
    f.write_text(json.dumps(cfg))
    proc = start(f, "--workers", "2")
    proc.wait(timeout=120)
    err = stderr_of(f)
    assert proc.returncode == 1, err
    assert "assay: stopping (another worker failed): reading no more" in err, err
    assert "second signal" not in err and "Traceback" not in err
    assert not (tmp_path / "out" / "_SUCCESS").exists()
