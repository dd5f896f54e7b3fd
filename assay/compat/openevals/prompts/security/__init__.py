"""``from openevals.prompts.security import …`` (see :mod:`assay.compat.openevals.prompts`)."""

from __future__ import annotations

from assay.compat.openevals.prompts.security.code_injection import CODE_INJECTION_PROMPT
from assay.compat.openevals.prompts.security.pii_leakage import PII_LEAKAGE_PROMPT
from assay.compat.openevals.prompts.security.prompt_injection import PROMPT_INJECTION_PROMPT

__all__ = [
    "CODE_INJECTION_PROMPT",
    "PII_LEAKAGE_PROMPT",
    "PROMPT_INJECTION_PROMPT",
]
