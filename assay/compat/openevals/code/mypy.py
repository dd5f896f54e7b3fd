"""``from openevals.code.mypy import create_mypy_evaluator`` (see :mod:`assay.compat`)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, cast

from assay.compat._core import AsyncCompatEvaluator, CompatEvaluator, as_async, wrap
from assay.compat.openevals.code.base import COMPAT_CHECK_TIMEOUT, extraction_strategy
from assay.compat.openevals.types import EvaluatorResult as TypedResult
from assay.evaluators.code import MypyCheck


def create_mypy_evaluator(
    *,
    mypy_cli_args: list[str] | None = None,
    code_extraction_strategy: str = "none",
    code_extractor: Callable[[Any], str] | None = None,
) -> CompatEvaluator[TypedResult]:
    """Type-check the output with mypy (key ``mypy_succeeded``); the code is never run."""
    ev = MypyCheck(
        timeout=COMPAT_CHECK_TIMEOUT,  # openevals waits for the checker however long it takes
        cli_args=mypy_cli_args,
        code_extraction=extraction_strategy(code_extraction_strategy, code_extractor),
        code_extractor=code_extractor,
    )
    return cast(
        "CompatEvaluator[TypedResult]",
        wrap(ev, errors_fail=True),  # openevals: a check that cannot run fails, it does not raise
    )


def create_async_mypy_evaluator(
    *,
    mypy_cli_args: list[str] | None = None,
    code_extraction_strategy: str = "none",
    code_extractor: Callable[[Any], str] | None = None,
) -> AsyncCompatEvaluator[TypedResult]:
    """:func:`create_mypy_evaluator` whose evaluator is awaited: ``await evaluator(outputs=...)``."""
    return as_async(
        create_mypy_evaluator(
            mypy_cli_args=mypy_cli_args,
            code_extraction_strategy=code_extraction_strategy,
            code_extractor=code_extractor,
        )
    )


__all__ = ["create_async_mypy_evaluator", "create_mypy_evaluator"]
