"""Aggregating a jury's verdicts and a pairwise verdict asked in both orders."""

from __future__ import annotations

import pytest

from assay.evaluators.jury import Vote, aggregate_votes, combine_swapped, swapped
from assay.exceptions import EvaluatorError
from assay.records import Result
from assay.traces.model import Trace


def votes(*scores: float | None, errors: int = 0) -> list[Vote]:
    out = [Vote(f"j{i}", 0, Result("k", s)) for i, s in enumerate(scores)]
    out += [Vote(f"e{i}", 0, Result("k", None, error="judge down")) for i in range(errors)]
    return out


@pytest.mark.parametrize(
    ("how", "scores", "expected"),
    [
        ("majority", (1.0, 1.0, 0.0), 1.0),
        ("majority", (1.0, 0.0), 0.0),  # a tie fails
        ("mean", (1.0, 0.5, 0.0), 0.5),
        ("min", (0.9, 0.7, 0.8), 0.7),
        ("all", (1.0, 1.0, 0.4), 0.0),
        ("all", (1.0, 0.6, 0.9), 1.0),
    ],
)
def test_aggregates(how: str, scores: tuple[float, ...], expected: float) -> None:
    r = aggregate_votes("k", votes(*scores), how)
    assert r.score == pytest.approx(expected) and r.metadata["jury"]["aggregate"] == how
    assert len(r.metadata["jury"]["verdicts"]) == len(scores)


def test_errors_are_left_out_and_counted_all_errors_is_an_error() -> None:
    r = aggregate_votes("k", votes(1.0, 1.0, errors=1), "majority")
    assert r.score == 1.0 and r.metadata["jury"]["errors"] == 1 and r.metadata["jury"]["agreement"] == 1.0
    failed = aggregate_votes("k", votes(errors=3), "majority")
    assert failed.score is None and failed.error == "judge down"


def test_categorical_verdicts_take_the_most_common_label() -> None:
    vs = [Vote(f"j{i}", 0, Result("k", None, label)) for i, label in enumerate(["billing", "billing", "refund"])]
    r = aggregate_votes("k", vs, "majority")
    assert r.value == "billing" and r.metadata["jury"]["agreement"] == pytest.approx(2 / 3)


def test_swap_orders_that_disagree_are_a_tie() -> None:
    agree = combine_swapped(Result("k", 1.0, True), Result("k", 0.0, False))
    assert (agree.score, agree.metadata["swap"]["consistent"]) == (1.0, True)
    biased = combine_swapped(Result("k", 1.0, True), Result("k", 1.0, True))
    assert (biased.score, biased.value, biased.metadata["swap"]["consistent"]) == (0.5, "tie", False)
    broken = combine_swapped(Result("k", 1.0), Result("k", None, error="x"))
    assert broken.error == "x" and broken.metadata["swap"]["consistent"] is None


def test_swapped_trace_exchanges_answer_and_reference() -> None:
    t = Trace(id="t", final_output="A", reference=Trace(final_output="B"))
    s = swapped(t)
    assert s.final_output == "B" and s.reference is not None and s.reference.final_output == "A"
    with pytest.raises(EvaluatorError, match="swap"):
        swapped(Trace(id="t", final_output="A"))
