"""The import paths of openevals / agentevals / potato served by assay.compat and assay.evaluators,
and the scores that used to differ from the references (issue 21 §2–§3)."""

from __future__ import annotations

import importlib
import json
import logging
from typing import Any

import anyio
import pytest

from assay.compat._core import EvaluatorResult


@pytest.mark.parametrize(
    ("module", "names"),
    [
        ("assay.compat.openevals.exact", ["exact_match", "exact_match_async"]),
        ("assay.compat.openevals.string.levenshtein", ["levenshtein_distance", "levenshtein_distance_async"]),
        (
            "assay.compat.openevals.string.embedding_similarity",
            ["create_embedding_similarity_evaluator", "create_async_embedding_similarity_evaluator"],
        ),
        ("assay.compat.openevals.code.pyright", ["create_pyright_evaluator", "create_async_pyright_evaluator"]),
        ("assay.compat.openevals.code.mypy", ["create_mypy_evaluator", "create_async_mypy_evaluator"]),
        (
            "assay.compat.openevals.code.e2b.execution",
            ["create_e2b_execution_evaluator", "create_async_e2b_execution_evaluator"],
        ),
        (
            "assay.compat.openevals.code.e2b.pyright",
            ["create_e2b_pyright_evaluator", "create_async_e2b_pyright_evaluator"],
        ),
        (
            "assay.compat.agentevals.graph_trajectory.strict",
            ["graph_trajectory_strict_match", "graph_trajectory_strict_match_async"],
        ),
        (
            "assay.compat.agentevals.graph_trajectory.llm",
            [
                "create_graph_trajectory_llm_as_judge",
                "create_async_graph_trajectory_llm_as_judge",
                "DEFAULT_REF_COMPARE_PROMPT",
            ],
        ),
        (
            "assay.compat.agentevals.graph_trajectory.utils",
            ["extract_langgraph_trajectory_from_thread", "aextract_langgraph_trajectory_from_thread"],
        ),
        ("assay.compat.e2b_code_interpreter", ["Sandbox"]),
        ("assay.evaluators", ["build_evaluator", "list_evaluators"]),
    ],
)
def test_upstream_import_paths_exist(module: str, names: list[str]) -> None:
    mod = importlib.import_module(module)
    for name in names:
        assert hasattr(mod, name), f"{module}.{name}"
        assert name in getattr(mod, "__all__", [name])


def test_exact_match_is_openevals_json_rule() -> None:
    from assay.compat.openevals.exact import exact_match, exact_match_async

    assert exact_match(outputs={"a": 1, "b": [1, 2]}, reference_outputs={"b": [1, 2], "a": 1})["score"] is True
    assert exact_match(outputs=1, reference_outputs=1.0)["score"] is False
    assert exact_match(outputs="a ", reference_outputs="a")["score"] is False
    assert exact_match(outputs=1, reference_outputs="1")["score"] is False
    r = anyio.run(lambda: exact_match_async(outputs=[1], reference_outputs=(1,)))
    assert r == {"key": "exact_match", "score": True, "comment": None, "metadata": None}
    with pytest.raises(ValueError):
        exact_match(outputs=None, reference_outputs="x")


def test_levenshtein_is_openevals_rule() -> None:
    from assay.compat.openevals.string.levenshtein import levenshtein_distance

    assert levenshtein_distance(outputs="", reference_outputs="")["score"] == 1.0
    assert levenshtein_distance(outputs="kitten", reference_outputs="sitting")["score"] == pytest.approx(1 - 3 / 7)
    # a non-string is its json.dumps text ({"a": 1}), as in the reference (0.875)
    assert levenshtein_distance(outputs={"a": 1}, reference_outputs='{"a":1}')["score"] == 0.875


def test_graph_trajectory_strict_match_returns_a_bool_result() -> None:
    from assay.compat.agentevals.graph_trajectory.strict import graph_trajectory_strict_match

    t = {"inputs": [], "results": [], "steps": [["__start__", "agent"], ["agent"]]}
    assert graph_trajectory_strict_match(outputs=t, reference_outputs=t)["score"] is True
    other = {"inputs": [], "results": [], "steps": [["__start__", "agent", "agent"]]}
    r = graph_trajectory_strict_match(outputs=t, reference_outputs=other, unused="ignored")
    assert r["key"] == "graph_trajectory_strict_match" and r["score"] is False


def test_e2b_sandbox_object_is_accepted_with_one_note(caplog: pytest.LogCaptureFixture) -> None:
    import assay.compat.openevals.code.e2b as e2b
    from assay.compat.e2b_code_interpreter import Sandbox
    from assay.compat.openevals.code.e2b.pyright import create_e2b_pyright_evaluator

    e2b._noted = False
    sandbox = Sandbox("OpenEvalsPython")
    with caplog.at_level(logging.WARNING, logger="assay.compat"):
        create_e2b_pyright_evaluator(sandbox=sandbox)
        create_e2b_pyright_evaluator(sandbox=sandbox)
    notes = [r for r in caplog.records if "E2B sandbox" in r.getMessage()]
    assert len(notes) == 1 and "dependencies are not installed" in notes[0].getMessage()


def _trajectory(args: dict[str, Any]) -> list[dict[str, Any]]:
    call = {"id": "1", "type": "function", "function": {"name": "t", "arguments": json.dumps(args)}}
    return [{"role": "user", "content": "x"}, {"role": "assistant", "content": "", "tool_calls": [call]}]


@pytest.mark.parametrize("mode", ["strict", "unordered", "subset", "superset"])
def test_override_path_compares_a_dotted_key(mode: str) -> None:
    from assay.compat.openevals.trajectory.match import create_trajectory_match_evaluator

    ev = create_trajectory_match_evaluator(trajectory_match_mode=mode, tool_args_match_overrides={"t": ["a.b"]})
    assert ev(outputs=_trajectory({"a.b": 1}), reference_outputs=_trajectory({"a.b": 2}))["score"] is False
    assert ev(outputs=_trajectory({"a": {"b": 1}}), reference_outputs=_trajectory({"a": {"b": 2}}))["score"] is False
    assert ev(outputs=_trajectory({"a.b": 1, "x": 1}), reference_outputs=_trajectory({"a.b": 1}))["score"] is True
    assert ev(outputs=_trajectory({"a": {"b": 1}, "x": 1}), reference_outputs=_trajectory({"a": {"b": 1}}))["score"]


def test_json_match_scores_are_openevals_numbers() -> None:
    from assay.compat.openevals.json import create_json_match_evaluator

    per_key = create_json_match_evaluator()(outputs={"a": 1, "b": 2}, reference_outputs={"a": 1, "b": 3})
    assert [(r["key"], r["score"], type(r["score"])) for r in per_key] == [
        ("json_match:a", 1, int),
        ("json_match:b", 0, int),
    ]
    (avg,) = create_json_match_evaluator(aggregator="average")(outputs={"a": 1, "b": 2}, reference_outputs={"a": 1})
    assert avg["score"] == 0.5 and type(avg["score"]) is float  # b has no reference: 0
    (quirk,) = create_json_match_evaluator(aggregator="average")(outputs=[], reference_outputs=[])
    assert quirk["score"] == 1 and type(quirk["score"]) is int  # the reference's quirk, kept
    (nothing,) = create_json_match_evaluator(aggregator="average")(outputs={}, reference_outputs={})
    assert nothing["score"] == 0  # openevals: the mean of no key scores is 0
    (listed,) = create_json_match_evaluator(list_aggregator="average")(
        outputs=[{"a": 1}, {"a": 2}], reference_outputs=[{"a": 1}, {"a": 3}]
    )
    assert listed["score"] == 0.5


def test_catalog_spelling_reads_a_number() -> None:
    r = EvaluatorResult(key="trajectory_accuracy", score=True, comment="fine", metadata=None)
    assert r.score == 1.0 and type(r.score) is float and r["score"] is True and r.reasoning == "fine"


def test_routing_accuracy_reads_the_catalogs_top_level_tool_calls() -> None:
    from assay.registry import build_evaluator

    record = {
        "messages": [{"role": "user", "content": "route me"}, {"role": "assistant", "content": "done"}],
        "tool_calls": [{"name": "delegate_to_billing", "args": {}}],
        "expected_subagent": "billing",
    }
    assert build_evaluator("routing_accuracy").evaluate(outputs=record).score == 1.0
    record["tool_calls"] = [{"name": "delegate_to_support", "args": {}}]
    assert build_evaluator("routing_accuracy").evaluate(outputs=record).score == 0.0


def test_interrupt_rejection_reads_tool_calls_after_approval() -> None:
    from assay.registry import build_evaluator

    record = {
        "messages": [{"role": "user", "content": "delete it"}, {"role": "assistant", "content": "ok"}],
        "tool_calls": [{"name": "delete_db", "args": {}}],
        "tool_calls_after_approval": [{"name": "delete_db", "args": {}}],
        "approval": "reject",
        "sensitive_tool": "delete_db",
    }
    ev = build_evaluator("interrupt_rejection")
    assert ev.evaluate(outputs=record).score == 0.0
    record["tool_calls_after_approval"] = [{"name": "notify_user", "args": {}}]
    assert ev.evaluate(outputs=record).score == 1.0


@pytest.mark.parametrize("factory", ["pyright", "mypy"])
def test_code_checkers_fail_instead_of_raising_on_rejected_cli_args(factory: str) -> None:
    if factory == "pyright":
        pytest.importorskip("pyright")
        from assay.compat.openevals.code.pyright import create_pyright_evaluator as create

        ev = create(pyright_cli_args=["--no-such-flag"])
    else:
        pytest.importorskip("mypy")
        from assay.compat.openevals.code.mypy import create_mypy_evaluator as create

        ev = create(mypy_cli_args=["--no-such-flag"])
    r = ev(outputs="x: int = 1")
    assert r["score"] is False and "no-such-flag" in r["comment"]


def test_potato_build_evaluator_takes_potato_config() -> None:
    from assay.evaluators import build_evaluator, list_evaluators

    assert any(e["name"] == "trajectory_match" for e in list_evaluators())
    config = {"ai_support": {"enabled": True, "endpoint_type": "openai", "ai_config": {"model": "gpt-4o-mini"}}}
    ev = build_evaluator("rubric_dag", {"config": config, "preset": "answer_quality"})
    assert ev.key == "answer_quality"
    assert ev.params.judge == {"provider": "openai", "model": "gpt-4o-mini"}
