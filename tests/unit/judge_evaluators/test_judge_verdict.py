from __future__ import annotations

import pytest

from assay.exceptions import VerdictParseError
from assay.judges.base import JudgeResponse, JudgeUsage
from assay.judges.verdict import (
    VerdictSpec,
    coerce_bool,
    extract_json_object,
    last_json_object,
    parse_verdict,
    parse_verdict_text,
    strip_thinking,
    verdict_schema,
)

BOOL = VerdictSpec("boolean")
CONT = VerdictSpec("continuous")


def resp(text: str, data: dict | None = None) -> JudgeResponse:
    return JudgeResponse(text, data, JudgeUsage())


class TestSchema:
    def test_boolean_with_reasoning_first(self) -> None:
        s = verdict_schema(BOOL)
        assert list(s["properties"]) == ["reasoning", "score"]
        assert s["required"] == ["reasoning", "score"]
        assert s["properties"]["score"]["type"] == "boolean"
        assert s["additionalProperties"] is False

    def test_without_reasoning(self) -> None:
        s = verdict_schema(VerdictSpec("continuous", use_reasoning=False))
        assert list(s["properties"]) == ["score"] and s["required"] == ["score"]
        assert s["properties"]["score"]["type"] == "number"

    def test_numeric_and_label_choices(self) -> None:
        num = verdict_schema(VerdictSpec("choices", choices=(0, 0.5, 1)))["properties"]["score"]
        assert num == {**num, "type": "number", "enum": [0, 0.5, 1]}
        lab = verdict_schema(VerdictSpec("choices", choices=("a", "b")))["properties"]["score"]
        assert lab["type"] == "string" and lab["enum"] == ["a", "b"]


class TestSalvage:
    def test_strip_think_blocks(self) -> None:
        assert strip_thinking('<think>{"score": true}</think>answer') == "answer"
        assert strip_thinking("ok <thinking>unclosed {") == "ok"

    def test_direct_fenced_and_last_object(self) -> None:
        assert extract_json_object('{"score": 1}') == {"score": 1}
        assert extract_json_object('Sure.\n```json\n{"score": 0.5}\n```\nbye') == {"score": 0.5}
        text = 'first {"score": 0.1, "x": {"y": 1}} then {"score": 0.9} end'
        assert last_json_object(text) == {"score": 0.9}
        assert extract_json_object("no json {here") is None

    def test_think_block_json_ignored(self) -> None:
        v = parse_verdict_text('<think>{"score": true}</think>\n{"reasoning": "r", "score": false}', BOOL)
        assert v.value is False and v.reasoning == "r" and v.salvaged

    @pytest.mark.parametrize(
        ("text", "expected"),
        [
            ("Thus, the score should be: true", True),
            ("Score: FALSE.", False),
            ("blah blah\n\n**No**", False),
            ("verdict = pass", True),
        ],
    )
    def test_boolean_from_text(self, text: str, expected: bool) -> None:
        v = parse_verdict_text(text, BOOL)
        assert v.value is expected and v.score == float(expected)
        assert "verdict salvaged from free text" in v.notes

    def test_number_near_score(self) -> None:
        assert parse_verdict_text("I'd say the score is 0.35 overall", CONT).score == 0.35

    def test_choice_label_in_text(self) -> None:
        spec = VerdictSpec("choices", choices=("Order Management", "Other"))
        assert parse_verdict_text("This is clearly about Order Management.", spec).value == "Order Management"

    def test_nothing_salvageable_keeps_raw(self) -> None:
        with pytest.raises(VerdictParseError) as info:
            parse_verdict_text("I cannot decide, it depends.", BOOL)
        assert info.value.raw == "I cannot decide, it depends."

    def test_json_without_score_field_is_error(self) -> None:
        with pytest.raises(VerdictParseError, match="no 'score' field"):
            parse_verdict(resp("", {"reasoning": "x"}), BOOL)


class TestValidation:
    @pytest.mark.parametrize(
        ("raw", "expected"),
        [(True, True), (False, False), ("false", False), ("False", False), ("true", True), ("no", False), (0, False)],
    )
    def test_boolean_strings_not_truthiness(self, raw: object, expected: bool) -> None:
        v = parse_verdict(resp("", {"score": raw}), BOOL)
        assert v.value is expected
        assert v.score == (1.0 if expected else 0.0)

    def test_boolean_garbage_is_error(self) -> None:
        with pytest.raises(VerdictParseError, match="not a boolean"):
            parse_verdict(resp("", {"score": "maybe"}), BOOL)
        assert coerce_bool(2) is None

    def test_continuous_clamped_with_note(self) -> None:
        v = parse_verdict(resp("", {"score": 1.7, "reasoning": "r"}), CONT)
        assert v.score == 1.0 and v.value == 1.0
        assert v.notes and "clamped" in v.notes[0]
        assert parse_verdict(resp("", {"score": "-3"}), CONT).score == 0.0

    def test_continuous_rejects_non_numbers(self) -> None:
        for bad in (True, "high", None, float("nan")):
            with pytest.raises(VerdictParseError):
                parse_verdict(resp("", {"score": bad}), CONT)

    def test_choices(self) -> None:
        spec = VerdictSpec("choices", choices=(1, 2, 3, 4, 5))
        v = parse_verdict(resp("", {"score": 4}), spec)
        assert v.value == 4 and v.score == 0.75
        with pytest.raises(VerdictParseError, match="not one of the choices"):
            parse_verdict(resp("", {"score": 6}), spec)
        unit = VerdictSpec("choices", choices=(0, 0.5, 1))
        assert parse_verdict(resp("", {"score": "0.5"}), unit).score == 0.5

    def test_label_choices_with_scores(self) -> None:
        spec = VerdictSpec("choices", choices=("good", "bad"), choice_scores={"good": 1.0, "bad": 0.0})
        v = parse_verdict(resp("", {"score": "GOOD"}), spec)
        assert v.value == "good" and v.score == 1.0
        plain = VerdictSpec("choices", choices=("x", "y"))
        assert parse_verdict(resp("", {"score": "y"}), plain).score is None

    def test_structured_data_wins_over_text(self) -> None:
        v = parse_verdict(resp('{"score": false}', {"score": True, "reasoning": "ok"}), BOOL)
        assert v.value is True and not v.salvaged
