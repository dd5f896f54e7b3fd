from __future__ import annotations

from typing import Any

from assay.evaluators.json_match import JsonMatch, RubricItem
from assay.evaluators.json_rubric import build_rubric_requests, field_names


def by_key(results: list[Any]) -> dict[str, Any]:
    return {r.key: r for r in results}


def test_one_call_per_rubric_key_without_aggregator(scripted: Any) -> None:
    def reply(req: Any) -> dict[str, Any]:
        (name,) = req.schema["properties"]
        return {name: {"reasoning": f"judged {name}", "score": name == "summary"}}

    judge = scripted(reply)
    ev = JsonMatch(rubric={"summary": "mentions the total", "tone": "is polite"}, judge=judge)
    out = {"summary": "Total is 20", "tone": "rude!", "id": 1}
    ref = {"summary": "The total is $20", "tone": "polite", "id": 1}
    res = by_key(ev.evaluate(outputs=out, reference_outputs=ref))
    assert res["json_match:id"].score == 1
    assert (res["json_match:summary"].score, res["json_match:summary"].comment) == (1.0, "judged summary")
    assert res["json_match:tone"].score == 0.0
    assert len(judge.requests) == 2
    first = judge.requests[0]
    assert first.messages[0]["role"] == "system"
    user = first.messages[1]["content"]
    assert "Key: summary, Criteria: mentions the total" in user and "summary: Total is 20" in user
    assert "summary: The total is $20" in user


def test_one_call_with_aggregator_no_reasoning(scripted: Any) -> None:
    judge = scripted({"a": True, "b": "false"})
    ev = JsonMatch(rubric={"a": "c1", "b": "c2"}, aggregator="average", judge=judge, use_reasoning=False)
    (r,) = ev.evaluate(outputs={"a": 1, "b": 2}, reference_outputs={"a": 1, "b": 3})
    assert r.key == "json_match:average" and r.score == 0.5
    assert len(judge.requests) == 1
    assert judge.requests[0].schema["properties"]["a"] == {
        **judge.requests[0].schema["properties"]["a"],
        "type": "boolean",
    }


def test_missing_rubric_verdict_is_error(scripted: Any) -> None:
    ev = JsonMatch(rubric={"a": "c1"}, aggregator="all", judge=scripted({"zzz": True}))
    (r,) = ev.evaluate(outputs={"a": 1}, reference_outputs={"a": 1})
    assert r.score is None and r.error is not None and "'a'" in r.error


def test_list_field_names_and_dry_run_requests() -> None:
    items = [RubricItem(0, "k", "c", 1, 1), RubricItem(1, "k", "c", 2, 2), RubricItem(1, "m", "d", 3, 3)]
    assert field_names(items) == ["k_0", "k_1", "m_1"]
    assert len(build_rubric_requests(items, aggregated=False, use_reasoning=True)) == 2
    assert len(build_rubric_requests(items, aggregated=True, use_reasoning=True)) == 1
    single = [RubricItem(0, "k", "c", 1, 1)]
    assert field_names(single) == ["k"]


def test_rubric_makes_json_match_async_and_dry_runnable(scripted: Any) -> None:
    from assay.traces.normalize import trace_from_args

    assert JsonMatch().is_async is False
    ev = JsonMatch(rubric={"a": "c"}, judge=scripted({"a": True}))
    assert ev.is_async is True
    reqs = ev.build_requests(trace_from_args({"a": 1, "b": 2}, {"a": 1, "b": 2}))
    assert len(reqs) == 1 and list(reqs[0].schema["properties"]) == ["a"]
