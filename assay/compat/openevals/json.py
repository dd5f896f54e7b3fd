"""``from openevals.json import create_json_match_evaluator`` (see :mod:`assay.compat`)."""

from __future__ import annotations

from typing import Any, cast

from assay.compat._core import (
    AsyncCompatEvaluator,
    CompatEvaluator,
    EvaluatorResult,
    compat_errors,
    judge_params,
    openevals_result,
)
from assay.compat.openevals.types import EvaluatorResult as TypedResult
from assay.evaluators.json_match import JsonMatch
from assay.evaluators.judge_base import shorthand_judge
from assay.records import Result


def openevals_number(result: Result, params: dict[str, Any]) -> EvaluatorResult:
    """A json_match result with openevals' score types: ``1``/``0`` (ints) for exact-compared
    keys and ``all`` aggregates, a float after averaging, a bool for a rubric key."""
    metadata = result.metadata or {}
    base = result.key.partition(":")[2]
    shaped: EvaluatorResult = openevals_result(result, comment=base in params["rubric"])  # a rubric's reasoning
    if result.score is None:
        return shaped
    is_list = "item_scores" in metadata

    averaged = params["aggregator"] == "average" or (is_list and params["list_aggregator"] == "average")
    if params["aggregator"] is None and base in params["rubric"]:
        shaped["score"] = bool(result.value)
    elif params["aggregator"] is not None and is_list and params["list_aggregator"] == "all":
        shaped["score"] = int(result.score == 1.0)
    elif averaged:
        shaped["score"] = float(result.score)
    else:
        shaped["score"] = int(result.score == 1.0)
    return shaped


class _JsonMatchShape:
    params: dict[str, Any]

    def _shape(self, results: list[Result]) -> Any:
        return [openevals_number(r, self.params) for r in results]


class JsonMatchCompat(_JsonMatchShape, CompatEvaluator[list[TypedResult]]):
    """openevals' json match evaluator function: a list of results."""


class AsyncJsonMatchCompat(_JsonMatchShape, AsyncCompatEvaluator[list[TypedResult]]):
    """Its async twin."""


def _build(is_async: bool, params: dict[str, Any]) -> Any:
    with compat_errors():  # a bad argument is a ValueError, as in openevals
        return _build_json(is_async, params)


def _build_json(is_async: bool, params: dict[str, Any]) -> Any:
    judge, model = params.pop("judge"), params.pop("model")
    if judge is not None or model is not None:
        spec = judge_params(judge, model)
        params["judge"] = shorthand_judge(spec["model"]) if "model" in spec else spec["judge"]
    params["exclude_keys"] = params["exclude_keys"] or []
    params["rubric"] = params["rubric"] or {}
    params["empty_average"] = 0.0  # openevals: the mean of no scores is 0 ({} vs {} averaged)
    cls = AsyncJsonMatchCompat if is_async else JsonMatchCompat
    shaped = cls(JsonMatch(params), many=True)
    del params["empty_average"]
    shaped.params = params
    return shaped


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
) -> CompatEvaluator[list[TypedResult]]:
    """Per-key comparison of JSON objects (or lists of them); returns a list of result dicts, one
    per key (``json_match:<key>``) or one aggregate (``json_match:<aggregator>``). ``rubric`` keys
    are graded by the judge. See docs/evaluators.md, json_match."""
    return cast("CompatEvaluator[list[TypedResult]]", _build(False, dict(locals())))


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
) -> AsyncCompatEvaluator[list[TypedResult]]:
    """:func:`create_json_match_evaluator`, awaited."""
    return cast("AsyncCompatEvaluator[list[TypedResult]]", _build(True, dict(locals())))


__all__ = ["create_async_json_match_evaluator", "create_json_match_evaluator"]
