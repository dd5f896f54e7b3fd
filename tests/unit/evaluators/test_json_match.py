"""json_match: per-key scores, aggregators, list pairing modes, rubric hook."""

from __future__ import annotations

from typing import Any

import pytest

from assay.evaluators import JsonMatch
from assay.evaluators.json_match import RubricItem
from assay.exceptions import ConfigError
from assay.records import Result


def scores(results: list[Result]) -> dict[str, float | None]:
    return {r.key: r.score for r in results}


def test_single_object_per_key() -> None:
    out = {"a": 1, "b": [1, 2], "c": {"x": 1, "y": 2}, "extra": 1}
    ref = {"a": 1.0, "b": [2, 1], "c": {"y": 2, "x": 1}, "missing": 0}
    got = scores(JsonMatch().evaluate(outputs=out, reference_outputs=ref))
    assert got == {
        "json_match:a": 1.0,
        "json_match:b": 0.0,  # list order matters
        "json_match:c": 1.0,  # key order does not
        "json_match:extra": 0.0,  # not in the reference
        "json_match:missing": 0.0,  # not in the output
    }
    # results come sorted by key
    assert list(got) == sorted(got)


def test_aggregators_on_an_object() -> None:
    out, ref = {"a": 1, "b": 2}, {"a": 1, "b": 3}
    assert scores(JsonMatch(aggregator="average").evaluate(outputs=out, reference_outputs=ref)) == {
        "json_match:average": 0.5
    }
    assert scores(JsonMatch(aggregator="all").evaluate(outputs=out, reference_outputs=ref)) == {"json_match:all": 0.0}


def test_readme_example_exclude_and_list_average() -> None:
    outputs = [{"a": "Mango, Bananas", "b": 2}, {"a": "Apples", "b": 2, "c": [1, 2, 3]}]
    reference = [{"a": "Mango, Bananas", "b": 2}, {"a": "Apples", "b": 2, "c": [1, 2, 4]}]
    ev = JsonMatch(aggregator="all", list_aggregator="average", exclude_keys=["a"])
    [r] = ev.evaluate(outputs=outputs, reference_outputs=reference)
    assert (r.key, r.score) == ("json_match:all", 0.5)
    assert r.metadata["item_scores"] == [1.0, 0.0]


def test_same_elements_pairs_items_regardless_of_order() -> None:
    out = [{"id": 1, "v": "x"}, {"id": 2, "v": "y"}]
    ref = [{"id": 2, "v": "y"}, {"id": 1, "v": "x"}]
    assert scores(JsonMatch().evaluate(outputs=out, reference_outputs=ref)) == {
        "json_match:id": 1.0,
        "json_match:v": 1.0,
    }
    ordered = JsonMatch(list_match_mode="ordered", list_aggregator="average")
    assert scores(ordered.evaluate(outputs=out, reference_outputs=ref)) == {
        "json_match:id": 0.0,
        "json_match:v": 0.0,
    }


@pytest.mark.parametrize(
    ("mode", "expected"),
    [
        # output has an extra item {"a": 3}
        ("same_elements", 2 / 3),
        ("subset", 2 / 3),  # unmatched outputs still score 0
        ("superset", 1.0),  # extra outputs are ignored
        ("ordered", 2 / 3),
    ],
)
def test_list_modes_with_an_extra_output_item(mode: str, expected: float) -> None:
    out = [{"a": 1}, {"a": 2}, {"a": 3}]
    ref = [{"a": 1}, {"a": 2}]
    ev = JsonMatch(list_match_mode=mode, list_aggregator="average")
    assert scores(ev.evaluate(outputs=out, reference_outputs=ref))["json_match:a"] == pytest.approx(expected)


@pytest.mark.parametrize(("mode", "expected"), [("same_elements", 0.5), ("subset", 1.0), ("superset", 0.5)])
def test_list_modes_with_a_missing_output_item(mode: str, expected: float) -> None:
    out = [{"a": 1}]
    ref = [{"a": 1}, {"a": 2}]
    ev = JsonMatch(list_match_mode=mode, list_aggregator="average")
    assert scores(ev.evaluate(outputs=out, reference_outputs=ref))["json_match:a"] == pytest.approx(expected)


def test_greedy_pairing_prefers_the_most_equal_keys() -> None:
    out = [{"a": 1, "b": 2}]
    ref = [{"a": 1, "b": 3}, {"a": 5, "b": 2, "c": 0}, {"a": 1, "b": 2}]
    ev = JsonMatch(list_aggregator="average", list_match_mode="subset")
    assert scores(ev.evaluate(outputs=out, reference_outputs=ref)) == {"json_match:a": 1.0, "json_match:b": 1.0}


def test_identical_lists_with_different_key_sets_score_one() -> None:
    # documented difference: openevals counts items where the key is absent on both sides as 0
    items = [{"a": 1}, {"b": 1}, {"b": 1}]
    ev = JsonMatch(list_aggregator="average")
    assert scores(ev.evaluate(outputs=items, reference_outputs=items)) == {"json_match:a": 1.0, "json_match:b": 1.0}


def test_empty_items_and_empty_inputs() -> None:
    ev = JsonMatch(list_aggregator="average")
    assert scores(ev.evaluate(outputs=[{"a": 1}, {}], reference_outputs=[{"a": 1}])) == {
        "json_match:__empty_item": 0.0,
        "json_match:a": 1.0,
    }
    assert JsonMatch().evaluate(outputs={}, reference_outputs={}) == []
    assert scores(JsonMatch(aggregator="average").evaluate(outputs={}, reference_outputs={})) == {
        "json_match:average": 1.0
    }
    assert scores(JsonMatch(aggregator="all").evaluate(outputs=[], reference_outputs=[])) == {"json_match:all": 1.0}


def test_shape_mismatch_is_an_error_result() -> None:
    [r] = JsonMatch().evaluate(outputs=[{"a": 1}], reference_outputs={"a": 1})
    assert r.score is None and r.error is not None and "list" in r.error
    [r] = JsonMatch().evaluate(outputs=[1, 2], reference_outputs=[1, 2])
    assert r.error is not None and "objects" in r.error


def test_json_text_output_is_parsed_and_missing_reference_is_not_scored() -> None:
    assert scores(JsonMatch().evaluate(outputs='{"a": 1}', reference_outputs={"a": 1})) == {"json_match:a": 1.0}
    [r] = JsonMatch(aggregator="average").evaluate(outputs={"a": 1})
    assert r.key == "json_match:average" and r.score is None and r.error is None


def test_boolean_is_not_a_number() -> None:
    assert scores(JsonMatch().evaluate(outputs={"a": True}, reference_outputs={"a": 1})) == {"json_match:a": 0.0}


def test_custom_key_prefix() -> None:
    got = JsonMatch(key="extract").evaluate(outputs={"a": 1}, reference_outputs={"a": 1})
    assert [r.key for r in got] == ["extract:a"]


def test_rubric_needs_a_judge_and_judge_needs_a_rubric() -> None:
    with pytest.raises(ConfigError, match="json_match rubric keys need a judge"):
        JsonMatch(rubric={"a": "mentions every fruit"})
    with pytest.raises(ConfigError, match="judge"):
        JsonMatch(judge="j")


class FakeRubricJsonMatch(JsonMatch):
    """A scorer plugged into the hook: passes when the output value appears in the reference."""

    seen: list[RubricItem]

    async def ascore_rubric(self, items: list[RubricItem]) -> list[tuple[float | None, str | None]]:
        self.seen = list(items)
        return [(1.0 if str(i.output) in str(i.reference) else 0.0, f"checked {i.key}") for i in items]


def test_rubric_scorer_hook() -> None:
    ev = FakeRubricJsonMatch(rubric={"a": "is it in there?"}, judge="j", aggregator="average")
    out = {"a": "Mango", "b": 2}
    ref = {"a": "Bananas, Mango", "b": 2, "d": "x"}
    assert ev.is_async and not JsonMatch().is_async
    [r] = ev.evaluate(outputs=out, reference_outputs=ref)
    assert r.score == pytest.approx(2 / 3)  # a by rubric 1, b 1, d missing 0
    assert [(i.key, i.output, i.criteria) for i in ev.seen] == [("a", "Mango", "is it in there?")]
    assert "checked a" in (r.comment or "")


def test_rubric_keys_are_left_out_of_item_pairing() -> None:
    class Always(JsonMatch):
        async def ascore_rubric(self, items: list[RubricItem]) -> list[tuple[float | None, str | None]]:
            return [(1.0, None) for _ in items]

    ev = Always(rubric={"note": "anything"}, judge="j", list_aggregator="average")
    out: list[dict[str, Any]] = [{"id": 2, "note": "b"}, {"id": 1, "note": "a"}]
    ref: list[dict[str, Any]] = [{"id": 1, "note": "zzz"}, {"id": 2, "note": "yyy"}]
    assert scores(ev.evaluate(outputs=out, reference_outputs=ref)) == {"json_match:id": 1.0, "json_match:note": 1.0}
