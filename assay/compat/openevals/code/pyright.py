"""``from openevals.code.pyright import create_pyright_evaluator`` (see :mod:`assay.compat`)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from assay.compat._core import CompatEvaluator, as_async, wrap
from assay.compat.openevals.code.base import extraction_strategy
from assay.evaluators.code import PyrightCheck


def create_pyright_evaluator(
    *,
    pyright_cli_args: list[str] | None = None,
    code_extraction_strategy: str = "none",
    code_extractor: Callable[[Any], str] | None = None,
) -> CompatEvaluator:
    """Type-check the output with pyright (key ``pyright_succeeded``); the code is never run."""
    ev = PyrightCheck(
        cli_args=pyright_cli_args,
        code_extraction=extraction_strategy(code_extraction_strategy, code_extractor),
        code_extractor=code_extractor,
    )
    return wrap(ev, errors_fail=True)  # openevals: a check that cannot run fails, it does not raise


def create_async_pyright_evaluator(
    *,
    pyright_cli_args: list[str] | None = None,
    code_extraction_strategy: str = "none",
    code_extractor: Callable[[Any], str] | None = None,
) -> CompatEvaluator:
    """:func:`create_pyright_evaluator` whose evaluator is awaited: ``await evaluator(outputs=...)``."""
    return as_async(
        create_pyright_evaluator(
            pyright_cli_args=pyright_cli_args,
            code_extraction_strategy=code_extraction_strategy,
            code_extractor=code_extractor,
        )
    )


__all__ = ["create_async_pyright_evaluator", "create_pyright_evaluator"]
