from __future__ import annotations

import copy
from typing import Any

import pytest

from assay.evaluators.judge_trajectory import TrajectoryJudge
from assay.evaluators.rubric_dag import RubricDag, match_choice, parse_dag
from assay.evaluators.rubric_presets import RUBRIC_PRESETS
from assay.exceptions import ConfigError, JudgeRetryableError
from assay.traces.normalize import trace_from_args

CHOICES = ("yes", "partially", "no")


def choose(*answers: str) -> list[dict[str, str]]:
    return [{"reasoning": f"because {a}", "choice": a} for a in answers]


@pytest.mark.parametrize(
    ("answer", "expected"),
    [
        ("yes", "yes"),
        ("YES.", "yes"),
        ('"Partially"', "partially"),
        ("The answer is partially correct", "partially"),
        ("not partially", None),  # potato's substring rule says "partially"
        ("Nope", None),  # potato: "no"
        ("yes or no", None),  # ambiguous
        ("I would say no", "no"),
        ("It is not a yes", None),
    ],
)
def test_choice_matching(answer: str, expected: str | None) -> None:
    assert match_choice(answer, CHOICES) == expected


def test_answer_quality_preset_path(scripted: Any) -> None:
    judge = scripted(*choose("yes", "no"))
    ev = RubricDag(preset="answer_quality", judge=judge)
    r = ev.evaluate(inputs="2+2?", outputs="4", reference_outputs="4")
    assert (r.key, r.score, r.value, r.comment) == (
        "answer_quality",
        0.7,
        "correct but unsupported",
        "correct but unsupported",
    )
    assert [(p["node"], p["choice"]) for p in r.metadata["path"]] == [("answers", "yes"), ("grounded", "no")]
    assert r.metadata["path"][0]["question"].startswith("Does the response directly")
    assert r.metadata["path"][1]["reasoning"] == "because no"
    assert r.metadata["usage"]["calls"] == 2
    first = judge.prompt(0)
    assert "Task / input:\n<input>\n2+2?\n</input>" in first and "Output to evaluate:\n<output>\n4\n</output>" in first
    assert "Reference / expected:\n<reference>\n4\n</reference>" in first
    assert "Allowed options: yes, partially, no" in first
    assert judge.requests[0].schema["properties"]["choice"]["enum"] == ["yes", "partially", "no"]


def test_free_text_answers_and_invalid_choice(scripted: Any) -> None:
    judge = scripted("Reasoning...\nPartially")
    r = RubricDag(preset="answer_quality", judge=judge).evaluate(inputs="q", outputs="a")
    assert r.score == 0.5 and r.metadata["path"][0]["choice"] == "partially"
    judge = scripted(*choose("yes"), {"reasoning": "hmm", "choice": "not sure"})
    r = RubricDag(preset="answer_quality", judge=judge).evaluate(inputs="q", outputs="a")
    assert r.score is None and r.error is not None and "no valid choice at node 'grounded'" in r.error
    assert [p["node"] for p in r.metadata["path"]] == ["answers"] and r.metadata["node"] == "grounded"
    assert "not sure" in r.metadata["raw_output"]


def test_judge_error_mid_path(scripted: Any) -> None:
    judge = scripted(*choose("yes"), JudgeRetryableError("timeout"))
    r = RubricDag(preset="answer_quality", judge=judge).evaluate(inputs="q", outputs="a")
    assert r.error is not None and "timeout" in r.error and len(r.metadata["path"]) == 1
    assert r.metadata["usage"]["calls"] == 1


def test_custom_dag_yaml_style_keys(scripted: Any) -> None:
    dag = {
        "key": "politeness",
        "root": "q",
        "nodes": {
            "q": {
                "question": "Polite?",
                "choices": ["yes", "no", 3],
                "branches": {True: {"score": 1}, False: {"score": 0, "label": "rude"}, 3: {"score": 0.5}},
            }
        },
    }
    judge = scripted({"reasoning": "r", "choice": "3"})
    r = RubricDag(dag=dag, judge=judge).evaluate(outputs="hi")
    assert (r.key, r.score, r.value, r.comment) == ("politeness", 0.5, 0.5, "score=0.5")


def test_presets_are_valid_and_build_requests_longest_path() -> None:
    assert len(RUBRIC_PRESETS) >= 4
    for name in RUBRIC_PRESETS:
        ev = RubricDag(preset=name)
        assert ev.key == name
    ev = RubricDag(preset="tool_use_quality")
    reqs = ev.build_requests(trace_from_args("answer", None, "task"))
    assert len(reqs) == 4  # needed -> called -> arguments -> results_used


def _answer_quality() -> dict[str, Any]:
    return copy.deepcopy(RUBRIC_PRESETS["answer_quality"])


@pytest.mark.parametrize(
    ("mutate", "message"),
    [
        (lambda d: d.update(root="nope"), "root 'nope' is not one of the nodes"),
        (lambda d: d["nodes"]["answers"].update(choices=[]), "has no choices"),
        (lambda d: d["nodes"]["answers"].pop("question"), "has no question"),
        (lambda d: d["nodes"]["answers"]["branches"].pop("no"), "choices without a branch: ['no']"),
        (
            lambda d: d["nodes"]["answers"]["branches"].update(maybe={"score": 1}),
            "branch 'maybe' is not one of its choices",
        ),
        (lambda d: d["nodes"]["answers"]["branches"].update(yes="ghost"), "unknown node 'ghost'"),
        (
            lambda d: d["nodes"]["grounded"]["branches"].update(no={"score": 1.5}),
            "leaf score must be a number in [0, 1]",
        ),
        (lambda d: d["nodes"]["grounded"]["branches"].update(no="answers"), "cycle: answers -> grounded -> answers"),
        (lambda d: d["nodes"]["grounded"]["branches"].update(no=42), "must be a node name or a leaf"),
    ],
)
def test_dag_validation(mutate: Any, message: str) -> None:
    dag = _answer_quality()
    mutate(dag)
    with pytest.raises(ConfigError) as info:
        RubricDag(dag=dag)
    assert message in str(info.value) and "rubric_dag" in str(info.value)


def test_dag_or_preset_exactly_one() -> None:
    with pytest.raises(ConfigError, match="exactly one"):
        RubricDag()
    with pytest.raises(ConfigError, match="unknown preset"):
        RubricDag(preset="nope")
    with pytest.raises(ConfigError, match="exactly one"):
        RubricDag(preset="answer_quality", dag=_answer_quality())
    assert parse_dag(_answer_quality(), "x").longest_path()[0].name == "answers"
    assert TrajectoryJudge  # imported for the shared registry check below


def test_trace_without_output_is_an_error(scripted: Any) -> None:
    r = RubricDag(preset="answer_quality", judge=scripted({"choice": "yes"})).evaluate(outputs=None, inputs="q")
    assert r.error is not None and "no output" in r.error
