"""Juries and repeated samples of judges: several verdicts on one trace become one result.

A judge evaluator with ``judges: [a, b, c]`` asks each judge, with ``samples: k`` asks each judge
k times; ``aggregate`` turns the verdicts into the result's score:

* ``majority`` (default): 1.0 when more than half of the verdicts pass, else 0.0 (a tie fails);
* ``mean``: the mean score; ``min``: the lowest score (the strictest judge);
* ``all``: 1.0 when every verdict passes, else 0.0.

Verdicts that errored are left out (their count is kept); if every one errored the result is an
error. The result's ``metadata.jury`` keeps every verdict (judge, sample, score, passed, comment or
error) and ``agreement``: the share of verdicts that agree with the aggregate's pass/fail;
``metadata.samples`` the scores in order (what ``assay calibrate --samples`` reads).

>>> votes = [Vote("a", 0, Result("c", 1.0)), Vote("b", 0, Result("c", 0.0)), Vote("c", 0, Result("c", 1.0))]
>>> r = aggregate_votes("c", votes, "majority", threshold=0.5)
>>> r.score, r.metadata["jury"]["agreement"]
(1.0, 0.6666666666666666)
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass
from typing import Any, Literal

import msgspec

from assay.exceptions import EvaluatorError
from assay.records import Result
from assay.traces.model import Trace

__all__ = [
    "AGGREGATES",
    "Aggregate",
    "Vote",
    "aggregate_votes",
    "combine_swapped",
    "judge_label",
    "merge_usage",
    "swapped",
]

Aggregate = Literal["majority", "mean", "min", "all"]
AGGREGATES: tuple[str, ...] = ("majority", "mean", "min", "all")


@dataclass(frozen=True, slots=True)
class Vote:
    """One judge's verdict (sample ``sample`` of judge ``judge``)."""

    judge: str
    sample: int
    result: Result


def judge_label(spec: Any, index: int) -> str:
    """A short name for a judge of a jury: its name, its inline model, or ``judge<i>``."""
    if isinstance(spec, str):
        return spec
    if isinstance(spec, dict) and spec.get("model"):
        return str(spec["model"])
    return str(getattr(spec, "name", None) or f"judge{index}")


def merge_usage(usages: list[dict[str, Any]]) -> dict[str, Any]:
    """Usage dicts of several calls added up (numbers summed; ``cached`` true when all were)."""
    out: dict[str, Any] = {}
    for u in usages:
        for k, v in u.items():
            if isinstance(v, int | float) and not isinstance(v, bool):
                out[k] = out.get(k, 0) + v
    out["cached"] = bool(usages) and all(bool(u.get("cached")) for u in usages)
    return out


def _score(votes: list[Vote], how: str, threshold: float) -> float:
    scores = [v.result.score for v in votes if v.result.score is not None]
    passes = [s >= threshold for s in scores]
    if how == "mean":
        return sum(scores) / len(scores)
    if how == "min":
        return min(scores)
    if how == "all":
        return 1.0 if all(passes) else 0.0
    return 1.0 if 2 * sum(passes) > len(passes) else 0.0


def aggregate_votes(key: str, votes: list[Vote], how: str, *, threshold: float = 0.5) -> Result:
    """One result from the verdicts of a jury (see the module docstring)."""
    ok = [v for v in votes if v.result.error is None]
    scored = [v for v in ok if v.result.score is not None]
    detail = [
        {
            "judge": v.judge,
            "sample": v.sample,
            "score": v.result.score,
            "passed": None if v.result.score is None else v.result.score >= threshold,
            **({"error": v.result.error} if v.result.error else {"comment": (v.result.comment or "")[:500]}),
        }
        for v in votes
    ]
    jury: dict[str, Any] = {"aggregate": how, "judges": len({v.judge for v in votes}), "verdicts": detail}
    if len(ok) < len(votes):
        jury["errors"] = len(votes) - len(ok)
    metadata: dict[str, Any] = {"jury": jury, "samples": [v.result.score for v in votes]}
    orders = [sw.get("consistent") for v in votes if isinstance(sw := v.result.metadata.get("swap"), dict)]
    if orders:  # swap: true on every judge: how many asked in both orders agreed with themselves
        checked = [c for c in orders if isinstance(c, bool)]
        metadata["swap"] = {"consistent": sum(checked), "checked": len(checked)}
    if not ok:
        first = votes[0].result
        jury["agreement"] = None
        return Result(key, None, None, None, {**first.metadata, **metadata}, error=first.error or "every judge failed")
    if scored:
        score: float | None = _score(scored, how, threshold)
        final = score is not None and score >= threshold
        jury["agreement"] = sum(((v.result.score or 0.0) >= threshold) == final for v in scored) / len(scored)
        passes = sum((v.result.score or 0.0) >= threshold for v in scored)
        comment = f"{len(scored)} verdicts: {passes} pass, {len(scored) - passes} fail ({how})"
        value: Any = final
    else:  # labels without scores (categorical prompts): the most common label
        labels = Counter(str(v.result.value) for v in ok)
        value, count = labels.most_common(1)[0]
        score, comment = None, f"{len(ok)} verdicts: {dict(labels)} (most common)"
        jury["agreement"] = count / len(ok)
    return Result(key, score, value, comment, metadata)


def swapped(trace: Trace) -> Trace:
    """The trace with its answer (A, ``{outputs}``) and its reference (B, ``{reference_outputs}``)
    exchanged: the second order of a pairwise question (``swap: true``)."""
    ref = trace.reference
    if ref is None:
        raise EvaluatorError("swap: a pairwise prompt needs a second answer (the reference outputs)")
    back = msgspec.structs.replace(ref, final_output=trace.final_output, messages=trace.messages)
    return msgspec.structs.replace(trace, final_output=ref.final_output, messages=ref.messages, reference=back)


def combine_swapped(first: Result, second: Result, threshold: float = 0.5) -> Result:
    """A pairwise verdict asked in both orders: ``first`` says how much A beats B, ``second`` how
    much B beats A when shown first. Orders that agree give the mean of ``first`` and
    ``1 - second``; orders that disagree are a tie (0.5). ``metadata.swap`` keeps both and
    ``consistent``; an error in either order is the result's error."""
    if first.error is not None or first.score is None or second.error is not None or second.score is None:
        bad = first if first.error is not None or first.score is None else second
        bad.metadata["swap"] = {"first": first.score, "swapped": second.score, "consistent": None}
        return bad
    a, b = first.score, 1.0 - second.score
    consistent = (a >= threshold) == (b >= threshold)
    score = (a + b) / 2 if consistent else 0.5
    metadata = {**first.metadata, "swap": {"first": first.score, "swapped": second.score, "consistent": consistent}}
    comment = first.comment if consistent else f"position-inconsistent: a tie ({first.comment} / {second.comment})"
    return Result(first.key, score, score >= threshold if consistent else "tie", comment, metadata)
