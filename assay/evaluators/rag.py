"""The RAG triad: context relevance, groundedness (claim by claim) and answer relevance.

The question is the trace input (or its ``question``/``query``/``input``/``text`` field), the
context is the trace's retrieved context, the answer is the final output; ``question_key`` and
``context_key`` (potato's names) name other fields of the inputs or the record.

* ``context_relevance``: how relevant and sufficient the context is for the question (0–1);
* ``answer_relevance``: how well the answer addresses the question, regardless of correctness (0–1);
* ``groundedness``: the judge splits the answer into atomic claims and marks each supported or
  not; score = supported / claims listed, per-claim verdicts in ``metadata["claims"]``. A judge
  that lists no claims is an error (potato returns "no score"; 1.0 would be a silent pass), and a
  ``supported`` that is not a boolean (``"false"`` is read as False, not by truthiness) is an error.
* ``rag_triad``: the three results for one trace (calls made one after another).

A trace without the needed question, context or answer is not scored (score None, with a
comment saying what is missing) — it is not an error of the judge.
"""

from __future__ import annotations

from typing import Any, ClassVar

import anyio

from assay.evaluators.base import MultiEvaluator
from assay.evaluators.judge_base import JudgeCalls, JudgeEvaluator, JudgeParams
from assay.evaluators.judge_render import as_text, context_text, format_template, lookup, question_text
from assay.exceptions import VerdictParseError
from assay.judges.base import JudgeRequest
from assay.judges.prompts import load_template
from assay.judges.verdict import VerdictSpec, coerce_bool, parse_verdict, reasoning_property, response_object
from assay.records import Result
from assay.traces.base import get_path
from assay.traces.model import Trace


class RagParams(JudgeParams):
    question_key: str | None = None
    """Where the question is (potato's ``question_key``): a field of the inputs (dotted path), else
    a record field (scenario, metadata). None: the input text or its
    ``question``/``query``/``input``/``text`` field."""
    context_key: str | None = None
    """Where the retrieved context is (potato's ``context_key``): a field of the inputs (dotted
    path), else a record field. None: the trace's context (``context=``, the record's context,
    ``inputs["context"]``)."""
    system: str | None = None
    """A system message sent before the prompt."""
    use_reasoning: bool = True
    """Ask for reasoning before the score (kept as the comment)."""


def field_value(trace: Trace, path: str) -> Any:
    """A named field: in the inputs first (potato reads ``inputs[question_key]``), then the
    record's fields (scenario, metadata)."""
    if isinstance(trace.input, dict):
        value = get_path(trace.input, path)
        if value is not None:
            return value
    return lookup(trace, path)


def answer_text(trace: Trace) -> str:
    value = trace.final_output
    return "" if value is None else as_text(value)


class _RagJudge(JudgeEvaluator[RagParams]):
    """Shared request building: one prompt, a verdict schema, the question/context/answer."""

    Params = RagParams
    template_name: ClassVar[str] = ""
    needs: ClassVar[tuple[str, ...]] = ()

    def values(self, trace: Trace) -> dict[str, str] | str:
        """The template values, or a comment saying what the trace lacks."""
        p = self.params
        question = field_value(trace, p.question_key) if p.question_key else question_text(trace)
        context = field_value(trace, p.context_key) if p.context_key else trace.context
        values = {
            "question": "" if question is None else as_text(question),
            "context": context_text(context) or "",
            "answer": answer_text(trace),
        }
        for name in self.needs:
            if not values[name].strip():
                return f"no {name} provided" if name != "answer" else "empty answer"
        return values

    def schema(self) -> dict[str, Any]:
        return VerdictSpec("continuous", self.params.use_reasoning).schema()

    def make_request(self, values: dict[str, str]) -> JudgeRequest:
        messages: list[dict[str, Any]] = []
        if self.params.system:
            messages.append({"role": "system", "content": self.params.system})
        messages.append({"role": "user", "content": format_template(load_template(self.template_name), values)})
        return self.request(messages, self.schema())

    def requests_for(self, trace: Trace) -> list[JudgeRequest]:
        values = self.values(trace)
        return [] if isinstance(values, str) else [self.make_request(values)]

    async def judge_trace(self, trace: Trace, calls: JudgeCalls) -> Result:
        values = self.values(trace)
        if isinstance(values, str):
            return Result(self.key, None, None, values)
        response = await calls.complete(self.make_request(values))
        verdict = parse_verdict(response, VerdictSpec("continuous", self.params.use_reasoning))
        metadata: dict[str, Any] = {"notes": verdict.notes} if verdict.notes else {}
        return Result(self.key, verdict.score, verdict.value, verdict.reasoning, metadata)


class ContextRelevance(_RagJudge):
    """How relevant and sufficient the retrieved context is for the question (0–1)."""

    name: ClassVar[str] = "context_relevance"
    description: ClassVar[str] = (
        "LLM judge: how relevant and sufficient the retrieved context is for the question (0–1)."
    )
    example: ClassVar[dict[str, Any]] = {"judge": "gpt4o_mini"}
    template_name: ClassVar[str] = "_context_relevance"
    needs: ClassVar[tuple[str, ...]] = ("question", "context")


class AnswerRelevance(_RagJudge):
    """How well the answer addresses the question, regardless of correctness (0–1)."""

    name: ClassVar[str] = "answer_relevance"
    description: ClassVar[str] = (
        "LLM judge: how well the answer addresses the question, regardless of correctness (0–1)."
    )
    example: ClassVar[dict[str, Any]] = {"judge": "gpt4o_mini"}
    template_name: ClassVar[str] = "_answer_relevance"
    needs: ClassVar[tuple[str, ...]] = ("question", "answer")


class Groundedness(_RagJudge):
    """Claim decomposition: the fraction of the answer's claims the context supports."""

    name: ClassVar[str] = "groundedness"
    description: ClassVar[str] = (
        "LLM judge: split the answer into claims, check each against the context; score = supported / claims."
    )
    example: ClassVar[dict[str, Any]] = {"judge": "gpt4o_mini"}
    template_name: ClassVar[str] = "_groundedness"
    needs: ClassVar[tuple[str, ...]] = ("answer", "context")

    def schema(self) -> dict[str, Any]:
        claim = {
            "type": "object",
            "additionalProperties": False,
            "properties": {
                "claim": {"type": "string", "description": "One atomic factual statement from the answer."},
                "supported": {"type": "boolean", "description": "true when the context supports the claim."},
            },
            "required": ["claim", "supported"],
        }
        props: dict[str, Any] = {"claims": {"type": "array", "items": claim}}
        if self.params.use_reasoning:
            props["reasoning"] = reasoning_property()
        return {"type": "object", "additionalProperties": False, "properties": props, "required": list(props)}

    async def judge_trace(self, trace: Trace, calls: JudgeCalls) -> Result:
        values = self.values(trace)
        if isinstance(values, str):
            return Result(self.key, None, None, values)
        response = await calls.complete(self.make_request(values))
        obj, salvaged = response_object(response)
        raw_claims = obj.get("claims")
        raw = response.text or ""
        if not isinstance(raw_claims, list) or not raw_claims:
            raise VerdictParseError("the judge listed no claims", raw=raw[:4000])
        claims = []
        for i, item in enumerate(raw_claims):
            if not isinstance(item, dict):
                raise VerdictParseError(f"claim {i} is not an object", raw=raw[:4000])
            supported = coerce_bool(item.get("supported"))
            if supported is None:
                raise VerdictParseError(
                    f"claim {i}: supported={item.get('supported')!r} is not a boolean", raw=raw[:4000]
                )
            claims.append({"claim": str(item.get("claim", "")), "supported": supported})
        n_ok = sum(1 for c in claims if c["supported"])
        total = len(claims)
        reasoning = obj.get("reasoning")
        metadata: dict[str, Any] = {"claims": claims, "supported": n_ok, "total": total}
        if salvaged:
            metadata["salvaged"] = True
        return Result(
            self.key,
            n_ok / total,
            f"{n_ok}/{total} claims supported",
            reasoning if isinstance(reasoning, str) else None,
            metadata,
        )


class RagTriad(MultiEvaluator[RagParams]):
    """Context relevance, groundedness and answer relevance in one evaluator (three results)."""

    name: ClassVar[str] = "rag_triad"
    description: ClassVar[str] = (
        "The RAG triad: context_relevance, groundedness (claim by claim) and answer_relevance, three results."
    )
    Params = RagParams
    is_async: ClassVar[bool] = True
    example: ClassVar[dict[str, Any]] = {"judge": "gpt4o_mini"}

    def setup(self) -> None:
        shared = self.params.model_dump(exclude={"key", "threshold"})
        prefix = f"{self.params.key}:" if self.params.key else ""
        self.parts: list[_RagJudge] = [
            cls({**shared, "key": prefix + cls.name, "threshold": self.params.threshold})
            for cls in (ContextRelevance, Groundedness, AnswerRelevance)
        ]

    def result_keys(self) -> list[str]:
        return [p.key for p in self.parts]

    def build_requests(self, trace: Trace) -> list[JudgeRequest]:
        return [req for part in self.parts for req in part.build_requests(trace)]

    def score_trace(self, trace: Trace) -> list[Result]:
        return anyio.run(self.ascore_trace, trace)

    async def ascore_trace(self, trace: Trace) -> list[Result]:
        # One after another: BudgetExceeded must reach the pipeline as itself, not wrapped in an
        # exception group, and the pipeline already runs many traces concurrently.
        return [await part.ascore(trace) for part in self.parts]


__all__ = ["AnswerRelevance", "ContextRelevance", "Groundedness", "RagParams", "RagTriad"]
