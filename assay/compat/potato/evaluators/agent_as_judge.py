"""``potato.evaluators.agent_as_judge``."""

from __future__ import annotations

from assay.evaluators.potato import AgentAsJudgeEvaluator

__all__ = ["AgentAsJudgeEvaluator"]
