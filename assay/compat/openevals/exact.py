"""``from openevals.exact import exact_match`` (see :mod:`assay.compat`).

openevals' rule, kept exactly: the two values are equal when their JSON texts with sorted keys are
(so key order is ignored, ``1`` differs from ``1.0`` and from ``"1"``, ``"a "`` from ``"a"``).
assay's own ``exact_match`` evaluator (``assay.evaluators.ExactMatch``) is potato's text rule with
options; this function is openevals'.

>>> exact_match(outputs={"a": 1, "b": 2}, reference_outputs={"b": 2, "a": 1})["score"]
True
"""

from __future__ import annotations

import json
from typing import Any

from assay.compat._core import EvaluatorResult


def exact_match(*, outputs: Any, reference_outputs: Any, **kwargs: Any) -> EvaluatorResult:
    """Whether ``outputs`` equals ``reference_outputs`` (key ``exact_match``, a bool score)."""
    if outputs is None or reference_outputs is None:
        raise ValueError("Exact match requires both outputs and reference_outputs")
    equal = json.dumps(outputs, sort_keys=True) == json.dumps(reference_outputs, sort_keys=True)
    return EvaluatorResult(key="exact_match", score=equal, comment=None, metadata=None)


async def exact_match_async(*, outputs: Any, reference_outputs: Any, **kwargs: Any) -> EvaluatorResult:
    """:func:`exact_match`, awaited."""
    return exact_match(outputs=outputs, reference_outputs=reference_outputs, **kwargs)


__all__ = ["exact_match", "exact_match_async"]
