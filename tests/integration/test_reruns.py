"""A run's output is exactly its rows, whatever a scheduler did before (issue 8, 1b/1c).

Every sequence runs the real CLI in subprocesses over a corpus whose evaluator is slow enough
(a user function sleeping per trace) to be interrupted midway; the output is then counted:
one row per trace, ``_SUCCESS`` only beside a whole output.
"""

from __future__ import annotations

import gzip
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from tests.support.runs import checkpointed_rows, slow_evaluator

N = 600
SLOW = slow_evaluator(0.004)


@pytest.fixture
def job(tmp_path: Path) -> Path:
    """A run file over N traces with a slow user evaluator and a directory sink in parts."""
    lines = [
        json.dumps(
            {"id": f"t{i}", "messages": [{"role": "user", "content": "q"}, {"role": "assistant", "content": f"a{i}"}]}
        )
        for i in range(N)
    ]
    (tmp_path / "corpus.jsonl").write_text("\n".join(lines) + "\n")
    (tmp_path / "slowmod.py").write_text(SLOW)
    cfg = {
        "source": {"path": "corpus.jsonl"},
        "evaluators": [{"name": "python", "params": {"function": "slowmod:slow"}}],
        "sink": {"path": "out/", "max_rows_per_part": 100},
        "limits": {"batch_size": 10, "commit_interval_s": 0.2, "grace_period_s": 5},
    }
    f = tmp_path / "run.yaml"
    f.write_text(json.dumps(cfg))
    return f


def cmd(f: Path, *extra: str) -> list[str]:
    return [sys.executable, "-m", "assay.cli", "run", str(f), "-q", *extra]


def run(f: Path, *extra: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(cmd(f, *extra), capture_output=True, text=True, timeout=300, cwd=f.parent)


def interrupt(f: Path, *extra: str, sig: int = signal.SIGTERM, after_rows: int = 150) -> int:
    """Start the run, send ``sig`` once some rows are durable (a checkpoint exists), wait."""
    proc = subprocess.Popen(cmd(f, *extra), stdout=subprocess.PIPE, stderr=subprocess.PIPE, cwd=f.parent)
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline and proc.poll() is None:
        if checkpointed_rows(f.parent) >= after_rows:
            break
        time.sleep(0.02)
    proc.send_signal(sig)
    proc.communicate(timeout=120)
    return proc.returncode


def rows(out: Path) -> list[dict[str, Any]]:
    got = []
    for p in sorted(out.glob("part-*.jsonl*")):
        data = gzip.decompress(p.read_bytes()) if p.name.endswith(".gz") else p.read_bytes()
        got += [json.loads(line) for line in data.splitlines() if line]
    return got


def assert_exact(out: Path) -> None:
    ids = [r["trace_id"] for r in rows(out)]
    assert len(ids) == N, f"{len(ids)} rows for {N} traces ({len(ids) - len(set(ids))} repeated)"
    assert set(ids) == {f"t{i}" for i in range(N)}
    assert (out / "_SUCCESS").exists()
    summary = json.loads((out / "_SUMMARY.json").read_text())
    assert summary["status"] == "ok" and summary["exit_code"] == 0
    assert summary["counts"]["scored"] == N and summary["counts"]["read"] == N
    assert not list(out.glob(".*.tmp"))


def test_interrupted_resume_then_fresh(job: Path) -> None:
    out = job.parent / "out"
    assert interrupt(job) == 130
    assert not (out / "_SUCCESS").exists()
    assert json.loads((out / "_SUMMARY.json").read_text())["status"] == "interrupted"
    assert run(job).returncode == 0
    assert_exact(out)
    assert run(job, "--fresh").returncode == 0
    assert_exact(out)


def test_workers_two_then_one_over_the_same_output(job: Path) -> None:
    out = job.parent / "out"
    assert run(job, "--workers", "2").returncode == 0
    assert_exact(out)
    assert run(job, "--workers", "1").returncode == 0
    assert_exact(out)


def test_complete_then_fresh_interrupted_leaves_no_stale_success(job: Path) -> None:
    out = job.parent / "out"
    assert run(job).returncode == 0
    assert_exact(out)
    assert interrupt(job, "--fresh") == 130
    assert not (out / "_SUCCESS").exists()
    assert json.loads((out / "_SUMMARY.json").read_text())["status"] == "interrupted"
    assert len(rows(out)) < N
    assert run(job).returncode == 0
    assert_exact(out)


def test_workers_two_interrupted_resumed_with_one_continues(job: Path) -> None:
    out = job.parent / "out"
    assert interrupt(job, "--workers", "2") == 130
    first = {r["run_id"] for r in rows(out)}
    kept = len(rows(out))
    assert kept > 0
    assert run(job, "--workers", "1").returncode == 0
    assert_exact(out)
    # continued, not started over: the rows of the first attempt are still there
    assert first <= {r["run_id"] for r in rows(out)}
    assert sum(r["run_id"] in first for r in rows(out)) >= kept


def test_sigterm_resume_sigkill_resume_never_repeats_a_row(job: Path) -> None:
    out = job.parent / "out"
    assert interrupt(job, after_rows=100) == 130
    assert interrupt(job, sig=signal.SIGKILL, after_rows=300) == -signal.SIGKILL
    assert not (out / "_SUCCESS").exists()
    assert run(job).returncode == 0
    assert_exact(out)


def test_kill_then_fresh_starts_over_cleanly(job: Path) -> None:
    out = job.parent / "out"
    assert interrupt(job, sig=signal.SIGKILL, after_rows=200) == -signal.SIGKILL
    assert run(job, "--fresh").returncode == 0
    assert_exact(out)
    assert len({r["run_id"] for r in rows(out)}) == 1


def test_file_sink_interrupted_publishes_nothing_partial(job: Path) -> None:
    cfg = json.loads(job.read_text())
    cfg["sink"] = {"path": "scores.jsonl.gz"}
    job.write_text(json.dumps(cfg))
    target = job.parent / "scores.jsonl.gz"
    target.write_bytes(gzip.compress(b'{"trace_id": "from an older run"}\n'))
    assert interrupt(job, sig=signal.SIGKILL) == -signal.SIGKILL
    assert run(job).returncode == 0
    got = [json.loads(x) for x in gzip.decompress(target.read_bytes()).splitlines()]
    assert sorted(r["trace_id"] for r in got) == sorted(f"t{i}" for i in range(N))
    summary = json.loads((job.parent / "scores.jsonl.gz._SUMMARY.json").read_text())
    assert summary["status"] == "ok" and summary["counts"]["scored"] == N


def test_two_file_sinks_in_one_folder_keep_their_own_summaries(tmp_path: Path, job: Path) -> None:
    for name in ("a.jsonl", "b.jsonl"):
        proc = subprocess.run(
            [sys.executable, "-m", "assay.cli", "score", str(job.parent / "corpus.jsonl"), "-e", "exact_match",
             "-o", str(tmp_path / name), "-q"],
            capture_output=True, text=True, timeout=120,
        )  # fmt: skip
        assert proc.returncode in (0, 1), proc.stderr
    assert (tmp_path / "a.jsonl._SUMMARY.json").exists() and (tmp_path / "b.jsonl._SUMMARY.json").exists()
    assert json.loads((tmp_path / "a.jsonl._SUMMARY.json").read_text())["outputs"]["results"].endswith("a.jsonl")


def test_leftover_temp_files_of_a_killed_run_are_cleaned(job: Path) -> None:
    out = job.parent / "out"
    assert interrupt(job, sig=signal.SIGKILL, after_rows=120) == -signal.SIGKILL
    (out / ".part-00007-00003.jsonl.tmp").write_text("junk from another attempt\n")
    assert run(job, "--fresh").returncode == 0
    assert_exact(out)
    assert not [p for p in os.listdir(out) if p.endswith(".tmp")]


@pytest.mark.parametrize("workers", ["1", "2"])
def test_truncated_gzip_is_a_clear_error_and_keeps_what_was_read(tmp_path: Path, workers: str) -> None:
    lines = [json.dumps({"id": f"t{i}", "outputs": "a", "reference_outputs": "a"}) for i in range(20000)]
    data = gzip.compress(("\n".join(lines) + "\n").encode())
    (tmp_path / "trunc.jsonl.gz").write_bytes(data[: len(data) // 2])
    out = tmp_path / "out"
    proc = subprocess.run(
        [sys.executable, "-m", "assay.cli", "score", str(tmp_path / "trunc.jsonl.gz"), "-e", "exact_match",
         "-o", str(out) + "/", "-q", "--workers", workers],
        capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    assert proc.returncode == 1
    assert "Traceback" not in proc.stderr and "ExceptionGroup" not in proc.stderr
    assert "assay: error:" in proc.stderr and "trunc.jsonl.gz" in proc.stderr and "truncated" in proc.stderr
    assert not (out / "_SUCCESS").exists()
    summary = json.loads((out / "_SUMMARY.json").read_text())
    assert summary["status"] == "failed" and summary["exit_code"] == 1
    got = rows(out)
    assert got and len(got) == summary["counts"]["scored"] == len({r["trace_id"] for r in got})
