"""``from openevals.code.e2b.pyright import create_e2b_pyright_evaluator``, run locally: pyright on
this machine, without installing the code's dependencies (missing imports are ignored)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from assay.compat._core import AsyncCompatEvaluator, CompatEvaluator, as_async
from assay.compat.openevals.code.e2b import ignore_sandbox
from assay.compat.openevals.code.pyright import create_pyright_evaluator
from assay.compat.openevals.types import EvaluatorResult as TypedResult


def create_e2b_pyright_evaluator(
    *,
    sandbox: Any = None,
    pyright_cli_args: list[str] | None = None,
    sandbox_project_directory: str | None = None,
    code_extraction_strategy: str = "none",
    code_extractor: Callable[[Any], str] | None = None,
) -> CompatEvaluator[TypedResult]:
    """Type-check the output with the local pyright (key ``pyright_succeeded``)."""
    ignore_sandbox(sandbox)
    del sandbox_project_directory
    return create_pyright_evaluator(
        pyright_cli_args=pyright_cli_args,
        code_extraction_strategy=code_extraction_strategy,
        code_extractor=code_extractor,
    )


def create_async_e2b_pyright_evaluator(
    *,
    sandbox: Any = None,
    pyright_cli_args: list[str] | None = None,
    sandbox_project_directory: str | None = None,
    code_extraction_strategy: str = "none",
    code_extractor: Callable[[Any], str] | None = None,
) -> AsyncCompatEvaluator[TypedResult]:
    """:func:`create_e2b_pyright_evaluator` whose evaluator is awaited: ``await evaluator(outputs=...)``."""
    return as_async(
        create_e2b_pyright_evaluator(
            sandbox=sandbox,
            pyright_cli_args=pyright_cli_args,
            sandbox_project_directory=sandbox_project_directory,
            code_extraction_strategy=code_extraction_strategy,
            code_extractor=code_extractor,
        )
    )


__all__ = ["create_async_e2b_pyright_evaluator", "create_e2b_pyright_evaluator"]
