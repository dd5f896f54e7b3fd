"""Composite: one score from several evaluators (all pass, any passes, or a weighted mean).

Children are built with the registry (``{name, params}`` specs, ``type`` accepted for ``name``,
or a bare name), so anything registered, plugins included, can be composed. Every child result
counts: a multi-result child (json_match) contributes each of its keys. A child result passes
when its score is at or above that child's ``threshold`` (default 0.5). Results that could not be
scored (score None, errors) are left out; when they leave the verdict open the composite is not
scored either.

>>> children = [{"name": "exact_match"}, {"name": "contains", "params": {"substring": "Paris"}}]
>>> ev = Composite(evaluators=children)
>>> ev.evaluate(outputs="Paris", reference_outputs="Paris").score
1.0
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, ClassVar, Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator

from assay.evaluators.base import BaseEvaluator, Evaluator, EvaluatorParams
from assay.exceptions import ConfigError
from assay.records import Result
from assay.traces.model import Trace

if TYPE_CHECKING:
    from assay.judges.pool import JudgePool


class ChildSpec(BaseModel):
    """One child evaluator: registry name and params."""

    model_config = ConfigDict(extra="forbid", frozen=True, populate_by_name=True)

    name: str = Field(validation_alias="type")
    """Registry name (or alias) of the child evaluator; ``type`` is accepted too."""
    params: dict[str, Any] = Field(default_factory=dict)
    """The child's params."""


class CompositeParams(EvaluatorParams):
    evaluators: list[ChildSpec]
    """The children: ``[{name, params}, ...]`` (or bare names)."""
    mode: Literal["all", "any", "weighted_mean"] = "all"
    """all: 1 when every child result passes; any: 1 when one passes; weighted_mean: mean of scores."""
    weights: dict[str, float] = Field(default_factory=dict)
    """weighted_mean: weight per child result key (default 1)."""

    @field_validator("evaluators", mode="before")
    @classmethod
    def _names_are_specs(cls, v: Any) -> Any:
        if isinstance(v, list):
            return [{"name": x} if isinstance(x, str) else x for x in v]
        return v


class Composite(Evaluator[CompositeParams]):
    """Combine child evaluators' results into one score (all | any | weighted_mean)."""

    name: ClassVar[str] = "composite"
    description: ClassVar[str] = "One score from several evaluators: all pass, any passes, or a weighted mean."
    Params = CompositeParams
    example: ClassVar[dict[str, Any]] = {
        "evaluators": [
            {"name": "response_contains"},
            {"name": "max_turns"},
            {"name": "trajectory_match", "params": {"mode": "subsequence"}},
        ],
        "mode": "all",
    }

    def setup(self) -> None:
        from assay.registry import build_evaluator  # the registry imports this package

        p = self.params
        if not p.evaluators:
            raise ConfigError(f"evaluator {self.name!r}: params.evaluators: give at least one child")
        children: list[BaseEvaluator[Any]] = []
        for i, spec in enumerate(p.evaluators):
            try:
                children.append(build_evaluator(spec.name, spec.params))
            except ConfigError as exc:
                raise ConfigError(f"evaluator {self.name!r}: params.evaluators.{i} ({spec.name}): {exc}") from exc
        bad = [w for w in p.weights.values() if w < 0]
        if bad:
            raise ConfigError(f"evaluator {self.name!r}: params.weights must not be negative")
        self.children = children
        # An instance flag: a composite is async exactly when one of its children is.
        self.is_async = any(c.is_async for c in children)  # type: ignore[misc]
        self.reads_scenario = any(c.reads_scenario for c in children)  # type: ignore[misc]

    def calls_judges(self) -> bool:
        return any(c.calls_judges() for c in self.children)

    def use_judges(self, pool: JudgePool) -> None:
        """The children find their judges in ``pool`` too."""
        for c in self.children:
            c.use_judges(pool)
        super().use_judges(pool)

    async def aclose(self) -> None:
        for c in self.children:
            await c.aclose()

    def score(self, trace: Trace) -> Result:
        results = [r for c in self.children for r in c.score_trace(trace)]
        return self.combine(results)

    async def ascore_trace(self, trace: Trace) -> list[Result]:
        results = [r for c in self.children for r in await c.ascore_trace(trace)]
        return [self.combine(results)]

    def _threshold(self, result: Result) -> float:
        for c in self.children:
            if result.key == c.key or result.key.startswith(f"{c.key}:"):
                return c.threshold
        return 0.5

    def combine(self, results: list[Result]) -> Result:
        """The composite result of the children's results."""
        mode = self.params.mode
        md = {"children": [r.to_dict() for r in results]}
        scored = [r for r in results if r.score is not None and r.error is None]
        unscored = len(results) - len(scored)
        if mode == "weighted_mean":
            w = self.params.weights
            total = sum(w.get(r.key, 1.0) for r in scored)
            if not scored or total == 0:
                return Result(self.key, None, None, "no child result was scored", md)
            score = sum(w.get(r.key, 1.0) * (r.score or 0.0) for r in scored) / total
            return Result(self.key, score, score, f"weighted mean of {len(scored)} result(s)", md)
        passing = [r.key for r in scored if (r.score or 0.0) >= self._threshold(r)]
        failing = [r.key for r in scored if r.key not in passing]
        if mode == "all":
            decided: bool | None = False if failing else (None if unscored or not scored else True)
        else:
            decided = True if passing else (None if unscored or not scored else False)
        if decided is None:
            return Result(self.key, None, None, f"{unscored} child result(s) not scored; verdict open", md)
        comment = f"passed: {passing or 'none'}; failed: {failing or 'none'}"
        return Result(self.key, 1.0 if decided else 0.0, decided, comment, md)
