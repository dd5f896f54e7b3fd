from __future__ import annotations

from typing import Any

import anyio
import pytest

from assay.evaluators.agent_judge import AgentAsJudge, match_verdicts
from assay.evaluators.rag import AnswerRelevance, ContextRelevance, Groundedness, RagTriad
from assay.exceptions import BudgetExceeded, ConfigError, VerdictParseError
from assay.registry import build_evaluator
from assay.traces.normalize import trace_from_args

Q = {"question": "When was the Eiffel Tower built?"}
CTX = ["The Eiffel Tower was completed in 1889.", "It is in Paris."]
ANSWER = "It was completed in 1889 and is 500 m tall."


class TestRag:
    def test_context_relevance(self, scripted: Any) -> None:
        judge = scripted({"reasoning": "on topic", "score": 0.9})
        r = ContextRelevance(judge=judge).evaluate(inputs=Q, outputs=ANSWER, context=CTX)
        assert (r.key, r.score, r.comment) == ("context_relevance", 0.9, "on topic")
        text = judge.prompt()
        assert "When was the Eiffel Tower built?" in text
        assert "[1] The Eiffel Tower was completed in 1889.\n\n[2] It is in Paris." in text
        assert ANSWER not in text

    def test_answer_relevance_clamps_and_needs_no_context(self, scripted: Any) -> None:
        r = AnswerRelevance(judge=scripted({"reasoning": "r", "score": 1.4})).evaluate(inputs=Q, outputs=ANSWER)
        assert r.score == 1.0 and "clamped" in r.metadata["notes"][0]

    def test_missing_parts_are_not_scored(self, scripted: Any) -> None:
        judge = scripted({"score": 1})
        r = ContextRelevance(judge=judge).evaluate(inputs=Q, outputs=ANSWER)
        assert (r.score, r.error, r.comment) == (None, None, "no context provided")
        r = Groundedness(judge=judge).evaluate(inputs=Q, outputs="", context=CTX)
        assert r.comment == "empty answer"
        assert judge.requests == []

    def test_groundedness_claims(self, scripted: Any) -> None:
        judge = scripted(
            {
                "claims": [
                    {"claim": "completed in 1889", "supported": True},
                    {"claim": "500 m tall", "supported": "false"},
                ],
                "reasoning": "height not in context",
            }
        )
        r = Groundedness(judge=judge).evaluate(inputs=Q, outputs=ANSWER, context=CTX)
        assert (r.score, r.value, r.comment) == (0.5, "1/2 claims supported", "height not in context")
        assert r.metadata["claims"][1] == {"claim": "500 m tall", "supported": False}
        assert (r.metadata["supported"], r.metadata["total"]) == (1, 2)
        assert judge.requests[0].schema["properties"]["claims"]["type"] == "array"

    def test_groundedness_no_claims_is_error_not_one(self, scripted: Any) -> None:
        r = Groundedness(judge=scripted({"claims": [], "reasoning": "none"})).evaluate(
            inputs=Q, outputs=ANSWER, context=CTX
        )
        assert r.score is None and r.error is not None and "no claims" in r.error

    def test_groundedness_bad_supported_value(self, scripted: Any) -> None:
        judge = scripted({"claims": [{"claim": "x", "supported": "kinda"}]})
        r = Groundedness(judge=judge).evaluate(inputs=Q, outputs=ANSWER, context=CTX)
        assert r.error is not None and "not a boolean" in r.error and "raw_output" in r.metadata

    def test_question_and_context_keys(self, scripted: Any) -> None:
        judge = scripted({"reasoning": "on topic", "score": 0.7})
        ev = ContextRelevance(judge=judge, question_key="query", context_key="search.docs")
        inputs = {"query": "When was it built?", "search": {"docs": CTX}, "question": "not this one"}
        assert ev.evaluate(inputs=inputs, outputs=ANSWER).score == 0.7
        text = judge.prompt()
        assert "When was it built?" in text and "not this one" not in text
        assert "[1] The Eiffel Tower was completed in 1889." in text
        # a record field (the pipeline's scenario) when the inputs do not have it
        ev = AnswerRelevance(judge=judge, question_key="user_query")
        assert ev.evaluate(inputs="ignored", outputs=ANSWER, user_query="How tall is it?").score == 0.7
        assert "How tall is it?" in judge.prompt()
        r = ContextRelevance(judge=judge, context_key="missing").evaluate(inputs=Q, outputs=ANSWER, context=CTX)
        assert (r.score, r.comment) == (None, "no context provided")
        triad = build_evaluator("rag_triad", {"judge": judge, "question_key": "query", "context_key": "search.docs"})
        assert all(p.params.question_key == "query" for p in triad.parts)  # type: ignore[attr-defined]

    def test_triad_three_results(self, scripted: Any) -> None:
        def reply(req: Any) -> dict[str, Any]:
            if "claims" in req.schema["properties"]:
                return {"claims": [{"claim": "c", "supported": True}], "reasoning": "r"}
            return {"reasoning": "r", "score": 0.8 if req.metadata["evaluator"] == "context_relevance" else 0.6}

        ev = build_evaluator("rag_triad", {"judge": scripted(reply)})
        results = ev.evaluate(inputs=Q, outputs=ANSWER, context=CTX)
        assert [(r.key, r.score) for r in results] == [
            ("context_relevance", 0.8),
            ("groundedness", 1.0),
            ("answer_relevance", 0.6),
        ]
        assert ev.result_keys() == ["context_relevance", "groundedness", "answer_relevance"]
        assert len(ev.build_requests(trace_from_args(ANSWER, None, Q, context=CTX))) == 3

    def test_triad_budget_propagates(self, scripted: Any) -> None:
        ev = RagTriad(judge=scripted(BudgetExceeded("spent")))
        with pytest.raises(BudgetExceeded):
            anyio.run(ev.ascore_trace, trace_from_args(ANSWER, None, Q, context=CTX))


TRAJ = [
    {"role": "user", "content": "refund order 7"},
    {
        "role": "assistant",
        "content": "",
        "tool_calls": [
            {"id": "c1", "type": "function", "function": {"name": "lookup_order", "arguments": '{"id": 7}'}}
        ],
    },
    {"role": "tool", "tool_call_id": "c1", "content": "order 7: $20"},
    {"role": "assistant", "content": "Refunded $20."},
]
REQS = ["Looks up the order", "Confirms the amount with the user", "Issues the refund"]


class TestAgentAsJudge:
    def test_fraction_of_requirements(self, scripted: Any) -> None:
        judge = scripted(
            {
                "verdicts": [
                    {"id": 1, "requirement": REQS[0], "satisfied": True, "evidence": "lookup_order"},
                    {"id": 2, "requirement": REQS[1], "satisfied": False, "evidence": "never asked"},
                    {"id": 3, "requirement": REQS[2], "satisfied": "true", "evidence": "Refunded"},
                ],
                "reasoning": "mostly",
            }
        )
        r = AgentAsJudge(requirements=REQS, judge=judge).evaluate(outputs=TRAJ)
        assert (r.key, r.value, r.comment) == ("agent_as_judge", "2/3 requirements satisfied", "mostly")
        assert r.score == pytest.approx(2 / 3)
        assert [v["satisfied"] for v in r.metadata["verdicts"]] == [True, False, True]
        text = judge.prompt()
        assert "1. Looks up the order\n2. Confirms" in text and "refund order 7" in text
        assert '-> lookup_order({"id":7})' in text

    def test_missing_verdicts_count_as_unsatisfied(self, scripted: Any) -> None:
        # potato would divide by the 1 verdict returned and score 1.0
        judge = scripted({"verdicts": [{"requirement": "looks up the order.", "satisfied": True, "evidence": "e"}]})
        r = AgentAsJudge(requirements=REQS, judge=judge).evaluate(outputs=TRAJ)
        assert r.score == pytest.approx(1 / 3)
        assert r.metadata["verdicts"][2]["evidence"] == "no verdict from the judge"

    def test_requirements_from_record_field(self, scripted: Any) -> None:
        judge = scripted({"verdicts": [{"id": 1, "satisfied": True, "evidence": "e"}], "reasoning": "r"})
        ev = AgentAsJudge(judge=judge, requirements_field="checks")
        assert ev.evaluate(outputs=TRAJ, checks="Looks up the order").score == 1.0
        r = ev.evaluate(outputs=TRAJ)
        assert (r.score, r.error, r.comment) == (None, None, "no requirements provided")

    def test_no_verdicts_is_error(self, scripted: Any) -> None:
        r = AgentAsJudge(requirements=REQS, judge=scripted({"verdicts": []})).evaluate(outputs=TRAJ)
        assert r.error is not None and "no verdicts" in r.error

    def test_empty_requirements_param(self) -> None:
        with pytest.raises(ConfigError, match="requirements"):
            AgentAsJudge(requirements=["  "])


def test_match_verdicts_by_id_text_position() -> None:
    reqs = ["a", "b", "c"]
    verdicts = [
        {"id": 3, "satisfied": True},  # by id -> c
        {"requirement": "A", "satisfied": False},  # by text -> a
        {"requirement": "?", "satisfied": True},  # position 2 taken (c) -> unmatched
        {"id": 9, "requirement": "zz", "satisfied": True},  # nothing -> unmatched
    ]
    out, extra = match_verdicts(reqs, verdicts)
    assert [v["satisfied"] for v in out] == [False, False, True]
    assert out[1]["evidence"] == "no verdict from the judge" and len(extra) == 2
    out, extra = match_verdicts(reqs, [{"satisfied": True}, {"satisfied": False}])
    assert [v["satisfied"] for v in out] == [True, False, False] and extra == []
    with pytest.raises(VerdictParseError):
        match_verdicts(reqs, [{"satisfied": "perhaps"}])
