"""A LangSmith run tree or a Langfuse observation tree whose parent links form a cycle is not a
tree: normalizing it fails naming the cycle's ids (the record becomes a dead letter), instead of
silently dropping the runs in the cycle and below it. Seeded random trees: every run of an acyclic
tree is read (its span is in the trace), and a cycle of 2 or 3 non-root runs, a root↔child cycle
or a self-parent is named exactly."""

from __future__ import annotations

import json
import random
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from assay.cli import app
from assay.exceptions import NormalizationError
from assay.traces import langfuse, langsmith
from assay.traces.assemble import parent_cycles
from tests.support.exports import langsmith_export, shuffled_files, write_jsonl, write_parquet

T0 = datetime(2026, 11, 20, 10, 0, 0, tzinfo=UTC)
SEEDS = range(40)


def _tree(r: random.Random, n: int) -> list[tuple[str, str | None, str]]:
    """``(id, parent id, kind)`` of a random tree of ``n`` nodes: node 0 the root (a container),
    each later node below an earlier container; kinds ``container`` / ``llm`` / ``tool``."""
    nodes: list[tuple[str, str | None, str]] = [("n0", None, "container")]
    containers = ["n0"]
    for i in range(1, n):
        kind = r.choice(["container", "llm", "llm", "tool"])
        nodes.append((f"n{i}", r.choice(containers), kind))
        if kind == "container":
            containers.append(f"n{i}")
    return nodes


def _langsmith_runs(nodes: list[tuple[str, str | None, str]]) -> list[dict[str, Any]]:
    runs = []
    for i, (rid, parent, kind) in enumerate(nodes):
        run_type = {"container": "chain", "llm": "llm", "tool": "tool"}[kind]
        runs.append(
            {
                "id": rid,
                "trace_id": "n0",
                "parent_run_id": parent,
                "name": f"{run_type}-{i}",
                "run_type": run_type,
                "start_time": (T0 + timedelta(seconds=i)).isoformat(),
                "end_time": (T0 + timedelta(seconds=i, milliseconds=500)).isoformat(),
                "inputs": {"messages": [{"role": "user", "content": f"q{i}"}]} if kind == "llm" else {"x": i},
                "outputs": (
                    {"choices": [{"message": {"role": "assistant", "content": f"a{i}"}}]}
                    if kind == "llm"
                    else {"output": f"r{i}"}
                ),
            }
        )
    return runs


def _langfuse_observations(nodes: list[tuple[str, str | None, str]]) -> list[dict[str, Any]]:
    obs = []
    for i, (oid, parent, kind) in enumerate(nodes):
        obs.append(
            {
                "id": oid,
                "traceId": "t",
                "parentObservationId": parent,
                "type": {"container": "SPAN", "llm": "GENERATION", "tool": "TOOL"}[kind],
                "name": f"{kind}-{i}",
                "startTime": (T0 + timedelta(seconds=i)).isoformat(),
                "endTime": (T0 + timedelta(seconds=i, milliseconds=500)).isoformat(),
                "input": [{"role": "user", "content": f"q{i}"}] if kind == "llm" else {"x": i},
                "output": {"role": "assistant", "content": f"a{i}"} if kind == "llm" else f"r{i}",
            }
        )
    return obs


def _with_cycle(
    r: random.Random, nodes: list[tuple[str, str | None, str]], how: str
) -> tuple[list[tuple[str, str | None, str]], list[str]]:
    """The tree with some parent links changed into a cycle, and the cycle's ids."""
    if how == "self":
        cycle = [r.choice(nodes[1:])[0]]
    elif how == "root":
        cycle = ["n0", r.choice(nodes[1:])[0]]
    else:
        cycle = r.sample([rid for rid, _, _ in nodes[1:]], int(how))
    parent_of = {c: cycle[(k + 1) % len(cycle)] for k, c in enumerate(cycle)}
    return [(rid, parent_of.get(rid, parent), kind) for rid, parent, kind in nodes], cycle


def _named(message: str, nodes: list[tuple[str, str | None, str]]) -> set[str]:
    words = set(message.replace("→", " ").replace(";", " ").replace(":", " ").split())
    return {rid for rid, _, _ in nodes} & words


FORMATS = [(langsmith, _langsmith_runs), (langfuse, _langfuse_observations)]


@pytest.mark.parametrize("seed", SEEDS)
@pytest.mark.parametrize(("fmt", "rows"), FORMATS, ids=["langsmith", "langfuse"])
def test_an_acyclic_tree_in_any_row_order_reads_every_run(seed: int, fmt: Any, rows: Any) -> None:
    r = random.Random(seed)
    nodes = _tree(r, r.randint(2, 14))
    records = rows(nodes)
    r.shuffle(records)
    trace = fmt.normalize(records)
    assert len(trace.metadata["spans"]) == len(nodes)
    assert not any("cycle" in w for w in trace.warnings or [])


@pytest.mark.parametrize("seed", SEEDS)
@pytest.mark.parametrize("how", ["2", "3", "root", "self"])
@pytest.mark.parametrize(("fmt", "rows"), FORMATS, ids=["langsmith", "langfuse"])
def test_a_cycle_of_parent_links_is_an_error_naming_exactly_its_ids(seed: int, how: str, fmt: Any, rows: Any) -> None:
    r = random.Random(seed)
    nodes = _tree(r, r.randint(4, 14))
    cyclic, cycle = _with_cycle(r, nodes, how)
    records = rows(cyclic)
    r.shuffle(records)
    with pytest.raises(NormalizationError, match="cycle") as err:
        fmt.normalize(records)
    assert _named(str(err.value), nodes) == set(cycle), str(err.value)
    assert "no runs" not in str(err.value)
    # the same message whatever the rows' order (the cycle starts at its smallest id)
    r.shuffle(records)
    with pytest.raises(NormalizationError) as again:
        fmt.normalize(records)
    assert str(again.value) == str(err.value)


def test_a_nested_langsmith_run_tree_is_a_tree_by_construction() -> None:
    run = {"run_type": "chain", "inputs": {"input": "q"}, "child_runs": [{"run_type": "tool", "inputs": {}}]}
    assert langsmith.normalize(run).messages  # no parent links to check


def test_parent_cycles() -> None:
    assert parent_cycles({"r": None, "a": "r", "b": "a"}) == []
    assert parent_cycles({"r": None, "b": "c", "c": "a", "a": "b", "d": "a"}) == [["a", "b", "c"]]
    assert parent_cycles({"x": "outside"}) == []  # a parent outside the export: a root
    assert parent_cycles({"a": "b", "b": "a", "c": "d", "d": "c"}) == [["a", "b"], ["c", "d"]]


def _cyclic_export(seed: int) -> tuple[list[dict[str, Any]], dict[str, list[str]], set[str]]:
    """A LangSmith export of 10 traces, 3 of them with a cycle (2 and 3 non-root runs, root↔child):
    the rows, each broken trace's cycle and the intact traces' ids."""
    rows, expected = langsmith_export(10, seed=seed)
    r = random.Random(seed)
    broken: dict[str, list[str]] = {}
    for tid, how in zip(r.sample(sorted(expected), 3), ["2", "3", "root"], strict=True):
        runs = [row for row in rows if row["trace_id"] == tid]
        root = next(row for row in runs if row["parent_run_id"] is None)
        kids = [row for row in runs if row is not root]
        cycle = [root, r.choice(kids)] if how == "root" else r.sample(kids, int(how))
        for k, row in enumerate(cycle):
            row["parent_run_id"] = cycle[(k + 1) % len(cycle)]["id"]
        broken[tid] = [row["id"] for row in cycle]
    r.shuffle(rows)
    return rows, broken, set(expected) - set(broken)


@pytest.mark.parametrize("fmt", ["jsonl", "parquet"])
def test_an_export_with_cycles_dead_letters_those_traces_naming_their_runs(tmp_path: Path, fmt: str) -> None:
    pytest.importorskip("pyarrow")
    rows, broken, intact = _cyclic_export(7)
    (tmp_path / "export").mkdir()
    for i, part in enumerate(shuffled_files(rows, 2, seed=1)):
        write = write_parquet if fmt == "parquet" else write_jsonl
        write(tmp_path / "export" / f"runs-{i}.{fmt}", part)
    run = tmp_path / "run.yaml"
    run.write_text(
        json.dumps(
            {
                "source": {"path": str(tmp_path / "export")},
                "evaluators": ["max_turns:max_turns=5"],
                "sink": {"path": str(tmp_path / "out")},
                "state_dir": str(tmp_path / "state"),
            }
        )
    )
    res = CliRunner().invoke(app, ["run", str(run), "--ds", "2026-11-27", "-q"])
    assert res.exit_code == 0, res.output
    out = tmp_path / "out"
    scored = [json.loads(line) for p in out.glob("part-*") for line in p.read_text().splitlines()]
    assert sorted(r["trace_id"] for r in scored) == sorted(intact)
    dead = [json.loads(line) for p in (out / "_dead_letter").iterdir() for line in p.read_text().splitlines()]
    assert len(dead) == len(broken)
    for d in dead:
        assert d["stage"] == "normalize" and "cycle" in d["error"], d
        tid = next(t for t, cycle in broken.items() if cycle[0] in d["error"])
        assert all(rid in d["error"] for rid in broken[tid]), d["error"]
        assert d["file"].endswith(f".{fmt}") and d["line"] >= 1
