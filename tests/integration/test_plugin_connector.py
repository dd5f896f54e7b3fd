"""A third-party connector, installed as a package would be (a module and a dist-info declaring an
``assay.connectors`` entry point), validates and runs like a built-in one: its own models check its
sections (the run file's ``type: gcs`` is no closed list), and the engine reads none of its fields.
Its sink has no path (a bucket and a table): two such sinks never share a checkpoint."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from collections.abc import Iterator
from pathlib import Path

import pytest

from assay.config import build_config
from assay.connectors import registry
from assay.pipeline.outputs import RunPlan
from assay.pipeline.targets import dead_letter_of

PLUGIN = '''
"""A stand-in for a GCS connector: buckets are directories under ``emulator_dir``."""

from __future__ import annotations

from pathlib import Path
from typing import Any, Literal

import orjson

from assay.connectors.base import ConnectorConfig, Sink, Source
from assay.connectors.registry import BaseConnector
from assay.records import Envelope, Position


class GcsSource(ConnectorConfig):
    type: Literal["gcs"] = "gcs"
    path: str  # gs://bucket/prefix/
    emulator_dir: str


class GcsTable(ConnectorConfig):
    type: Literal["gcs"] = "gcs"
    bucket: str
    table: str
    emulator_dir: str


class Reader(Source):
    def __init__(self, config: GcsSource, batch_size: int) -> None:
        super().__init__()
        bucket, _, prefix = config.path.removeprefix("gs://").partition("/")
        self.root = Path(config.emulator_dir) / bucket / prefix
        self.batch_size = batch_size

    async def batches(self):
        for f in sorted(self.root.glob("*.jsonl")):
            lines = f.read_bytes().splitlines()
            for start in range(0, len(lines), self.batch_size):
                chunk = lines[start : start + self.batch_size]
                yield [Envelope(line, Position(f.name, start + i + 1)) for i, line in enumerate(chunk)]


class Table(Sink):
    def __init__(self, config: GcsTable, role: str, resume_state: Any) -> None:
        self.file = Path(config.emulator_dir) / config.bucket / f"{config.table}.{role}.jsonl"
        self.rows: list[bytes] = []
        self.start_over = resume_state is None

    async def open(self) -> None:
        self.file.parent.mkdir(parents=True, exist_ok=True)
        if self.start_over:
            self.file.unlink(missing_ok=True)

    async def write_batch(self, rows, keys=None) -> None:
        self.rows.extend(rows)

    async def flush(self) -> None:
        with self.file.open("ab") as f:
            f.write(b"".join(r + b"\\n" for r in self.rows))
        self.rows.clear()

    async def publish(self, summary, *, success, summary_name=None) -> str:
        target = self.file.with_name(summary_name or f"{self.file.stem}._SUMMARY.json")
        target.write_bytes(orjson.dumps(summary, default=str))
        return str(target)

    async def aclose(self) -> None:
        pass


class GcsConnector(BaseConnector):
    source_config = GcsSource
    sink_config = GcsTable
    schemes = ("gs",)

    def build_source(self, config, ctx):
        return Reader(config, ctx.batch_size)

    def build_sink(self, config, ctx):
        return Table(config, ctx.role, ctx.resume_state)


CONNECTOR = GcsConnector()
'''


@pytest.fixture
def site(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    """``pip install assay-gcs`` as it lands on disk: a module and a dist-info with the entry point."""
    site = tmp_path / "site"
    (site / "assay_gcs").mkdir(parents=True)
    (site / "assay_gcs" / "__init__.py").write_text(textwrap.dedent(PLUGIN))
    dist = site / "assay_gcs-0.1.dist-info"
    dist.mkdir()
    (dist / "METADATA").write_text("Metadata-Version: 2.1\nName: assay-gcs\nVersion: 0.1\n")
    (dist / "entry_points.txt").write_text("[assay.connectors]\ngcs = assay_gcs:CONNECTOR\n")
    monkeypatch.syspath_prepend(str(site))
    registry.clear_cache()
    yield site
    monkeypatch.undo()
    registry.clear_cache()
    sys.modules.pop("assay_gcs", None)


def run_file(tmp_path: Path, table: str = "scores") -> Path:
    lake = tmp_path / "lake"
    (lake / "traces" / "day").mkdir(parents=True, exist_ok=True)
    lines = [json.dumps({"id": f"t{i}", "outputs": f"a{i}", "reference_outputs": f"a{i % 3}"}) for i in range(25)]
    (lake / "traces" / "day" / "part-0.jsonl").write_text("\n".join(lines) + "\n")
    f = tmp_path / f"{table}.yaml"
    cfg = {
        "source": {"path": "gs://traces/day/", "emulator_dir": str(lake)},  # the scheme picks the connector
        "evaluators": ["exact_match"],
        "sink": {"type": "gcs", "bucket": "results", "table": table, "emulator_dir": str(lake)},
        "limits": {"batch_size": 10},
    }
    f.write_text(json.dumps(cfg))
    return f


def cli(site: Path, *args: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(site), os.environ.get("PYTHONPATH", "")])}
    return subprocess.run(
        [sys.executable, "-m", "assay.cli", *args], capture_output=True, text=True, env=env, timeout=120
    )


def test_a_plugin_connector_validates_and_runs(tmp_path: Path, site: Path) -> None:
    f = run_file(tmp_path)
    checked = cli(site, "validate", str(f))
    assert checked.returncode == 0, checked.stderr
    done = cli(site, "run", str(f), "-q")
    assert done.returncode == 0, done.stderr
    rows = [
        json.loads(line) for line in (tmp_path / "lake" / "results" / "scores.results.jsonl").read_text().splitlines()
    ]
    assert sorted(r["trace_id"] for r in rows) == sorted(f"t{i}" for i in range(25))
    assert sum(r["results"]["exact_match"]["score"] for r in rows) == 3  # t0, t1, t2 match their reference
    summary = json.loads((tmp_path / "lake" / "results" / "scores.results._SUMMARY.json").read_text())
    assert summary["status"] == "ok" and summary["counts"]["scored"] == 25
    # its own model checks its section: a misspelled key is named, with the file
    bad = json.loads(f.read_text())
    bad["sink"]["tabel"] = "x"
    f.write_text(json.dumps(bad))
    refused = cli(site, "validate", str(f))
    assert refused.returncode == 2 and "sink.tabel: Extra inputs are not permitted" in refused.stderr


def test_without_the_plugin_the_type_is_unknown(tmp_path: Path) -> None:
    data = json.loads(run_file(tmp_path).read_text())
    with pytest.raises(Exception, match="unknown connector type 'gcs'"):
        build_config({**data, "source": {**data["source"], "type": "gcs"}}, origin="run.yaml")


def test_sinks_without_a_path_never_share_a_checkpoint(tmp_path: Path, site: Path) -> None:
    a = build_config(json.loads(run_file(tmp_path, "scores").read_text()), origin="a.yaml")
    b = build_config(json.loads(run_file(tmp_path, "other").read_text()), origin="b.yaml")
    assert type(a.sink).__name__ == "GcsTable" and type(a.source).__name__ == "GcsSource"
    assert RunPlan(a).store.key != RunPlan(b).store.key
    assert dead_letter_of(a).path != dead_letter_of(b).path  # each its own dead-letter directory
