"""potato's own unit tests for ``potato.evaluators``, run against ``assay.compat.potato``.

potato is GPL-3.0, so its tests are not vendored here: the test downloads the release's sdist
from the package index (``pip download``, the sha256 pinned), takes its six
``tests/unit/test_evaluators_*`` / ``test_agent_as_judge`` files, rewrites their import lines
(``potato.evaluators`` → ``assay.compat.potato.evaluators``) and runs them in a pytest
subprocess. Without the index (offline) it skips, except in CI (``CI`` set), where it fails.
Against potato 2.12.1 itself the 54 tests pass (agentevals not installed); against assay 53 pass
and one skips itself (:data:`EXCLUDED`).
"""

from __future__ import annotations

import hashlib
import os
import re
import shutil
import subprocess
import sys
import tarfile
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
RELEASE = "potato-annotation==2.12.1"
SDIST = "potato_annotation-2.12.1.tar.gz"
SHA256 = "fe0c891215030d7e27bca691d1945ce9ecd8d3521ee05a49665e83bcb0732934"
FILES = (
    "test_agent_as_judge.py",
    "test_evaluators_agentevals_adapter.py",
    "test_evaluators_heuristic.py",
    "test_evaluators_llm_judge.py",
    "test_evaluators_tool_use.py",
    "test_evaluators_trajectory_match.py",
)
#: Tests that do not pass against assay, and why.
EXCLUDED = {
    "test_evaluators_agentevals_adapter.py::test_factories_raise_when_unavailable": (
        "skips itself when agentevals' evaluators are available (as on potato with agentevals "
        "installed): assay implements them, so is_available() is True and there is no "
        "degradation path to test"
    ),
}
_IMPORT = re.compile(r"^(\s*from\s+)potato(\.evaluators\b)", re.M)


def rewrite(text: str) -> str:
    """``from potato.evaluators… import`` → ``from assay.compat.potato.evaluators… import``."""
    return _IMPORT.sub(r"\1assay.compat.potato\2", text)


def _sha256(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


@pytest.fixture(scope="module")
def potato_sdist(tmp_path_factory: pytest.TempPathFactory, request: pytest.FixtureRequest) -> Path:
    cache = getattr(request.config, "cache", None)
    folder = cache.mkdir("potato-sdist") if cache is not None else tmp_path_factory.mktemp("potato-sdist")
    target = folder / SDIST
    if not target.exists() or _sha256(target) != SHA256:
        download = tmp_path_factory.mktemp("download")
        proc = subprocess.run(
            [sys.executable, "-m", "pip", "download", "--quiet", "--no-deps", "--no-binary", ":all:",
             "--no-build-isolation", "--dest", str(download), RELEASE],
            capture_output=True, text=True, timeout=600, check=False,
        )  # fmt: skip
        got = download / SDIST
        if proc.returncode != 0 or not got.exists():
            message = f"cannot download {RELEASE} from the package index: {proc.stderr.strip()[-500:]}"
            if os.environ.get("CI"):
                pytest.fail(message)
            pytest.skip(message)
        shutil.move(str(got), target)
    assert _sha256(target) == SHA256, f"{SDIST}: unexpected sha256"
    return target


def test_the_rewrite_changes_only_import_lines() -> None:
    text = "from potato.evaluators import X\nfrom potato.evaluators.agent_as_judge import Y\nx = 'potato.evaluators'\n"
    assert rewrite(text) == (
        "from assay.compat.potato.evaluators import X\nfrom assay.compat.potato.evaluators.agent_as_judge import Y\n"
        "x = 'potato.evaluators'\n"
    )


def test_potatos_evaluator_tests_pass_against_assay(potato_sdist: Path, tmp_path: Path) -> None:
    suite = tmp_path / "potato_tests"
    suite.mkdir()
    with tarfile.open(potato_sdist) as tf:
        for name in FILES:
            member = tf.extractfile(f"potato_annotation-2.12.1/tests/unit/{name}")
            assert member is not None
            original = member.read().decode("utf-8")
            rewritten = rewrite(original)
            changed = [a for a, b in zip(original.splitlines(), rewritten.splitlines(), strict=True) if a != b]
            assert changed and all(line.lstrip().startswith("from potato.evaluators") for line in changed)
            (suite / name).write_text(rewritten, encoding="utf-8")
    xml = tmp_path / "potato.xml"
    env = {k: v for k, v in os.environ.items() if not k.startswith("PYTEST_")}
    env["PYTHONPATH"] = os.pathsep.join([str(ROOT), env.get("PYTHONPATH", "")]).rstrip(os.pathsep)
    proc = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-o", "addopts=", "-p", "no:cacheprovider", "-p", "no:randomly",
         "-p", "no:langsmith_plugin", "-p", "no:phoenix", "-p", "no:benchmark", f"--junitxml={xml}", str(suite)],
        cwd=tmp_path, env=env, capture_output=True, text=True, timeout=600, check=False,
    )  # fmt: skip
    assert xml.exists(), proc.stdout[-3000:] + proc.stderr[-3000:]
    outcomes: dict[str, str] = {}
    for tc in ET.parse(xml).iter("testcase"):
        kinds = {c.tag for c in tc}
        module = (tc.get("classname") or "").rpartition(".")[2]
        if module.startswith("Test"):  # a test class: classname is module.Class
            module = (tc.get("classname") or "").split(".")[-2]
        outcome = "failed" if kinds & {"failure", "error"} else "skipped" if "skipped" in kinds else "passed"
        outcomes[f"{module}.py::{tc.get('name')}"] = outcome
    failed = sorted(k for k, v in outcomes.items() if v == "failed")
    assert failed == [], proc.stdout[-4000:]
    assert sorted(k for k, v in outcomes.items() if v == "skipped") == sorted(EXCLUDED)
    assert sum(v == "passed" for v in outcomes.values()) == 53
