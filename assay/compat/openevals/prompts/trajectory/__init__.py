"""``from openevals.prompts.trajectory import …`` (see :mod:`assay.compat.openevals.prompts`)."""

from __future__ import annotations

from assay.compat.openevals.prompts.trajectory.accuracy import (
    TRAJECTORY_ACCURACY_PROMPT,
    TRAJECTORY_ACCURACY_PROMPT_WITH_REFERENCE,
)
from assay.compat.openevals.prompts.trajectory.tool_selection import TOOL_SELECTION_PROMPT

__all__ = [
    "TOOL_SELECTION_PROMPT",
    "TRAJECTORY_ACCURACY_PROMPT",
    "TRAJECTORY_ACCURACY_PROMPT_WITH_REFERENCE",
]
