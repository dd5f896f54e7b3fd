"""``from openevals.json import create_json_match_evaluator`` (see :mod:`assay.compat`)."""

from __future__ import annotations

from typing import Any

from assay.compat._core import CompatEvaluator, judge_params, wrap
from assay.evaluators.json_match import JsonMatch
from assay.evaluators.judge_base import shorthand_judge


def _build(is_async: bool, params: dict[str, Any]) -> CompatEvaluator:
    judge, model = params.pop("judge"), params.pop("model")
    if judge is not None or model is not None:
        spec = judge_params(judge, model)
        params["judge"] = shorthand_judge(spec["model"]) if "model" in spec else spec["judge"]
    params["exclude_keys"] = params["exclude_keys"] or []
    params["rubric"] = params["rubric"] or {}
    return wrap(JsonMatch(params), is_async=is_async, many=True)


def create_json_match_evaluator(
    *,
    aggregator: str | None = None,
    list_aggregator: str = "all",
    rubric: dict[str, str] | None = None,
    exclude_keys: list[str] | None = None,
    judge: Any = None,
    model: str | None = None,
    use_reasoning: bool = True,
    list_match_mode: str = "same_elements",
) -> CompatEvaluator:
    """Per-key comparison of JSON objects (or lists of them); returns a list of result dicts, one
    per key (``json_match:<key>``) or one aggregate (``json_match:<aggregator>``). ``rubric`` keys
    are graded by the judge. See docs/evaluators.md, json_match."""
    return _build(False, dict(locals()))


def create_async_json_match_evaluator(
    *,
    aggregator: str | None = None,
    list_aggregator: str = "all",
    rubric: dict[str, str] | None = None,
    exclude_keys: list[str] | None = None,
    judge: Any = None,
    model: str | None = None,
    use_reasoning: bool = True,
    list_match_mode: str = "same_elements",
) -> CompatEvaluator:
    """:func:`create_json_match_evaluator`, awaited."""
    return _build(True, dict(locals()))


__all__ = ["create_async_json_match_evaluator", "create_json_match_evaluator"]
