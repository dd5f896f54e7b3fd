"""The Ray job scores the same as ``assay run``: a local Ray (2 CPUs) reads a Parquet table with
``ray.data.read_parquet`` and maps :class:`assay.integrations.ray.AssayScorer` over it with two
actors; a trajectory match and a judge (the stand-in judge server) whose rate budget the actors
share through Redis (``rate_store``)."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from assay.testing.judge_server import JudgeServerThread
from tests.conftest import agent_messages
from tests.support.redis_server import RedisServer

pytest.importorskip("pyarrow")
ray = pytest.importorskip("ray")
pytestmark = pytest.mark.xdist_group("ray")  # one worker, one local Ray (tests/support/ray_fixtures.py)

ROOT = Path(__file__).resolve().parents[2]
N = 24


def _table(path: Path) -> None:
    import pyarrow as pa
    import pyarrow.parquet as pq

    rows = []
    for i in range(N):
        calls = [("search", {"q": f"q{i}"}), ("fetch", {"id": str(i)})]
        ref = calls if i % 3 else [*calls, ("submit", {"id": str(i)})]
        rows.append(
            {
                "id": f"t{i}",
                "messages": agent_messages(*calls, final=f"answer {i}"),
                "reference": agent_messages(*ref, final=f"answer {i}"),
            }
        )
    pq.write_table(pa.Table.from_pylist(rows), path, row_group_size=8)


def _run_file(tmp_path: Path, judge_url: str, redis_url: str) -> Path:
    cfg: dict[str, Any] = {
        "source": {"path": str(tmp_path / "traces.parquet")},
        "normalize": {"reference": "reference"},
        "judges": {
            "j": {"provider": "openai", "base_url": f"{judge_url}/v1", "model": "m", "rpm": 6000, "timeout": 10}
        },
        "rate_store": redis_url,
        "evaluators": [
            {"name": "trajectory_match", "params": {"mode": "strict"}},
            {"name": "llm_judge", "params": {"prompt": "correctness", "judge": "j"}},
        ],
        "sink": {"path": str(tmp_path / "out") + "/"},
        "state_dir": str(tmp_path / "state"),
    }
    path = tmp_path / "run.yaml"
    path.write_text(json.dumps(cfg))
    return path


def _ray_job(tmp_path: Path, run_file: Path, actors: int) -> list[dict[str, Any]]:
    """The table scored by ``actors`` AssayScorer actors in batches of 5 (each actor takes half a
    CPU: the read tasks keep the rest of the two)."""
    from assay.integrations.ray import AssayScorer

    ds = ray.data.read_parquet(str(tmp_path / "traces.parquet"), override_num_blocks=4)
    scored = ds.map_batches(
        AssayScorer,
        fn_constructor_kwargs={"run_file": str(run_file)},
        batch_format="pyarrow",
        batch_size=5,
        concurrency=actors,
        num_cpus=0.5,
    )
    return [r for ref in scored.to_arrow_refs() for r in ray.get(ref).to_pylist()]


@pytest.mark.slow
@pytest.mark.timeout(600)
@pytest.mark.filterwarnings("ignore::DeprecationWarning:ray")  # Ray's own, about its settings
@pytest.mark.filterwarnings("ignore::UserWarning:ray")  # Ray's notes on concurrency vs blocks
def test_ray_job_scores_the_same_as_assay_run(tmp_path: Path, redis_server: RedisServer, ray_local: Any) -> None:
    import redis

    _table(tmp_path / "traces.parquet")
    store = redis_server.url.rsplit("/", 1)[0] + "/5"  # a database of its own
    client = redis.Redis.from_url(store)
    client.flushdb()
    with JudgeServerThread(latency=(0.01, 0.03)) as server:
        run_file = _run_file(tmp_path, server.url, store)
        proc = subprocess.run(
            [sys.executable, "-m", "assay.cli", "run", str(run_file), "-q", "--no-cache"],
            capture_output=True,
            text=True,
            timeout=300,
            env={**os.environ, "PYTHONPATH": str(ROOT)},
        )
        assert proc.returncode == 0, proc.stderr
        run_rows = [
            row
            for part in (tmp_path / "out").glob("part-*.jsonl")
            for row in map(json.loads, part.read_text().splitlines())
        ]
        expected = {row["trace_id"]: {k: r["score"] for k, r in row["results"].items()} for row in run_rows}
        assert len(expected) == N
        client.flushdb()
        rows = _ray_job(tmp_path, run_file, actors=2)
        judged = server.stats.requests
    assert len(rows) == N and all(r["read_error"] is None for r in rows)
    got = {r["trace_id"]: {k: r[k]["score"] for k in ("trajectory_strict_match", "correctness")} for r in rows}
    assert got == expected
    assert {r["run_id"] for r in rows} == {r["run_id"] for r in run_rows}  # the same stable run id
    assert sum(1 for s in got.values() if s["trajectory_strict_match"] == 1.0) == N - N // 3
    assert judged == 2 * N  # each trace judged once by assay run and once by the Ray job
    assert client.dbsize() > 0  # the actors' judge drew its rate budget from the shared store


def test_scorer_on_one_batch_without_ray(tmp_path: Path) -> None:
    """The callable itself, as an actor calls it: a batch in, the score columns out (the Parquet
    sink's schema, plus read_error for a row that is not a trace)."""
    import pyarrow as pa

    from assay.integrations.ray import AssayScorer

    scorer = AssayScorer(
        config={
            "source": {"path": "unused.parquet"},
            "normalize": {"reference": "reference"},
            "evaluators": [{"name": "trajectory_match", "params": {"mode": "strict"}}],
            "sink": {"path": "unused/"},
        },
        ds="2026-11-24",
    )
    msgs = agent_messages(("search", {"q": "x"}))
    batch = pa.Table.from_pylist(
        [
            {"id": "a", "messages": json.dumps(msgs), "reference": json.dumps(msgs)},
            {"id": "b", "messages": json.dumps(msgs), "reference": json.dumps(agent_messages(("fetch", {"id": 1})))},
            {"id": "c", "messages": "not a trace", "reference": None},
        ]
    )
    out = scorer(batch)
    assert out.column_names == [
        *("trace_id", "run_id", "ds", "position", "platform"),
        *("trajectory_strict_match", "read_error"),
    ]
    rows = out.to_pylist()
    assert [r["trace_id"] for r in rows[:2]] == ["a", "b"]
    assert [r["trajectory_strict_match"]["score"] for r in rows[:2]] == [1.0, 0.0]
    assert [r["trajectory_strict_match"]["passed"] for r in rows[:2]] == [True, False]
    assert rows[0]["ds"] == "2026-11-24" and rows[0]["position"] == "batch:1"
    assert rows[2]["trajectory_strict_match"] is None
    assert "messages is a JSON string, expected a list of messages" in rows[2]["read_error"]
    scorer.close()


class KillTheCaller:
    """A judge rule that, at the ``at``-th request, kills (SIGKILL) the process that sent it before
    answering: the request is never answered (a 500 to a dead socket), as when an actor dies with
    a call in flight. Every other request is answered with the default verdict."""

    def __init__(self, port: int, at: int) -> None:
        self.port, self.at = port, at
        self.seen = 0
        self.killed: list[int] = []
        self.answered: list[str] = []
        self.problem = ""

    async def __call__(self, body: dict[str, Any]) -> Any:
        import asyncio

        from assay.testing.judge_server import Reply, default_verdict, prompt_text, requested_schema

        self.seen += 1
        if self.seen == self.at:
            await asyncio.to_thread(self._kill)
            return Reply(500, {"error": {"message": "the caller was killed"}})
        self.answered.append(prompt_text(body))
        return default_verdict(prompt_text(body), requested_schema(body, "openai"))

    def _kill(self) -> None:
        import psutil

        # the previous call's answer is written to the judge cache just after its slot is freed
        # (this call was sent then): let that write land, so one call only is in flight at the kill
        time.sleep(0.5)
        me = os.getpid()
        pids = {
            c.pid
            for c in psutil.net_connections(kind="tcp")
            if c.raddr and c.raddr.port == self.port and c.pid and c.pid != me and c.status == "ESTABLISHED"
        }
        if len(pids) != 1:  # the one actor, else the test says what it saw
            self.problem = f"processes connected to the judge: {sorted(pids)}"
            return
        for pid in pids:
            os.kill(pid, signal.SIGKILL)
            psutil.Process(pid).wait(timeout=30)
        self.killed.extend(pids)


@pytest.mark.slow
@pytest.mark.timeout(600)
@pytest.mark.filterwarnings("ignore::DeprecationWarning:ray")
@pytest.mark.filterwarnings("ignore::UserWarning:ray")
def test_a_killed_actor_restarts_and_pays_no_judge_call_twice(tmp_path: Path, ray_local: Any) -> None:
    """kill -9 of the actor in the middle of a batch (one judge call in flight): Ray Data restarts
    it and redoes the batch, whose answered calls come from the run's judge cache: the server
    answers each distinct judge call once, and every trace gets its row once."""
    _table(tmp_path / "traces.parquet")
    rule = KillTheCaller(0, at=8)  # the 3rd call of the 2nd batch of 5
    with JudgeServerThread(rule=rule) as server:
        rule.port = int(server.url.rsplit(":", 1)[1])
        run_file = _run_file(tmp_path, server.url, "")
        cfg = json.loads(run_file.read_text())
        del cfg["rate_store"]
        cfg["judges"]["j"]["max_concurrency"] = 1  # one call in flight when the actor dies
        cfg["judges"]["j"]["hedge"] = False
        run_file.write_text(json.dumps(cfg))
        rows = _ray_job(tmp_path, run_file, actors=1)
        stats = server.stats
    assert len(rule.killed) == 1, rule.problem  # the actor did die mid-batch
    assert sorted(r["trace_id"] for r in rows) == sorted(f"t{i}" for i in range(N))  # one row per trace
    assert all(r["correctness"]["error"] is None for r in rows)
    # every distinct judge call answered (paid) once; the one killed in flight was sent once more
    assert len(rule.answered) == len(set(rule.answered)) == N
    assert stats.ok == N and stats.requests == N + 1, stats.to_dict()


def test_scorer_by_columns_gives_the_object_paths_table() -> None:
    """Messages as Arrow lists of structs: the scorer takes the columnar path (the run's
    evaluators all have a columnar form), and its table is the object path's, row for row — the
    rows the columns leave to the object path (no id, an empty or missing message list, no
    reference) put back in place."""
    import random

    import pyarrow as pa

    from assay.integrations.arrow_scoring import score_table
    from assay.integrations.ray import AssayScorer

    rng = random.Random(7)
    names = ["search", "fetch", "submit", "ünïcode"]
    rows: list[dict[str, Any]] = []
    for i in range(300):
        calls = [(rng.choice(names), {"q": rng.randint(0, 2)}) for _ in range(rng.randint(0, 4))]
        ref = [(rng.choice(names), {"q": rng.randint(0, 2)}) for _ in range(rng.randint(0, 4))]
        row: dict[str, Any] = {"id": f"t{i}", "messages": agent_messages(*calls), "reference": agent_messages(*ref)}
        row["id"] = None if i % 17 == 0 else '{"json": "text"}' if i == 5 else row["id"]
        row["messages"] = [] if i % 23 == 0 else None if i % 29 == 0 else row["messages"]
        row["reference"] = None if i % 31 == 0 else row["reference"]
        rows.append(row)
    evaluators: list[dict[str, Any]] = [
        {"name": "trajectory_match", "params": {"mode": mode}} for mode in ("strict", "unordered", "subset", "superset")
    ]
    evaluators += [
        {"name": "tool_call_accuracy"},
        {"name": "trajectory_match", "params": {"mode": "strict", "tool_args_match_mode": "exact", "key": "exact"}},
    ]
    scorer = AssayScorer(config={"source": {"path": "x.parquet"}, "sink": {"path": "o/"}, "evaluators": evaluators})
    batch = pa.Table.from_pylist(rows).to_batches()[0]
    assert scorer.columnar_plan(batch.schema) is not None
    by_columns = scorer(batch)
    processed = scorer.process(batch, "batch")
    by_objects = score_table(processed, scorer.keys, run_id=scorer.run_id, ds=None, thresholds=scorer.thresholds)
    assert by_columns.schema == by_objects.schema
    assert by_columns.to_pylist() == by_objects.to_pylist()
    table = by_columns.to_pylist()
    assert sum((r["trajectory_strict_match"] or {}).get("passed") is True for r in table) > 10
    assert sum(r["read_error"] is not None for r in table) > 0  # dead letters in place, by the object path
