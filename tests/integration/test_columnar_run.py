"""``assay run`` Parquet → Parquet scored by columns against the same run with the columnar path
off (``ASSAY_COLUMNAR=0``): the same result table (every value of every column, the schema), the
same dead letters and the same summary (but its clock), for a name-level run (arguments left
unread) and for a run that compares arguments and reads text (defective rows go the object path,
with their warning rows, and are merged back in row order). An in-process run says which path
scored how many batches and rows."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import anyio
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from assay.config import load_run_file
from assay.pipeline import columnar_run
from assay.pipeline.run import execute
from tests.support.columnar_corpus import universe

CLOCK = {"invocation_id", "started_at", "finished_at", "wall_time_s", "records_per_s", "summary_path"}
NAME_LEVEL = [
    "trajectory_match:mode=strict,tool_args_match_mode=ignore",
    "trajectory_match:mode=unordered,tool_args_match_mode=ignore",
    "tool_call_accuracy:args_match_mode=ignore",
    "tool_use:expected_tool=search",
]
EXACT = [
    "trajectory_match:mode=superset",
    "trajectory_match:mode=subsequence",
    "tool_call_accuracy",
    "json_valid",
    {"name": "contains", "params": {"substring": "ok"}},
]


def _input(tmp_path: Path) -> Path:
    d = tmp_path / "in"
    d.mkdir()
    clean = pa.Table.from_batches([universe(2000, seed=4, defects=False)])
    pq.write_table(clean, d / "a.parquet", row_group_size=700)  # every batch scored by columns
    defective = pa.Table.from_batches([universe(1000, seed=5)])
    pq.write_table(defective, d / "b.parquet", row_group_size=1000)  # rows only the object path reads
    return d


def _run_file(tmp_path: Path, evaluators: list[Any], name: str) -> Path:
    cfg = {
        "source": {"path": str(tmp_path / "in")},
        "evaluators": evaluators,
        "sink": {"path": str(tmp_path / "out") + "/", "format": "parquet"},
        "dead_letter": {"path": str(tmp_path / "out" / "_dead_letter") + "/"},
        "state_dir": str(tmp_path / "state"),
        "limits": {"max_error_rate": 1.0},
    }
    f = tmp_path / f"{name}.yaml"
    f.write_text(json.dumps(cfg))
    return f


def _run(f: Path, columnar: bool) -> tuple[int, pa.Table, list[dict[str, Any]], dict[str, Any]]:
    out = f.parent / "out"
    env = {**os.environ, "ASSAY_COLUMNAR": "1" if columnar else "0"}
    proc = subprocess.run(
        [sys.executable, "-m", "assay.cli", "run", str(f), "-q", "--fresh"],
        capture_output=True,
        text=True,
        timeout=300,
        env=env,
        cwd=f.parent,
    )
    assert proc.returncode in (0, 3, 4), proc.stderr
    table = pq.read_table(out, schema=None)
    dead = sorted(
        (
            json.loads(line)
            for p in sorted((out / "_dead_letter").glob("*.jsonl"))
            for line in p.read_text().splitlines()
        ),
        key=lambda d: json.dumps(d, sort_keys=True),
    )
    summary = json.loads((out / "_SUMMARY.json").read_text())
    return proc.returncode, table, dead, {k: v for k, v in summary.items() if k not in CLOCK}


@pytest.mark.parametrize("evaluators", [NAME_LEVEL, EXACT], ids=["name-level", "exact-args-and-text"])
def test_columnar_run_equals_the_object_path_run(tmp_path: Path, evaluators: list[Any]) -> None:
    _input(tmp_path)
    f = _run_file(tmp_path, evaluators, "run")
    code_c, table_c, dead_c, summary_c = _run(f, columnar=True)
    code_o, table_o, dead_o, summary_o = _run(f, columnar=False)
    assert code_c == code_o
    assert table_c.num_rows + summary_c["counts"]["dead_letters"] == 3000 < table_c.num_rows + 200
    assert table_c.schema.equals(table_o.schema, check_metadata=True)
    assert table_c.equals(table_o)
    assert dead_c == dead_o
    assert summary_c == summary_o
    if evaluators is EXACT:
        assert summary_c["counts"]["warnings"] > 0  # rows with defective arguments, scored by the object path


def test_the_columnar_path_scores_the_batches_it_can(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    _input(tmp_path)
    seen: dict[str, int] = {"columnar": 0, "object": 0, "rows_by_objects": 0}
    original = columnar_run.ColumnarPipeline._score

    def spy(self: Any, unit: Any) -> Any:
        got = original(self, unit)
        seen["columnar" if got is not None else "object"] += 1
        seen["rows_by_objects"] += len(got.fallback_rows) if got is not None else 0
        return got

    monkeypatch.setattr(columnar_run.ColumnarPipeline, "_score", spy)
    monkeypatch.setenv("ASSAY_COLUMNAR", "1")
    # units of UNIT_ROWS rows across a file's row groups: a.parquet (2,000 rows in row groups of
    # 700) is one unit, b.parquet another; units of 512 rows cut them into 4 + 2
    for unit_rows, units in ((columnar_run.ColumnarPipeline.UNIT_ROWS, 2), (512, 6)):
        monkeypatch.setattr(columnar_run.ColumnarPipeline, "UNIT_ROWS", unit_rows)
        for evaluators in (NAME_LEVEL, EXACT):
            seen.update(columnar=0, object=0, rows_by_objects=0)
            config = load_run_file(_run_file(tmp_path, evaluators, "inproc"))
            report = anyio.run(lambda c=config: execute(c, fresh=True))
            assert report.summary["counts"]["scored"] + report.summary["counts"]["dead_letters"] >= 3000
            # every batch by columns; the defective rows of b.parquet by the object path, merged in
            assert seen["columnar"] == units and seen["object"] == 0, seen
            assert 0 < seen["rows_by_objects"] < 150, seen
    monkeypatch.setenv("ASSAY_COLUMNAR", "0")
    seen.update(columnar=0, object=0, rows_by_objects=0)
    anyio.run(lambda: execute(load_run_file(_run_file(tmp_path, NAME_LEVEL, "off")), fresh=True))
    assert seen == {"columnar": 0, "object": 0, "rows_by_objects": 0}


def test_a_columnar_run_that_failed_resumes_to_the_same_output(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Batches acknowledged as row spans: a run that fails after some commits resumes where it
    stopped, and its output equals a clean run's with the columnar path off."""
    from assay.exceptions import ConnectorError

    _input(tmp_path)
    f = _run_file(tmp_path, NAME_LEVEL, "resume")
    cfg = json.loads(f.read_text())
    cfg["limits"]["commit_interval_s"] = 0.001
    f.write_text(json.dumps(cfg))
    monkeypatch.setenv("ASSAY_COLUMNAR", "1")
    monkeypatch.setattr(columnar_run.ColumnarPipeline, "UNIT_ROWS", 512)  # 6 units: it fails at the third
    writes = {"n": 0}
    original = columnar_run.ColumnarPipeline._write

    async def failing(self: Any, p: Any) -> None:
        writes["n"] += 1
        if writes["n"] == 3:
            raise ConnectorError("the disk went away")
        await original(self, p)

    monkeypatch.setattr(columnar_run.ColumnarPipeline, "_write", failing)
    first = anyio.run(lambda: execute(load_run_file(f), fresh=True))
    assert first.exit_code != 0 and not (tmp_path / "out" / "_SUCCESS").exists()
    monkeypatch.setattr(columnar_run.ColumnarPipeline, "_write", original)
    second = anyio.run(lambda: execute(load_run_file(f)))
    assert second.exit_code in (0, 3, 4), second.error
    resumed = pq.read_table(tmp_path / "out")
    _, clean, _, summary = _run(f, columnar=False)
    assert resumed.equals(clean)
    assert second.summary["counts"]["scored"] == summary["counts"]["scored"] == clean.num_rows


def test_a_rerun_over_a_columnar_output_keeps_it_as_it_was(tmp_path: Path) -> None:
    """The same command again over the output a columnar run published: every pair is current
    (the ledger reads the columnar rows like any other), so nothing is scored or written: the same
    part files byte for byte and the same summary (``pairs``: what the first run scored)."""
    _input(tmp_path)
    f = _run_file(tmp_path, NAME_LEVEL, "run")
    _run(f, columnar=True)
    out = tmp_path / "out"
    before = {p.name: p.read_bytes() for p in sorted(out.rglob("*")) if p.is_file()}
    env = {**os.environ, "ASSAY_COLUMNAR": "1"}
    proc = subprocess.run(
        [sys.executable, "-m", "assay.cli", "run", str(f), "-q"],
        capture_output=True,
        text=True,
        timeout=300,
        env=env,
        cwd=tmp_path,
    )
    assert proc.returncode == 0, proc.stderr
    assert "nothing to score" in proc.stderr
    after = {p.name: p.read_bytes() for p in sorted(out.rglob("*")) if p.is_file()}
    assert after == before
    pairs = json.loads((out / "_SUMMARY.json").read_text())["pairs"]
    assert pairs["kept"] == 0 and pairs["dropped"] == 0 and pairs["scored"] > 0


@pytest.mark.parametrize("evaluators", [NAME_LEVEL, EXACT], ids=["name-level", "exact-args-and-text"])
def test_a_columnar_run_does_not_import_pandas(tmp_path: Path, evaluators: list[Any]) -> None:
    """pyarrow imports pandas on the first ``pa.array`` / ``pa.scalar`` / ``to_numpy`` of a
    process (~0.3 s of CPU, a fifth of a 10^5-row run): the columnar path builds its arrays
    without them (``assay.connectors.arrow_arrays``), the rows it leaves to the object path too."""
    _input(tmp_path)
    f = _run_file(tmp_path, evaluators, "run")
    proc = subprocess.run(
        [sys.executable, "-X", "importtime", "-m", "assay.cli", "run", str(f), "-q"],
        capture_output=True,
        text=True,
        timeout=300,
        env={**os.environ, "ASSAY_COLUMNAR": "1"},
        cwd=tmp_path,
    )
    assert proc.returncode in (0, 3, 4), proc.stderr[-2000:]
    imported = {line.rsplit("|", 1)[1].strip() for line in proc.stderr.splitlines() if line.startswith("import time:")}
    assert "pyarrow.parquet" in imported
    assert not {m for m in imported if m == "pandas" or m.startswith("pandas.")}
