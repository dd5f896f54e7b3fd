"""The score table as the ledger (issue 29): what makes a result stale, the columnar plan of a day,
the rows a rerun writes back, and the backfill's verdict over days."""

from __future__ import annotations

from typing import Any

import anyio
import orjson
import pyarrow as pa
import pytest

from assay.config import build_config
from assay.exceptions import ConfigError
from assay.pipeline.assembly import build_evaluators, judge_pool
from assay.pipeline.backfill import _common_parent, days_between, worst
from assay.pipeline.ledger import Ledger, evaluator_of, expected_identities, plan_pairs
from assay.records import Result, encode_row


def config(judged: dict[str, Any] | None = None, **judge: Any) -> Any:
    return build_config(
        {
            "source": {"path": "in.jsonl"},
            "judges": {"gpt": {"provider": "openai", "model": "judge-1", "base_url": "http://a/v1", **judge}},
            "evaluators": [
                {"name": "exact_match"},
                {"name": "llm_judge", "params": {"prompt": "correctness", "judge": "gpt"}, **(judged or {})},
            ],
            "sink": {"path": "out/"},
        }
    )


def identities(cfg: Any) -> dict[str, str]:
    async def go() -> dict[str, str]:
        async with judge_pool(cfg, use_cache=False) as pool:
            return expected_identities(build_evaluators(cfg, judges=pool))

    return anyio.run(go)


def test_pacing_and_transport_settings_do_not_make_a_result_stale() -> None:
    base = identities(config())
    assert base["correctness"].endswith("/judge-1")
    assert identities(config(rpm=10, base_url="http://elsewhere/v1", max_concurrency=3, timeout=9)) == base
    assert identities(config(input_price_per_mtok=5.0, mode="batch")) == base
    assert identities(config(model="judge-2"))["correctness"] != base["correctness"]
    assert identities(config(model="judge-2"))["exact_match"] == base["exact_match"]


def test_a_declared_version_and_a_prompt_change_make_it_stale() -> None:
    base = identities(config())
    bumped = identities(config({"version": 3}))
    assert bumped["correctness"] != base["correctness"] and bumped["exact_match"] == base["exact_match"]
    ev, params, prompt, model = bumped["correctness"].split("/")
    assert (ev, prompt, model) == tuple(base["correctness"].split("/")[i] for i in (0, 2, 3)) and params
    assert identities(config({"version": 3})) == bumped  # the same version: the same identity
    prompt = {"params": {"prompt": "Is it right? {outputs}", "judge": "gpt", "feedback_key": "correctness"}}
    changed = identities(config(prompt))
    assert changed["correctness"].split("/")[2] != base["correctness"].split("/")[2]


def pairs(rows: list[tuple[str, str, str | None]]) -> pa.Table:
    ids, keys, idents = zip(*rows, strict=True) if rows else ((), (), ())
    return pa.table(
        {"trace_id": pa.array(ids, pa.string()), "key": pa.array(keys, pa.string()), "identity": pa.array(idents)}
    )


def test_the_plan_counts_kept_stale_missing_dropped_and_removed_pairs() -> None:
    expected = {"a": "A1", "b": "B2"}
    table = pairs(
        [
            ("t1", "a", "A1"), ("t1", "b", "B2"),  # current
            ("t2", "a", "A1"), ("t2", "b", "B1"),  # b stale
            ("t3", "a", "A1"), ("t3", "old", "X"),  # b missing, old removed
            ("t9", "a", "A1"), ("t9", "b", "B2"),  # no longer in the input
        ]
    )  # fmt: skip
    c = plan_pairs(table, pa.array(["t1", "t2", "t3", "t4"]), expected)
    assert c.traces == 4
    assert c.kept == {"a": 3, "b": 1}
    assert c.score == {"a": 1, "b": 3}  # t4 for both; t2's and t3's b
    assert c.stale == {"a": 0, "b": 1}
    assert (c.dropped, c.dropped_traces, c.removed) == (2, 1, 1)
    assert not c.nothing_to_do
    done = plan_pairs(pairs([("t1", "a", "A1"), ("t1", "b", "B2")]), pa.array(["t1"]), expected)
    assert done.nothing_to_do and done.to_dict()["kept"] == 2


def test_the_plan_of_a_day_never_scored_scores_everything() -> None:
    c = plan_pairs(pairs([]), pa.array(["t1", "t2"]), {"a": "A1"})
    assert c.score == {"a": 2} and c.kept == {"a": 0} and c.dropped == 0


def result(key: str, score: float) -> dict[str, Any]:
    return {
        "key": key,
        "score": score,
        "value": score,
        "comment": None,
        "metadata": {},
        "error": None,
        "threshold": None,
    }


def test_a_rerun_row_keeps_current_results_in_the_order_a_full_run_writes() -> None:
    ledger = Ledger({"a": "A1", "b": "B2", "c": "C1"}, {"a": 0.5, "b": 0.5, "c": 0.5})
    ledger.add_row(
        {
            "trace_id": "t1",
            "results": {"a": result("a", 1.0), "b": result("b", 0.0), "c:x": result("c:x", 1.0)},
            "identity": {"a": "A1", "b": "B1", "c": "C1"},
        }
    )
    assert ledger.kept_keys("t1") == {"a", "c"}
    assert ledger.kept_keys("t2") == frozenset() and ledger.kept_keys(None) == frozenset()
    merged = ledger.merge("t1", {"b": Result("b", 1.0, True)}, ["a", "b", "c"])
    assert list(merged) == ["a", "b", "c:x"]
    assert encode_row({"r": merged["a"]}) == orjson.dumps({"r": result("a", 1.0)})  # the same bytes
    assert merged["b"].score == 1.0
    ledger.merge("t5", {"a": Result("a", 1.0)}, ["a", "b", "c"])
    assert ledger.pairs() == {
        "kept": 2, "scored": 1 + 3, "dropped": 0, "changed": 2, "existing": 3, "new_traces": 1
    }  # fmt: skip


def test_pairs_of_traces_not_read_again_are_dropped() -> None:
    ledger = Ledger({"a": "A1"}, {"a": 0.5})
    for tid in ("t1", "t2", "t3"):
        ledger.add_row({"trace_id": tid, "results": {"a": result("a", 1.0)}, "identity": {"a": "A1"}})
    ledger.merge("t1", {}, ["a"])
    got = ledger.pairs()
    assert (got["kept"], got["scored"], got["dropped"], got["changed"]) == (1, 0, 2, 0)
    assert ledger.pairs({"kept": 2, "existing": 2}) == {
        "kept": 3, "scored": 0, "dropped": 0, "changed": 0, "existing": 3, "new_traces": 0
    }  # fmt: skip


def test_evaluator_of_a_dynamic_result_key() -> None:
    assert evaluator_of("rubric:clarity", {"rubric", "x"}) == "rubric"
    assert evaluator_of("x", {"x"}) == "x"


def test_days_between_and_its_errors() -> None:
    assert days_between("2026-12-30", "2027-01-02") == ["2026-12-30", "2026-12-31", "2027-01-01", "2027-01-02"]
    with pytest.raises(ConfigError, match="before"):
        days_between("2026-01-02", "2026-01-01")
    with pytest.raises(ConfigError, match="YYYY-MM-DD"):
        days_between("2026-1-x", "2026-01-01")


def test_the_worst_day_decides_the_exit_code() -> None:
    def day(status: str, code: int) -> dict[str, Any]:
        return {"status": status, "exit_code": code}

    assert worst([]) == ("ok", 0)
    assert worst([day("ok", 0), day("gate_failed", 3), day("ok", 0)]) == ("gate_failed", 3)
    assert worst([day("gate_failed", 3), day("dead_letters", 4)]) == ("dead_letters", 4)
    assert worst([day("gate_failed", 3), day("pending", 75)]) == ("pending", 75)
    assert worst([day("pending", 75), day("failed", 1), day("interrupted", 130)]) == ("failed", 1)


def test_backfill_json_goes_beside_the_days_summaries() -> None:
    assert _common_parent(["out/dt=2026-01-01", "out/dt=2026-01-02"]) == "out"
    assert _common_parent(["s3://b/scores/dt=1", "s3://b/scores/dt=2"]) == "s3://b/scores"
    assert _common_parent(["/t/lake/_summaries/ds=1", "/t/lake/_summaries/ds=2"]) == "/t/lake/_summaries"
    assert _common_parent(["out/dt=2026-01-01"]) == "out"
