"""The ``fixture_name`` fixture: every sample file of the same agent run."""

from __future__ import annotations

import pytest
from format_samples import FORMAT_OF


@pytest.fixture(params=sorted(FORMAT_OF))
def fixture_name(request: pytest.FixtureRequest) -> str:
    return str(request.param)
