"""``potato.evaluators.rubric_dag``."""

from __future__ import annotations

from assay.evaluators.potato import RUBRIC_PRESETS, make_rubric_dag
from assay.evaluators.rubric_dag import RubricDag as RubricDagEvaluator

__all__ = ["RUBRIC_PRESETS", "RubricDagEvaluator", "make_rubric_dag"]
