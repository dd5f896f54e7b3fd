"""A run's output is exactly its rows, whatever a scheduler did before (issue 8, 1b/1c).

Every sequence runs the real CLI in subprocesses over a corpus whose evaluator is slow enough
(a user function sleeping per trace) to be interrupted midway; the output is then counted:
one row per trace, ``_SUCCESS`` only beside a whole output.
"""

from __future__ import annotations

import gzip
import json
import os
import random
import shutil
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.support.disk import small_tmpfs
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
    since = time.time()
    proc = subprocess.Popen(cmd(f, *extra), stdout=subprocess.PIPE, stderr=subprocess.PIPE, cwd=f.parent)
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline and proc.poll() is None:
        if checkpointed_rows(f.parent, since) >= after_rows:
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


def test_complete_then_fresh_interrupted_keeps_the_whole_output_in_place(job: Path) -> None:
    """Issue 17: a run that starts over beside a whole output stages its parts (``_staging/``);
    stopped, it leaves that output as it was; resumed, it swaps its own in at the end."""
    out = job.parent / "out"
    assert run(job).returncode == 0
    assert_exact(out)
    before = json.loads((out / "_SUMMARY.json").read_text())
    assert interrupt(job, "--fresh") == 130
    assert_exact(out)  # the previous whole output, its _SUCCESS and its summary
    assert json.loads((out / "_SUMMARY.json").read_text()) == before
    staged = json.loads((out / "_staging" / "_SUMMARY.json").read_text())
    assert staged["status"] == "interrupted" and 0 < len(rows(out / "_staging")) < N
    assert run(job).returncode == 0
    assert_exact(out)
    assert not (out / "_staging").exists()
    assert json.loads((out / "_SUMMARY.json").read_text())["started_at"] != before["started_at"]


def test_a_failed_run_over_a_whole_output_leaves_it_in_place(tmp_path: Path) -> None:
    """Issue 17: a truncated input fails the run that started over; the good output stays."""
    lines = [json.dumps({"id": f"t{i}", "outputs": "a", "reference_outputs": "a"}) for i in range(5000)]
    data = gzip.compress(("\n".join(lines) + "\n").encode())
    src = tmp_path / "in.jsonl.gz"
    src.write_bytes(data)
    out = tmp_path / "out"
    score = [sys.executable, "-m", "assay.cli", "score", str(src), "-e", "exact_match", "-o", str(out) + "/", "-q"]
    assert subprocess.run(score, capture_output=True, timeout=120, cwd=tmp_path).returncode == 0
    good = sorted(r["trace_id"] for r in rows(out))
    assert len(good) == 5000 and (out / "_SUCCESS").exists()
    src.write_bytes(data[: len(data) // 2])
    proc = subprocess.run(score, capture_output=True, text=True, timeout=120, cwd=tmp_path)
    assert proc.returncode == 1 and "truncated" in proc.stderr
    assert sorted(r["trace_id"] for r in rows(out)) == good and (out / "_SUCCESS").exists()
    assert json.loads((out / "_SUMMARY.json").read_text())["status"] == "ok"
    assert json.loads((out / "_staging" / "_SUMMARY.json").read_text())["status"] == "failed"
    src.write_bytes(data)
    assert subprocess.run(score, capture_output=True, timeout=120, cwd=tmp_path).returncode == 0
    assert sorted(r["trace_id"] for r in rows(out)) == good and (out / "_SUCCESS").exists()
    assert not (out / "_staging").exists()


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
            capture_output=True, text=True, timeout=120, cwd=tmp_path,
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
        capture_output=True, text=True, timeout=120, cwd=tmp_path,
    )  # fmt: skip
    assert proc.returncode == 1
    assert "Traceback" not in proc.stderr and "ExceptionGroup" not in proc.stderr
    assert "assay: error:" in proc.stderr and "trunc.jsonl.gz" in proc.stderr and "truncated" in proc.stderr
    assert not (out / "_SUCCESS").exists()
    summary = json.loads((out / "_SUMMARY.json").read_text())
    assert summary["status"] == "failed" and summary["exit_code"] == 1
    got = rows(out)
    assert got and len(got) == summary["counts"]["scored"] == len({r["trace_id"] for r in got})


def test_workers_lineage_two_killed_one_stopped_three_keeps_every_row(job: Path) -> None:
    """Issue 17: a later run with more writers must not delete the parts an earlier writer
    finished while a checkpoint still counts their positions as done."""
    out = job.parent / "out"
    assert interrupt(job, "--workers", "2", sig=signal.SIGKILL, after_rows=150) == -signal.SIGKILL
    assert interrupt(job, "--workers", "1", "--wait-lock", "60", after_rows=300) == 130
    assert run(job, "--workers", "3", "--wait-lock", "60").returncode == 0
    assert_exact(out)


@pytest.fixture
def small_disk(tmp_path: Path) -> Iterator[Path]:
    """A 5 MB tmpfs (root only; skipped elsewhere)."""
    with small_tmpfs(tmp_path / "disk", "5m") as where:
        yield where


@pytest.mark.parametrize("compression", ["none", "gzip"])
def test_disk_full_fails_clearly_and_the_rerun_after_freeing_space_is_exact(
    tmp_path: Path, small_disk: Path, compression: str
) -> None:
    n = 4000
    noise = random.Random(17)  # rows that do not compress away: the disk fills with gzip too
    lines = [
        json.dumps({"id": f"t{i}", "outputs": f"{noise.getrandbits(1024):x}", "reference_outputs": "a"})
        for i in range(n)
    ]
    (tmp_path / "corpus.jsonl").write_text("\n".join(lines) + "\n")
    cfg = {
        "source": {"path": "corpus.jsonl"},
        "evaluators": [{"name": "exact_match"}],
        "sink": {"path": str(small_disk / "out") + "/", "max_rows_per_part": 100, "compression": compression},
        "limits": {"batch_size": 50, "commit_interval_s": 0.05},
        "state_dir": str(tmp_path / ".assay"),
    }
    f = tmp_path / "run.yaml"
    f.write_text(json.dumps(cfg))
    filler = small_disk / "filler"
    filler.write_bytes(b"\0" * ((5 << 20) - (120 << 10)))  # about 120 KB left: the run stops midway
    proc = run(f)
    assert proc.returncode == 1, proc.stderr
    assert "Traceback" not in proc.stderr
    assert "assay: error:" in proc.stderr and "no space left" in proc.stderr and str(small_disk) in proc.stderr
    out = small_disk / "out"
    assert not (out / "_SUCCESS").exists()
    got = rows(out)  # every finished part holds whole, committed rows only
    assert len(got) == len({r["trace_id"] for r in got}) < n
    filler.unlink()
    proc = run(f)
    assert proc.returncode == 0, proc.stderr
    ids = [r["trace_id"] for r in rows(out)]
    assert len(ids) == n == len(set(ids))
    assert (out / "_SUCCESS").exists()
    assert not list(out.glob(".*.tmp"))


def test_a_resume_under_a_changed_run_file_starts_over_and_says_why(job: Path) -> None:
    """Issue 17: rows scored two ways never share an output."""
    out = job.parent / "out"
    assert interrupt(job, sig=signal.SIGKILL, after_rows=200) == -signal.SIGKILL
    cfg = json.loads(job.read_text())
    cfg["evaluators"].append({"name": "exact_match"})
    job.write_text(json.dumps(cfg))
    proc = run(job)
    assert proc.returncode == 0, proc.stderr
    assert "starting over" in proc.stderr and "evaluators" in proc.stderr
    assert_exact(out)
    assert all(set(r["results"]) == {"slow", "exact_match"} for r in rows(out))
    # an unchanged run file resumes without a word
    assert interrupt(job, "--fresh", sig=signal.SIGKILL, after_rows=200) == -signal.SIGKILL
    proc = run(job)
    assert proc.returncode == 0 and "starting over" not in proc.stderr
    assert_exact(out)


def test_a_stop_after_the_file_was_published_but_before_the_checkpoint_was_forgotten(job: Path) -> None:
    """Found by the random lineage: SIGTERM during the publish of a file sink (the parts already
    concatenated and removed, the checkpoint not yet) made the rerun fail on missing parts."""
    cfg = json.loads(job.read_text())
    cfg["sink"] = {"path": "scores.jsonl.gz"}
    job.write_text(json.dumps(cfg))
    assert interrupt(job, sig=signal.SIGKILL, after_rows=200) == -signal.SIGKILL
    (ck,) = (job.parent / ".assay" / "checkpoints").glob("*/run.json")
    ck.write_text(json.dumps({**json.loads(ck.read_text()), "publishing": True}))  # as publish marks it
    parts = job.parent / ".scores.jsonl.gz.parts"
    (job.parent / "scores.jsonl.gz").write_bytes(b"".join(p.read_bytes() for p in sorted(parts.glob("part-*"))))
    shutil.rmtree(parts)  # what the publish of the stopped run had done
    proc = run(job)
    assert proc.returncode == 0, proc.stderr
    got = [json.loads(x) for x in gzip.decompress((job.parent / "scores.jsonl.gz").read_bytes()).splitlines()]
    assert sorted(r["trace_id"] for r in got) == sorted(f"t{i}" for i in range(N))


def test_parts_of_a_writer_stopped_before_its_first_checkpoint_are_removed(job: Path) -> None:
    """Found by the random lineage: writer 2 of a --workers 3 attempt finished a part and was killed
    before its first checkpoint; a resume with fewer writers kept that part (repeated rows)."""
    out = job.parent / "out"
    assert interrupt(job, sig=signal.SIGKILL, after_rows=200) == -signal.SIGKILL
    (ck,) = (job.parent / ".assay" / "checkpoints").glob("*/run.json")
    ck.write_text(json.dumps({**json.loads(ck.read_text()), "writers": 3}))  # as a --workers 3 attempt left it
    stray = json.dumps({"trace_id": "t5", "results": {}})
    (out / "part-00002-00000.jsonl").write_text(stray + "\n")
    (out / "_dead_letter").mkdir(exist_ok=True)
    assert run(job, "--workers", "1").returncode == 0
    assert_exact(out)


_SUMMARY_DISK_FULL = """
import errno, sys
import assay.connectors.file_sink as fs
_real = fs.write_json_atomic
def _full(path, data, **kw):
    if path.name == "_SUMMARY.json":
        raise OSError(errno.ENOSPC, "No space left on device", str(path))
    _real(path, data, **kw)
fs.write_json_atomic = _full
sys.argv[0] = "assay"
from assay.cli import main
main()
"""


def test_disk_full_at_the_summary_is_one_clear_error_and_the_rerun_is_exact(job: Path) -> None:
    """Every part written, then the disk fills as the summary is written (seen in CI with gzip):
    one ``assay: error:`` line naming the path, no ``_SUCCESS``, no temp file; the rerun is exact."""
    out = job.parent / "out"
    proc = subprocess.run(
        [sys.executable, "-c", _SUMMARY_DISK_FULL, "run", str(job), "-q"],
        capture_output=True,
        text=True,
        timeout=300,
        cwd=job.parent,
    )
    assert proc.returncode == 1, proc.stderr
    assert "Traceback" not in proc.stderr
    assert "assay: error:" in proc.stderr and "no space left on device" in proc.stderr
    assert "_SUMMARY.json" in proc.stderr
    assert not (out / "_SUCCESS").exists() and not (out / "_SUMMARY.json").exists()
    assert not list(out.glob(".*.tmp"))
    assert run(job).returncode == 0
    assert_exact(out)
