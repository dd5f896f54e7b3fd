from __future__ import annotations

import itertools
import json
from collections.abc import Sequence
from typing import Any, ClassVar, cast

import anyio
import anyio.lowlevel
import pytest

from assay.connectors.base import Sink
from assay.evaluators import TrajectoryMatch
from assay.evaluators.base import AsyncEvaluator, EvaluatorParams
from assay.exceptions import BudgetExceeded, ConnectorError
from assay.pipeline import Pipeline, RunOptions
from assay.records import Result
from assay.stages import EvaluateStage
from assay.testing import ListSink, ListSource
from assay.traces.model import Trace
from tests.conftest import agent_messages

GOOD = {
    "id": "t1",
    "messages": agent_messages(("search", {"q": "x"})),
    "reference_outputs": agent_messages(("search", {"q": "x"})),
}


def run(items: list[Any], evaluators: list[Any] | None = None, **opts: Any) -> tuple[Pipeline, ListSink, ListSink]:
    sink, dead = ListSink(), ListSink()
    pipe = Pipeline(
        ListSource(items, batch_size=opts.pop("batch_size", 2)),
        EvaluateStage(evaluators or [TrajectoryMatch(mode="strict")]),
        sink,
        dead,
        RunOptions(run_id="r1", **opts),
    )
    anyio.run(pipe.run)
    return pipe, sink, dead


def test_rows_per_trace_and_dead_letters_with_positions() -> None:
    items = [
        GOOD,
        b"not json",
        {"messages": [{"role": "wizard", "content": "x"}]},
        {"nothing": "here"},
        42,
        {**GOOD, "id": "t2"},
        [1, 2, 3],
    ]
    pipe, sink, dead = run(items)
    rows = sink.records()
    assert [r["trace_id"] for r in rows] == ["t1", "t2"]
    assert rows[0]["results"]["trajectory_strict_match"]["score"] == 1.0
    assert rows[0]["position"] == {"file": "<list>", "line": 1}
    assert rows[0]["run_id"] == "r1"
    failures = dead.records()
    assert [(f["line"], f["stage"]) for f in failures] == [
        (2, "parse"),
        (3, "normalize"),
        (4, "normalize"),
        (5, "normalize"),
        (7, "normalize"),
    ]
    assert "not a list of messages" in failures[4]["error"]
    assert "unknown role 'wizard'" in failures[1]["error"]
    assert failures[0]["raw"] == "not json"
    c = pipe.stats.counts
    assert (c["read"], c["scored"], c["dead_letters"], c["parse_errors"], c["normalize_errors"]) == (7, 2, 5, 1, 4)


def test_unparsable_tool_arguments_are_scored_and_reported() -> None:
    rec = {
        "id": "bad-args",
        "messages": [
            {
                "role": "assistant",
                "tool_calls": [{"id": "1", "function": {"name": "f", "arguments": "{not json"}}],
            }
        ],
        "reference_outputs": [
            {
                "role": "assistant",
                "tool_calls": [{"id": "1", "function": {"name": "f", "arguments": "{not json"}}],
            }
        ],
    }
    pipe, sink, dead = run([rec])
    row = sink.records()[0]
    assert row["results"]["trajectory_strict_match"]["score"] == 1.0  # identical raw text still matches
    assert "not valid JSON" in row["warnings"][0]
    (f,) = dead.records()
    assert f["severity"] == "warning" and f["error_type"] == "InvalidToolArguments" and f["line"] == 1
    assert pipe.stats.counts["dead_letters"] == 0 and pipe.stats.counts["warnings"] == 1


class Boom(Exception):
    pass


class FailingSink(Sink):
    async def write_batch(self, rows: Sequence[bytes], keys: Sequence[str | None] | None = None) -> None:
        raise ConnectorError("disk full")

    async def aclose(self) -> None:
        pass


def test_stage_failure_cancels_run_with_clear_error() -> None:
    pipe = Pipeline(
        ListSource([GOOD] * 50, batch_size=1), EvaluateStage([TrajectoryMatch()]), FailingSink(), ListSink()
    )
    with pytest.raises(BaseExceptionGroup) as info:
        anyio.run(pipe.run)
    assert info.group_contains(ConnectorError, match="disk full")


class RaisingEvaluator(TrajectoryMatch):
    def score(self, trace: Trace) -> Result:
        raise Boom("evaluator bug")


def test_evaluator_exception_becomes_error_result_not_a_score() -> None:
    pipe, sink, _ = run([GOOD], [RaisingEvaluator(key="boom")])
    res = sink.records()[0]["results"]["boom"]
    assert res["score"] is None and "Boom: evaluator bug" in res["error"]
    assert pipe.stats.keys["boom"].errors == 1


class SlowParams(EvaluatorParams):
    delay: float = 0.05
    budget_after: int | None = None


class SlowJudge(AsyncEvaluator[SlowParams]):
    name = "slow"
    Params = SlowParams
    calls = 0
    max_in_flight = 0
    in_flight = 0

    async def ascore(self, trace: Trace) -> Result:
        cls = type(self)
        if self.params.budget_after is not None and cls.calls >= self.params.budget_after:
            raise BudgetExceeded("budget")
        cls.calls += 1
        cls.in_flight += 1
        cls.max_in_flight = max(cls.max_in_flight, cls.in_flight)
        await anyio.sleep(self.params.delay)
        cls.in_flight -= 1
        return Result(self.key, 1.0, True)


def test_async_evaluators_run_concurrently() -> None:
    SlowJudge.calls = SlowJudge.max_in_flight = SlowJudge.in_flight = 0
    items = [{**GOOD, "id": f"t{i}"} for i in range(40)]
    _pipe, sink, _ = run(items, [SlowJudge()], batch_size=5, workers=4)
    assert len(sink.rows) == 40
    assert SlowJudge.max_in_flight >= 10  # 4 workers x 5 traces per batch


def test_budget_stop_abandons_unscored_traces() -> None:
    SlowJudge.calls = SlowJudge.max_in_flight = SlowJudge.in_flight = 0
    items = [{**GOOD, "id": f"t{i}"} for i in range(50)]
    pipe, sink, _ = run(items, [SlowJudge(delay=0.0, budget_after=7)], batch_size=5, workers=1)
    assert pipe.status == "budget"
    assert len(sink.rows) == 7
    assert pipe.stats.counts["abandoned"] >= 3
    assert all(json.loads(r)["results"]["slow"]["score"] == 1.0 for r in sink.rows)


def test_scenario_evaluators_see_the_whole_record_and_others_take_the_fast_path() -> None:
    from assay.evaluators.scenario import Escalation

    record = dict(GOOD)
    record["should_escalate"] = True  # a top-level field: the scenario is the record itself
    pipe, sink, _ = run([record], [TrajectoryMatch(mode="strict"), Escalation()])
    assert pipe.parse.fast is False
    assert sink.records()[0]["results"]["escalation"]["score"] == 0.0  # it read should_escalate
    pipe, sink, _ = run([record])
    assert pipe.parse.fast is True and pipe.parse.hits == 1
    assert sink.records()[0]["results"]["trajectory_strict_match"]["score"] == 1.0


class Starts(AsyncEvaluator[EvaluatorParams]):
    name = "starts"
    Params = EvaluatorParams
    started = 0

    async def ascore(self, trace: Trace) -> Result:
        type(self).started += 1
        await anyio.lowlevel.checkpoint()
        return Result(self.key, 1.0, True)


def test_a_batch_of_async_evaluations_starts_a_chunk_at_a_time() -> None:
    """Each start renders a prompt: a whole batch started in one turn of the event loop held it
    for 50 ms, and a paced judge's sender waiting for its slot woke that late. A task waiting for
    its turn now runs after the first chunk, not after the whole batch."""
    import anyio.lowlevel

    from assay.stages.evaluate import SPAWN_CHUNK

    Starts.started = 0
    seen: list[int] = []
    traces: list[Any] = [None] * (8 * SPAWN_CHUNK)  # the stage hands them to the evaluator untouched

    async def other() -> None:
        while Starts.started < len(traces):
            await anyio.lowlevel.checkpoint()
            seen.append(Starts.started)

    async def main() -> None:
        stage = EvaluateStage([Starts()])
        async with anyio.create_task_group() as tg:
            tg.start_soon(stage.process, traces)
            tg.start_soon(other)

    anyio.run(main)
    assert Starts.started == len(traces)
    # the other task ran between chunks, never more than one chunk apart
    assert max(b - a for a, b in itertools.pairwise([0, *seen])) <= SPAWN_CHUNK


class Tagged(AsyncEvaluator[EvaluatorParams]):
    name = "tagged"
    Params = EvaluatorParams
    order: ClassVar[list[str]] = []

    async def ascore(self, trace: Trace) -> Result:
        type(self).order.append(cast(str, trace))
        await anyio.lowlevel.checkpoint()
        return Result(self.key, 1.0, True)


def test_two_workers_batches_start_one_after_the_other() -> None:
    """Started a chunk at a time, two workers' batches interleaved in the judges' line, finished
    together and left the judge idle while every worker fetched its next batch: the first batch's
    evaluations all start before the second's."""
    from assay.stages.evaluate import SPAWN_CHUNK

    Tagged.order = []
    first: list[Any] = ["a"] * (4 * SPAWN_CHUNK)  # the stage hands them to the evaluator untouched
    second: list[Any] = ["b"] * (4 * SPAWN_CHUNK)

    async def main() -> None:
        stage = EvaluateStage([Tagged()])
        async with anyio.create_task_group() as tg:
            tg.start_soon(stage.process, first)
            tg.start_soon(stage.process, second)

    anyio.run(main)
    assert Tagged.order == first + second
