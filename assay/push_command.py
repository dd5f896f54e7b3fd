"""``assay push RUN.yaml --ds D [--to NAME]`` and the push at the end of ``assay run``: the run
file's ``push:`` targets fed from the run's *published* output (never rows in flight).

This module sits at the entry-point layer (beside :mod:`assay.cli`): it finds the output the way
the sink's connector lays it out, reads it with the readers ``assay report`` uses, hands the rows
to :func:`assay.push.push_target` for each target, then writes ``push.<name>`` into the output's
``_SUMMARY.json`` (atomically) and the push dead letters to ``_push_dead_letter/<name>.jsonl``
beside it. An output without ``_SUCCESS`` is never pushed.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol

import anyio
import orjson

from assay.config import RunConfig
from assay.connectors.layout import (
    PUSH_DEAD_LETTER,
    SUCCESS,
    SUMMARIES,
    SUMMARY,
    summary_beside,
    write_atomic,
    write_json_atomic,
)
from assay.exceptions import EXIT_CONFIG, EXIT_INFRA, EXIT_OK, AssayError, ConfigError, InputMissingError
from assay.push import PushLedger, TargetReport, build_target, push_target
from assay.push.base import PushTarget, stable_day

__all__ = [
    "PublishedOutput",
    "check_push_specs",
    "find_output",
    "output_published",
    "push_key_problems",
    "push_published",
]

DEAD_DIR = PUSH_DEAD_LETTER


def check_push_specs(config: RunConfig, origin: str) -> None:
    """Validate every ``push:`` entry by its target's params model (exit 2 on a bad one)."""
    from assay.push.registry import validate_push_spec

    for i, spec in enumerate(config.push):
        validate_push_spec(spec.params(), f"{origin}: push[{i}]")


def push_key_problems(config: RunConfig) -> list[str]:
    """The push targets whose keys are not in the environment (``assay validate``)."""
    problems = []
    for spec in config.push:
        try:
            build_target(spec.params()).check_keys()
        except AssayError as exc:
            problems.append(str(exc))
    return problems


class OutputPlace(Protocol):
    """Where an output's summary and push dead letters are (local disk, an S3 prefix)."""

    def read_summary(self) -> dict[str, Any]: ...

    def write_summary(self, doc: dict[str, Any]) -> None: ...

    def write_dead(self, name: str, data: bytes | None) -> None:
        """``_push_dead_letter/<name>.jsonl`` replaced by ``data`` (None: removed)."""


class LocalPlace:
    def __init__(self, summary: Path, dead_dir: Path) -> None:
        self.summary, self.dead_dir = summary, dead_dir

    def read_summary(self) -> dict[str, Any]:
        with contextlib.suppress(OSError, orjson.JSONDecodeError):
            doc = orjson.loads(self.summary.read_bytes())
            if isinstance(doc, dict):
                return doc
        return {}

    def write_summary(self, doc: dict[str, Any]) -> None:
        write_json_atomic(self.summary, doc)

    def write_dead(self, name: str, data: bytes | None) -> None:
        dead = self.dead_dir / f"{name}.jsonl"
        if data is None:
            dead.unlink(missing_ok=True)
            return
        write_atomic(dead, data)


class S3Place:
    """An ``s3://`` output prefix: a PutObject appears whole or not at all (atomic writes)."""

    def __init__(self, fs: Any) -> None:
        self.fs = fs

    def read_summary(self) -> dict[str, Any]:
        with contextlib.suppress(AssayError, orjson.JSONDecodeError):
            doc = orjson.loads(self.fs.read_bytes(SUMMARY))
            if isinstance(doc, dict):
                return doc
        return {}

    def write_summary(self, doc: dict[str, Any]) -> None:
        self.fs.write_bytes(SUMMARY, orjson.dumps(doc, option=orjson.OPT_INDENT_2))

    def write_dead(self, name: str, data: bytes | None) -> None:
        key = f"{DEAD_DIR}/{name}.jsonl"
        if data is not None:
            self.fs.write_bytes(key, data)
        else:
            self.fs.remove(key)


@dataclass
class PublishedOutput:
    """A run's output as push reads it."""

    location: str
    place: OutputPlace
    published: bool
    rows: Callable[[], Iterator[Mapping[str, Any]]]
    unpublished: str = "no _SUCCESS"
    """Why an output that is not published is not (the refusal's message)."""

    def close(self) -> None:
        """Release what reading the output opened (an S3 client)."""
        close = getattr(getattr(self.place, "fs", None), "close", None)
        if close is not None:
            close()


def output_published(config: RunConfig) -> bool:
    """Whether the run's output is published (its ``_SUCCESS``): the check ``assay run`` makes
    before it pushes."""
    out = find_output(config)
    try:
        return out.published
    finally:
        out.close()


def find_output(config: RunConfig) -> PublishedOutput:
    """Where the run's published output is (a directory of JSON lines or Parquet parts, one file,
    or a day of a Delta table on local disk; an ``s3://`` prefix of JSON lines or Parquet parts)."""
    from assay.connectors.file_sink import is_directory_target
    from assay.report.load import iter_rows
    from assay.report.store import open_store

    sink = config.sink
    kind = sink.type
    path = getattr(sink, "path", None)
    if kind == "delta" and isinstance(path, str) and "://" not in path:
        ds = getattr(sink, "ds", None) or config.ds
        folder = Path(path) / SUMMARIES / f"ds={ds}"
        loc = f"{path.rstrip('/')}/ds={ds}"
        return PublishedOutput(
            loc,
            LocalPlace(folder / SUMMARY, folder / DEAD_DIR),
            (folder / SUCCESS).exists(),
            lambda: iter_rows(open_store(loc)),
        )
    if kind == "s3" and isinstance(path, str) and path.startswith("s3://"):
        return _s3_output(config, path)
    if kind == "kafka":
        return _kafka_output(config)
    if kind == "file" and isinstance(path, str) and path != "-":
        if is_directory_target(path):
            root = Path(path)
            return PublishedOutput(
                path,
                LocalPlace(root / SUMMARY, root / DEAD_DIR),
                (root / SUCCESS).exists(),
                lambda: iter_rows(open_store(path)),
            )
        summary = Path(summary_beside(path))
        return PublishedOutput(
            path,
            LocalPlace(summary, Path(f"{path}{DEAD_DIR}")),
            Path(path).exists() and _complete(summary),
            lambda: _file_rows(path),
        )
    raise ConfigError(
        f"push: reads the published output from local disk (a directory, a file, a Delta table) or an "
        f"s3:// prefix; the {kind} sink's output cannot be read back for a push"
    )


def _kafka_output(config: RunConfig) -> PublishedOutput:
    """A results topic: append-only, so "published" is the run's summary on local disk saying the
    run completed (``<state_dir>/summaries/<sink key>/``, or ``summary_path``), and the rows are
    the topic's messages of that run (its ``run_id``), read back from the earliest offset to the
    end the topic had when the push started (:mod:`~assay.connectors.kafka_readback`). A topic
    that holds many nights is read whole each time: its retention bounds what can be pushed."""
    from assay.connectors.kafka_readback import iter_topic_values
    from assay.pipeline.targets import local_summary_path

    sink = config.sink
    summary = local_summary_path(config)
    place = LocalPlace(summary, summary.parent / DEAD_DIR)
    run_id = place.read_summary().get("run_id")
    topic = str(getattr(sink, "topic", ""))

    def rows() -> Iterator[Mapping[str, Any]]:
        for value in iter_topic_values(sink, topic):  # type: ignore[arg-type]
            try:
                row = orjson.loads(value)
            except orjson.JSONDecodeError:
                continue
            if isinstance(row, dict) and row.get("run_id") == run_id:
                yield row

    return PublishedOutput(
        f"kafka topic {topic}",
        place,
        summary.exists() and _complete(summary),
        rows,
        f"no summary of a completed run at {summary}",
    )


def _s3_output(config: RunConfig, path: str) -> PublishedOutput:
    """An ``s3://`` output prefix (JSON lines or Parquet parts, ``_SUCCESS`` beside them), read and
    written with the run file's ``s3:`` settings."""
    from assay.connectors.registry import results_fs
    from assay.connectors.s3_results import S3Store
    from assay.report.load import iter_rows

    location = path if path.endswith("/") else path + "/"
    fs = results_fs(location, config.s3)
    names = set(fs.list())
    return PublishedOutput(
        location,
        S3Place(fs),
        SUCCESS in names,
        lambda: iter_rows(S3Store(location, reader=fs.reader)),
    )


def _complete(summary: Path) -> bool:
    try:
        doc = orjson.loads(summary.read_bytes())
    except (OSError, orjson.JSONDecodeError):
        return False
    return isinstance(doc, dict) and doc.get("status") not in (None, "interrupted", "failed", "pending")


def _file_rows(path: str) -> Iterator[Mapping[str, Any]]:
    from assay.connectors.file import iter_lines
    from assay.report.store import open_decompressed

    with open(path, "rb") as raw, open_decompressed(raw, path) as f:
        for line in iter_lines(f):
            if line and not line.isspace():
                row = orjson.loads(line)
                if isinstance(row, dict):
                    yield row


def _select(config: RunConfig, to: list[str] | None) -> list[PushTarget]:
    specs = config.push
    if to:
        names = {s.target_name for s in specs}
        for name in to:
            if name not in names:
                known = ", ".join(sorted(names)) or "none"
                raise ConfigError(f"--to {name}: no push target of that name in the run file (known: {known})")
        specs = [s for s in specs if s.target_name in to]
    return [build_target(s.params()) for s in specs]


def push_published(
    config: RunConfig, *, to: list[str] | None = None, echo: Callable[[str], None] = print
) -> tuple[int, dict[str, TargetReport]]:
    """Push the run's published output to its targets (all, or those named by ``to``); returns the
    exit code (0; 1 a target unreachable; 2 a key refused or missing) and the reports."""
    if not config.push:
        raise ConfigError("push: the run file names no push targets (add a push: list)")
    targets = _select(config, to)
    out = find_output(config)
    if not out.published:
        out.close()
        raise InputMissingError(f"push: {out.location} is not published ({out.unpublished}): nothing was pushed")
    summary = out.place.read_summary()
    when = stable_day(
        config.ds,
        summary.get("ds") if isinstance(summary.get("ds"), str) else None,
        summary.get("started_at") if isinstance(summary.get("started_at"), str) else None,
    )
    ledger = PushLedger(config.state_dir)

    async def go() -> dict[str, TargetReport]:
        reports: dict[str, TargetReport] = {}

        def progress(rep: TargetReport) -> None:
            rate = rep.sent / rep.wall_time_s * 60 if rep.wall_time_s else 0.0
            echo(f"push {rep.name}: {rep.sent:,} sent so far ({rate:,.0f}/min), {rep.rejected:,} rejected")

        async def one(target: PushTarget) -> None:
            reports[target.name] = await push_target(target, out.rows, ledger, when, progress=progress)

        async with anyio.create_task_group() as tg:
            for target in targets:
                tg.start_soon(one, target)
        return reports

    try:
        reports = anyio.run(go)
        _write_results(out, summary, reports)
    finally:
        ledger.close()
        out.close()
    code = EXIT_OK
    for target in targets:
        rep = reports[target.name]
        if rep.status == "unauthorized":
            code = EXIT_CONFIG
        elif rep.status == "unreachable" and code == EXIT_OK:
            code = EXIT_INFRA
        if rep.error:
            echo(f"error: {rep.error}; the output stays published: `assay push` finishes the push")
        else:
            echo(
                f"push {target.name}: {rep.delivered} delivered, {rep.already_there} already there, "
                f"{rep.rejected} rejected, {rep.not_sent} not sent ({rep.sent} sent now)"
            )
    return code, reports


def _write_results(out: PublishedOutput, summary: dict[str, Any], reports: Mapping[str, TargetReport]) -> None:
    current = out.place.read_summary() or summary  # the newest, should another push have written
    section = dict(current.get("push") or {})
    for name, rep in reports.items():
        section[name] = rep.summary()
        if rep.dead:
            out.place.write_dead(name, b"".join(orjson.dumps(d) + b"\n" for d in rep.dead))
        elif rep.status == "ok":
            out.place.write_dead(name, None)
    current["push"] = section
    out.place.write_summary(current)
