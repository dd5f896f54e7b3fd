"""Fixtures of the operations tests: a copy of the quickstart example and the real CLI in a subprocess."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[3]


def cli_env(**extra: str) -> dict[str, str]:
    """The environment of a CLI subprocess: this checkout first on the path."""
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join([str(REPO), *filter(None, [env.get("PYTHONPATH")])])
    env.update(extra)
    return env


@pytest.fixture
def quickstart(tmp_path: Path) -> Path:
    """The quickstart run file, copied with its traces into a temporary directory."""
    dest = tmp_path / "quickstart"
    shutil.copytree(REPO / "examples" / "quickstart", dest, ignore=shutil.ignore_patterns("out", ".assay"))
    return dest / "run.yaml"


@pytest.fixture
def run_cli() -> Callable[..., subprocess.CompletedProcess[str]]:
    def run(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [sys.executable, "-m", "assay.cli", *args],
            capture_output=True,
            text=True,
            env=env or cli_env(),
            stdin=subprocess.DEVNULL,
            timeout=100,
        )

    return run
