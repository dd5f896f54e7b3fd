"""``potato.evaluators.base``: ``EvaluationResult`` (assay's ``Result``: ``key``, ``score``,
``value``, ``comment``, ``metadata``, in that order) and ``Evaluator``, the base class of an
evaluator of your own: set ``key``, implement ``evaluate(*, outputs=, reference_outputs=,
inputs=, **kwargs)``; calling the instance calls ``evaluate``.

>>> class Length(Evaluator):
...     key = "length"
...     def evaluate(self, *, outputs=None, reference_outputs=None, inputs=None, **kwargs):
...         return EvaluationResult(self.key, min(len(outputs) / 10, 1.0), len(outputs))
>>> Length()(outputs="hello").score
0.5
"""

from __future__ import annotations

from typing import Any

from assay.records import Result as EvaluationResult


class Evaluator:
    """potato's evaluator contract (a plain base class; assay's own evaluators have more)."""

    key: str = "evaluator"

    def evaluate(
        self, *, outputs: Any = None, reference_outputs: Any = None, inputs: Any = None, **kwargs: Any
    ) -> EvaluationResult:
        raise NotImplementedError(f"{type(self).__name__}.evaluate")

    def __call__(self, **kwargs: Any) -> EvaluationResult:
        return self.evaluate(**kwargs)


__all__ = ["EvaluationResult", "Evaluator"]
