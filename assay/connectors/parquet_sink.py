"""The Parquet sink (extra ``assay[lake]``): result rows as ``part-*.parquet`` in a directory, or as
one ``.parquet`` file, with the JSON-lines sink's semantics (docs/lake.md).

Only the encoding of a part differs from :class:`~assay.connectors.file_sink.LocalSink`, so rows
go through one: it stages them as JSON-lines parts under ``<out>/_staging/`` (``.<name>.parts/``
beside a file target), with its commits, exact resume and start-over. A Parquet file cannot be
appended to after a commit, so the Parquet parts are written at :meth:`publish`, each staged part
converted into the part of the same name (``part-00000-00001.jsonl`` → ``part-00000-00001.parquet``,
zstd, row groups of :data:`~assay.connectors.parquet_schema.ROW_GROUP_ROWS`), or all of them into the
one file, in a temp file renamed into place. Then the summary, then ``_SUCCESS``. The schema
(:mod:`~assay.connectors.parquet_schema`) needs the run's result keys and thresholds: the summary
has them.

A run that starts over leaves the previous whole output's Parquet parts in place until its own
successful publish replaces them (a failed rerun never destroys a good day's rows; it removes
``_SUCCESS`` and writes its own summary, so the failure is seen).
"""

from __future__ import annotations

import os
import re
import shutil
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

import anyio
import anyio.to_thread
import orjson
import pyarrow.parquet as pq

from assay.connectors.base import Sink
from assay.connectors.file_sink import SUCCESS, SUMMARY, LocalSink, _fsync_dir, write_json_atomic
from assay.connectors.framing import iter_lines, line_chunks
from assay.connectors.parquet_schema import ROW_GROUP_ROWS, TableBuilder, decode_staged, summary_keys
from assay.exceptions import ConnectorError

STAGING = "_staging"
_PART = re.compile(r"^part-(\d{5})-(\d{5})\.parquet$")


def iter_part_rows(path: Path) -> Iterator[dict[str, Any]]:
    """The rows of a staged JSON-lines part, as dicts."""
    with open(path, "rb") as f:
        for line in iter_lines(f):
            if line and not line.isspace():
                row = orjson.loads(line)
                if isinstance(row, dict):
                    yield row


def fill_builder(builder: TableBuilder, part: Path, row_group_rows: int = ROW_GROUP_ROWS) -> Iterator[int]:
    """Add a staged part's rows to ``builder``; yields whenever it holds ``row_group_rows`` rows
    (the caller takes the batch). Rows are decoded a chunk at a time into only the fields the
    schema keeps (:func:`~assay.connectors.parquet_schema.decode_staged`); a chunk with a row of
    another shape is read as plain JSON."""
    with open(part, "rb") as f:
        for lines in line_chunks(f):
            chunk = b"\n".join(lines)
            staged = decode_staged(chunk)
            if staged is not None:
                while staged:
                    room = row_group_rows - builder.rows
                    builder.add_staged_rows(staged[:room])
                    staged = staged[room:]
                    if builder.rows >= row_group_rows:
                        yield builder.rows
                continue
            for line in lines:
                if line and not line.isspace():
                    rec = orjson.loads(line)
                    if isinstance(rec, dict):
                        builder.add(rec)
                        if builder.rows >= row_group_rows:
                            yield builder.rows


def write_parquet(
    target: Path, parts: Sequence[Path], builder: TableBuilder, *, row_group_rows: int = ROW_GROUP_ROWS
) -> int:
    """Convert staged parts into one Parquet file (temp file, fsync, rename); the rows written."""
    tmp = target.with_name(f".{target.name}.tmp")
    rows = 0
    with pq.ParquetWriter(tmp, builder.schema, compression="zstd") as writer:
        for part in parts:
            for n in fill_builder(builder, part, row_group_rows):
                rows += n
                writer.write_batch(builder.batch(), row_group_size=row_group_rows)
        if builder.rows or not rows:
            rows += builder.rows
            writer.write_batch(builder.batch(), row_group_size=row_group_rows)
    with open(tmp, "rb") as f:
        os.fsync(f.fileno())
    os.replace(tmp, target)
    return rows


class StagedSink(Sink):
    """A sink whose rows are staged as JSON lines by a local file sink (``self.staging``: its
    parts, commits and exact resume) and turned into the real output only at publish (Parquet
    parts, a Delta commit)."""

    staging: LocalSink

    async def open(self) -> None:
        await self.staging.open()

    async def write_batch(self, rows: Sequence[bytes], keys: Sequence[str | None] | None = None) -> None:
        await self.staging.write_batch(rows, keys)

    async def flush(self) -> None:
        await self.staging.flush()

    def snapshot(self) -> Any:
        return self.staging.snapshot()

    async def aclose(self) -> None:
        await self.staging.aclose()


class ParquetSink(StagedSink):
    """Result rows as Parquet (see the module docs). ``layout``: ``wide`` or ``long``; ``ds``: the
    ``ds`` column; the other arguments are the staging :class:`LocalSink`'s."""

    def __init__(
        self,
        path: str,
        *,
        shard: int = 0,
        max_rows_per_part: int | None = None,
        resume_state: Any = None,
        layout: str = "wide",
        ds: str | None = None,
        reset_only_shard: bool = False,
    ) -> None:
        self.path = path
        self.directory = not path.endswith(".parquet")
        self.layout = layout
        self.ds = ds
        if self.directory:
            self.out_dir = Path(path)
            staging = self.out_dir / STAGING
            self.summary_path = self.out_dir / SUMMARY
        else:
            final = Path(path)
            self.out_dir = final.parent
            staging = final.parent / f".{final.name}.parts"
            self.summary_path = final.with_name(f"{final.name}.{SUMMARY}")
        self.staging = LocalSink(
            str(staging) + "/",
            shard=shard,
            max_rows_per_part=max_rows_per_part,
            resume_state=resume_state,
            marker=False,
            create_empty=False,
        )
        self.staging.reset_only_shard = reset_only_shard
        self.shard = shard

    def describe(self) -> str:
        return self.path

    async def publish(self, summary: dict[str, Any], *, success: bool, summary_name: str | None = None) -> str | None:
        """Convert the staged parts when the output is whole (``success``) or is one shard's
        (``summary_name``), write the summary, then ``_SUCCESS`` when ``success``. A run that did
        not succeed leaves the Parquet parts of the last whole output in place (its staged parts
        stay for the resume) and removes ``_SUCCESS``."""
        await self.staging.publish(summary, success=False)  # finishes the part being written
        with anyio.CancelScope(shield=True):
            try:
                where: str = await anyio.to_thread.run_sync(self._publish, summary, success, summary_name)
            except OSError as exc:
                raise ConnectorError(f"cannot write {self.path!r}: {exc}") from exc
        return where

    def _builder(self, summary: dict[str, Any]) -> TableBuilder:
        keys, thresholds = summary_keys(summary)
        return TableBuilder(keys, layout=self.layout, ds=self.ds, thresholds=thresholds)

    def _publish(self, summary: dict[str, Any], success: bool, summary_name: str | None) -> str:
        staged = self.staging.all_parts()
        self.out_dir.mkdir(parents=True, exist_ok=True)
        if success or summary_name is not None:  # a whole output, or a shard's parts put in place
            if self.directory:
                self._convert_parts(staged, summary)
            else:
                write_parquet(Path(self.path), staged, self._builder(summary))
        target = self.summary_path if summary_name is None else self.out_dir / summary_name
        write_json_atomic(target, summary)
        if success:
            shutil.rmtree(self.staging.parts_dir, ignore_errors=True)
            if self.directory:
                (self.out_dir / SUCCESS).touch()
        elif self.directory:
            (self.out_dir / SUCCESS).unlink(missing_ok=True)
        _fsync_dir(self.out_dir)
        return str(target)

    def _convert_parts(self, staged: list[Path], summary: dict[str, Any]) -> None:
        """Every staged part as the Parquet part of the same name; Parquet parts of earlier runs
        that no staged part replaces are removed (a rerun's output is only its own rows)."""
        wanted = {p.name.split(".", 1)[0] + ".parquet": p for p in staged}
        if not wanted:
            wanted_empty = self.out_dir / "part-00000-00000.parquet"
            write_parquet(wanted_empty, [], self._builder(summary))
            wanted = {wanted_empty.name: wanted_empty}
        else:
            for name, part in sorted(wanted.items()):
                write_parquet(self.out_dir / name, [part], self._builder(summary))
        for f in self.out_dir.iterdir():
            if _PART.match(f.name) and f.name not in wanted:
                f.unlink(missing_ok=True)


def read_parquet_rows(source: Any) -> Iterator[dict[str, Any]]:
    """Rows of a wide or long Parquet output (a path or an open file) as the engine's JSON rows
    (``assay report``)."""
    pf = pq.ParquetFile(source)
    names = pf.schema_arrow.names
    long = "key" in names and "score" in names
    for batch in pf.iter_batches(batch_size=ROW_GROUP_ROWS):
        yield from rows_of_batch(batch, long)


def rows_of_batch(batch: Any, long: bool) -> Iterator[dict[str, Any]]:
    """A batch of the output schema as the engine's JSON rows."""
    for rec in batch.to_pylist():
        yield from _as_json_rows(rec, long)


def _as_json_rows(rec: dict[str, Any], long: bool) -> Iterator[dict[str, Any]]:
    top = {"trace_id": rec.get("trace_id"), "run_id": rec.get("run_id"), "position": rec.get("position")}
    if rec.get("ds") is not None:
        top["ds"] = rec["ds"]
    if long:
        cells = {rec["key"]: rec}
    else:
        cells = {
            k: v for k, v in rec.items() if k not in ("trace_id", "run_id", "ds", "position") and isinstance(v, dict)
        }
    identity = {k: v["identity"] for k, v in cells.items() if v.get("identity") is not None}
    row = {**top, "results": {k: _result(k, v) for k, v in cells.items()}}
    if identity:
        row["identity"] = identity
    yield row


def _result(key: str, v: dict[str, Any]) -> dict[str, Any]:
    usage = {k: v.get(k) for k in ("input_tokens", "output_tokens", "cost_usd") if v.get(k) is not None}
    out: dict[str, Any] = {
        "key": key,
        "score": v.get("score"),
        "value": v.get("value"),
        "comment": v.get("comment"),
        "metadata": {"usage": usage} if usage else {},
    }
    if v.get("error") is not None:
        out["error"] = v["error"]
    return out


__all__ = [
    "STAGING",
    "ParquetSink",
    "fill_builder",
    "iter_part_rows",
    "read_parquet_rows",
    "rows_of_batch",
    "write_parquet",
]
