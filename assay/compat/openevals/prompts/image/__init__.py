"""``from openevals.prompts.image import …`` (see :mod:`assay.compat.openevals.prompts`)."""

from __future__ import annotations

from assay.compat.openevals.prompts.image.explicit_content import EXPLICIT_CONTENT_PROMPT
from assay.compat.openevals.prompts.image.sensitive_imagery import SENSITIVE_IMAGERY_PROMPT

__all__ = [
    "EXPLICIT_CONTENT_PROMPT",
    "SENSITIVE_IMAGERY_PROMPT",
]
