"""How a run file's Parquet sink on ``s3://`` is built (no network): the S3 Parquet sink over a
local Parquet sink staged under the run's state dir, a prefix or one object, the run's ``s3:``
settings, and where its dead letters go."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from assay.connectors.parquet_sink import ParquetSink
from assay.connectors.registry import SinkContext, build_sink, default_dead_letter, parse_section
from assay.connectors.s3_parquet import S3ParquetSink
from assay.connectors.s3_sink import S3Sink
from assay.exceptions import ConfigError


def sink(section: dict[str, Any], **ctx: Any) -> Any:
    return build_sink(parse_section(section, "sink"), SinkContext(**ctx))


def test_a_prefix_with_format_parquet_is_staged_under_the_state_dir(tmp_path: Path) -> None:
    built = sink(
        {"path": "s3://lake/scores/dt=2026-11-21/", "format": "parquet", "layout": "long", "max_rows_per_part": 7},
        shard=2,
        state_dir=str(tmp_path),
        options={"endpoint_url": "http://127.0.0.1:9000"},
    )
    assert isinstance(built, S3ParquetSink) and isinstance(built.staging, ParquetSink)
    assert not built.single and built.bucket == "lake" and built.dir == "scores/dt=2026-11-21/"
    assert built.marker == "scores/dt=2026-11-21/_SUCCESS"
    assert built.config.endpoint_url == "http://127.0.0.1:9000"
    local = built.staging
    assert Path(local.path).parent == tmp_path / "lake" and local.directory
    assert (local.shard, local.layout, local.max_rows) == (2, "long", 7)


def test_a_parquet_key_is_one_object_with_its_summary_beside_it(tmp_path: Path) -> None:
    built = sink({"path": "s3://lake/scores/2026-11-21.parquet"}, state_dir=str(tmp_path))
    assert isinstance(built, S3ParquetSink) and built.single and built.marker is None
    assert built.summary_key(None) == "scores/2026-11-21.parquet._SUMMARY.json"
    assert Path(built.staging.path).name == "2026-11-21.parquet" and not built.staging.directory
    section = parse_section({"path": "s3://lake/scores/2026-11-21.parquet"}, "sink")
    dead: Any = default_dead_letter(section, tmp_path, "k")
    assert dead.path == "s3://lake/scores/_dead_letter/2026-11-21/"


def test_dead_letters_and_json_lines_stay_the_s3_sinks() -> None:
    section = {"path": "s3://lake/scores/", "format": "parquet"}
    assert isinstance(sink(section, role="dead_letter"), S3Sink)
    assert isinstance(sink({"path": "s3://lake/scores/"}), S3Sink)
    with pytest.raises(ConfigError, match="compression"):
        sink({**section, "compression": "gzip"})
    with pytest.raises(ConfigError, match="glob"):
        sink({"path": "s3://lake/scores/*/", "format": "parquet"})
