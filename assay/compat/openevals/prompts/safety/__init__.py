"""``from openevals.prompts.safety import …`` (see :mod:`assay.compat.openevals.prompts`)."""

from __future__ import annotations

from assay.compat.openevals.prompts.safety.fairness import FAIRNESS_PROMPT
from assay.compat.openevals.prompts.safety.toxicity import TOXICITY_PROMPT

__all__ = [
    "FAIRNESS_PROMPT",
    "TOXICITY_PROMPT",
]
