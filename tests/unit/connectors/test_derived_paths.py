"""Every path the engine derives from a value it was given (a day, a shard summary's name, a key, a
run id) stays under its root or is refused with a ConfigError: one table of builders, each called
with hostile values. A ``ds`` is validated where it enters the run file, with a message naming the key."""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from assay.config import build_config
from assay.connectors import registry
from assay.connectors.delta import CONNECTOR as DELTA
from assay.connectors.delta import DeltaSink, DeltaSinkConfig
from assay.connectors.file_sink import LocalSink
from assay.connectors.kafka import KafkaSinkConfig
from assay.connectors.parquet_sink import ParquetSink
from assay.connectors.s3_parquet import S3ParquetSink, staging_path
from assay.connectors.s3_sink import S3Sink
from assay.exceptions import ConfigError
from assay.paths import check_day, partition, safe_join
from assay.pipeline.checkpoint import CheckpointStore
from assay.pipeline.lock import RunLock
from assay.pipeline.merge import LocalFS
from assay.pipeline.targets import member_key
from assay.report.lake import DeltaDayStore

HOSTILE = [
    "../x",
    "..",
    "/etc/passwd",
    "a/../../b",
    "ds=../../../../X",
    "..\\..\\x",
    "C:\\x",
    "a\x00b",
    "x" * 300,
    "/".join(["y" * 200] * 30),
    "s3://other/bucket",
]

S3_ROOT = "s3://lake/scores/"


def delta(root: Path, ds: str) -> DeltaSink:
    # model_construct: past the config's own check of ``ds``, so the builders' proof is what is tested
    config = DeltaSinkConfig.model_construct(
        type="delta",
        path=str(root / "table"),
        ds=ds,
        partition_by=["ds"],
        layout="wide",
        storage_options={},
        state_dir=str(root / "state"),
    )
    return DeltaSink(config)


def delta_config(root: Path, ds: str) -> DeltaSinkConfig:
    return DeltaSinkConfig.model_construct(
        type="delta", path=str(root / "table"), ds=ds, partition_by=["ds"], state_dir=str(root / "state")
    )


def local_summary(root: Path, name: str) -> str:
    sink = LocalSink(str(root / "out") + "/")
    return sink._publish({}, False, name) or ""


def parquet_summary(root: Path, name: str) -> str:
    return ParquetSink(str(root / "out") + "/")._publish({}, False, name)


def merge_write(root: Path, name: str) -> str:
    LocalFS(root).write_bytes(name, b"{}")
    return str(root / name)


def lock_path(root: Path, value: str) -> str:
    return str(RunLock(root, RunLock.key_for("run.yaml", value, None)).path)


# name → (builder(root, hostile value) → the derived path, the root it must stay under)
BUILDERS: dict[str, Callable[[Path, str], str]] = {
    "safe_join(str)": lambda root, v: safe_join(str(root), v),
    "safe_join(Path)": lambda root, v: str(safe_join(root, v)),
    "safe_join(nested)": lambda root, v: safe_join(str(root), "_summaries", partition("ds", v), "_SUMMARY.json"),
    "delta staging dir": lambda root, v: str(delta(root, v).staging_dir),
    "delta summary": lambda root, v: delta(root, v).store.url(delta(root, v).summary_rel),
    "delta store file": lambda root, v: delta(root, "2026-11-21").store.url(v),
    "delta dead letters": lambda root, v: str(DELTA.default_dead_letter(delta_config(root, v)).path),  # type: ignore[union-attr]
    "default dead letters": lambda root, v: str(
        registry.default_dead_letter(KafkaSinkConfig(topic="t", bootstrap_servers="b:9092"), root, v).path  # type: ignore[attr-defined]
    ),
    "checkpoint dir": lambda root, v: str(CheckpointStore(root, v).dir),
    "checkpoint writer": lambda root, v: str(CheckpointStore(root, v).writer_path(0)),
    "member checkpoints": lambda root, v: str(root / "checkpoints" / member_key(root, v)),
    "run lock": lock_path,
    "file sink summary": local_summary,
    "parquet sink summary": parquet_summary,
    "merge results file": merge_write,
    "lake report day": lambda root, v: str(DeltaDayStore(str(root), str(root), v).folder),
    "lake report dead letter": lambda root, v: str(
        DeltaDayStore(str(root), str(root), "2026-11-21")._path(f"_dead_letter/{v}")
    ),
    "lake report file": lambda root, v: str(DeltaDayStore(str(root), str(root), "2026-11-21")._path(v)),
    "s3 parquet staging": lambda root, v: staging_path(f"s3://b/{v}.parquet", root),
}

S3_BUILDERS: dict[str, Callable[[str], str]] = {
    "safe_join(s3)": lambda v: safe_join(S3_ROOT, v),
    "s3 sink summary key": lambda v: "s3://lake/" + S3Sink(S3_ROOT).key_under("scores/", v),
    "s3 parquet summary key": lambda v: "s3://lake/" + S3ParquetSink(S3_ROOT, ParquetSink("unused/")).summary_key(v),
}


def under(path: str, root: str) -> bool:
    whole = os.path.realpath(root)
    return os.path.commonpath([whole, os.path.realpath(path)]) == whole


@pytest.mark.parametrize("value", HOSTILE, ids=range(len(HOSTILE)))
@pytest.mark.parametrize("name", sorted(BUILDERS))
def test_every_local_path_builder_stays_under_its_root_or_refuses(tmp_path: Path, name: str, value: str) -> None:
    root = tmp_path / "root"
    root.mkdir()
    before = set(tmp_path.rglob("*"))
    try:
        path = BUILDERS[name](root, value)
    except ConfigError as exc:
        assert "\n" not in str(exc) and len(str(exc)) < 400  # one readable line, not the hostile value whole
    else:
        assert under(path, str(root)), f"{name}: {value!r} -> {path}"
    assert all(under(str(p), str(root)) for p in set(tmp_path.rglob("*")) - before), name


@pytest.mark.parametrize("value", HOSTILE, ids=range(len(HOSTILE)))
@pytest.mark.parametrize("name", sorted(S3_BUILDERS))
def test_every_s3_key_builder_stays_under_its_prefix_or_refuses(name: str, value: str) -> None:
    try:
        url = S3_BUILDERS[name](value)
    except ConfigError:
        return
    assert url.startswith(S3_ROOT) and ".." not in url.split("/"), f"{name}: {value!r} -> {url}"


def test_safe_join_keeps_ordinary_names() -> None:
    summary = "/t/_summaries/ds=2026-11-21/_SUMMARY.json"
    assert safe_join("/t", "_summaries", "ds=2026-11-21", "_SUMMARY.json") == summary
    assert safe_join(Path("/t"), "a/b") == Path("/t/a/b")
    assert safe_join("/t/x", "dead/") == "/t/x/dead/"
    assert safe_join("s3://b/p", "_dead_letter", "ds=2026-11-21/") == "s3://b/p/_dead_letter/ds=2026-11-21/"
    assert safe_join(".", "x") == "x"


def test_check_day_names_the_key() -> None:
    assert check_day("2026-11-21", "sink.ds") == "2026-11-21"
    with pytest.raises(ConfigError, match=r"^sink\.ds: expected a day YYYY-MM-DD \(got '\.\./X'\)$"):
        check_day("../X", "sink.ds")


RUN: dict[str, Any] = {"source": {"path": "t.jsonl"}, "evaluators": ["exact_match"], "sink": {"path": "out/"}}


@pytest.mark.parametrize(
    ("data", "key"),
    [
        ({**RUN, "ds": "../x"}, "ds"),
        ({**RUN, "sink": {"type": "delta", "path": "lake", "ds": "../../X"}}, "sink.ds"),
        ({**RUN, "sink": {"type": "delta", "path": "lake"}, "ds": "2026-11-21/../../X"}, "ds"),
        ({**RUN, "sink": {"path": "out.parquet", "ds": "/etc"}}, "sink.ds"),
        ({**RUN, "sink": {"path": "out/", "format": "parquet", "ds": "2026-02-30"}}, "sink.ds"),
    ],
)
def test_a_day_that_is_no_day_is_refused_naming_its_key(data: dict[str, Any], key: str) -> None:
    with pytest.raises(ConfigError) as info:
        build_config(data, origin="run.yaml")
    assert str(info.value).startswith(f"run.yaml: {key}: "), str(info.value)
    assert "YYYY-MM-DD" in str(info.value) or "no such day" in str(info.value)


def test_a_day_from_set_or_env_is_checked_too(monkeypatch: pytest.MonkeyPatch) -> None:
    data = {**RUN, "sink": {"type": "delta", "path": "lake", "ds": "${DAY}"}}
    monkeypatch.setenv("DAY", "../../X")
    with pytest.raises(ConfigError, match=r"sink\.ds: expected a day"):
        build_config(data, origin="run.yaml")
    monkeypatch.setenv("DAY", "2026-11-21")
    assert build_config(data, origin="run.yaml").sink.ds == "2026-11-21"  # type: ignore[attr-defined]
    with pytest.raises(ConfigError, match=r"sink\.ds: expected a day"):
        build_config(data, origin="run.yaml", sets=["sink.ds=../../Y"])
