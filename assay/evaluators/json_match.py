"""JSON (structured output) match: per-key comparison of a JSON object, or a list of objects, with
the reference, with openevals' aggregators and list pairing modes.

* One result per top-level key (``json_match:<key>``), or one aggregated result
  (``json_match:average`` / ``json_match:all``).
* A key present on one side only scores 0; excluded keys are ignored; values compare by deep JSON
  equality (key order irrelevant, list order relevant, ``1 == 1.0``, ``True != 1``).
* Lists of objects are paired item by item (``list_match_mode``) and each key's per-item scores are
  combined with ``list_aggregator``.
* ``rubric`` keys are graded by an LLM judge through :meth:`JsonMatch.ascore_rubric` (the judges
  module plugs its scorer in there); everything else is deterministic.

Deliberate differences from openevals (documented in docs/evaluators.md): with
``aggregator=None``, a key's list score is aggregated over the items where the key was compared
(openevals also counts items where the key is absent on *both* sides, as 0, so two identical lists
of objects with different key sets score below 1); two empty objects score 1 under
``aggregator="average"`` (openevals: 0); an empty item left unpaired is reported under the key
``__empty_item`` (openevals: ``__openevals_empty_record``); a JSON string output is parsed first.

>>> ev = JsonMatch(aggregator="all", list_aggregator="average", exclude_keys=["a"])
>>> out = [{"a": "Mango, Bananas", "b": 2}, {"a": "Apples", "b": 2, "c": [1, 2, 3]}]
>>> ref = [{"a": "Mango, Bananas", "b": 2}, {"a": "Apples", "b": 2, "c": [1, 2, 4]}]
>>> [(r.key, r.score) for r in ev.evaluate(outputs=out, reference_outputs=ref)]
[('json_match:all', 0.5)]
"""

from __future__ import annotations

from typing import Any, ClassVar, Literal

import anyio
import orjson
from pydantic import Field

from assay.evaluators.base import EvaluatorParams, MultiEvaluator
from assay.evaluators.heuristic import json_equal
from assay.evaluators.json_rubric_item import RubricItem
from assay.exceptions import ConfigError, EvaluatorError
from assay.records import Result
from assay.traces.model import Trace

EMPTY_ITEM = "__empty_item"


class JsonMatchParams(EvaluatorParams):
    aggregator: Literal["average", "all"] | None = None
    """None: one result per key; average: the mean of the key scores; all: 1 only if every key scores 1."""
    list_aggregator: Literal["average", "all"] = "all"
    """For lists of objects: how per-item scores combine (average, or all = 1 only if every item scores 1)."""
    list_match_mode: Literal["same_elements", "subset", "superset", "ordered"] = "same_elements"
    """How output items pair with reference items (see docs/evaluators.md)."""
    exclude_keys: list[str] = Field(default_factory=list)
    """Top-level keys to ignore on both sides."""
    rubric: dict[str, str] = Field(default_factory=dict)
    """key -> criteria: these keys are graded by the LLM judge instead of compared exactly."""
    judge: Any = None
    """The judge that grades rubric keys (required with a rubric): a name from the run file's
    ``judges:`` section, an inline endpoint dict, or (library use) a Judge object."""
    use_reasoning: bool = True
    """Ask the judge to reason before each rubric verdict (the reasoning becomes the comment)."""
    empty_average: float = 1.0
    """The score of an ``average`` over nothing (an object with no keys, a list with no items):
    1.0, nothing differs; openevals gives 0, which ``assay.compat`` asks for."""


Scores = list[dict[str, float | None]]  # per item: key -> score (None = pending rubric grade)


class JsonMatch(MultiEvaluator[JsonMatchParams]):
    """Per-key exact match of structured output (objects or lists of objects), openevals-style."""

    name: ClassVar[str] = "json_match"
    reads_scenario: ClassVar[bool] = False
    description: ClassVar[str] = (
        "Per-key match of a JSON object (or list of objects) with the reference, with aggregators."
    )
    Params = JsonMatchParams
    example: ClassVar[dict[str, Any]] = {
        "aggregator": "average",
        "list_aggregator": "all",
        "exclude_keys": ["id"],
    }

    def setup(self) -> None:
        p = self.params
        if p.rubric and not p.judge:
            raise ConfigError(f"evaluator {self.name!r}: params.rubric: json_match rubric keys need a judge")
        if p.judge and not p.rubric:
            raise ConfigError(f"evaluator {self.name!r}: params.judge is only used with a rubric")
        self._ignored = frozenset(p.exclude_keys) | frozenset(p.rubric)
        # An instance flag: rubric keys are graded by a judge, so the pipeline must await ascore_trace.
        self.is_async = bool(p.rubric)  # type: ignore[misc]
        if p.rubric:  # judge calls: the pipeline must schedule it as an async evaluator
            self.is_async = True  # type: ignore[misc]

    def result_keys(self) -> list[str]:
        agg = self.params.aggregator
        return [f"{self.key}:{agg}"] if agg else [f"{self.key}:"]

    # -- the rubric hook -------------------------------------------------------------------------

    async def ascore_rubric(self, items: list[RubricItem]) -> list[tuple[float | None, str | None]]:
        """Grade rubric keys: one ``(score in [0, 1], comment)`` per item, in order.

        One judge call per rubric key without an aggregator, one for all keys with one
        (see :mod:`assay.evaluators.json_rubric`).
        """
        from assay.evaluators.json_rubric import grade_rubric, resolve

        return await grade_rubric(
            items,
            resolve(self.params.judge, self.judges()),
            aggregated=self.params.aggregator is not None,
            use_reasoning=self.params.use_reasoning,
        )

    def build_requests(self, trace: Trace) -> list[Any]:
        """The judge requests the rubric keys of ``trace`` would need (for ``--dry-run``)."""
        if not self.params.rubric:
            return []
        prepared = self._prepare(trace)
        if isinstance(prepared, list):
            return []
        from assay.evaluators.json_rubric import build_rubric_requests

        return build_rubric_requests(
            prepared[2],
            aggregated=self.params.aggregator is not None,
            use_reasoning=self.params.use_reasoning,
        )

    # -- scoring ---------------------------------------------------------------------------------

    def score_trace(self, trace: Trace) -> list[Result]:
        if self.params.rubric:
            return anyio.run(self.ascore_trace, trace)
        prepared = self._prepare(trace)
        if isinstance(prepared, list):
            return prepared
        scores, is_list, _ = prepared
        return self._aggregate(scores, is_list)

    async def ascore_trace(self, trace: Trace) -> list[Result]:
        prepared = self._prepare(trace)
        if isinstance(prepared, list):
            return prepared
        scores, is_list, rubric_items = prepared
        comments: dict[tuple[int, str], str] = {}
        if rubric_items:
            try:
                graded = await self.ascore_rubric(rubric_items)
            except EvaluatorError as exc:
                return [Result.from_error(self._agg_key(), exc)]
            for item, (score, comment) in zip(rubric_items, graded, strict=True):
                scores[item.index][item.key] = score
                if comment:
                    comments[(item.index, item.key)] = comment
        return self._aggregate(scores, is_list, comments)

    def _agg_key(self) -> str:
        agg = self.params.aggregator
        return f"{self.key}:{agg}" if agg else self.key

    def _prepare(self, trace: Trace) -> list[Result] | tuple[Scores, bool, list[RubricItem]]:
        if trace.reference is None:
            return [Result(self._agg_key(), None, None, "no reference output to compare with")]
        out = _as_json(trace.final_output)
        ref = _as_json(trace.reference.final_output)
        if isinstance(out, dict) and isinstance(ref, dict):
            rubric: list[RubricItem] = []
            return [self._score_pair(0, out, ref, rubric)], False, rubric
        if isinstance(out, list) and isinstance(ref, list):
            bad = next((x for x in (*out, *ref) if not isinstance(x, dict)), _OK)
            if bad is not _OK:
                return [Result.from_error(self._agg_key(), f"list items must be objects, got {_kind(bad)}")]
            rubric = []
            return self._score_lists(out, ref, rubric), True, rubric
        return [
            Result.from_error(
                self._agg_key(),
                f"json_match compares an object with an object or a list with a list; "
                f"got {_kind(out)} output and {_kind(ref)} reference",
            )
        ]

    def _score_pair(
        self, index: int, out: dict[str, Any], ref: dict[str, Any], rubric: list[RubricItem]
    ) -> dict[str, float | None]:
        excluded = self.params.exclude_keys
        criteria = self.params.rubric
        scores: dict[str, float | None] = {}
        for k, v in out.items():
            if k in excluded:
                continue
            if k not in ref:
                scores[k] = 0.0
            elif k in criteria:
                scores[k] = None
                rubric.append(RubricItem(index, k, criteria[k], v, ref[k]))
            else:
                scores[k] = 1.0 if json_equal(v, ref[k]) else 0.0
        for k in ref:
            if k not in excluded and k not in out:
                scores[k] = 0.0
        return scores

    def _unpaired(self, item: dict[str, Any]) -> dict[str, float | None]:
        keys = [k for k in item if k not in self.params.exclude_keys]
        return dict.fromkeys(keys, 0.0) if keys else {EMPTY_ITEM: 0.0}

    def _compared(self, item: dict[str, Any]) -> dict[str, Any]:
        return {k: v for k, v in item.items() if k not in self._ignored}

    def _overlap(self, a: dict[str, Any], b: dict[str, Any]) -> int:
        return sum(1 for k, v in a.items() if k not in self._ignored and k in b and json_equal(v, b[k]))

    def _greedy(self, drivers: list[dict[str, Any]], pool: list[dict[str, Any]]) -> list[int | None]:
        """Each driver item, in order, takes the free pool item with the most equal keys (first wins)."""
        free = list(range(len(pool)))
        chosen: list[int | None] = []
        for d in drivers:
            if not free:
                chosen.append(None)
                continue
            best = max(free, key=lambda j: (self._overlap(d, pool[j]), -j))
            free.remove(best)
            chosen.append(best)
        return chosen

    def _exact_pairs(self, out: list[dict[str, Any]], ref: list[dict[str, Any]]) -> list[int | None] | None:
        if len(out) != len(ref):
            return None
        free = list(range(len(ref)))
        chosen: list[int | None] = []
        for o in out:
            co = self._compared(o)
            j = next((j for j in free if json_equal(co, self._compared(ref[j]))), None)
            if j is None:
                return None
            free.remove(j)
            chosen.append(j)
        return chosen

    def _score_lists(self, out: list[dict[str, Any]], ref: list[dict[str, Any]], rubric: list[RubricItem]) -> Scores:
        mode = self.params.list_match_mode
        scores: Scores = []
        if mode == "ordered":
            for i in range(max(len(out), len(ref))):
                if i < len(out) and i < len(ref):
                    scores.append(self._score_pair(i, out[i], ref[i], rubric))
                else:
                    scores.append(self._unpaired(out[i] if i < len(out) else ref[i]))
            return scores
        if mode == "superset":
            for j, partner in enumerate(self._greedy(ref, out)):
                if partner is None:
                    scores.append(self._unpaired(ref[j]))
                else:
                    scores.append(self._score_pair(len(scores), out[partner], ref[j], rubric))
            return scores
        pairs = (self._exact_pairs(out, ref) if mode == "same_elements" else None) or self._greedy(out, ref)
        for i, partner in enumerate(pairs):
            if partner is None:
                scores.append(self._unpaired(out[i]))
            else:
                scores.append(self._score_pair(i, out[i], ref[partner], rubric))
        if mode == "same_elements":
            taken = set(pairs)
            scores.extend(self._unpaired(r) for j, r in enumerate(ref) if j not in taken)
        return scores

    # -- aggregation -----------------------------------------------------------------------------

    def _combine(self, values: list[float], how: str, empty: float) -> float:
        if not values:
            return empty if how == "all" else self.params.empty_average
        if how == "all":
            return 1.0 if all(v == 1.0 for v in values) else 0.0
        return sum(values) / len(values)

    def _aggregate(
        self, scores: Scores, is_list: bool, comments: dict[tuple[int, str], str] | None = None
    ) -> list[Result]:
        p = self.params
        comments = comments or {}
        if p.aggregator is None:
            per_key: dict[str, list[float]] = {}
            for item in scores:
                for k, s in item.items():
                    per_key.setdefault(k, []).append(0.0 if s is None else s)
            results = []
            for k in sorted(per_key):
                values = per_key[k]
                score = self._combine(values, p.list_aggregator, 1.0) if is_list else values[0]
                comment = "; ".join(c for (i, key), c in sorted(comments.items()) if key == k) or None
                md: dict[str, Any] = {"item_scores": values} if is_list else {}
                results.append(Result(f"{self.key}:{k}", score, score == 1.0, comment, md))
            return results
        per_item = [
            self._combine([0.0 if s is None else s for s in item.values()], p.aggregator, 1.0) for item in scores
        ]
        score = self._combine(per_item, p.list_aggregator, 1.0) if is_list else per_item[0]
        md = {"item_scores": per_item} if is_list else {"key_scores": scores[0]}
        comment = "; ".join(f"{k}: {c}" for (_, k), c in sorted(comments.items())) or None
        return [Result(f"{self.key}:{p.aggregator}", score, score == 1.0, comment, md)]


_OK = object()


def _kind(v: Any) -> str:
    return "null" if v is None else type(v).__name__


def _as_json(value: Any) -> Any:
    """Structured output given as JSON text is parsed (an LLM's raw answer); other values pass."""
    if isinstance(value, str):
        try:
            parsed = orjson.loads(value)
        except orjson.JSONDecodeError:
            return value
        return parsed if isinstance(parsed, dict | list) else value
    return value
