"""composite, python (user functions) and entry-point plugins."""

from __future__ import annotations

import sys
from importlib.metadata import EntryPoint
from pathlib import Path
from typing import Any

import pytest

import assay.registry as registry
from assay.evaluators import Composite, PythonEvaluator
from assay.exceptions import ConfigError
from assay.records import Result
from assay.registry import build_evaluator, evaluator_names
from assay.traces.model import Trace

ROOT = Path(__file__).resolve().parents[3]

# -- composite -----------------------------------------------------------------------------------


def test_composite_all_any_weighted() -> None:
    children = [{"name": "exact_match"}, {"type": "contains", "params": {"substring": "Paris"}}, "edit_distance"]
    out, ref = "Paris!", "Paris"
    r_all = Composite(evaluators=children, mode="all").evaluate(outputs=out, reference_outputs=ref)
    assert r_all.score == 0.0 and "exact_match" in (r_all.comment or "")
    r_any = Composite(evaluators=children, mode="any").evaluate(outputs=out, reference_outputs=ref)
    assert r_any.score == 1.0
    weighted = Composite(evaluators=children, mode="weighted_mean", weights={"edit_distance": 2, "contains": 0})
    r = weighted.evaluate(outputs=out, reference_outputs=ref)
    assert r.score == pytest.approx((0.0 + 2 * (1 - 1 / 6)) / 3)
    assert [c["key"] for c in r.metadata["children"]] == ["exact_match", "contains", "edit_distance"]


def test_composite_uses_child_thresholds_and_multi_results() -> None:
    children = [
        {"name": "edit_distance", "params": {"threshold": 0.9}},
        {"name": "json_match"},
    ]
    ev = Composite(evaluators=children)
    r = ev.score(Trace(final_output={"a": 1}, reference=Trace(final_output={"a": 1})))
    # edit distance is 1.0 and json_match:a is 1.0: both pass
    assert r.score == 1.0
    r = ev.score(Trace(final_output={"a": 1, "bb": 2}, reference=Trace(final_output={"a": 1, "b": 2})))
    assert r.score == 0.0  # json_match:bb fails; edit distance below its 0.9 threshold


def test_composite_with_unscored_children() -> None:
    ev = Composite(evaluators=["exact_match", {"name": "contains", "params": {"substring": "x"}}], mode="all")
    r = ev.evaluate(outputs="x")  # exact_match has no reference: verdict depends on it
    assert r.score is None
    r = ev.evaluate(outputs="y")  # contains fails: all cannot pass whatever exact_match says
    assert r.score == 0.0


def test_composite_bad_child_names_the_child() -> None:
    with pytest.raises(ConfigError, match=r"evaluators\.1 \(regex_match\)"):
        Composite(evaluators=["exact_match", {"name": "regex_match", "params": {"pattern": "("}}])
    with pytest.raises(ConfigError, match="unknown evaluator"):
        Composite(evaluators=["no_such_thing"])


def test_composite_of_async_children_is_async() -> None:
    async def judge(outputs: Any) -> bool:
        return outputs == "ok"

    ev = Composite(evaluators=[{"name": "python", "params": {"function": judge}}, "json_valid"])
    assert ev.is_async
    assert ev.evaluate(outputs="ok").score == 0.0  # "ok" is not JSON
    assert Composite(evaluators=["json_valid"]).is_async is False


# -- python evaluator ----------------------------------------------------------------------------


def test_python_return_shapes() -> None:
    cases: list[tuple[Any, list[tuple[str, float | None]]]] = [
        (True, [("f", 1.0)]),
        (0.25, [("f", 0.25)]),
        (None, [("f", None)]),
        (7, [("f", None)]),  # outside [0, 1]: kept as value
        ((1, "why"), [("f", 1.0)]),
        ({"score": False, "reasoning": "r"}, [("f", 0.0)]),
        ({"key": "k", "score": 0.5}, [("k", 0.5)]),
        ({"a": 1, "b": [True, {"score": 0}]}, [("a", 1.0), ("b", 1.0), ("b", 0.0)]),
        (Result("x", 0.75), [("x", 0.75)]),
        ([True, {"key": "z", "score": 0}], [("f", 1.0), ("z", 0.0)]),
    ]
    for returned, expected in cases:

        def f(outputs: Any, _r: Any = returned) -> Any:
            return _r

        got = [(r.key, r.score) for r in PythonEvaluator(function=f).evaluate(outputs="x")]
        assert got == expected, returned


def test_python_bad_returns_and_exceptions_are_error_results() -> None:
    [r] = PythonEvaluator(function=lambda outputs: {"a": {"no": "score"}}).evaluate(outputs="x")
    assert r.error is not None and "without 'score'" in r.error
    [r] = PythonEvaluator(function=lambda outputs: "text").evaluate(outputs="x")
    assert r.error is not None

    def boom(outputs: Any) -> bool:
        raise RuntimeError("kaput")

    [r] = PythonEvaluator(function=boom).evaluate(outputs="x")
    assert r.score is None and r.error == "RuntimeError: kaput" and r.key == "boom"


def test_python_passes_only_the_arguments_the_function_takes() -> None:
    seen: dict[str, Any] = {}

    def takes_trace(outputs: Any, trace: Trace, budget: int) -> bool:
        seen.update(outputs=outputs, n_calls=len(trace.tool_calls()), budget=budget)
        return True

    msgs = [
        {"role": "user", "content": "q"},
        {"role": "assistant", "tool_calls": [{"id": "1", "function": {"name": "t", "arguments": "{}"}}]},
        {"role": "assistant", "content": "done"},
    ]
    PythonEvaluator(function=takes_trace, kwargs={"budget": 3}).evaluate(outputs=msgs)
    assert seen["n_calls"] == 1 and seen["budget"] == 3
    assert seen["outputs"][-1] == {"role": "assistant", "content": "done"}

    def everything(**kw: Any) -> float:
        seen["kw"] = sorted(kw)
        return 1.0

    PythonEvaluator(function=everything).evaluate(outputs="x", reference_outputs="y", inputs="z")
    assert seen["kw"] == ["context", "inputs", "metadata", "outputs", "reference_outputs", "scenario", "trace"]


def test_python_async_function_and_module_path(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    (tmp_path / "user_evals.py").write_text(
        "async def same(outputs, reference_outputs):\n"
        "    return {'key': 'same', 'score': outputs == reference_outputs}\n"
    )
    monkeypatch.syspath_prepend(str(tmp_path))
    ev = build_evaluator("python", {"function": "user_evals:same"})
    assert ev.is_async and ev.key == "same"
    assert [r.score for r in ev.evaluate_all(outputs="a", reference_outputs="a")] == [1.0]
    with pytest.raises(ConfigError, match="cannot load"):
        build_evaluator("python", {"function": "user_evals:nope"})


# -- entry-point plugins -------------------------------------------------------------------------


@pytest.fixture
def plugin_installed(monkeypatch: pytest.MonkeyPatch) -> Any:
    """Simulate ``pip install examples/plugin``: its source on sys.path and its entry point listed."""
    monkeypatch.syspath_prepend(str(ROOT / "examples" / "plugin" / "src"))
    ep = EntryPoint(name="word_count", value="assay_wordcount:WordCount", group="assay.evaluators")
    real = registry.entry_points

    def fake_entry_points(*, group: str) -> Any:
        return [ep] if group == "assay.evaluators" else real(group=group)

    monkeypatch.setattr(registry, "entry_points", fake_entry_points)
    registry._table.cache_clear()
    registry.get_evaluator_class.cache_clear()
    yield
    monkeypatch.undo()
    registry._table.cache_clear()
    registry.get_evaluator_class.cache_clear()
    sys.modules.pop("assay_wordcount", None)


def test_example_plugin_through_the_entry_point(plugin_installed: Any) -> None:
    assert "word_count" in evaluator_names()
    ev = build_evaluator("word_count", {"max_words": 3})
    assert ev.evaluate(outputs="one two three").score == 1.0
    r = ev.evaluate(outputs="one two three four")
    assert r.score == 0.0 and r.value == 4
    with pytest.raises(ConfigError, match="max_words"):
        build_evaluator("word_count", {"max_words": 0})


def test_without_the_entry_point_the_plugin_is_unknown() -> None:
    registry._table.cache_clear()
    assert "word_count" not in evaluator_names()
