"""LLM-as-judge: a prompt template (or a prebuilt prompt by name) scored by a judge endpoint.

The parameters carry openevals' names (``prompt``, ``feedback_key``, ``continuous``, ``choices``,
``use_reasoning``, ``few_shot_examples``, ``system``, ``output_schema``, ``attachments``).

Template variables: ``{inputs}`` (the trace input, or the first user message), ``{outputs}``
(the final answer; the compact trajectory when the agent used tools or answered more than once,
or always for the conversation prompts), ``{reference_outputs}``, ``{context}`` (retrieved
documents, numbered), ``{attachments}`` (where images/audio/PDF go), and any other name, looked up
in ``variables`` (params), then the record's scenario fields, metadata and inputs. Strings are
inserted as they are, other values as compact JSON. A variable the trace does not have gives an
error Result naming it (prebuilt prompts declare which variables may be left empty).

A template of your own that names no ``{outputs}`` (nor ``{attachments}``) — a domain prompt
such as "You are evaluating a customer support agent. Score the trajectory on: …" — is not sent
blind: the rendered trace is appended as ``<outputs>…</outputs>`` (with ``<inputs>`` and
``<reference_outputs>`` blocks when the template does not show them and the trace has them).

Scores: a boolean verdict → 1.0/0.0 with ``value`` True/False; continuous → the number; choices →
the choice (numbers in [0, 1] are the score, other numbers are scaled min→0 … max→1, labels score
through a ``{label: score}`` mapping or not at all). Polarity: for prompts where the judge's
``true`` means a defect (toxicity, laziness, PII leakage …) ``value`` keeps the judge's answer
(True = defect found, as in openevals) and ``score`` is inverted, so 1.0 is always good and pass
rates mean the same thing for every evaluator.

>>> LLMJudge(prompt="correctness").key
'correctness'
>>> LLMJudge(prompt="Is {outputs} polite?").key
'score'
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, ClassVar, Literal

from pydantic import Field, field_validator

from assay.evaluators.judge_base import JudgeCalls, JudgeEvaluator, JudgeParams
from assay.evaluators.judge_render import (
    MISSING_TEXT,
    PromptText,
    append_to_last_user,
    as_text,
    attachment_block,
    context_text,
    delimit,
    few_shot_text,
    format_template,
    input_value,
    lookup,
    render_trace_output,
    user_content,
)
from assay.exceptions import ConfigError, EvaluatorError
from assay.judges.base import JudgeRequest, JudgeResponse
from assay.judges.prompts import PROMPTS, PromptInfo, get_prompt, library_summary, template_variables
from assay.judges.verdict import VerdictSpec, coerce_number, parse_verdict, response_object
from assay.records import Result
from assay.traces.model import Trace

ATTACHMENTS = "attachments"
#: Traces in a row without a required prompt variable (and none with it) that stop the run as a
#: configuration error instead of one error result each.
MISSING_VARIABLE_LIMIT = 20
BUILTIN_VARIABLES = frozenset({"inputs", "outputs", "reference_outputs", "context", ATTACHMENTS})


_JSON_TYPES = {str: "string", bool: "boolean", int: "integer", float: "number", list: "array", dict: "object"}


def _typeddict_schema(td: type) -> dict[str, Any]:
    """A JSON schema from a TypedDict's annotations (simple field types; others unconstrained)."""
    import typing

    hints = typing.get_type_hints(td)
    props = {
        name: {"type": _JSON_TYPES[t]} if t in _JSON_TYPES else {}
        for name, t in ((n, typing.get_origin(h) or h) for n, h in hints.items())
    }
    required = sorted(getattr(td, "__required_keys__", hints))
    return {"type": "object", "title": td.__name__, "properties": props, "required": required}


class LLMJudgeParams(JudgeParams):
    prompt: str
    """A template with ``{inputs}``, ``{outputs}``, ``{reference_outputs}``, ``{context}``,
    ``{attachments}`` and extra ``{names}``; or the name of a prebuilt prompt (``correctness``,
    ``toxicity``, … — see the list above)."""
    feedback_key: str | None = None
    """Result key (default: the prebuilt prompt's name, else ``score`` like openevals)."""
    continuous: bool | None = None
    """Ask for a number in [0, 1] instead of pass/fail."""
    choices: list[float | str] | dict[str, float] | None = None
    """Allowed scores (numbers), or labels; a ``{label: score}`` mapping gives labels a score.
    Wins over ``continuous``."""
    use_reasoning: bool = True
    """Ask for reasoning before the score (kept as the result's comment)."""
    few_shot_examples: list[dict[str, Any]] | None = None
    """Examples ``{inputs, outputs, reasoning?, score?}`` appended to the prompt."""
    system: str | None = None
    """A system message sent before the prompt."""
    output_schema: dict[str, Any] | None = None
    """A custom JSON schema for the verdict (library use: also a pydantic model or a TypedDict
    class): the parsed object becomes ``value``; its ``score`` (bool or number in [0, 1]) the
    score and its ``reasoning`` the comment."""
    attachments: str | list[Any] | None = None
    """Where the attachments are: a field path in the record (default ``attachments``), or a
    list of attachments (URL strings, ``{mime_type, data}`` dicts, or content blocks)."""
    polarity: Literal["auto", "true_is_good", "true_is_bad"] = "auto"
    """Whether the judge's ``true`` means good or a defect (auto: from the prebuilt prompt, else
    good). With ``true_is_bad`` the score is inverted (1.0 = good)."""
    variables: dict[str, Any] = Field(default_factory=dict)
    """Constant values for template variables (e.g. a ``plan`` shared by every trace)."""
    outputs_as: Literal["auto", "final_output", "trajectory"] | None = None
    """How ``{outputs}``/``{reference_outputs}`` render: the final answer, the compact
    trajectory, or auto (trajectory when the agent used tools or answered more than once)."""
    max_tool_result_chars: int = 500
    """Tool results longer than this are truncated in rendered trajectories (0 = never)."""

    @field_validator("output_schema", mode="before")
    @classmethod
    def _schema_from_type(cls, v: Any) -> Any:
        """A pydantic model or a TypedDict (library use) becomes its JSON schema."""
        if isinstance(v, type):
            from pydantic import BaseModel, TypeAdapter

            if issubclass(v, BaseModel):
                return v.model_json_schema()
            try:
                return TypeAdapter(v).json_schema()
            except Exception:  # typing.TypedDict on Python < 3.12: pydantic refuses it
                return _typeddict_schema(v)
        return v

    @field_validator("choices")
    @classmethod
    def _choices_not_empty(cls, v: Any) -> Any:
        if v is not None and len(v) == 0:
            raise ValueError("choices must not be empty")
        return v


@dataclass(frozen=True, slots=True)
class CompiledPrompt:
    """A template checked at build time, with the verdict it asks for."""

    template: str
    info: PromptInfo | None
    variables: frozenset[str]
    spec: VerdictSpec
    polarity: str
    outputs_as: str


class LLMJudge(JudgeEvaluator[LLMJudgeParams]):
    """Generic LLM-as-judge over a prompt template or a prebuilt prompt."""

    name: ClassVar[str] = "llm_judge"
    description: ClassVar[str] = (
        "LLM-as-judge with a prompt template or a prebuilt prompt (correctness, toxicity, "
        "task_completion, …): pass/fail, continuous or choices."
    )
    Params = LLMJudgeParams
    example: ClassVar[dict[str, Any]] = {"prompt": "correctness", "judge": "gpt4o_mini"}

    #: The feedback key used when neither ``key`` nor ``feedback_key`` nor a prebuilt name gives one.
    fallback_key: ClassVar[str] = "score"
    #: Variables that show the judge what it grades; a prompt naming none of them gets the
    #: rendered trace appended (see :meth:`trace_appendix`).
    trace_variables: ClassVar[frozenset[str]] = frozenset({"outputs", ATTACHMENTS})

    def default_key(self) -> str:
        p = self.params
        if p.feedback_key:
            return p.feedback_key
        if p.prompt and p.prompt in PROMPTS:
            return p.prompt
        return self.fallback_key

    # ------------------------------------------------------------------ build time

    def setup(self) -> None:
        self._compiled: dict[str, CompiledPrompt] = {}
        self._missing: dict[str, int] = {}  # required variable -> traces without it so far
        self._present: set[str] = set()  # required variables some trace had
        if self.params.prompt:
            self._main = self.compile(self.params.prompt)

    def compile(self, prompt: str) -> CompiledPrompt:
        """Check a template or prebuilt name once, at build time (ConfigError naming the key)."""
        if prompt in self._compiled:
            return self._compiled[prompt]
        p = self.params
        info: PromptInfo | None = None
        if prompt.isidentifier():
            try:
                info = get_prompt(prompt)
            except ConfigError as exc:
                raise ConfigError(f"evaluator {self.name!r}: params.prompt: {exc}") from None
            template = info.template
        else:
            template = prompt
        try:
            variables = template_variables(template)
        except ConfigError as exc:
            raise ConfigError(f"evaluator {self.name!r}: params.prompt: {exc}") from None
        if p.output_schema is not None and p.output_schema.get("type", "object") != "object":
            raise ConfigError(f"evaluator {self.name!r}: params.output_schema must describe a JSON object")
        if p.few_shot_examples and not all(isinstance(e, dict) for e in p.few_shot_examples):
            raise ConfigError(f"evaluator {self.name!r}: params.few_shot_examples must be objects")
        polarity = p.polarity if p.polarity != "auto" else (info.polarity if info else "true_is_good")
        compiled = CompiledPrompt(
            template=template,
            info=info,
            variables=variables,
            spec=self._verdict_spec(info),
            polarity=polarity,
            outputs_as=p.outputs_as or (info.outputs_as if info else "auto"),
        )
        self._compiled[prompt] = compiled
        return compiled

    def _verdict_spec(self, info: PromptInfo | None) -> VerdictSpec:
        p = self.params
        if p.choices is not None:
            if isinstance(p.choices, dict):
                scores = {str(k): float(v) for k, v in p.choices.items()}
                bad = [k for k, v in scores.items() if not 0.0 <= v <= 1.0]
                if bad:
                    raise ConfigError(f"evaluator {self.name!r}: params.choices: scores must be in [0, 1] ({bad})")
                return VerdictSpec("choices", p.use_reasoning, tuple(scores), scores)
            return VerdictSpec("choices", p.use_reasoning, tuple(p.choices))
        if p.continuous:
            return VerdictSpec("continuous", p.use_reasoning)
        if info is not None and info.kind == "choices":
            return VerdictSpec("choices", p.use_reasoning, info.choices)
        if info is not None and info.kind == "label":
            return VerdictSpec("label", p.use_reasoning, score_field="label")
        return VerdictSpec("boolean", p.use_reasoning)

    # ------------------------------------------------------------------ per trace

    def prompt_for(self, trace: Trace) -> CompiledPrompt:
        """The prompt used for ``trace`` (subclasses pick one per trace, e.g. with/without reference)."""
        return self._main

    def outputs_text(self, trace: Trace, compiled: CompiledPrompt) -> str | None:
        if trace.final_output is None and not trace.messages:
            return None
        return render_trace_output(trace, compiled.outputs_as, self.params.max_tool_result_chars)

    def variable(self, name: str, trace: Trace, compiled: CompiledPrompt) -> str | None:
        """The text of one template variable for ``trace`` (None when the trace has no value)."""
        if name in self.params.variables:
            return PromptText(as_text(self.params.variables[name]))  # the run file's own text
        if name == "outputs":
            return self.outputs_text(trace, compiled)
        if name == "inputs":
            value = input_value(trace)
            return None if value is None else as_text(value)
        if name == "reference_outputs":
            ref = trace.reference
            if ref is None:
                return None
            return render_trace_output(ref, compiled.outputs_as, self.params.max_tool_result_chars)
        if name == "context":
            return context_text(trace.context)
        value = lookup(trace, name)
        return None if value is None else as_text(value)

    def variables_for(self, trace: Trace, compiled: CompiledPrompt) -> dict[str, str]:
        values: dict[str, str] = {}
        optional = compiled.info.optional if compiled.info else frozenset()
        for name in sorted(compiled.variables - {ATTACHMENTS}):
            text = self.variable(name, trace, compiled)
            if text is None:
                if name not in optional:
                    self._missing_variable(name)
                text = MISSING_TEXT
            elif name not in optional:
                self._present.add(name)
            values[name] = text
        return values

    def _missing_variable(self, name: str) -> None:
        """A trace lacks a required variable: an error result for this trace — or, when none of
        the first :data:`MISSING_VARIABLE_LIMIT` traces had it, a ConfigError that stops the run
        (exit 2): the prompt names a field the data does not have, and a retry would change
        nothing."""
        hint = "give it in the record, its scenario/metadata, or params.variables"
        seen = self._missing[name] = self._missing.get(name, 0) + 1
        if name not in self._present and seen >= MISSING_VARIABLE_LIMIT:
            raise ConfigError(
                f"evaluator {self.key!r}: prompt variable {{{name}}} is missing in each of the first {seen} traces: "
                f"the prompt names a field the data does not have ({hint})"
            )
        raise EvaluatorError(f"prompt variable {{{name}}} is missing: the trace has no {name} ({hint})")

    def attachment_blocks(self, trace: Trace, compiled: CompiledPrompt) -> list[dict[str, Any]]:
        source = self.params.attachments
        items = source if isinstance(source, list) else lookup(trace, source or ATTACHMENTS)
        if items is None:
            if ATTACHMENTS in compiled.variables:
                raise EvaluatorError(
                    "prompt variable {attachments} is missing: the trace has no attachments "
                    f"(looked for field {source or ATTACHMENTS!r})"
                )
            return []
        if not isinstance(items, list):
            items = [items]
        return [attachment_block(item) for item in items]

    def messages_for(self, trace: Trace, compiled: CompiledPrompt) -> list[dict[str, Any]]:
        values = self.variables_for(trace, compiled)
        blocks = self.attachment_blocks(trace, compiled)
        slot = "{" + ATTACHMENTS + "}"
        if slot in compiled.template:
            before, _, after = compiled.template.partition(slot)
            content = user_content(format_template(before, values), blocks, format_template(after, values))
        else:
            content = user_content(format_template(compiled.template, values), blocks)
        messages: list[dict[str, Any]] = []
        if self.params.system:
            messages.append({"role": "system", "content": self.params.system})
        messages.append({"role": "user", "content": content})
        if compiled.info is None and not compiled.variables & self.trace_variables:
            append_to_last_user(messages, self.trace_appendix(trace, compiled))
        if self.params.few_shot_examples:
            append_to_last_user(messages, few_shot_text(self.params.few_shot_examples))
        return messages

    def trace_appendix(self, trace: Trace, compiled: CompiledPrompt) -> str:
        """What is appended to a prompt that names none of :attr:`trace_variables` (a domain
        prompt such as "You are evaluating a customer support agent…"): the trace, so the judge
        never grades blind. The input and the reference are added when the prompt does not
        already show them and the trace has them."""
        parts = []
        if "inputs" not in compiled.variables and (inputs := self.variable("inputs", trace, compiled)):
            parts.append(f"<inputs>\n{delimit(inputs)}\n</inputs>")
        outputs = self.variable("outputs", trace, compiled)
        parts.append(f"<outputs>\n{delimit(outputs) if outputs is not None else MISSING_TEXT}\n</outputs>")
        if (
            "reference_outputs" not in compiled.variables
            and trace.reference is not None
            and (reference := self.variable("reference_outputs", trace, compiled))
        ):
            parts.append(f"<reference_outputs>\n{delimit(reference)}\n</reference_outputs>")
        return "\n\n".join(parts)

    def schema_for(self, compiled: CompiledPrompt) -> dict[str, Any]:
        custom = self.params.output_schema
        if custom is None:
            return compiled.spec.schema()
        if "schema" in custom and isinstance(custom["schema"], dict):  # an OpenAI json_schema wrapper
            return dict(custom["schema"])
        return dict(custom)

    def prepare(self, trace: Trace) -> tuple[JudgeRequest, CompiledPrompt] | Result:
        """The request for ``trace`` (or a Result that needs no judge call)."""
        compiled = self.prompt_for(trace)
        return self.request(self.messages_for(trace, compiled), self.schema_for(compiled)), compiled

    def requests_for(self, trace: Trace) -> list[JudgeRequest]:
        prepared = self.prepare(trace)
        if isinstance(prepared, Result):
            self.no_call_reason = prepared.error or prepared.comment
            return []
        return [prepared[0]]

    async def judge_trace(self, trace: Trace, calls: JudgeCalls) -> Result:
        prepared = self.prepare(trace)
        if isinstance(prepared, Result):
            return prepared
        request, compiled = prepared
        response = await calls.complete(request)
        return self.result_from(response, compiled)

    # ------------------------------------------------------------------ verdict → Result

    def result_from(self, response: JudgeResponse, compiled: CompiledPrompt) -> Result:
        if self.params.output_schema is not None:
            return self._custom_result(response)
        verdict = parse_verdict(response, compiled.spec)
        score = verdict.score
        if score is not None and compiled.polarity == "true_is_bad":
            score = 1.0 - score
        metadata: dict[str, Any] = {}
        if compiled.polarity != "true_is_good":
            metadata["polarity"] = compiled.polarity
        if verdict.notes:
            metadata["notes"] = verdict.notes
        if verdict.salvaged:
            metadata["salvaged"] = True
        return Result(self.key, score, verdict.value, verdict.reasoning, metadata)

    def _custom_result(self, response: JudgeResponse) -> Result:
        obj, salvaged = response_object(response)
        raw = obj.get("score")
        score: float | None = None
        if isinstance(raw, bool):
            score = 1.0 if raw else 0.0
        else:
            number = coerce_number(raw)
            if number is not None and 0.0 <= number <= 1.0:
                score = number
        reasoning = obj.get("reasoning")
        metadata: dict[str, Any] = {"salvaged": True} if salvaged else {}
        return Result(self.key, score, obj, reasoning if isinstance(reasoning, str) else None, metadata)


LLMJudge.__doc__ = (
    f"{LLMJudge.__doc__}\n\nPrebuilt prompts (``prompt: NAME``), what a true verdict means, polarity and "
    f"variables:\n\n{library_summary()}"
)

__all__ = ["LLMJudge", "LLMJudgeParams"]
