"""Keep the README true and the public surface complete."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
from pydantic import BaseModel

import assay
from assay import config
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
        config.SourceConfig,
        config.NormalizeConfig,
        config.SinkConfig,
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


def test_import_is_light_and_fast() -> None:
    code = (
        "import sys, time; t = time.perf_counter(); import assay; dt = time.perf_counter() - t; "
        "heavy = [m for m in ('torch', 'sentence_transformers', 'aiohttp', 'numpy') if m in sys.modules]; "
        "print(dt, heavy)"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout.split(" ", 1)
    assert float(out[0]) < 0.3
    assert out[1].strip() == "[]"


def test_evaluator_params_are_described_from_attribute_docstrings() -> None:
    from assay.evaluators import TrajectoryMatch
    from assay.report import describe_params

    rows = {r["name"]: r for r in describe_params(TrajectoryMatch)}
    assert rows["mode"]["description"].startswith("strict | unordered")
    assert rows["key"]["description"].startswith("Result key")  # inherited from EvaluatorParams
    assert rows["mode"]["default"] == "strict"
