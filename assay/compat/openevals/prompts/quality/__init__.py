"""``from openevals.prompts.quality import …`` (see :mod:`assay.compat.openevals.prompts`)."""

from __future__ import annotations

from assay.compat.openevals.prompts.quality.answer_relevance import ANSWER_RELEVANCE_PROMPT
from assay.compat.openevals.prompts.quality.code_correctness import (
    CODE_CORRECTNESS_PROMPT,
    CODE_CORRECTNESS_PROMPT_WITH_REFERENCE_OUTPUTS,
)
from assay.compat.openevals.prompts.quality.conciseness import CONCISENESS_PROMPT
from assay.compat.openevals.prompts.quality.correctness import CORRECTNESS_PROMPT
from assay.compat.openevals.prompts.quality.hallucination import HALLUCINATION_PROMPT
from assay.compat.openevals.prompts.quality.laziness import LAZINESS_PROMPT
from assay.compat.openevals.prompts.quality.plan_adherence import PLAN_ADHERENCE_PROMPT

__all__ = [
    "ANSWER_RELEVANCE_PROMPT",
    "CODE_CORRECTNESS_PROMPT",
    "CODE_CORRECTNESS_PROMPT_WITH_REFERENCE_OUTPUTS",
    "CONCISENESS_PROMPT",
    "CORRECTNESS_PROMPT",
    "HALLUCINATION_PROMPT",
    "LAZINESS_PROMPT",
    "PLAN_ADHERENCE_PROMPT",
]
