"""``potato.evaluators.base``: ``Evaluator`` (assay's evaluator base) and ``EvaluationResult``
(assay's ``Result``: ``key``, ``score``, ``value``, ``comment``, ``metadata``)."""

from __future__ import annotations

from assay.evaluators.base import BaseEvaluator as Evaluator
from assay.records import Result as EvaluationResult

__all__ = ["EvaluationResult", "Evaluator"]
