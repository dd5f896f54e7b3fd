"""``from openevals.code.e2b.execution import create_e2b_execution_evaluator``, run locally.

The code runs in assay's ``code_execution`` sandbox (a limited child interpreter with no network,
see docs/evaluators.md) instead of an E2B sandbox: ``sandbox`` and ``sandbox_project_directory``
are accepted and ignored, and the generated code's dependencies are not installed (an import of a
package this interpreter lacks fails the run).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, cast

from assay.compat._core import AsyncCompatEvaluator, CompatEvaluator, as_async, wrap
from assay.compat.openevals.code.base import extraction_strategy
from assay.compat.openevals.code.e2b import ignore_sandbox
from assay.compat.openevals.types import EvaluatorResult as TypedResult
from assay.evaluators.code_exec import CodeExecution


def create_e2b_execution_evaluator(
    *,
    sandbox: Any = None,
    environment_variables: dict[str, str] | None = None,
    sandbox_project_directory: str | None = None,
    code_extraction_strategy: str = "none",
    code_extractor: Callable[[Any], str] | None = None,
) -> CompatEvaluator[TypedResult]:
    """Run the output's code; key ``execution_succeeded``, score True when it exits cleanly."""
    ignore_sandbox(sandbox)  # E2B's; the local sandbox needs neither it nor a project directory
    del sandbox_project_directory
    ev = CodeExecution(
        environment_variables=environment_variables or {},
        code_extraction=extraction_strategy(code_extraction_strategy, code_extractor),
        code_extractor=code_extractor,
    )
    return cast("CompatEvaluator[TypedResult]", wrap(ev))


def create_async_e2b_execution_evaluator(
    *,
    sandbox: Any = None,
    environment_variables: dict[str, str] | None = None,
    sandbox_project_directory: str | None = None,
    code_extraction_strategy: str = "none",
    code_extractor: Callable[[Any], str] | None = None,
) -> AsyncCompatEvaluator[TypedResult]:
    """:func:`create_e2b_execution_evaluator` whose evaluator is awaited: ``await evaluator(outputs=...)``."""
    return as_async(
        create_e2b_execution_evaluator(
            sandbox=sandbox,
            environment_variables=environment_variables,
            sandbox_project_directory=sandbox_project_directory,
            code_extraction_strategy=code_extraction_strategy,
            code_extractor=code_extractor,
        )
    )


__all__ = ["create_async_e2b_execution_evaluator", "create_e2b_execution_evaluator"]
