"""Keep the README true and the public surface complete."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
from pydantic import BaseModel

import assay
from assay import config
from assay.connectors import path_config
from assay.registry import list_evaluators

ROOT = Path(__file__).resolve().parents[2]
README = (ROOT / "README.md").read_text()


@pytest.mark.parametrize("name", [e["name"] for e in list_evaluators()])
def test_every_evaluator_is_in_the_readme_and_importable(name: str) -> None:
    assert f"`{name}`" in README
    assert not [e for e in list_evaluators() if e["description"].startswith("(unavailable")]


def _fields(model: type[BaseModel]) -> list[str]:
    return list(model.model_fields)


@pytest.mark.parametrize(
    "model",
    [
        path_config.SourceConfig,
        config.NormalizeConfig,
        path_config.SinkConfig,
        config.LimitsConfig,
        config.GateConfig,
        config.RunConfig,
    ],
)
def test_every_run_file_key_is_documented(model: type[BaseModel]) -> None:
    for field in _fields(model):
        assert f"`{field}`" in README or f"{field}:" in README, f"{model.__name__}.{field} missing from README"


def test_public_names_exist() -> None:
    for name in assay.__all__:
        assert hasattr(assay, name), name


def test_import_is_light() -> None:
    """``import assay`` loads no heavy library and no third-party package beyond its small core
    (what it loads is counted, not timed: a busy machine must not fail this)."""
    code = (
        "import sys; before = set(sys.modules); import assay; "
        "print(' '.join(sorted({m.split('.')[0] for m in set(sys.modules) - before})))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout.split()
    heavy = {"torch", "sentence_transformers", "aiohttp", "numpy", "pyarrow", "ray", "deltalake", "duckdb", "scipy"}
    assert heavy.isdisjoint(out)
    third_party = {m for m in out if m not in sys.stdlib_module_names and not m.startswith("_")} - {"assay"}
    core = {"anyio", "msgspec", "orjson", "pydantic", "pydantic_core", "annotated_types", "typing_extensions"}
    assert third_party <= core | {"typing_inspection", "sniffio", "idna", "exceptiongroup"}, third_party


def test_evaluator_params_are_described_from_attribute_docstrings() -> None:
    from assay.evaluators import TrajectoryMatch
    from assay.report import describe_params

    rows = {r["name"]: r for r in describe_params(TrajectoryMatch)}
    assert rows["mode"]["description"].startswith("strict | unordered")
    assert rows["key"]["description"].startswith("Result key")  # inherited from EvaluatorParams
    assert rows["mode"]["default"] == "strict"


def test_every_docstring_example_runs() -> None:
    """The ``>>>`` examples of every module run as written (the docs promise runnable examples)."""
    import doctest
    import importlib
    import pkgutil

    import assay

    skip = {"assay.integrations.airflow", "assay.integrations.ray"}  # need Airflow / a Ray cluster
    failures: list[str] = []
    for info in pkgutil.walk_packages(assay.__path__, "assay."):
        if info.name in skip:
            continue
        module = importlib.import_module(info.name)
        result = doctest.testmod(module, optionflags=doctest.ELLIPSIS | doctest.NORMALIZE_WHITESPACE, verbose=False)
        if result.failed:
            failures.append(f"{info.name}: {result.failed} of {result.attempted}")
    assert not failures, failures


def test_a_json_lines_run_loads_no_arrow(tmp_path: Path) -> None:
    """A JSON-lines run with deterministic evaluators starts without pyarrow, numpy or pandas
    (the columnar engine is for Arrow sources; importing it cost each such run ~0.3 s of CPU)."""
    import shutil

    shutil.copytree(
        Path(__file__).resolve().parents[2] / "examples" / "quickstart",
        tmp_path / "qs",
        ignore=shutil.ignore_patterns("out"),
    )
    code = (
        "import atexit, sys\n"
        "atexit.register(lambda: open('loaded.txt', 'w').write("
        "' '.join(sorted({m.split('.')[0] for m in sys.modules} & {'pyarrow', 'numpy', 'pandas', 'torch'}))))\n"
        "sys.argv = ['assay', 'run', 'run.yaml', '-q']\n"
        "from assay.cli import main\n"
        "main()\n"
    )
    for _ in ("first run", "the nightly rerun over its output"):
        proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=tmp_path / "qs")
        assert proc.returncode == 0, proc.stderr
        assert (tmp_path / "qs" / "loaded.txt").read_text() == ""
    assert (tmp_path / "qs" / "out" / "_SUCCESS").exists()
