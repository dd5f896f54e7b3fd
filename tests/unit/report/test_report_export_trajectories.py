"""The worst traces of a run over a multi-row export (LangSmith runs, Langfuse observations) show
their trajectories: the report gathers each trace's rows from the export's files (JSON lines or
Parquet, a trace's rows spread over several files) and assembles the trace the run scored."""

from __future__ import annotations

import random
from pathlib import Path
from typing import Any

import anyio
import pytest

from assay.config import build_config
from assay.pipeline.run import execute
from assay.report import build_run_report, render_html
from tests.support.exports import langfuse_export, langsmith_export, write_jsonl, write_parquet

N = 14


def _write(folder: Path, rows: list[dict[str, Any]], fmt: str, seed: int) -> None:
    """The rows shuffled over three files: a trace's rows land in several of them."""
    random.Random(seed).shuffle(rows)
    folder.mkdir(parents=True)
    for i in range(3):
        part = rows[i::3]
        if fmt == "parquet":
            write_parquet(folder / f"part-{i}.parquet", part, row_group_size=5)
        else:
            write_jsonl(folder / f"part-{i}.jsonl", part)


def _calls(messages: list[dict[str, Any]]) -> list[str]:
    return [tc["name"] for m in messages for tc in m["tool_calls"]]


@pytest.mark.parametrize("fmt", ["jsonl", "parquet"])
@pytest.mark.parametrize(("kind", "seed"), [("langsmith", 3), ("langfuse", 4)])
def test_export_traces_show_their_whole_trajectory(tmp_path: Path, kind: str, fmt: str, seed: int) -> None:
    rows, expected = (langsmith_export if kind == "langsmith" else langfuse_export)(N, seed=seed)
    _write(tmp_path / "export", rows, fmt, seed)
    cfg = build_config(
        {
            "source": {"path": str(tmp_path / "export")},
            "evaluators": ["max_turns:max_turns=1"],  # every trace has two turns at least: all fail
            "sink": {"path": str(tmp_path / "out") + "/", "format": "parquet"},
            "state_dir": str(tmp_path / ".assay"),
        }
    )
    assert anyio.run(lambda: execute(cfg)).exit_code in (0, 3)
    report = build_run_report(str(tmp_path / "out"), worst=N)
    assert len(report.worst) == N
    for t in report.worst:
        traj = t.trajectory
        assert traj is not None and "raw" not in traj, (t.trace_id, traj)
        want = expected[t.trace_id]
        assert _calls(traj["messages"]) == [name for name, _ in want["calls"]], t.trace_id
        assert traj["final_output"] == want["final"]
        assert traj["format"] == kind
        n = sum(1 for row in rows if row.get("trace_id") == t.trace_id)
        assert traj["where"].startswith(f"{n} export rows in ") and traj["where"].endswith(f"(first: {t.position})")
    page = render_html(report)
    assert "not readable from here" not in page
    assert page.count("trajectory from ") == N


def test_an_export_row_whose_files_moved_leaves_results_only(tmp_path: Path) -> None:
    rows, _ = langsmith_export(4, seed=9)
    _write(tmp_path / "export", rows, "jsonl", 9)
    cfg = build_config(
        {
            "source": {"path": str(tmp_path / "export")},
            "evaluators": ["max_turns:max_turns=1"],
            "sink": {"path": str(tmp_path / "out") + "/"},
            "state_dir": str(tmp_path / ".assay"),
        }
    )
    assert anyio.run(lambda: execute(cfg)).exit_code in (0, 3)
    (tmp_path / "export").rename(tmp_path / "moved")
    report = build_run_report(str(tmp_path / "out"), worst=4)
    assert len(report.worst) == 4 and all(t.trajectory is None for t in report.worst)


@pytest.mark.parametrize("fmt", ["jsonl", "parquet"])
def test_legacy_langfuse_traces_and_observations_folders(tmp_path: Path, fmt: str) -> None:
    """A legacy Langfuse export: the trace row in ``traces/``, its observations in
    ``observations/``; the trajectory is gathered from both folders, wherever its first row is."""
    from tests.support.exports import langfuse_legacy_export

    trace_rows, obs_rows, expected = langfuse_legacy_export(8, seed=6)
    for folder, part in (("traces", trace_rows), ("observations", obs_rows)):
        _write(tmp_path / "export" / folder, part, fmt, 7)
    cfg = build_config(
        {
            "source": {"path": str(tmp_path / "export")},
            "evaluators": ["max_turns:max_turns=1"],
            "sink": {"path": str(tmp_path / "out") + "/"},
            "state_dir": str(tmp_path / ".assay"),
        }
    )
    assert anyio.run(lambda: execute(cfg)).exit_code in (0, 3)
    report = build_run_report(str(tmp_path / "out"), worst=8)
    assert len(report.worst) == 8
    for t in report.worst:
        traj = t.trajectory
        assert traj is not None and "raw" not in traj, (t.trace_id, traj)
        assert _calls(traj["messages"]) == [name for name, _ in expected[t.trace_id]["calls"]], t.trace_id
        assert traj["input"] == expected[t.trace_id]["input"]  # the traces/ row's
