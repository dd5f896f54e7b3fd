"""Agent-as-judge: the judge inspects the whole trajectory and gives a verdict, with evidence, for
each requirement; score = the fraction of the REQUIREMENTS satisfied.

Requirements come from ``params.requirements``, else from the record field named by
``requirements_field`` (default ``requirements``; a single string is one requirement).

The judge is asked for one verdict per requirement, numbered. Verdicts are matched back to the
requirements by their ``id`` (the requirement's number), then by the requirement text (ignoring
case and spacing), then by position; a requirement left without a verdict counts as NOT satisfied
(``evidence: "no verdict from the judge"``) and extra verdicts are ignored (listed in
``metadata["unmatched_verdicts"]``). potato divides by the number of verdicts the judge returned,
so a judge that skips a failing requirement scores higher there; here the denominator is always
the number of requirements. A judge that returns no verdicts at all is an error, as is a
``satisfied`` that is not a boolean.
"""

from __future__ import annotations

import re
from typing import Any, ClassVar

from assay.evaluators.judge_base import JudgeCalls, JudgeEvaluator, JudgeParams
from assay.evaluators.judge_render import format_template, lookup, question_text, render_trace_output
from assay.exceptions import ConfigError, VerdictParseError
from assay.judges.base import JudgeRequest
from assay.judges.prompts import load_template
from assay.judges.verdict import coerce_bool, coerce_number, reasoning_property, response_object
from assay.records import Result
from assay.traces.model import Trace


def _norm(text: str) -> str:
    return re.sub(r"\s+", " ", text).strip().casefold().rstrip(".")


class AgentAsJudgeParams(JudgeParams):
    requirements: list[str] | str | None = None
    """The requirements every trace is checked against (else read from ``requirements_field``)."""
    requirements_field: str = "requirements"
    """Record field (dotted path in the scenario/metadata/inputs) holding per-record requirements."""
    system: str | None = None
    """A system message sent before the prompt."""
    max_tool_result_chars: int = 500
    """Tool results longer than this are truncated in the rendered trajectory (0 = never)."""


class AgentAsJudge(JudgeEvaluator[AgentAsJudgeParams]):
    """Per-requirement verdicts with evidence; score = fraction of requirements satisfied."""

    name: ClassVar[str] = "agent_as_judge"
    description: ClassVar[str] = (
        "LLM judge inspects the trajectory and gives a verdict with evidence per requirement; "
        "score = fraction of requirements satisfied."
    )
    Params = AgentAsJudgeParams
    example: ClassVar[dict[str, Any]] = {
        "judge": "gpt4o_mini",
        "requirements": ["Looks up the order before refunding", "Confirms the refund amount with the user"],
    }

    def setup(self) -> None:
        reqs = self.params.requirements
        if reqs is not None and not _clean(reqs):
            raise ConfigError(f"evaluator {self.name!r}: params.requirements is empty")
        self._template = load_template("_agent_as_judge")

    def requirements_for(self, trace: Trace) -> list[str]:
        reqs = self.params.requirements
        if reqs is None:
            reqs = lookup(trace, self.params.requirements_field)
        return _clean(reqs)

    def schema(self) -> dict[str, Any]:
        verdict = {
            "type": "object",
            "additionalProperties": False,
            "properties": {
                "id": {"type": "integer", "description": "The requirement's number."},
                "requirement": {"type": "string", "description": "The requirement, as given."},
                "satisfied": {"type": "boolean"},
                "evidence": {
                    "type": "string",
                    "description": "What in the trajectory shows it (or its absence).",
                },
            },
            "required": ["id", "requirement", "satisfied", "evidence"],
        }
        return {
            "type": "object",
            "additionalProperties": False,
            "properties": {
                "verdicts": {"type": "array", "items": verdict},
                "reasoning": reasoning_property(),
            },
            "required": ["verdicts", "reasoning"],
        }

    def make_request(self, trace: Trace, reqs: list[str]) -> JudgeRequest:
        values = {
            "task": question_text(trace) or "(not given)",
            "trajectory": render_trace_output(trace, "trajectory", self.params.max_tool_result_chars) or "(empty)",
            "requirements": "\n".join(f"{i}. {r}" for i, r in enumerate(reqs, 1)),
        }
        messages: list[dict[str, Any]] = []
        if self.params.system:
            messages.append({"role": "system", "content": self.params.system})
        messages.append({"role": "user", "content": format_template(self._template, values)})
        return self.request(messages, self.schema())

    def requests_for(self, trace: Trace) -> list[JudgeRequest]:
        reqs = self.requirements_for(trace)
        return [self.make_request(trace, reqs)] if reqs else []

    async def judge_trace(self, trace: Trace, calls: JudgeCalls) -> Result:
        reqs = self.requirements_for(trace)
        if not reqs:
            return Result(self.key, None, None, "no requirements provided")
        response = await calls.complete(self.make_request(trace, reqs))
        obj, salvaged = response_object(response)
        raw = (response.text or "")[:4000]
        verdicts = obj.get("verdicts")
        if not isinstance(verdicts, list) or not verdicts:
            raise VerdictParseError("the judge returned no verdicts", raw=raw)
        matched, unmatched = match_verdicts(reqs, verdicts, raw)
        n_ok = sum(1 for v in matched if v["satisfied"])
        reasoning = obj.get("reasoning")
        metadata: dict[str, Any] = {"verdicts": matched, "satisfied": n_ok, "total": len(reqs)}
        if unmatched:
            metadata["unmatched_verdicts"] = unmatched
        if salvaged:
            metadata["salvaged"] = True
        return Result(
            self.key,
            n_ok / len(reqs),
            f"{n_ok}/{len(reqs)} requirements satisfied",
            reasoning if isinstance(reasoning, str) else None,
            metadata,
        )


def _clean(reqs: Any) -> list[str]:
    if reqs is None:
        return []
    if isinstance(reqs, str):
        reqs = [reqs]
    if not isinstance(reqs, list):
        return []
    return [str(r).strip() for r in reqs if str(r).strip()]


def match_verdicts(
    reqs: list[str], verdicts: list[Any], raw: str = ""
) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """Pair the judge's verdicts with the requirements (id, then text, then position).

    Returns one verdict per requirement (missing ones unsatisfied) and the verdicts left over.
    """
    slots: list[dict[str, Any] | None] = [None] * len(reqs)
    by_text = {_norm(r): i for i, r in enumerate(reqs)}
    pending: list[tuple[int, dict[str, Any]]] = []
    for pos, v in enumerate(verdicts):
        if not isinstance(v, dict):
            raise VerdictParseError(f"verdict {pos} is not an object", raw=raw)
        satisfied = coerce_bool(v.get("satisfied"))
        if satisfied is None:
            raise VerdictParseError(f"verdict {pos}: satisfied={v.get('satisfied')!r} is not a boolean", raw=raw)
        v = {**v, "satisfied": satisfied}
        idx = coerce_number(v.get("id"))
        i = int(idx) - 1 if idx is not None and idx == int(idx) else -1
        if 0 <= i < len(reqs) and slots[i] is None:
            slots[i] = v
            continue
        j = by_text.get(_norm(str(v.get("requirement", ""))), -1)
        if j >= 0 and slots[j] is None:
            slots[j] = v
            continue
        pending.append((pos, v))
    unmatched = []
    for pos, v in pending:
        if pos < len(reqs) and slots[pos] is None:
            slots[pos] = v
        else:
            unmatched.append(v)
    out = []
    for i, (req, v) in enumerate(zip(reqs, slots, strict=True)):
        if v is None:
            out.append({"id": i + 1, "requirement": req, "satisfied": False, "evidence": "no verdict from the judge"})
        else:
            out.append(
                {
                    "id": i + 1,
                    "requirement": req,
                    "satisfied": v["satisfied"],
                    "evidence": str(v.get("evidence", "")),
                }
            )
    return out, unmatched


__all__ = ["AgentAsJudge", "AgentAsJudgeParams", "match_verdicts"]
