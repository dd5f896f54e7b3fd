"""One local Ray (2 CPUs) for the Ray tests of a pytest worker, started by the first of them and
stopped after the last: the tests that use it are in the ``ray`` xdist group, so they run one after
the other on one worker (``ray.init`` costs ~6 s of a loaded 2-core machine; an idle Ray left
running would cost ~4 % of a core for the rest of the session). Each job makes its own actors, so a
test that kills one leaves nothing behind for the next."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

ROOT = Path(__file__).resolve().parents[2]
FIXTURE = "ray_local"


class _LocalRay:
    def __init__(self) -> None:
        self.module: Any = None

    def start(self) -> Any:
        if self.module is None:
            ray = pytest.importorskip("ray")
            ray.init(
                num_cpus=2,
                include_dashboard=False,
                log_to_driver=False,
                runtime_env={"env_vars": {"PYTHONPATH": str(ROOT)}},
            )
            self.module = ray
        return self.module

    def stop(self) -> None:
        if self.module is not None:
            self.module.shutdown()
            self.module = None


_RAY = _LocalRay()


@pytest.fixture
def ray_local() -> Iterator[Any]:
    yield _RAY.start()


def pytest_runtest_teardown(item: pytest.Item, nextitem: pytest.Item | None) -> None:
    """Stop the local Ray after the last test in a row that uses it."""
    if nextitem is None or FIXTURE not in getattr(nextitem, "fixturenames", ()):
        _RAY.stop()
