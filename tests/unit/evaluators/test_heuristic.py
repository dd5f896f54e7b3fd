"""exact_match, contains, regex_match, edit_distance, json_valid, json_schema_match."""

from __future__ import annotations

import time

import pytest

from assay.evaluators import Contains, EditDistance, ExactMatch, JsonSchemaMatch, JsonValid, RegexMatch
from assay.exceptions import ConfigError
from assay.registry import build_evaluator
from assay.traces.model import Trace

# -- exact_match ---------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("out", "ref", "expected"),
    [
        ("Paris", "Paris", True),
        ("Paris\n", "  Paris", True),  # stripped by default
        ("paris", "Paris", False),  # case-sensitive by default
        ({"a": 1, "b": [1, {"x": 2, "y": 3}]}, {"b": [1, {"y": 3, "x": 2}], "a": 1}, True),
        ([1, 2], [2, 1], False),
        (1, 1.0, False),  # compared as JSON text: "1" vs "1.0" (openevals and potato agree)
        (True, 1, False),  # a boolean is not a number
        (1, "1", True),  # text equals the number whose text it is (potato)
        (" 42\n", 42, True),
        ("True", True, True),
        ('{"a": 1}', {"a": 1}, False),  # text never equals an object (openevals and potato agree)
        ("1.0", "1", False),  # two texts compare as text
        ("yes", 1, False),
    ],
)
def test_exact_match_table(out: object, ref: object, expected: bool) -> None:
    r = ExactMatch().evaluate(outputs=out, reference_outputs=ref)
    assert r.value is expected
    assert r.score == (1.0 if expected else 0.0)


def test_exact_match_null_reference_value() -> None:
    # a reference that exists but holds no output (e.g. a trajectory without a final answer)
    ev = ExactMatch()
    assert ev.score(Trace(final_output=None, reference=Trace(final_output=None))).score == 1.0
    assert ev.score(Trace(final_output="", reference=Trace(final_output=None))).score == 1.0
    assert ev.score(Trace(final_output="x", reference=Trace(final_output=None))).score == 0.0
    assert ev.score(Trace(final_output="null", reference=Trace(final_output=None))).score == 0.0


def test_exact_match_options() -> None:
    assert ExactMatch(case_sensitive=False).evaluate(outputs="HI", reference_outputs="hi").score == 1.0
    assert ExactMatch(strip=False).evaluate(outputs="a ", reference_outputs="a").score == 0.0
    ev = ExactMatch(normalize_whitespace=True)
    assert ev.evaluate(outputs="a   b\n c", reference_outputs="a b c").score == 1.0
    strict = ExactMatch(type_strict=True)
    assert strict.evaluate(outputs=1, reference_outputs="1").score == 0.0
    # case folding reaches strings inside JSON values
    ci = ExactMatch(case_sensitive=False)
    assert ci.evaluate(outputs={"a": "X"}, reference_outputs={"a": "x"}).score == 1.0


def test_exact_match_without_reference_is_not_scored() -> None:
    r = ExactMatch().evaluate(outputs="x")
    assert r.score is None and r.error is None and "no reference" in (r.comment or "")


def test_exact_match_on_message_trajectories_compares_final_answers() -> None:
    out = [{"role": "user", "content": "q"}, {"role": "assistant", "content": "Paris"}]
    ref = [{"role": "assistant", "content": "Paris"}]
    assert ExactMatch().evaluate(outputs=out, reference_outputs=ref).score == 1.0


# -- contains ------------------------------------------------------------------------------------


def test_contains_substring_and_reference_needle() -> None:
    assert Contains(substring="error").evaluate(outputs="An ERROR occurred").score == 1.0
    assert Contains(substring="error", case_sensitive=True).evaluate(outputs="An ERROR").score == 0.0
    # the needle defaults to the reference
    assert Contains().evaluate(outputs="The capital is Paris.", reference_outputs="paris").score == 1.0
    assert Contains().evaluate(outputs="x").score is None


def test_contains_lists_any_all_and_negate() -> None:
    text = "refund issued for order 7"
    assert Contains(substring=["refund", "order"]).evaluate(outputs=text).score == 1.0
    r = Contains(substring=["refund", "apology"]).evaluate(outputs=text)
    assert r.score == 0.0 and r.metadata["missing"] == ["apology"]
    assert Contains(substring=["refund", "apology"], mode="any").evaluate(outputs=text).score == 1.0
    banned = Contains(substring=["sorry", "unfortunately"], mode="any", negate=True)
    assert banned.evaluate(outputs=text).score == 1.0
    assert banned.evaluate(outputs="Sorry, no").score == 0.0


def test_contains_empty_needle_never_matches() -> None:
    assert Contains(substring="").evaluate(outputs="anything").score == 0.0
    assert Contains().evaluate(outputs="anything", reference_outputs="").score == 0.0


def test_contains_reads_answer_field_of_a_dict_output() -> None:
    assert Contains(substring="Paris").evaluate(outputs={"answer": "It is Paris"}).score == 1.0


# -- regex_match ---------------------------------------------------------------------------------


def test_regex_modes_and_flags() -> None:
    assert RegexMatch(pattern=r"order #\d+").evaluate(outputs="see order #42 now").score == 1.0
    assert RegexMatch(pattern=r"order #\d+", match="fullmatch").evaluate(outputs="see order #42").score == 0.0
    assert RegexMatch(pattern=r"ORDER", flags="IGNORECASE").evaluate(outputs="order").score == 1.0
    assert RegexMatch(pattern=r"ORDER", flags=["i"]).evaluate(outputs="order").score == 1.0
    assert RegexMatch(pattern=r"^b", flags=["MULTILINE", "i"]).evaluate(outputs="a\nB").score == 1.0
    assert RegexMatch(pattern=r"^b", flags=0).evaluate(outputs="a\nb").score == 0.0
    r = RegexMatch(pattern=r"\d+").evaluate(outputs="abc 123")
    assert r.metadata == {"match": "123", "span": [4, 7]}
    assert RegexMatch(pattern=r"@", negate=True).evaluate(outputs="no email").score == 1.0


def test_regex_bad_pattern_or_flag_is_a_config_error() -> None:
    with pytest.raises(ConfigError, match="regex_match"):
        RegexMatch(pattern="(unclosed")
    with pytest.raises(ConfigError, match="flag"):
        RegexMatch(pattern="a", flags="NOPE")


def test_regex_catastrophic_backtracking_is_an_error_not_a_hang() -> None:
    text = "a" * 5000 + "b"
    start = time.monotonic()
    # the brief's classic: the regex engine's optimiser handles it quickly (no match)
    r1 = RegexMatch(pattern=r"(a+)+$", timeout=0.2).evaluate(outputs=text)
    # a truly exponential pattern: stopped by the timeout, reported as an error result
    r2 = RegexMatch(pattern=r"(a|aa)+$", timeout=0.2).evaluate(outputs=text)
    elapsed = time.monotonic() - start
    assert elapsed < 5
    assert r1.score == 0.0 or r1.error is not None
    assert r2.score is None and r2.error is not None and "longer than" in r2.error


# -- edit_distance -------------------------------------------------------------------------------


def test_edit_distance() -> None:
    r = EditDistance().evaluate(outputs="kitten", reference_outputs="sitting")
    assert r.value == 3 and r.score == pytest.approx(1 - 3 / 7)
    assert EditDistance().evaluate(outputs="", reference_outputs="").score == 1.0
    # non-strings compare as JSON text (openevals): {"a": 1} vs '{"a":1}' -> 1 edit over 8
    assert EditDistance().evaluate(outputs={"a": 1}, reference_outputs='{"a":1}').score == pytest.approx(0.875)
    assert EditDistance(case_sensitive=False).evaluate(outputs="ABC", reference_outputs="abc").score == 1.0
    assert EditDistance().evaluate(outputs="x").score is None


def test_edit_distance_aliases() -> None:
    for alias in ("levenshtein", "levenshtein_distance"):
        ev = build_evaluator(alias)
        assert isinstance(ev, EditDistance)
        assert ev.evaluate(outputs="ab", reference_outputs="ab").score == 1.0


# -- json_valid / json_schema_match --------------------------------------------------------------


@pytest.mark.parametrize(
    ("out", "ok"),
    [
        ('{"a": 1}', True),
        ("  [1, 2]\n", True),
        ("42", True),
        ("null", True),
        ("{'a': 1}", False),
        ("NaN", False),  # strict JSON
        ("", False),
        ({"a": 1}, True),  # already a JSON value
    ],
)
def test_json_valid(out: object, ok: bool) -> None:
    r = JsonValid().evaluate(outputs=out)
    assert r.value is ok
    if not ok:
        assert "invalid JSON" in (r.comment or "")


def test_json_valid_code_fence() -> None:
    fenced = '```json\n{"a": 1}\n```'
    assert JsonValid().evaluate(outputs=fenced).score == 0.0
    assert JsonValid(strip_code_fence=True).evaluate(outputs=fenced).score == 1.0


SCHEMA = {"type": "object", "required": ["answer"], "properties": {"answer": {"type": "string"}}}


def test_json_schema_match() -> None:
    ev = JsonSchemaMatch(schema=SCHEMA)
    assert ev.evaluate(outputs='{"answer": "x"}').score == 1.0
    assert ev.evaluate(outputs={"answer": "x"}).score == 1.0
    r = ev.evaluate(outputs='{"answer": 3}')
    assert r.score == 0.0 and "is not of type 'string'" in (r.comment or "")
    assert r.metadata["errors"][0]["path"] == "/answer"
    r = ev.evaluate(outputs="not json")
    assert r.score == 0.0 and (r.comment or "").startswith("invalid JSON")


def test_json_schema_from_text_and_invalid_schema() -> None:
    assert JsonSchemaMatch(schema='{"type": "integer"}').evaluate(outputs="3").score == 1.0
    with pytest.raises(ConfigError, match="not a valid JSON Schema"):
        JsonSchemaMatch(schema={"type": "no-such-type"})
    with pytest.raises(ConfigError, match="schema"):
        build_evaluator("json_schema_match", {})


def test_evaluators_score_canonical_traces_directly() -> None:
    t = Trace(final_output="Paris", reference=Trace(final_output="Paris"))
    assert ExactMatch().score_trace(t)[0].score == 1.0
    assert EditDistance().score(t).score == 1.0


def test_empty_reference_text_is_no_reference() -> None:
    from assay.evaluators import EditDistance, EmbeddingSimilarity, ExactMatch

    for ev in (EditDistance(), ExactMatch(), EmbeddingSimilarity(embed_fn=lambda t: [1.0, float(len(t))])):
        r = ev.evaluate(outputs="some answer", reference_outputs="")
        assert r.score is None and r.error is None, ev.name
