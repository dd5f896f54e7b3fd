"""One rubric key of one list item, as :mod:`assay.evaluators.json_match` finds it and
:mod:`assay.evaluators.json_rubric` grades it (a module of its own so that neither imports the other)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

__all__ = ["RubricItem"]


@dataclass(slots=True)
class RubricItem:
    """One rubric key of one list item to be graded: where its score goes and what to show the judge."""

    index: int
    key: str
    criteria: str
    output: Any
    reference: Any
