"""``potato.evaluators.agentevals_adapter``. assay implements agentevals' graph trajectory
evaluators itself, so ``is_available()`` is True and the factories always work (potato's answer
when agentevals is installed); ``_AgentEvalsWrapper`` turns any agentevals-style callable
(``fn(outputs=, reference_outputs=, **kw)`` → a result dict or a list of them) into an evaluator.

>>> w = _AgentEvalsWrapper(lambda **kw: {"key": "k", "score": True, "comment": "ok"}, key="k")
>>> r = w.evaluate(outputs="x")
>>> r.score, r.value, r.metadata["source"]
(1.0, True, 'agentevals')
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from assay.evaluators.agentevals_adapter import graph_trajectory_llm_judge, graph_trajectory_strict_match, is_available
from assay.records import Result


class _AgentEvalsWrapper:
    """An agentevals evaluator callable with potato's ``evaluate(outputs=, reference_outputs=, inputs=)``."""

    def __init__(self, fn: Callable[..., Any], key: str) -> None:
        self._fn = fn
        self.key = key

    def evaluate(
        self, *, outputs: Any = None, reference_outputs: Any = None, inputs: Any = None, **kwargs: Any
    ) -> Result:
        result = self._fn(outputs=outputs, reference_outputs=reference_outputs, **kwargs)
        if isinstance(result, list):
            result = result[0] if result else {}
        if not isinstance(result, dict):
            return Result(self.key, None, result, "", {"source": "agentevals"})
        raw = result.get("score")
        score = float(raw) if isinstance(raw, bool | int | float) else None
        return Result(result.get("key", self.key), score, raw, result.get("comment") or "", {"source": "agentevals"})

    __call__ = evaluate


__all__ = ["graph_trajectory_llm_judge", "graph_trajectory_strict_match", "is_available"]
