"""One local Ray (2 CPUs) for every Ray test of a pytest worker: the tests that use it are in the
``ray`` xdist group, so one worker starts it once (``ray.init`` costs ~6 s of a loaded 2-core
machine) and stops it at the end of the session. Each job makes its own actors, so a test that
kills one leaves nothing behind for the next."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="session")
def ray_local() -> Iterator[Any]:
    ray = pytest.importorskip("ray")
    ray.init(
        num_cpus=2,
        include_dashboard=False,
        log_to_driver=False,
        runtime_env={"env_vars": {"PYTHONPATH": str(ROOT)}},
    )
    try:
        yield ray
    finally:
        ray.shutdown()
