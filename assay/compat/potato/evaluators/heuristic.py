"""``potato.evaluators.heuristic``: assay's text evaluators reading outputs as potato does.

potato reads an output (or reference) given as a dict through its text field: the first of
``output``, ``text``, ``content``, ``answer``, ``final_answer`` that holds a string. These classes
do the same before scoring; anything else is read as assay reads it (JSON values compared as
values, not as their Python ``str()``).

>>> ExactMatch().evaluate(outputs={"output": "hi"}, reference_outputs="hi").score
1.0
"""

from __future__ import annotations

from typing import Any

from assay.evaluators import heuristic as _h
from assay.evaluators import potato as _p
from assay.records import Result

TEXT_FIELDS = ("output", "text", "content", "answer", "final_answer")


def potato_text(value: Any) -> Any:
    """A dict's text field (see the module docstring), else the value itself."""
    if isinstance(value, dict):
        for name in TEXT_FIELDS:
            if isinstance(value.get(name), str):
                return value[name]
    return value


class _PotatoText:
    """Unwrap potato's text containers in ``evaluate`` / ``aevaluate`` / calling the evaluator."""

    def evaluate(
        self, *, outputs: Any = None, reference_outputs: Any = None, inputs: Any = None, **kwargs: Any
    ) -> Result:
        base: Any = super()
        result: Result = base.evaluate(
            outputs=potato_text(outputs), reference_outputs=potato_text(reference_outputs), inputs=inputs, **kwargs
        )
        return result

    async def aevaluate(
        self, *, outputs: Any = None, reference_outputs: Any = None, inputs: Any = None, **kwargs: Any
    ) -> Result:
        base: Any = super()
        result: Result = await base.aevaluate(
            outputs=potato_text(outputs), reference_outputs=potato_text(reference_outputs), inputs=inputs, **kwargs
        )
        return result

    def __call__(self, **kwargs: Any) -> Result:
        return self.evaluate(**kwargs)


class ExactMatch(_PotatoText, _h.ExactMatch):
    """potato's ``ExactMatch(case_sensitive=True, strip=True)``."""


class Contains(_PotatoText, _h.Contains):
    """potato's ``Contains(substring=None)`` (the reference when no substring)."""


class RegexMatch(_PotatoText, _h.RegexMatch):
    """potato's ``RegexMatch(pattern)``."""


class EditDistance(_PotatoText, _h.EditDistance):
    """potato's ``EditDistance()``: ``value`` is the Levenshtein distance, ``score`` 1 − distance / max length."""


class JSONValid(_PotatoText, _p.JSONValid):
    """potato's ``JSONValid()``."""


class JSONSchemaMatch(_PotatoText, _p.JSONSchemaMatch):
    """potato's ``JSONSchemaMatch(schema)``."""


EmbeddingDistance = _p.EmbeddingDistance

__all__ = ["Contains", "EditDistance", "EmbeddingDistance", "ExactMatch", "JSONSchemaMatch", "JSONValid", "RegexMatch"]
