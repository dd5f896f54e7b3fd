"""A LangSmith export whose traces are spread over several files, scored through the real CLI with
a budget so small that its rows are sorted on disk (``source.export_memory_bytes``): a run killed
with kill -9 and run again leaves exactly one row per trace, the same traces as a run that held
every row in memory."""

from __future__ import annotations

import json
import random
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from tests.support.exports import langsmith_export, write_jsonl
from tests.support.runs import checkpointed_rows, slow_evaluator

TRACES = 600  # more than one chunk of DRAIN_CHUNK traces: written in several batches


def _export(root: Path) -> set[str]:
    rows, expected = langsmith_export(TRACES, seed=31)
    random.Random(32).shuffle(rows)
    (root / "export").mkdir()
    for i in range(3):
        write_jsonl(root / "export" / f"runs-{i}.jsonl", rows[i::3])  # a trace's rows in several files
    return set(expected)


def _run_file(root: Path, name: str, budget: int | None, slow: float) -> Path:
    """A run file in its own directory ``root/name`` (its state in ``.assay`` there)."""
    source: dict[str, Any] = {"path": str(root / "export")}
    if budget is not None:
        source["export_memory_bytes"] = budget
    cfg = {
        "source": source,
        "evaluators": [{"name": "python", "params": {"function": "slowmod:slow"}}, "max_turns:max_turns=2"],
        "sink": {"path": "out/"},
        "limits": {"batch_size": 8, "commit_interval_s": 0.2},
    }
    (root / name).mkdir()
    (root / name / "slowmod.py").write_text(slow_evaluator(slow))
    f = root / name / "run.yaml"
    f.write_text(json.dumps(cfg))
    return f


def _cmd(f: Path) -> list[str]:
    return [sys.executable, "-m", "assay.cli", "run", str(f), "--ds", "2026-11-27", "-q"]


def _rows(out: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for p in sorted(out.glob("part-*.jsonl")) for line in p.read_text().splitlines()]


def test_a_spilled_export_killed_and_rerun_scores_each_trace_once(tmp_path: Path) -> None:
    expected = _export(tmp_path)
    memory = _run_file(tmp_path, "memory", None, 0.0)
    done = subprocess.run(_cmd(memory), capture_output=True, text=True, timeout=300, cwd=memory.parent)
    assert done.returncode == 0, done.stderr
    held = {r["trace_id"]: r["results"] for r in _rows(memory.parent / "out")}
    assert sorted(held) == sorted(expected)

    spilled = _run_file(tmp_path, "spilled", 3000, 0.03)  # slow enough to be killed midway
    since = time.time()
    proc = subprocess.Popen(_cmd(spilled), stdout=subprocess.PIPE, stderr=subprocess.PIPE, cwd=spilled.parent)
    deadline = time.monotonic() + 100
    out = spilled.parent / "out"
    while time.monotonic() < deadline and proc.poll() is None and checkpointed_rows(spilled.parent, since) < 200:
        time.sleep(0.02)  # killed once a first batch of traces is durable
    assert proc.poll() is None, "the run ended before it could be killed"
    proc.send_signal(signal.SIGKILL)
    proc.communicate(timeout=60)
    assert not (out / "_SUCCESS").exists()
    done = subprocess.run(_cmd(spilled), capture_output=True, text=True, timeout=300, cwd=spilled.parent)
    assert done.returncode == 0, done.stderr
    rows = _rows(out)
    assert sorted(r["trace_id"] for r in rows) == sorted(expected)  # every trace once, none twice
    assert {r["trace_id"]: r["results"] for r in rows} == held  # scored as when every row was in memory
