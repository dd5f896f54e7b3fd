"""``from openevals.code.e2b.execution import create_e2b_execution_evaluator``, run locally.

The code runs in assay's ``code_execution`` sandbox (a limited child interpreter with no network,
see docs/evaluators.md) instead of an E2B sandbox: ``sandbox`` and ``sandbox_project_directory``
are accepted and ignored, and the generated code's dependencies are not installed (an import of a
package this interpreter lacks fails the run).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from assay.compat._core import CompatEvaluator, wrap
from assay.evaluators.code_exec import CodeExecution


def create_e2b_execution_evaluator(
    *,
    sandbox: Any = None,
    environment_variables: dict[str, str] | None = None,
    sandbox_project_directory: str | None = None,
    code_extraction_strategy: str = "none",
    code_extractor: Callable[[Any], str] | None = None,
) -> CompatEvaluator:
    """Run the output's code; key ``execution_succeeded``, score True when it exits cleanly."""
    del sandbox, sandbox_project_directory  # E2B's; the local sandbox needs neither
    ev = CodeExecution(
        environment_variables=environment_variables or {},
        code_extraction=code_extraction_strategy,
        code_extractor=code_extractor,
    )
    return wrap(ev)


__all__ = ["create_e2b_execution_evaluator"]
