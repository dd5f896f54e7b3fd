"""``assay compare`` on lake outputs: Parquet parts and the days of a Delta table."""

from __future__ import annotations

import json
import random
from pathlib import Path
from typing import Any

import anyio
import pytest

from assay.config import RunConfig
from assay.pipeline.run import execute
from assay.report.compare_command import compare_command

pytest.importorskip("pyarrow")

SCORER = """
def verdict(metadata):
    return metadata["ok"]
"""


@pytest.fixture
def scorer(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    (tmp_path / "lake_scorer.py").write_text(SCORER)
    monkeypatch.syspath_prepend(str(tmp_path))


def _source(tmp_path: Path, name: str, drop: float) -> str:
    rng = random.Random(11)
    recs = []
    for i in range(300):
        p = rng.betavariate(4, 1.5)
        first, second = rng.random(), rng.random()
        ok = (second if drop else first) < p - drop
        recs.append({"id": f"t{i}", "inputs": "q", "outputs": "a", "metadata": {"ok": float(ok)}})
    path = tmp_path / f"{name}.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in recs))
    return str(path)


def _run(tmp_path: Path, source: str, sink: dict[str, Any], ds: str | None = None) -> None:
    config = RunConfig.model_validate(
        {
            "source": {"path": source},
            "evaluators": [{"name": "python", "params": {"function": "lake_scorer:verdict", "key": "ok"}}],
            "sink": sink,
            "state_dir": str(tmp_path / f".assay-{ds or sink['path'].rstrip('/').rsplit('/', 1)[-1]}"),
            "ds": ds,
        }
    )
    report = anyio.run(lambda: execute(config, use_cache=False))
    assert report.exit_code == 0, report.messages


@pytest.mark.usefixtures("scorer")
def test_compare_parquet_outputs(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    before, after = str(tmp_path / "before") + "/", str(tmp_path / "after") + "/"
    _run(tmp_path, _source(tmp_path, "b", 0.0), {"path": before, "format": "parquet"})
    _run(tmp_path, _source(tmp_path, "a", 0.2), {"path": after, "format": "parquet"})
    assert list(Path(before).glob("part-*.parquet"))
    assert compare_command(before, after, json_out=True, fail_on="regression") == 3
    data = json.loads(capsys.readouterr().out)
    assert data["matched"] == 300 and data["regressions"] == ["ok"]


@pytest.mark.usefixtures("scorer")
def test_compare_delta_days(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    pytest.importorskip("deltalake")
    table = str(tmp_path / "lake" / "scores")
    _run(tmp_path, _source(tmp_path, "b", 0.0), {"type": "delta", "path": table}, ds="2026-11-21")
    _run(tmp_path, _source(tmp_path, "a", 0.2), {"type": "delta", "path": table}, ds="2026-11-22")
    code = compare_command(f"{table}/ds=2026-11-21", f"{table}/ds=2026-11-22", json_out=True, fail_on="regression")
    data = json.loads(capsys.readouterr().out)
    assert code == 3 and data["matched"] == 300 and data["regressions"] == ["ok"]
    assert compare_command(f"{table}/ds=2026-11-21", f"{table}/ds=2026-11-21", json_out=True) == 0
    same = json.loads(capsys.readouterr().out)
    assert same["keys"]["ok"]["p_value"] == 1.0 and same["keys"]["ok"]["pass_to_fail"] == 0
