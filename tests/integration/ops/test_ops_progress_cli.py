"""``assay run`` with stderr not a terminal (cron, Airflow): timestamped progress lines with the
rate and the ETA at ``--progress-interval``; the metrics textfile carries the queue depths."""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.support.runs import slow_evaluator

REPO = Path(__file__).resolve().parents[3]
LINE = re.compile(
    r"^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ assay: read [\d,]+  scored [\d,]+  dead letters [\d,]+ \| [\d,]+ rec/s \| "
)


@pytest.fixture
def job(tmp_path: Path) -> Path:
    """600 traces of about 10 kB (6 MB of input) and an evaluator taking 4 ms each: ~2.5 s."""
    pad = "x" * 10_000
    msgs = [{"role": "user", "content": pad}, {"role": "assistant", "content": "a"}]
    lines = [json.dumps({"id": f"t{i}", "messages": msgs}) for i in range(600)]
    (tmp_path / "corpus.jsonl").write_text("\n".join(lines) + "\n")
    (tmp_path / "slowmod.py").write_text(slow_evaluator(0.004))
    cfg = {
        "source": {"path": "corpus.jsonl"},
        "evaluators": [{"name": "python", "params": {"function": "slowmod:slow"}}],
        "sink": {"path": "out/"},
        "limits": {"batch_size": 10},
    }
    (tmp_path / "run.yaml").write_text(json.dumps(cfg))
    return tmp_path / "run.yaml"


def test_progress_lines_without_a_terminal_and_queue_depth_metrics(job: Path) -> None:
    prom = job.parent / "assay.prom"
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(REPO), str(job.parent)])}
    proc = subprocess.run(
        [
            sys.executable,
            "-m",
            "assay.cli",
            "run",
            str(job),
            "--workers",
            "1",
            "--progress-interval",
            "0.25",
            "--metrics-textfile",
            str(prom),
        ],
        capture_output=True,
        text=True,
        env=env,
        cwd=job.parent,
        stdin=subprocess.DEVNULL,
        timeout=120,
    )
    assert proc.returncode == 0, proc.stderr
    lines = [ln for ln in proc.stderr.splitlines() if " assay: read " in ln]
    assert len(lines) >= 3, proc.stderr
    assert all(LINE.match(ln) for ln in lines), lines
    assert all("\x1b" not in ln for ln in lines)  # no terminal codes in a log file
    assert all(re.search(r"\d+% of [\d.]+ MB, ETA ", ln) for ln in lines), lines
    etas = [m.group(1) for ln in lines if (m := re.search(r"ETA (\d+s|\d+m\d\ds)\b", ln))]
    assert etas, lines  # once the rate is measured, the ETA is a duration
    rates = [int(re.search(r"\| ([\d,]+) rec/s", ln).group(1).replace(",", "")) for ln in lines]  # type: ignore[union-attr]
    assert all(r > 0 for r, ln in zip(rates, lines, strict=True) if " read 0 " not in ln)  # once records are read
    assert "queued evaluate " in lines[-1]

    text = prom.read_text()
    depths = dict(re.findall(r'^assay_queue_depth\{stage="(\w+)"\} ([\d.e+]+)$', text, re.M))
    capacity = dict(re.findall(r'^assay_queue_capacity\{stage="(\w+)"\} ([\d.e+]+)$', text, re.M))
    assert set(depths) == set(capacity) == {"evaluate", "sink"}
    assert all(float(capacity[s]) == 4 and 0 <= float(depths[s]) <= 4 for s in depths)


def test_ctrl_c_says_at_once_what_it_is_doing(job: Path) -> None:
    """SIGINT after the first progress line: the stop message names the in-flight records and the
    grace period right away; the run exits 130 (resumable)."""
    (job.parent / "slowmod.py").write_text(slow_evaluator(0.05))
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(REPO), str(job.parent)])}
    err = job.parent / "stderr.txt"
    with err.open("w") as f:
        proc = subprocess.Popen(
            [
                sys.executable,
                "-m",
                "assay.cli",
                "run",
                str(job),
                "--progress-interval",
                "0.2",
                "--set",
                "limits.grace_period_s=7",
            ],
            stdout=subprocess.DEVNULL,
            stderr=f,
            env=env,
            cwd=job.parent,
            stdin=subprocess.DEVNULL,
        )
        try:
            deadline = time.monotonic() + 60
            while " assay: read " not in err.read_text() and time.monotonic() < deadline:
                time.sleep(0.05)
            proc.send_signal(signal.SIGINT)
            assert proc.wait(timeout=60) == 130
        finally:
            if proc.poll() is None:
                proc.kill()
    text = err.read_text()
    assert re.search(
        r"assay: stopping: reading no more; finishing [\d,]+ in-flight records \(grace period 7 s", text
    ), text


def test_judged_run_shows_judges_in_flight_and_their_rate(tmp_path: Path) -> None:
    """A run against the stand-in judge (0.2 s latency, rpm 1,200): the lines name the judge, its
    requests in flight and the requests per minute actually sent, against its limit."""
    from assay.testing.judge_server import JudgeServerThread

    msgs = [{"role": "user", "content": "q"}, {"role": "assistant", "content": "a"}]
    lines = [json.dumps({"id": f"t{i}", "messages": msgs, "reference_outputs": "a"}) for i in range(80)]
    (tmp_path / "corpus.jsonl").write_text("\n".join(lines) + "\n")
    with JudgeServerThread(latency=0.2, seed=1) as server:
        cfg = {
            "source": {"path": "corpus.jsonl"},
            "judges": {
                "standin": {"provider": "openai", "base_url": f"{server.url}/v1", "model": "m", "rpm": 1200},
            },
            "evaluators": [{"name": "llm_judge", "params": {"prompt": "correctness", "judge": "standin"}}],
            "sink": {"path": "out/"},
            "limits": {"batch_size": 4},
        }
        (tmp_path / "run.yaml").write_text(json.dumps(cfg))
        proc = subprocess.run(
            [sys.executable, "-m", "assay.cli", "run", "run.yaml", "--no-cache", "--progress-interval", "0.5"],
            capture_output=True,
            text=True,
            env={**os.environ, "PYTHONPATH": str(REPO)},
            cwd=tmp_path,
            stdin=subprocess.DEVNULL,
            timeout=120,
        )
    assert proc.returncode == 0, proc.stderr
    judged = [ln for ln in proc.stderr.splitlines() if LINE.match(ln) and "judge standin: " in ln]
    assert judged, proc.stderr
    found = [re.search(r"judge standin: (\d+) in flight, ([\d,?]+) req/min \(limit ([\d,]+)\)", ln) for ln in judged]
    assert all(found), judged
    assert all(int(m.group(3).replace(",", "")) <= 1200 for m in found if m)
    rates = [int(m.group(2).replace(",", "")) for m in found if m and m.group(2) != "?"]
    # the first line may come before any answer (rate 0); the rate is never above the limit by much
    assert rates and any(r > 0 for r in rates) and all(0 <= r <= 1500 for r in rates), judged
