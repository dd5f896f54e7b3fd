"""``--shard i/N`` into a Delta table: each shard stages its rows beside the table, ``assay merge``
commits the day (docs/lake.md).

* A shard's publish copies its staged JSON-lines parts to ``<table>/_staging/ds=D/shard-i-of-N/``
  (the folder replaced whole: a rerun of the shard leaves only its new parts), then writes its shard
  summary ``_summaries/ds=D/_SUMMARY.shard-i-of-N.json`` naming those parts (``delta_staged``). The
  shards may run on different machines: the table's storage (a directory or ``s3://``) is what they
  share. Nothing reaches the table's log.
* ``assay merge --run-file RUN --ds D`` (:class:`DeltaShardMerge`) reads the shard summaries from
  ``_summaries/ds=D/``, and when every shard is whole commits the rows of all of them as ONE
  partition overwrite of ``ds = 'D'`` — the commit a run with ``--workers`` makes — with the merged
  summary's result keys, then removes the staged parts and writes ``_SUMMARY.json`` and ``_SUCCESS``.
  The merged summary records the commit (``delta``: table version and the shard runs it holds), so
  the same merge again publishes nothing twice.

Folders starting with ``_`` are not part of a Delta table (readers and ``VACUUM`` skip them).
"""

from __future__ import annotations

import shutil
import tempfile
from collections.abc import Mapping
from pathlib import Path
from typing import Any, Protocol

import anyio

from assay.connectors.layout import STAGING, SUMMARY, temp_path
from assay.exceptions import ConnectorError


def staged_folder(ds: str, shard: tuple[int, int]) -> str:
    """Where shard ``i/N`` of day ``ds`` stages its rows, relative to the table."""
    return f"{STAGING}/ds={ds}/shard-{shard[0]}-of-{shard[1]}"


def shard_runs(parts: Mapping[int, Mapping[str, Any]]) -> dict[str, Any]:
    """What tells one set of shard outputs from another: each shard's run id and finish time."""
    return {str(i): [p.get("run_id"), p.get("finished_at")] for i, p in sorted(parts.items())}


class TableFiles(Protocol):
    """The files beside a table (the Delta sink's store)."""

    def url(self, rel: str) -> str: ...

    async def read_json(self, rel: str) -> Any: ...

    async def fetch(self, folder: str, names: list[str], dest: Path) -> list[Path | None]: ...

    async def remove_tree(self, folder: str) -> None: ...


class DayCommit(Protocol):
    """Replaces the day by the rows of staged JSON-lines parts in one commit; the new version."""

    def __call__(self, parts: list[Path], summary: dict[str, Any]) -> int: ...


class DeltaShardMerge:
    """How ``assay merge`` publishes the shards of a Delta day: :attr:`location` holds the shard
    summaries (``summaries``, relative to the table, in ``store``); :meth:`commit` makes the day's
    one commit from their staged rows (through ``commit_day``)."""

    def __init__(self, *, path: str, ds: str, store: TableFiles, summaries: str, commit_day: DayCommit) -> None:
        self.path = path
        self.ds = ds
        self.store = store
        self.summaries = summaries
        self.commit_day = commit_day
        self.location = store.url(summaries)

    def commit(self, parts: Mapping[int, Mapping[str, Any]], merged: Mapping[str, Any]) -> dict[str, Any]:
        """Commit the day from every shard's staged rows (one partition overwrite), remove the staged
        rows; what to record in the merged summary. A merge of shard outputs already committed (the
        same merge again) commits nothing."""
        return anyio.run(self._commit, parts, merged)

    async def _commit(self, parts: Mapping[int, Mapping[str, Any]], merged: Mapping[str, Any]) -> dict[str, Any]:
        store = self.store
        runs = shard_runs(parts)
        staged = {i: p.get("delta_staged") for i, p in parts.items()}
        if any(not isinstance(s, dict) for s in staged.values()):
            bad = sorted(i for i, s in staged.items() if not isinstance(s, dict))
            raise ConnectorError(
                f"{self.path}: shard summaries {bad} of ds={self.ds} name no staged rows "
                "(written by an older assay): run those shards again"
            )
        previous = await store.read_json(f"{self.summaries}/{SUMMARY}")
        done = previous.get("delta") if isinstance(previous, dict) else None
        if isinstance(done, dict) and done.get("shards") == runs:  # this merge committed them already
            return {"delta": done}
        with tempfile.TemporaryDirectory(prefix="assay-delta-merge-") as tmp:
            files: list[Path] = []
            for i in sorted(staged):
                entry = staged[i]
                assert isinstance(entry, dict)
                folder, names = str(entry.get("folder")), [str(n) for n in entry.get("parts") or []]
                got = await store.fetch(folder, names, Path(tmp) / f"shard-{i}")
                missing = [n for n, f in zip(names, got, strict=True) if f is None]
                if missing:
                    raise ConnectorError(
                        f"{store.url(folder)}: shard {i}'s staged rows are missing ({', '.join(missing[:3])}): "
                        f"run shard {i}/{len(parts)} of ds={self.ds} again, then merge"
                    )
                files += [f for f in got if f is not None]
            version = await anyio.to_thread.run_sync(self.commit_day, files, dict(merged))
        await store.remove_tree(f"{STAGING}/ds={self.ds}")
        return {"delta": {"version": version, "shards": runs}}


def copy_into(src: Path, dest: Path) -> None:
    """Copy a file whole (temp file, rename)."""
    dest.parent.mkdir(parents=True, exist_ok=True)
    tmp = temp_path(dest)
    shutil.copyfile(src, tmp)
    tmp.replace(dest)


__all__ = [
    "DayCommit",
    "DeltaShardMerge",
    "TableFiles",
    "copy_into",
    "shard_runs",
    "staged_folder",
]
