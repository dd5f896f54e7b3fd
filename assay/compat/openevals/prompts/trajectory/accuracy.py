"""The prompt constants of ``openevals.prompts.trajectory.accuracy``."""

from __future__ import annotations

from assay.compat.openevals.prompts._text import prompt_text

TRAJECTORY_ACCURACY_PROMPT = prompt_text("trajectory_accuracy")
TRAJECTORY_ACCURACY_PROMPT_WITH_REFERENCE = prompt_text("trajectory_accuracy_with_reference")

__all__ = ["TRAJECTORY_ACCURACY_PROMPT", "TRAJECTORY_ACCURACY_PROMPT_WITH_REFERENCE"]
