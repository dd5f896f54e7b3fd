"""Whether ``code_execution``'s sandbox can be built here: tests that run code need it.

Outside CI a machine without the namespaces skips those tests, saying why; in CI (``CI=true``)
they must run, so a missing sandbox fails them.
"""

from __future__ import annotations

import os

import pytest

from assay.evaluators.sandbox import sandbox_unavailable


def require_sandbox() -> None:
    why = sandbox_unavailable()
    if why is None:
        return
    if os.environ.get("CI", "").lower() == "true":
        pytest.fail(f"CI must run the code sandbox's tests, but the sandbox cannot be built: {why}")
    pytest.skip(f"the code sandbox cannot be built on this machine: {why}")


@pytest.fixture
def sandbox() -> None:
    """Use as ``@pytest.mark.usefixtures("sandbox")``: skip (fail in CI) without the sandbox."""
    require_sandbox()
