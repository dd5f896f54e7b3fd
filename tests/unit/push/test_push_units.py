"""Push items, ids, the ledger, the targets' wire formats and the engine's retries (no network
beyond loopback stand-ins)."""

from __future__ import annotations

import datetime as dt
import uuid
from pathlib import Path
from typing import Any

import anyio
import orjson
import pytest

from assay.config import build_config
from assay.exceptions import ConfigError
from assay.push import PushLedger, build_target, push_id, push_target, validate_push_spec
from assay.push.base import ASSAY_NAMESPACE, PushParams, items_of_row, stable_day
from assay.push.langfuse import score_value

DAY = dt.datetime(2026, 11, 20, tzinfo=dt.UTC)
TID = uuid.uuid4().hex


def row(**over: Any) -> dict[str, Any]:
    base: dict[str, Any] = {
        "trace_id": TID,
        "results": {
            "ok": {"key": "ok", "score": 1.0, "value": True, "comment": "fine"},
            "grade": {"key": "grade", "score": None, "value": "B", "comment": None},
            "broken": {"key": "broken", "score": None, "value": None, "error": "JudgeError: timeout"},
        },
        "identity": {"ok": "contains/aaaa/-/-", "grade": "llm_judge/bbbb/cccc/gpt-4o", "broken": "x/1/-/-"},
    }
    return {**base, **over}


def test_ids_are_uuid5_of_trace_key_identity_under_the_assay_namespace() -> None:
    a = push_id("t", "k", "ev/1/-/-")
    assert a == uuid.uuid5(ASSAY_NAMESPACE, "t\x1fk\x1fev/1/-/-") and a.version == 5
    assert a != push_id("t", "k", "ev/2/-/-") != push_id("t2", "k", "ev/1/-/-")


def test_items_of_a_row_carry_platform_ids_the_stable_day_and_the_annotator() -> None:
    items = {i.key: i for i in items_of_row(row(platform={"trace_id": "P", "root_id": "R"}), PushParams(type="x"), DAY)}
    assert set(items) == {"ok", "grade", "broken"}
    assert items["ok"].trace_id == "P" and items["ok"].root_id == "R" and items["ok"].timestamp == DAY
    assert items["ok"].id == push_id(TID, "ok", "contains/aaaa/-/-")  # the row's own trace id names the item
    assert items["ok"].annotator == "CODE" and items["grade"].annotator == "LLM"
    # the run file may name the fields holding the platform's ids
    params = PushParams(type="x", trace_id_field="meta.lf", root_id_field="meta.root")
    (item, *_) = items_of_row(row(meta={"lf": "L", "root": "S"}), params, DAY)
    assert (item.trace_id, item.root_id) == ("L", "S")
    # a row without identities (an output older than identities) pushes nothing
    assert items_of_row(row(identity={}), PushParams(type="x"), DAY) == []


def test_langfuse_data_types_follow_the_value() -> None:
    items = {i.key: i for i in items_of_row(row(), PushParams(type="x"), DAY)}
    assert score_value(items["ok"]) == ("BOOLEAN", 1.0)
    assert score_value(items["grade"]) == ("CATEGORICAL", "B")
    assert score_value(items["broken"]) is None
    target = build_target({"type": "langfuse"}, env={"LANGFUSE_PUBLIC_KEY": "p", "LANGFUSE_SECRET_KEY": "s"})
    assert target.missing(items["broken"]) == "no score (evaluator error)"
    body = orjson.loads(target.request([items["ok"]]).body)
    assert body[0]["timestamp"] == "2026-11-20T00:00:00Z" and body[0]["id"] == str(items["ok"].id)


def test_langsmith_sends_one_feedback_without_retention_upgrade_and_needs_uuid_trace_ids() -> None:
    target = build_target({"type": "langsmith"}, env={"LANGSMITH_API_KEY": "k"})
    (item, *_) = items_of_row(row(), PushParams(type="x"), DAY)
    req = target.request([item])
    body = orjson.loads(req.body)
    assert req.url == "https://api.smith.langchain.com/feedback" and req.headers["x-api-key"] == "k"
    assert body["extend_trace_retention"] is False and body["feedback_source"]["type"] == "model"
    assert body["id"] == str(item.id) and uuid.UUID(body["run_id"]) == uuid.UUID(TID)
    (bad, *_) = items_of_row(row(trace_id="trace-000"), PushParams(type="x"), DAY)
    assert target.missing(bad) == "trace id is not a LangSmith run id (a UUID)"


def test_otel_records_carry_the_semantic_convention_and_trace_context() -> None:
    pytest.importorskip("opentelemetry.proto")
    from assay.testing.otlp_receiver import decode_logs

    target = build_target({"type": "otel"})
    items = items_of_row(row(platform={"trace_id": TID, "root_id": "00f067aa0ba902b7"}), PushParams(type="x"), DAY)
    recs = {r["attributes"]["gen_ai.evaluation.name"]: r for r in decode_logs(target.request(items).body)}
    ok = recs["ok"]
    assert (
        ok["event_name"] == "gen_ai.evaluation.result" and ok["trace_id"] == TID and ok["span_id"] == "00f067aa0ba902b7"
    )
    assert ok["attributes"]["gen_ai.evaluation.score.value"] == 1.0
    assert ok["attributes"]["gen_ai.evaluation.score.label"] == "pass"
    assert ok["attributes"]["gen_ai.evaluation.explanation"] == "fine"
    assert recs["broken"]["attributes"]["error.type"] == "JudgeError"
    assert ok["time_unix_nano"] == int(DAY.timestamp() * 1e9)


def test_specs_are_validated_by_each_targets_model_with_the_key_named() -> None:
    with pytest.raises(ConfigError, match=r"push\[0\]\.hots: Extra inputs are not permitted"):
        validate_push_spec({"type": "langfuse", "hots": "x"}, "run.yaml: push[0]")
    with pytest.raises(ConfigError, match="unknown type 'datadog'"):
        validate_push_spec({"type": "datadog"})
    base = {"source": {"path": "t.jsonl"}, "evaluators": ["exact_match"], "sink": {"path": "o/"}}
    with pytest.raises(ConfigError, match="two push targets are named 'langfuse'"):
        build_config({**base, "push": [{"type": "langfuse"}, {"type": "langfuse"}]}, origin="run.yaml")
    cfg = build_config({**base, "push": [{"type": "langfuse", "name": "eu"}, {"type": "langfuse"}]}, origin="r.yaml")
    assert [p.target_name for p in cfg.push] == ["eu", "langfuse"]


def test_stable_day() -> None:
    assert stable_day(None, "2026-11-21T03:00:00+00:00") == dt.datetime(2026, 11, 21, tzinfo=dt.UTC)
    assert stable_day("2026-11-20", "2026-11-21") == DAY


def test_ledger_remembers_outcomes_per_target(tmp_path: Path) -> None:
    ledger = PushLedger(tmp_path)
    ledger.record("a", [("1", "delivered", None, "t", "k"), ("2", "rejected", "no such trace", "t", "k")])
    assert ledger.known("a", ["1", "2", "3"]) == {"1": ("delivered", None), "2": ("rejected", "no such trace")}
    assert ledger.known("b", ["1"]) == {}
    ledger.close()
    assert PushLedger(tmp_path).known("a", ["1"]) == {"1": ("delivered", None)}  # durable


def test_engine_retries_5xx_and_429_and_reads_207_per_item(tmp_path: Path) -> None:
    from assay.testing.langfuse_server import LangfuseServer

    rows = [row(trace_id=f"t{i}") for i in range(10)]

    async def go() -> Any:
        async with LangfuseServer(traces={f"t{i}" for i in range(8)}, fail_first=2, rate_limit_first=1) as server:
            spec = {"type": "langfuse", "host": server.url, "batch_size": 4, "rpm": 6000}
            target = build_target(spec, env={"LANGFUSE_PUBLIC_KEY": "pk-test", "LANGFUSE_SECRET_KEY": "sk-test"})
            report = await push_target(
                target, lambda: iter(rows), PushLedger(tmp_path), DAY, progress=seen.append, progress_interval_s=0.01
            )
            return report, server

    seen: list[Any] = []
    report, server = anyio.run(go)
    assert seen and seen[0] is report  # a long push says how far it got
    assert report.status == "ok" and report.retries == 2 and report.rate_limited_429 == 1
    assert (report.delivered, report.rejected, report.not_sent) == (16, 4, 10)  # "broken" has no score
    assert {d["trace_id"] for d in report.dead} == {"t8", "t9"}
    assert all(d["message"].startswith("trace t") for d in report.dead)
    assert len(server.scores) == 16


def test_engine_stops_at_once_on_401_and_counts_unreachable(tmp_path: Path) -> None:
    from assay.testing.langsmith_server import LangSmithServer

    rows = [row(trace_id=uuid.uuid4().hex) for _ in range(20)]

    async def go() -> Any:
        async with LangSmithServer(api_key="right") as server:
            target = build_target({"type": "langsmith", "api_url": server.url}, env={"LANGSMITH_API_KEY": "wrong"})
            refused = await push_target(target, lambda: iter(rows), PushLedger(tmp_path), DAY)
            gone = build_target({"type": "langsmith", "api_url": "http://127.0.0.1:9", "retries": 1},
                                env={"LANGSMITH_API_KEY": "right"})  # fmt: skip
            down = await push_target(gone, lambda: iter(rows), PushLedger(tmp_path), DAY)
            return refused, down, server

    refused, down, server = anyio.run(go)
    assert refused.status == "unauthorized" and "HTTP 401" in (refused.error or "")
    assert server.stats.unauthorized < 60  # stopped at once, not after every item
    assert down.status == "unreachable" and "unreachable after 2 attempts" in (down.error or "")


def test_the_ledger_files_outcomes_by_name_and_destination() -> None:
    a = build_target({"type": "otel", "endpoint": "http://a:4318"})
    b = build_target({"type": "otel", "endpoint": "http://b:4318"})
    assert a.name == b.name == "otel" and a.ledger_key != b.ledger_key  # a new endpoint gets everything
    assert build_target({"type": "otel", "endpoint": "http://a:4318", "rpm": 5}).ledger_key == a.ledger_key


@pytest.mark.parametrize(
    ("fixture", "expected"),
    [
        (
            "langsmith",
            {"trace_id": "1f0c2b7e-7d0a-6c3e-9b1e-2f4a5d6e7f80", "root_id": "1f0c2b7e-7d0a-6c3e-9b1e-2f4a5d6e7f80"},
        ),
        ("langfuse", {"trace_id": "lf-trace-1"}),
        ("otel_semconv", {"trace_id": "5b8efff798038103d269b633813fc60c", "root_id": "a1"}),
    ],
)
def test_traces_read_from_a_platform_keep_its_ids(fixture: str, expected: dict[str, str]) -> None:
    from assay.traces.normalize import to_trace
    from assay.traces.platform import platform_ids

    path = Path(__file__).parents[2] / "fixtures" / "formats" / f"{fixture}.json"
    assert platform_ids(to_trace(orjson.loads(path.read_bytes()))) == expected


def test_answers_taken_for_the_ledger_are_written_even_when_the_writer_is_cancelled(tmp_path: Path) -> None:
    """The periodic ledger writer is cancelled when a push ends; answers it had taken when the
    cancel came are still written (else the next push sent them again: seen once in a full run)."""
    from assay.push.engine import _Sender

    target = build_target({"type": "langfuse", "host": "http://127.0.0.1:9"}, env={})
    ledger = PushLedger(tmp_path)

    async def go() -> None:
        sender = _Sender(target, ledger, object(), None)  # type: ignore[arg-type]
        sender.unrecorded = [("1", "delivered", None, "t1", "k"), ("2", "delivered", None, "t2", "k")]
        with anyio.CancelScope() as scope:
            scope.cancel()  # cancelled before it could write: the moment the push ends
            await sender.record()

    anyio.run(go)
    assert set(ledger.known(target.ledger_key, ["1", "2"])) == {"1", "2"}
