"""A module imported on first use, by the test that uses it: a reference library every worker
would otherwise import while collecting (scipy, statsmodels, scikit-learn: seconds each)."""

from __future__ import annotations

from typing import Any

import pytest


class LazyModule:
    """``pytest.importorskip(name)`` on first attribute access (the test is skipped without it)."""

    def __init__(self, name: str) -> None:
        self._name = name
        self._module: Any = None

    def __getattr__(self, attr: str) -> Any:
        if self._module is None:
            self._module = pytest.importorskip(self._name)
        return getattr(self._module, attr)
