"""``from openevals.code.mypy import create_mypy_evaluator`` (see :mod:`assay.compat`)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from assay.compat._core import CompatEvaluator, wrap
from assay.evaluators.code import MypyCheck


def create_mypy_evaluator(
    *,
    mypy_cli_args: list[str] | None = None,
    code_extraction_strategy: str = "none",
    code_extractor: Callable[[Any], str] | None = None,
) -> CompatEvaluator:
    """Type-check the output with mypy (key ``mypy_succeeded``); the code is never run."""
    ev = MypyCheck(cli_args=mypy_cli_args, code_extraction=code_extraction_strategy, code_extractor=code_extractor)
    return wrap(ev)


__all__ = ["create_mypy_evaluator"]
