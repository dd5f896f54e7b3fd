"""The optional evaluator hooks are declared on the base class, with defaults that mean "not
offered"; the engine asks ``offers`` (not ``hasattr``, which the declarations make always true)."""

from __future__ import annotations

from typing import Any

import anyio
import pytest

from assay.evaluators import TrajectoryMatch
from assay.evaluators.base import BaseEvaluator, offers
from assay.evaluators.embedding import EmbeddingSimilarity
from assay.evaluators.identity import evaluator_identity, parse_identity
from assay.judges.base import JudgeRequest, JudgeResponse, JudgeUsage
from assay.registry import build_evaluator
from assay.stages.evaluate import OTHER_ASYNC_IN_FLIGHT, EvaluateStage
from assay.traces.model import Message, Trace

HOOKS = ("score_traces", "ascore_traces", "resolve_judge", "build_requests")


class Sized:
    """A judge of a given capacity that always says yes."""

    name = "sized"

    def __init__(self, capacity: int) -> None:
        self.capacity = capacity

    async def complete(self, request: JudgeRequest) -> JudgeResponse:
        return JudgeResponse('{"score": true}', {"score": True}, JudgeUsage(calls=1))

    def estimate(self, request: JudgeRequest) -> JudgeUsage:
        return JudgeUsage()


def embedding() -> EmbeddingSimilarity:
    return EmbeddingSimilarity(embed_fn=lambda text: [1.0, float(len(text))])


def test_the_hooks_are_declared_on_the_base_class_and_not_offered_by_default() -> None:
    ev = TrajectoryMatch(mode="strict")
    trace = Trace(id="t", messages=[Message(role="user", content="hi")])
    for hook in HOOKS:
        assert hook in vars(BaseEvaluator)
        assert hasattr(ev, hook)  # declared: hasattr can no longer tell
        assert not ev.offers(hook) and not offers(ev, hook)
    with pytest.raises(NotImplementedError, match="does not score traces in batches"):
        ev.score_traces([trace])
    with pytest.raises(NotImplementedError, match="does not score traces in batches"):
        anyio.run(ev.ascore_traces, [trace])
    with pytest.raises(NotImplementedError, match="calls no judge"):
        ev.resolve_judge()
    with pytest.raises(NotImplementedError, match="calls no judge"):
        ev.build_requests(trace)


def test_what_each_kind_of_evaluator_offers() -> None:
    emb = embedding()
    assert emb.offers("score_traces") and emb.offers("ascore_traces")
    assert not emb.offers("resolve_judge") and not emb.offers("build_requests")
    judge = build_evaluator("llm_judge", {"prompt": "correctness", "judge": Sized(4)})
    assert judge.offers("resolve_judge") and judge.offers("build_requests") and not judge.offers("score_traces")
    checker = build_evaluator("pyright")  # calls out, but to no judge
    assert checker.is_async and not any(checker.offers(h) for h in HOOKS)
    json_rubric = build_evaluator("json_match", {"rubric": {"k": "is it right"}, "judge": Sized(4)})
    assert json_rubric.offers("build_requests") and not json_rubric.offers("resolve_judge")


def test_an_object_outside_the_hierarchy_offers_what_it_has() -> None:
    class Bare:
        def build_requests(self, trace: Trace) -> list[Any]:
            return []

    assert offers(Bare(), "build_requests") and not offers(Bare(), "resolve_judge")


def test_the_engine_uses_what_is_offered() -> None:
    strict, emb = TrajectoryMatch(mode="strict"), embedding()
    checker = build_evaluator("pyright")
    judge = build_evaluator("llm_judge", {"prompt": "correctness", "judge": Sized(200)})
    stage = EvaluateStage([strict, emb, checker, judge])
    assert stage.inline == [strict] and stage.batched == [emb] and stage.async_ == [checker, judge]
    # the judge counts by its capacity, the checker (no judge) as OTHER_ASYNC_IN_FLIGHT
    assert EvaluateStage([checker]).wanted_batches_in_flight(8) == -(-2 * OTHER_ASYNC_IN_FLIGHT // 8) + 1
    assert stage.wanted_batches_in_flight(8) == -(-2 * (200 + OTHER_ASYNC_IN_FLIGHT) // 8) + 1
    # a row's identity names the judge only for an evaluator that offers one
    assert parse_identity(evaluator_identity(checker))["judge_model"] is None
