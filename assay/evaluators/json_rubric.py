"""LLM grading of ``json_match`` rubric keys (openevals' ``rubric``, §4.4 of the semantics).

Each rubric key has criteria in words; the judge decides, per key, whether the output's value
meets them (seeing the reference value too). Without an aggregator there is one judge call per
rubric key (covering every list item that has it); with an aggregator, one call for all rubric
keys. The verdict schema has one property per graded field (``key``, or ``key_<index>`` for lists
of objects): a boolean, or ``{reasoning, score}`` with ``use_reasoning``. Booleans are read
strictly (``"false"`` is False); a missing or non-boolean verdict is a VerdictParseError.
"""

from __future__ import annotations

from collections import defaultdict
from typing import TYPE_CHECKING, Any

from assay.evaluators.json_rubric_item import RubricItem
from assay.evaluators.judge_render import as_text, format_template
from assay.exceptions import VerdictParseError
from assay.judges.base import Judge, JudgeRequest
from assay.judges.prompts import load_template
from assay.judges.verdict import coerce_bool, reasoning_property, response_object

if TYPE_CHECKING:
    from assay.judges.pool import JudgePool

Graded = tuple[float | None, str | None]


def field_names(items: list[RubricItem]) -> list[str]:
    """The schema property name of each item: ``key`` for a single object, ``key_<index>`` for lists."""
    counts: dict[str, int] = defaultdict(int)
    for it in items:
        counts[it.key] += 1
    single = all(it.index == 0 for it in items)
    return [it.key if single and counts[it.key] == 1 else f"{it.key}_{it.index}" for it in items]


def rubric_request(
    items: list[RubricItem], names: list[str], *, use_reasoning: bool, max_tokens: int | None = None
) -> JudgeRequest:
    """One judge request grading ``items`` (whose schema properties are ``names``)."""
    criteria: dict[str, str] = {}
    for it in items:
        criteria.setdefault(it.key, it.criteria)
    values = {
        "rubric": "\n".join(f"Key: {k}, Criteria: {c}" for k, c in criteria.items()),
        "outputs": "\n".join(f"{n}: {as_text(it.output)}" for n, it in zip(names, items, strict=True)),
        "reference_outputs": "\n".join(f"{n}: {as_text(it.reference)}" for n, it in zip(names, items, strict=True)),
    }
    props: dict[str, Any] = {}
    for n, it in zip(names, items, strict=True):
        desc = f"Does the output's value for {n} meet the criteria for key {it.key}?"
        if use_reasoning:
            props[n] = {
                "type": "object",
                "additionalProperties": False,
                "properties": {
                    "reasoning": reasoning_property(),
                    "score": {"type": "boolean", "description": desc},
                },
                "required": ["reasoning", "score"],
            }
        else:
            props[n] = {"type": "boolean", "description": desc}
    schema = {"type": "object", "additionalProperties": False, "properties": props, "required": list(props)}
    messages = [
        {"role": "system", "content": load_template("_json_rubric_system")},
        {"role": "user", "content": format_template(load_template("_json_rubric_user"), values)},
    ]
    return JudgeRequest(messages, schema, "structured_match_score", max_tokens, {"evaluator": "json_match"})


def rubric_batches(items: list[RubricItem], *, aggregated: bool) -> list[list[int]]:
    """Item indices per judge call: all at once with an aggregator, else one call per rubric key."""
    if aggregated:
        return [list(range(len(items)))] if items else []
    by_key: dict[str, list[int]] = {}
    for i, it in enumerate(items):
        by_key.setdefault(it.key, []).append(i)
    return list(by_key.values())


def build_rubric_requests(items: list[RubricItem], *, aggregated: bool, use_reasoning: bool) -> list[JudgeRequest]:
    """The requests ``grade_rubric`` would send (for dry runs)."""
    names = field_names(items)
    return [
        rubric_request([items[i] for i in batch], [names[i] for i in batch], use_reasoning=use_reasoning)
        for batch in rubric_batches(items, aggregated=aggregated)
    ]


def _read(obj: dict[str, Any], name: str, raw: str) -> Graded:
    if name not in obj:
        raise VerdictParseError(f"the rubric verdict has no field {name!r}", raw=raw)
    value = obj[name]
    reasoning: str | None = None
    if isinstance(value, dict):
        reasoning = value.get("reasoning") if isinstance(value.get("reasoning"), str) else None
        value = value.get("score")
    b = coerce_bool(value)
    if b is None:
        raise VerdictParseError(f"rubric verdict {name}={value!r} is not a boolean", raw=raw)
    return (1.0 if b else 0.0), reasoning


async def grade_rubric(items: list[RubricItem], judge: Judge, *, aggregated: bool, use_reasoning: bool) -> list[Graded]:
    """Grade every rubric item with ``judge``: one ``(score, comment)`` per item, in order."""
    names = field_names(items)
    graded: list[Graded | None] = [None] * len(items)
    for batch in rubric_batches(items, aggregated=aggregated):
        request = rubric_request([items[i] for i in batch], [names[i] for i in batch], use_reasoning=use_reasoning)
        response = await judge.complete(request)
        obj, _ = response_object(response)
        raw = (response.text or "")[:4000]
        for i in batch:
            graded[i] = _read(obj, names[i], raw)
    return [g if g is not None else (None, None) for g in graded]


def resolve(spec: Any, pool: JudgePool | None = None) -> Judge:
    """A Judge object as is, else the named/inline endpoint found in ``pool`` (see ``find_judge``)."""
    from assay.evaluators.judge_base import find_judge

    return find_judge(spec, "json_match", pool=pool)


__all__ = [
    "build_rubric_requests",
    "field_names",
    "grade_rubric",
    "resolve",
    "rubric_batches",
    "rubric_request",
]
