"""``from openevals.string.levenshtein import levenshtein_distance`` (see :mod:`assay.compat`).

Score ``1 - distance / max(len)`` over code points (two empty texts: 1.0); values that are not
text are compared as ``json.dumps`` text, as openevals does. assay's ``edit_distance`` evaluator
is the same measure with potato's text rule (``str()`` of non-strings).

>>> levenshtein_distance(outputs="kitten", reference_outputs="sitting")["score"]
0.5714285714285714
"""

from __future__ import annotations

import json
from typing import Any

from rapidfuzz.distance import Levenshtein

from assay.compat._core import EvaluatorResult


def _text(value: Any) -> str:
    return value if isinstance(value, str) else json.dumps(value)


def levenshtein_distance(*, outputs: Any, reference_outputs: Any, **kwargs: Any) -> EvaluatorResult:
    """Normalised Levenshtein similarity (key ``levenshtein_distance``, a float score)."""
    if outputs is None or reference_outputs is None:
        raise ValueError("Levenshtein distance requires both outputs and reference_outputs")
    a, b = _text(outputs), _text(reference_outputs)
    longest = max(len(a), len(b))
    score = 1.0 if longest == 0 else 1.0 - Levenshtein.distance(a, b) / longest
    return EvaluatorResult(key="levenshtein_distance", score=score, comment=None, metadata=None)


async def levenshtein_distance_async(*, outputs: Any, reference_outputs: Any, **kwargs: Any) -> EvaluatorResult:
    """:func:`levenshtein_distance`, awaited."""
    return levenshtein_distance(outputs=outputs, reference_outputs=reference_outputs, **kwargs)


__all__ = ["levenshtein_distance", "levenshtein_distance_async"]
