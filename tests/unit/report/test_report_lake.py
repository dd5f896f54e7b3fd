"""The report reads lake outputs: Parquet parts, one Parquet file, and one day of a Delta table."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import anyio

from assay.config import build_config
from assay.pipeline.run import execute
from assay.report import expand_locations, iter_rows, read_run_info
from tests.conftest import agent_messages


def scored(
    tmp_path: Path,
    sink: dict[str, Any],
    ds: str = "2026-11-21",
    evaluators: tuple[str, ...] = ("trajectory_match:mode=strict",),
) -> Any:
    src = tmp_path / "t.jsonl"
    src.write_text(
        "".join(
            json.dumps(
                {
                    "id": f"t{i}",
                    "messages": agent_messages(("s", {"q": i})),
                    "reference": agent_messages(("s", {"q": i % 2})),
                }
            )
            + "\n"
            for i in range(12)
        )
    )
    cfg = build_config(
        {
            "source": {"path": str(src)},
            "evaluators": list(evaluators),
            "sink": sink,
            "state_dir": str(tmp_path / ".a"),
        },
        ds=ds,
    )
    return anyio.run(lambda: execute(cfg))


def scores(location: str) -> dict[str, float]:
    info = read_run_info(location)
    return {r["trace_id"]: r["results"]["trajectory_strict_match"]["score"] for r in iter_rows(info.store)}


def test_parquet_parts_and_one_parquet_file_read_like_json_lines(tmp_path: Path) -> None:
    scored(tmp_path, {"path": str(tmp_path / "json") + "/"})
    scored(tmp_path, {"path": str(tmp_path / "pq") + "/", "format": "parquet"})
    scored(tmp_path, {"path": str(tmp_path / "one.parquet")})
    want = scores(str(tmp_path / "json"))
    assert len(want) == 12 and 0 < sum(want.values()) < 12
    assert scores(str(tmp_path / "pq")) == want
    assert scores(str(tmp_path / "one.parquet")) == want
    info = read_run_info(str(tmp_path / "one.parquet"))
    assert info.complete and info.summary["counts"]["scored"] == 12  # a whole output: no "incomplete" warning
    summary = tmp_path / "one.parquet._SUMMARY.json"
    summary.write_text(json.dumps({**json.loads(summary.read_text()), "status": "failed"}))
    assert not read_run_info(str(tmp_path / "one.parquet")).complete  # a failed rerun left the last file


def test_one_parquet_file_dead_letters_are_reported(tmp_path: Path) -> None:
    from assay.report import iter_dead_letters

    src = tmp_path / "t.jsonl"
    src.write_text(json.dumps({"id": "ok", "messages": agent_messages(("s", {}))}) + "\n{not json\n")
    cfg = build_config(
        {
            "source": {"path": str(src)},
            "evaluators": ["max_turns"],
            "sink": {"path": str(tmp_path / "o.parquet")},
            "state_dir": str(tmp_path / ".a"),
        }
    )
    anyio.run(lambda: execute(cfg))
    dead = list(iter_dead_letters(read_run_info(str(tmp_path / "o.parquet")).store))
    assert len(dead) == 1 and dead[0]["stage"] == "parse"


def test_a_delta_table_is_one_run_per_day(tmp_path: Path) -> None:
    for day in ("2026-11-21", "2026-11-22"):
        assert scored(tmp_path, {"type": "delta", "path": str(tmp_path / "lake")}, ds=day).exit_code == 0
    locations = expand_locations([str(tmp_path / "lake")])
    assert [Path(p).name for p in locations] == ["ds=2026-11-21", "ds=2026-11-22"]
    info = read_run_info(locations[0])
    assert info.complete and info.partition == "2026-11-21" and info.summary["counts"]["scored"] == 12
    assert len(scores(locations[1])) == 12


def test_a_delta_table_in_the_long_layout_has_a_row_per_trace_and_key(tmp_path: Path) -> None:
    from deltalake import DeltaTable

    assert scored(tmp_path, {"type": "delta", "path": str(tmp_path / "long"), "layout": "long"}).exit_code == 0
    t = DeltaTable(str(tmp_path / "long")).to_pyarrow_table()
    assert t.num_rows == 12 and set(t.column("key").to_pylist()) == {"trajectory_strict_match"}
    assert {"score", "passed", "identity", "ds"} <= set(t.schema.names)
    location = expand_locations([str(tmp_path / "long")])[0]
    assert len(scores(location)) == 12


def test_the_long_layout_reads_as_one_row_per_trace_with_every_key(tmp_path: Path) -> None:
    """The long layout's rows (one per trace and key) are one row per trace again for the report:
    the same rows as the wide layout's, for Parquet parts and a Delta day."""
    both = ("trajectory_match:mode=strict", "trajectory_match:mode=unordered")
    scored(tmp_path, {"path": str(tmp_path / "wide") + "/", "format": "parquet"}, evaluators=both)
    scored(tmp_path, {"path": str(tmp_path / "long") + "/", "format": "parquet", "layout": "long"}, evaluators=both)
    scored(tmp_path, {"type": "delta", "path": str(tmp_path / "delta"), "layout": "long"}, evaluators=both)

    def rows(location: str) -> dict[str, dict[str, Any]]:
        got = list(iter_rows(read_run_info(expand_locations([location])[0]).store))
        assert len(got) == 12
        return {r["trace_id"]: {k: v["score"] for k, v in r["results"].items()} for r in got}

    want = rows(str(tmp_path / "wide"))
    assert all(set(r) == {"trajectory_strict_match", "trajectory_unordered_match"} for r in want.values())
    assert rows(str(tmp_path / "long")) == want
    assert rows(str(tmp_path / "delta")) == want


def test_worst_traces_of_parquet_and_delta_outputs_show_their_trajectories(tmp_path: Path) -> None:
    """Parquet and Delta rows keep the position as ``file:line`` text: the report reads the
    source records back as it does for JSON lines (and a Parquet source's rows by row number)."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    from assay.report import build_run_report, render_html

    scored(tmp_path, {"path": str(tmp_path / "json") + "/"})
    scored(tmp_path, {"path": str(tmp_path / "pq") + "/", "format": "parquet"})
    scored(tmp_path, {"type": "delta", "path": str(tmp_path / "lake")})
    delta_day = expand_locations([str(tmp_path / "lake")])[0]
    want = {t.trace_id: t.trajectory for t in build_run_report(str(tmp_path / "json"), worst=20).worst}
    assert len(want) >= 6 and all(t is not None and t["messages"] for t in want.values())
    for location in (str(tmp_path / "pq"), delta_day):
        report = build_run_report(location, worst=20)
        assert {t.trace_id: t.trajectory for t in report.worst} == want, location
        assert "not readable from here" not in render_html(report)
    # a Parquet source (rows over several row groups): the trajectory of row n is row n's
    rows = [json.loads(line) for line in (tmp_path / "t.jsonl").read_text().splitlines()]
    pq.write_table(pa.Table.from_pylist(rows), tmp_path / "t.parquet", row_group_size=5)
    cfg = build_config(
        {
            "source": {"path": str(tmp_path / "t.parquet")},
            "evaluators": ["trajectory_match:mode=strict"],
            "sink": {"path": str(tmp_path / "from-pq") + "/", "format": "parquet"},
            "state_dir": str(tmp_path / ".b"),
        }
    )
    assert anyio.run(lambda: execute(cfg)).exit_code == 0
    report = build_run_report(str(tmp_path / "from-pq"), worst=20)
    got = {t.trace_id: t.trajectory for t in report.worst}
    assert set(got) == set(want)
    for tid, traj in got.items():
        assert traj is not None and traj["messages"] == want[tid]["messages"], tid
        assert traj["where"] == f"{tmp_path / 't.parquet'}:{int(tid[1:]) + 1}"
