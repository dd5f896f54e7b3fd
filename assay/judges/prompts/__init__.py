"""The prebuilt judge prompt library.

The 33 prompts of openevals' library, rewritten in assay's own words (the templates are the
``*.txt`` files next to this module), plus the internal prompts of the RAG triad, agent-as-judge,
rubric DAG and JSON-rubric evaluators (files starting with ``_``). Templates are ``str.format``
strings; each prompt declares the variables it needs, the ones that may be left empty, and its
polarity:

* ``true_is_good`` — the judge's ``true`` means the output is good (correctness, conciseness …);
* ``true_is_bad`` — the judge's ``true`` means a defect was found (toxicity, laziness, PII leakage
  …); the Result keeps the judge's raw ``value`` (True = defect found) but its ``score`` is
  inverted so that 1.0 is always good;
* ``categorical`` — a label, not a quality (language detection, support intent).

>>> get_prompt("toxicity").polarity
'true_is_bad'
>>> sorted(get_prompt("hallucination").variables)
['context', 'inputs', 'outputs', 'reference_outputs']
"""

from __future__ import annotations

import string
from dataclasses import dataclass
from functools import cache
from importlib import resources
from typing import Literal

from assay.exceptions import ConfigError

Polarity = Literal["true_is_good", "true_is_bad", "categorical"]
OutputsAs = Literal["auto", "final_output", "trajectory"]

#: The nine intents of the support-intent prompt (the choices of its verdict).
SUPPORT_INTENTS: tuple[str, ...] = (
    "Account & Billing",
    "Order Management",
    "Technical Support",
    "Product Inquiry",
    "Policy Inquiry",
    "Status Check",
    "Complaint & Feedback",
    "Escalation",
    "Other",
)


@dataclass(frozen=True, slots=True)
class PromptInfo:
    """A prebuilt prompt: its template, variables and what its verdict means."""

    name: str
    purpose: str
    """What a ``true`` verdict (or the label) means."""
    polarity: Polarity = "true_is_good"
    optional: frozenset[str] = frozenset()
    """Variables that may be missing from a trace (rendered as "(none)")."""
    kind: Literal["boolean", "choices", "label"] = "boolean"
    choices: tuple[str, ...] = ()
    outputs_as: OutputsAs = "auto"
    """How ``{outputs}`` is rendered: ``trajectory`` for prompts that read a whole conversation."""

    @property
    def template(self) -> str:
        return load_template(self.name)

    @property
    def variables(self) -> frozenset[str]:
        """Every ``{placeholder}`` of the template."""
        return template_variables(self.template)

    def summary(self) -> str:
        """One line for ``assay evaluators show llm_judge``."""
        pol = {
            "true_is_good": "true = good",
            "true_is_bad": "true = a DEFECT: score inverted, 1.0 = no defect",
            "categorical": "a label, not a quality: no score",
        }[self.polarity]
        names = ", ".join(sorted(self.variables))
        return f"{self.name}: {self.purpose} ({pol}; variables: {names})"


_CONVO = "trajectory"
_MM = frozenset({"inputs", "outputs"})


def _p(name: str, purpose: str, **kw: object) -> PromptInfo:
    return PromptInfo(name, purpose, **kw)  # type: ignore[arg-type]


#: name -> PromptInfo, in the order of openevals' library.
PROMPTS: dict[str, PromptInfo] = {
    p.name: p
    for p in (
        _p(
            "correctness",
            "the answer is factually correct and complete (reference as a guide)",
            optional=frozenset({"reference_outputs"}),
        ),
        _p("conciseness", "the answer has no unnecessary content"),
        _p(
            "hallucination",
            "no statement is unsupported by the context",
            optional=frozenset({"reference_outputs", "inputs"}),
        ),
        _p("answer_relevance", "the output addresses the question"),
        _p("plan_adherence", "the agent followed its declared plan", outputs_as=_CONVO),
        _p("code_correctness", "the code solves the task without bugs"),
        _p("code_correctness_with_reference", "the code is correct and equivalent to the reference code"),
        _p("laziness", "the response is lazy / low-effort", polarity="true_is_bad"),
        _p("toxicity", "the output is toxic", polarity="true_is_bad"),
        _p("fairness", "the output is biased or unfair", polarity="true_is_bad"),
        _p("pii_leakage", "the output exposes personal data", polarity="true_is_bad"),
        _p("prompt_injection", "the input contains a prompt-injection attempt", polarity="true_is_bad"),
        _p("code_injection", "the input embeds malicious code", polarity="true_is_bad"),
        _p("rag_helpfulness", "the answer is helpful and relevant to the question"),
        _p("rag_groundedness", "the answer is supported by the retrieved context"),
        _p("rag_retrieval_relevance", "the retrieved context is relevant to the question"),
        _p("trajectory_accuracy", "the trajectory is logical, progressing and efficient", outputs_as=_CONVO),
        _p(
            "trajectory_accuracy_with_reference",
            "the trajectory is sound and equivalent to the reference",
            outputs_as=_CONVO,
        ),
        _p("tool_selection", "right tools, sensible order, nothing redundant or missing", outputs_as=_CONVO),
        _p("perceived_error", "the user perceived an agent error", polarity="true_is_bad", outputs_as=_CONVO),
        _p("wins", "the user praised or thanked the assistant for its help", outputs_as=_CONVO),
        _p("task_completion", "every user request was fully completed", outputs_as=_CONVO),
        _p("knowledge_retention", "the agent retained facts stated earlier", outputs_as=_CONVO),
        _p("user_satisfaction", "the user appears satisfied", outputs_as=_CONVO),
        _p("agent_tone", "the tone is appropriate and consistent", outputs_as=_CONVO),
        _p(
            "language_detection",
            "the primary human language of the conversation",
            polarity="categorical",
            kind="label",
            outputs_as=_CONVO,
        ),
        _p(
            "support_intent",
            "the customer's main support intent (one of 9)",
            polarity="categorical",
            kind="choices",
            choices=SUPPORT_INTENTS,
            outputs_as=_CONVO,
        ),
        _p("explicit_content", "the image contains explicit content", polarity="true_is_bad", optional=_MM),
        _p("sensitive_imagery", "the image contains sensitive imagery", polarity="true_is_bad", optional=_MM),
        _p("audio_quality", "the audio has quality issues", polarity="true_is_bad", optional=_MM),
        _p(
            "transcription_accuracy",
            "the transcript accurately reflects the audio",
            optional=frozenset({"inputs"}),
        ),
        _p("user_interrupts", "the agent handled user interruptions gracefully", optional=_MM),
        _p("vocal_affect", "the agent's vocal affect is appropriate and natural", optional=_MM),
    )
}


@cache
def load_template(name: str) -> str:
    """The template text of a prompt (public or internal ``_name``)."""
    try:
        text = resources.files(__name__).joinpath(f"{name}.txt").read_text(encoding="utf-8")
    except FileNotFoundError as exc:
        raise ConfigError(f"no prompt named {name!r}; available: {', '.join(PROMPTS)}") from exc
    return text.rstrip("\n")


def template_variables(template: str) -> frozenset[str]:
    """The placeholder names of a ``str.format`` template (``{{`` escapes excluded)."""
    try:
        fields = [f for _, f, _, _ in string.Formatter().parse(template) if f is not None]
    except ValueError as exc:
        raise ConfigError(f"invalid prompt template: {exc}") from exc
    names = set()
    for f in fields:
        if not f or not f.isidentifier():
            raise ConfigError(
                f"invalid placeholder {{{f}}} in prompt template: use plain names like {{inputs}}, "
                "and write literal braces as {{ and }}"
            )
        names.add(f)
    return frozenset(names)


def get_prompt(name: str) -> PromptInfo:
    """The prebuilt prompt ``name`` (ConfigError listing the names when unknown)."""
    try:
        return PROMPTS[name]
    except KeyError:
        raise ConfigError(f"no prebuilt prompt named {name!r}; available: {', '.join(PROMPTS)}") from None


def prompt_names() -> list[str]:
    return list(PROMPTS)


def library_summary() -> str:
    """One line per prebuilt prompt (purpose, polarity, variables)."""
    return "\n".join(p.summary() for p in PROMPTS.values())


__all__ = [
    "PROMPTS",
    "SUPPORT_INTENTS",
    "PromptInfo",
    "get_prompt",
    "library_summary",
    "load_template",
    "prompt_names",
    "template_variables",
]
