"""``potato.evaluators.trajectory_match``: an unknown ``mode`` or ``tool_args_match_mode`` raises
a ``ValueError`` (assay's ``ConfigError`` too), as in potato.

>>> TrajectoryMatchEvaluator(mode="bogus")
Traceback (most recent call last):
...
assay.compat._core.CompatConfigError: evaluator 'trajectory_match': params.mode: ...
"""

from __future__ import annotations

from typing import Any

from assay.compat._core import CompatConfigError
from assay.evaluators import potato as _p
from assay.exceptions import ConfigError


class TrajectoryMatchEvaluator(_p.TrajectoryMatchEvaluator):
    """potato's ``TrajectoryMatchEvaluator(mode=, tool_args_match_mode=, tool_args_match_overrides=)``."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        try:
            super().__init__(*args, **kwargs)
        except ConfigError as exc:
            raise CompatConfigError(str(exc)) from None


__all__ = ["TrajectoryMatchEvaluator"]
