"""openevals' prebuilt prompt constants (``from openevals.prompts import CORRECTNESS_PROMPT``):
the template texts of assay's prompt library (``assay evaluators show llm_judge`` lists them).

Each is an f-string style template, as in openevals; passed to
:func:`assay.compat.openevals.llm.create_llm_as_judge` unchanged it is recognised as the prebuilt
prompt (its polarity and optional variables apply); edited, it is a template of your own.

>>> "{outputs}" in CORRECTNESS_PROMPT
True
"""

from __future__ import annotations

from assay.judges.prompts import get_prompt


def _text(name: str) -> str:
    return get_prompt(name).template


ANSWER_RELEVANCE_PROMPT = _text("answer_relevance")
AUDIO_QUALITY_PROMPT = _text("audio_quality")
CODE_CORRECTNESS_PROMPT = _text("code_correctness")
CODE_CORRECTNESS_PROMPT_WITH_REFERENCE_OUTPUTS = _text("code_correctness_with_reference")
CODE_INJECTION_PROMPT = _text("code_injection")
CONCISENESS_PROMPT = _text("conciseness")
CORRECTNESS_PROMPT = _text("correctness")
EXPLICIT_CONTENT_PROMPT = _text("explicit_content")
FAIRNESS_PROMPT = _text("fairness")
HALLUCINATION_PROMPT = _text("hallucination")
LAZINESS_PROMPT = _text("laziness")
PII_LEAKAGE_PROMPT = _text("pii_leakage")
PLAN_ADHERENCE_PROMPT = _text("plan_adherence")
PROMPT_INJECTION_PROMPT = _text("prompt_injection")
RAG_GROUNDEDNESS_PROMPT = _text("rag_groundedness")
RAG_HELPFULNESS_PROMPT = _text("rag_helpfulness")
RAG_RETRIEVAL_RELEVANCE_PROMPT = _text("rag_retrieval_relevance")
SENSITIVE_IMAGERY_PROMPT = _text("sensitive_imagery")
TOXICITY_PROMPT = _text("toxicity")
TRAJECTORY_ACCURACY_PROMPT = _text("trajectory_accuracy")
TRAJECTORY_ACCURACY_PROMPT_WITH_REFERENCE = _text("trajectory_accuracy_with_reference")
TRANSCRIPTION_ACCURACY_PROMPT = _text("transcription_accuracy")
USER_INTERRUPTS_PROMPT = _text("user_interrupts")
VOCAL_AFFECT_PROMPT = _text("vocal_affect")

__all__ = [
    "ANSWER_RELEVANCE_PROMPT",
    "AUDIO_QUALITY_PROMPT",
    "CODE_CORRECTNESS_PROMPT",
    "CODE_CORRECTNESS_PROMPT_WITH_REFERENCE_OUTPUTS",
    "CODE_INJECTION_PROMPT",
    "CONCISENESS_PROMPT",
    "CORRECTNESS_PROMPT",
    "EXPLICIT_CONTENT_PROMPT",
    "FAIRNESS_PROMPT",
    "HALLUCINATION_PROMPT",
    "LAZINESS_PROMPT",
    "PII_LEAKAGE_PROMPT",
    "PLAN_ADHERENCE_PROMPT",
    "PROMPT_INJECTION_PROMPT",
    "RAG_GROUNDEDNESS_PROMPT",
    "RAG_HELPFULNESS_PROMPT",
    "RAG_RETRIEVAL_RELEVANCE_PROMPT",
    "SENSITIVE_IMAGERY_PROMPT",
    "TOXICITY_PROMPT",
    "TRAJECTORY_ACCURACY_PROMPT",
    "TRAJECTORY_ACCURACY_PROMPT_WITH_REFERENCE",
    "TRANSCRIPTION_ACCURACY_PROMPT",
    "USER_INTERRUPTS_PROMPT",
    "VOCAL_AFFECT_PROMPT",
]
