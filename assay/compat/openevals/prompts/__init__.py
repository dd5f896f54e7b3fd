"""openevals' prebuilt prompt constants (``from openevals.prompts import CORRECTNESS_PROMPT``):
the template texts of assay's prompt library, in openevals' sub-modules too
(``openevals.prompts.quality.correctness``, ``openevals.prompts.conversation`` …);
``assay evaluators show llm_judge`` lists them.

Each is an f-string style template, as in openevals; passed to
:func:`assay.compat.openevals.llm.create_llm_as_judge` unchanged it is recognised as the prebuilt
prompt (its polarity and optional variables apply); edited, it is a template of your own.

>>> "{outputs}" in CORRECTNESS_PROMPT
True
"""

from __future__ import annotations

from assay.compat.openevals.prompts.conversation import (
    AGENT_TONE_PROMPT,
    KNOWLEDGE_RETENTION_PROMPT,
    LANGUAGE_DETECTION_PROMPT,
    PERCEIVED_ERROR_PROMPT,
    SUPPORT_INTENT_PROMPT,
    TASK_COMPLETION_PROMPT,
    USER_SATISFACTION_PROMPT,
    WINS_PROMPT,
)
from assay.compat.openevals.prompts.image import (
    EXPLICIT_CONTENT_PROMPT,
    SENSITIVE_IMAGERY_PROMPT,
)
from assay.compat.openevals.prompts.quality import (
    ANSWER_RELEVANCE_PROMPT,
    CODE_CORRECTNESS_PROMPT,
    CODE_CORRECTNESS_PROMPT_WITH_REFERENCE_OUTPUTS,
    CONCISENESS_PROMPT,
    CORRECTNESS_PROMPT,
    HALLUCINATION_PROMPT,
    LAZINESS_PROMPT,
    PLAN_ADHERENCE_PROMPT,
)
from assay.compat.openevals.prompts.rag import (
    RAG_GROUNDEDNESS_PROMPT,
    RAG_HELPFULNESS_PROMPT,
    RAG_RETRIEVAL_RELEVANCE_PROMPT,
)
from assay.compat.openevals.prompts.safety import (
    FAIRNESS_PROMPT,
    TOXICITY_PROMPT,
)
from assay.compat.openevals.prompts.security import (
    CODE_INJECTION_PROMPT,
    PII_LEAKAGE_PROMPT,
    PROMPT_INJECTION_PROMPT,
)
from assay.compat.openevals.prompts.trajectory import (
    TOOL_SELECTION_PROMPT,
    TRAJECTORY_ACCURACY_PROMPT,
    TRAJECTORY_ACCURACY_PROMPT_WITH_REFERENCE,
)
from assay.compat.openevals.prompts.voice import (
    AUDIO_QUALITY_PROMPT,
    TRANSCRIPTION_ACCURACY_PROMPT,
    USER_INTERRUPTS_PROMPT,
    VOCAL_AFFECT_PROMPT,
)

__all__ = [
    "AGENT_TONE_PROMPT",
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
    "KNOWLEDGE_RETENTION_PROMPT",
    "LANGUAGE_DETECTION_PROMPT",
    "LAZINESS_PROMPT",
    "PERCEIVED_ERROR_PROMPT",
    "PII_LEAKAGE_PROMPT",
    "PLAN_ADHERENCE_PROMPT",
    "PROMPT_INJECTION_PROMPT",
    "RAG_GROUNDEDNESS_PROMPT",
    "RAG_HELPFULNESS_PROMPT",
    "RAG_RETRIEVAL_RELEVANCE_PROMPT",
    "SENSITIVE_IMAGERY_PROMPT",
    "SUPPORT_INTENT_PROMPT",
    "TASK_COMPLETION_PROMPT",
    "TOOL_SELECTION_PROMPT",
    "TOXICITY_PROMPT",
    "TRAJECTORY_ACCURACY_PROMPT",
    "TRAJECTORY_ACCURACY_PROMPT_WITH_REFERENCE",
    "TRANSCRIPTION_ACCURACY_PROMPT",
    "USER_INTERRUPTS_PROMPT",
    "USER_SATISFACTION_PROMPT",
    "VOCAL_AFFECT_PROMPT",
    "WINS_PROMPT",
]
