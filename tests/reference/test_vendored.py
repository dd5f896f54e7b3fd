"""The vendored upstream suites: their text is upstream's apart from the import rewrite, every
upstream test is run or excluded with a reason, and the counts in README.md / docs/compat.md are
the manifest's."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest

from tests.reference import vendor

HERE = Path(__file__).resolve().parent
ROOT = HERE.parents[1]
MANIFEST = json.loads((HERE / "manifest.json").read_text(encoding="utf-8"))


def _env(**extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("PYTEST_", "ASSAY_REFERENCE"))}
    env["PYTHONPATH"] = os.pathsep.join([str(ROOT), env.get("PYTHONPATH", "")]).rstrip(os.pathsep)
    return {**env, **extra}


def test_vendored_text_is_upstreams_apart_from_the_import_rewrite() -> None:
    files = {k: v for k, v in MANIFEST["files"].items() if v["blob"] is not None}
    assert len(files) == 42
    for rel, info in files.items():
        text = (HERE / rel).read_text(encoding="utf-8")
        upstream = vendor.pristine(text)
        assert vendor.blob_id(upstream.encode("utf-8")) == info["blob"], rel
        header, _, body = text.partition("\n")
        assert header.startswith("# assay: vendored from ") and info["source"] in header, rel
        assert body == vendor.rewrite(upstream), rel
        bare = re.findall(r"^\s*(?:from|import)\s+(openevals|agentevals)\b", body, re.M)
        assert bare == [], f"{rel} still imports the upstream package"


def test_the_rewrite_touches_only_imports_and_patch_targets() -> None:
    text = (
        "from openevals.llm import x\nimport agentevals\n    from openevals import y\n"
        'patch("openevals.llm.f")\nopenevals_x = 1\n'
    )
    assert vendor.rewrite(text) == (
        "from assay.compat.openevals.llm import x\nimport assay.compat.agentevals\n"
        '    from assay.compat.openevals import y\npatch("assay.compat.openevals.llm.f")\nopenevals_x = 1\n'
    )
    assert vendor.pristine("# assay: vendored from x\n" + vendor.rewrite(text)) == text


def test_every_upstream_test_is_run_or_excluded() -> None:
    """Collected in a subprocess with every test selected (ASSAY_REFERENCE_VERDICT=yes): the
    collected ids are exactly the manifest's run and excluded tests (the E2B modules, which do not
    import without the e2b package, are excluded whole)."""
    proc = subprocess.run(
        [sys.executable, "-m", "pytest", "--collect-only", "-q", "-n", "0", "-p", "no:randomly",
         "--ignore-glob=*/code/e2b/*", "tests/reference/openevals_suite", "tests/reference/agentevals_suite"],
        cwd=ROOT, env=_env(ASSAY_REFERENCE_VERDICT="yes"), capture_output=True, text=True, timeout=240, check=False,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    collected = set(
        vendor.position_keys(
            [
                line.removeprefix("tests/reference/")
                for line in proc.stdout.splitlines()
                if line.startswith("tests/reference/")
            ]
        )
    )
    listed = set(MANIFEST["run"]) | {k for k in MANIFEST["excluded"] if "::" in k}
    assert collected == listed
    whole = {k for k in MANIFEST["excluded"] if "::" not in k}
    e2b = ("test_execution", "test_execution_async", "test_typecheck", "test_typecheck_async")
    assert whole == {f"openevals_suite/code/e2b/{n}.py" for n in e2b}


def test_counts_in_the_docs_are_the_manifests() -> None:
    run = MANIFEST["run"]
    counts = {s: sum(1 for k in run if k.startswith(f"{s}_suite/")) for s in ("openevals", "agentevals")}
    assert counts == {"openevals": 249, "agentevals": 123}
    readme = (HERE / "README.md").read_text(encoding="utf-8")
    compat = (ROOT / "docs" / "compat.md").read_text(encoding="utf-8")
    for doc in (readme, compat):
        assert "openevals 0.2.2 | 249 | 249" in doc and "agentevals 0.0.9 | 123 | 123" in doc
    for nodeid in MANIFEST["excluded"]:
        assert f"`{nodeid}`" in readme, f"README.md does not list the excluded {nodeid}"


def test_isolated_tests_pass_in_a_process_of_their_own(tmp_path: Path) -> None:
    """The two simulator tests that upset CPython 3.11.7's AST validator (see conftest.ISOLATED)."""
    from tests.reference.conftest import ISOLATED

    xml = tmp_path / "isolated.xml"
    proc = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-n", "0", "-p", "no:randomly", "-p", "no:hypothesispytest",
         f"--junitxml={xml}", *(f"tests/reference/{k}" for k in sorted(ISOLATED))],
        cwd=ROOT, env=_env(ASSAY_REFERENCE_ISOLATED="1"), capture_output=True, text=True, timeout=240, check=False,
    )  # fmt: skip
    cases = list(ET.parse(xml).iter("testcase")) if xml.exists() else []
    failed = [c.get("name") for c in cases if any(x.tag in ("failure", "error", "skipped") for x in c)]
    assert proc.returncode == 0 and len(cases) == len(ISOLATED) and not failed, proc.stdout[-3000:]


@pytest.mark.parametrize("mode", ["yes", "no"])
def test_the_stand_in_gives_one_verdict_whatever_the_prompt(mode: str) -> None:
    from tests.reference import verdicts

    schema = {"type": "object", "properties": {"reasoning": {"type": "string"}, "score": {"type": "boolean"}}}
    body = {
        "messages": [{"role": "user", "content": "Is 2+2=4?"}],
        "response_format": {"type": "json_schema", "json_schema": {"name": "s", "schema": schema}},
    }
    verdict = verdicts.yes(body) if mode == "yes" else verdicts.no(body)
    assert verdict == {"reasoning": "Stand-in reasoning.", "score": mode == "yes"}
    plain = {"messages": [{"role": "user", "content": "hi"}]}
    assert (verdicts.yes if mode == "yes" else verdicts.no)(plain) == mode
    assert verdicts.fill({"type": "number", "minimum": 0, "maximum": 10}, mode == "yes") == (
        10.0 if mode == "yes" else 0.0
    )
