"""``potato.evaluators.llm_judge``."""

from __future__ import annotations

from assay.evaluators.potato import LLMTrajectoryJudge

__all__ = ["LLMTrajectoryJudge"]
