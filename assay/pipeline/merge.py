"""``assay merge RESULTS``: the shards of a ``--shard i/N`` run become one run.

Each shard writes its own summary, ``_SUMMARY.shard-{i}-of-{N}.json`` (:func:`shard_summary_name`),
into the results directory and no ``_SUCCESS``. The merge step (the final task of an Airflow
mapping, or a command after the last cron shard):

* reads every shard summary of one N (``shards=N``, or the only N present; a shard starting over
  removes the summaries it makes stale: :func:`forget_shard_summaries`);
* sums counts, evaluator aggregates (so means and pass rates are weighted by scored records) and
  judge statistics (:func:`~assay.pipeline.summary.merge_judge_stats`, the one used by runs too);
* decides the verdict of the totals with :func:`~assay.pipeline.verdict.decide`, the one
  ``assay run`` uses: the gates and dead-letter limits apply **once**, here (a shard records its
  gate values but exits 0 whatever they are). The policy comes from the run file when one is
  passed (``--run-file``: the current file wins, as for ``assay run``), else from the
  ``gate_config``/``limits`` each shard recorded in its summary (they must agree). Recorded gates
  make the merge self-contained, so it is the robust default; passing the run file lets a gate
  change apply to already-scored shards;
* writes ``_SUMMARY.json`` and, only when every shard 0..N-1 has a summary whose status says its
  output is whole, ``_SUCCESS`` (any earlier ``_SUCCESS`` is removed first).

Exit codes as ``assay run``: 0 ok; 1 a shard summary is missing (status ``incomplete``) or a shard
failed; 2 bad usage; 3 a gate failed; 4 dead letters above the limit; 5 a shard stopped on its
budget; 75 a shard's work is pending; 130 a shard was interrupted.

The results are reached through :class:`ResultsFS`: a local directory (:class:`LocalFS`) or an
``s3://`` prefix (:class:`~assay.connectors.s3_results.S3ResultsFS`, with the run file's ``s3:``
settings or the AWS chain's), where the shards of a run on several machines wrote
their parts and summaries.
"""

from __future__ import annotations

import datetime as dt
import os
import shutil
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol

import orjson

from assay.connectors import registry
from assay.connectors.layout import SHARD_SUMMARY, STAGING, SUCCESS, SUMMARY, write_atomic
from assay.exceptions import ConfigError
from assay.judges.batch.totals import merge_split_totals
from assay.paths import safe_join
from assay.pipeline.summary import RunStats, judge_totals, merge_judge_stats
from assay.pipeline.targets import results_location
from assay.pipeline.verdict import Policy, combine_statuses, decide


def forget_shard_summaries(fs: ResultsFS, index: int, count: int) -> list[str]:
    """Shard ``index`` of ``count`` starts over: its own earlier summary (of any shard count) and
    every summary of another shard count go, so a merge never counts a summary that describes
    rows this run replaces (a shard killed before it wrote its own leaves none: incomplete).
    Returns the names removed."""
    gone = []
    for name in fs.list():
        m = SHARD_SUMMARY.match(name)
        if m and (int(m.group(1)) == index or int(m.group(2)) != count):
            fs.remove(name)
            gone.append(name)
    return gone


class ResultsFS(Protocol):
    """Where a run's results live: names are relative to the results root."""

    def list(self) -> list[str]:
        """Names of the files directly under the root."""
        ...

    def read_bytes(self, name: str) -> bytes: ...

    def write_bytes(self, name: str, data: bytes) -> None:
        """Write atomically (readers never see a partial file)."""
        ...

    def remove(self, name: str) -> None:
        """Remove if present."""
        ...

    def close(self) -> None:
        """Release what reaching the results holds (a client); a local directory holds nothing."""
        ...


@dataclass
class LocalFS:
    """A local results directory."""

    root: Path

    def list(self) -> list[str]:
        try:
            return sorted(p.name for p in self.root.iterdir() if p.is_file())
        except FileNotFoundError:
            return []

    def read_bytes(self, name: str) -> bytes:
        return safe_join(self.root, name).read_bytes()

    def write_bytes(self, name: str, data: bytes) -> None:
        write_atomic(safe_join(self.root, name), data)

    def remove(self, name: str) -> None:
        safe_join(self.root, name).unlink(missing_ok=True)

    def close(self) -> None:
        pass

    def discard_staging(self) -> None:
        """The staging area the shards of a Parquet output shared (``_staging/``, their segments):
        not part of a whole output, so it goes when the merge publishes one."""
        shutil.rmtree(safe_join(self.root, STAGING), ignore_errors=True)


def open_results(location: str | os.PathLike[str], s3: Any = None) -> ResultsFS:
    """The :class:`ResultsFS` of a results location: a local directory (or its ``_SUMMARY.json``),
    or a prefix a connector reaches (``s3://``: :class:`~assay.connectors.s3_results.S3ResultsFS`,
    ``s3`` the run file's ``s3:`` settings, default the AWS chain; the caller closes it)."""
    text = os.fspath(location)
    if "://" in text:  # the connector claiming the scheme reaches it
        fs: ResultsFS | None = registry.results_fs(text.removesuffix(SUMMARY), s3)
        if fs is None:
            raise ConfigError(f"{text}: results are merged from a local directory or an s3:// prefix")
        return fs
    p = Path(text)
    return LocalFS(p.parent if p.name == SUMMARY else p)


@dataclass
class MergeReport:
    """What ``assay merge`` decided."""

    exit_code: int
    summary: dict[str, Any]
    messages: list[str]
    success: bool


def find_shards(fs: ResultsFS, shards: int | None = None) -> tuple[int, dict[int, dict[str, Any]]]:
    """N and the shard summaries present (index → summary). ``shards`` picks N when summaries of
    several N are present (a rerun with another N left old ones behind)."""
    found: dict[int, dict[int, str]] = {}
    for name in fs.list():
        m = SHARD_SUMMARY.match(name)
        if m:
            found.setdefault(int(m.group(2)), {})[int(m.group(1))] = name
    if shards is None:
        if not found:
            raise ConfigError("assay merge: no shard summaries (_SUMMARY.shard-I-of-N.json) in the results")
        if len(found) > 1:
            raise ConfigError(f"assay merge: shard summaries of several shard counts {sorted(found)}; pass --shards N")
        shards = next(iter(found))
    summaries = {}
    for i, name in sorted(found.get(shards, {}).items()):
        try:
            data = orjson.loads(fs.read_bytes(name))
        except (OSError, orjson.JSONDecodeError) as exc:
            raise ConfigError(f"assay merge: cannot read {name}: {exc}") from exc
        summaries[i] = data
    return shards, summaries


def merge(
    location: str | os.PathLike[str] | ResultsFS,
    *,
    policy: Policy | None = None,
    shards: int | None = None,
    write: bool = True,
    rows: Any = None,
) -> MergeReport:
    """Merge the shard summaries at ``location`` (see the module docstring): a local directory,
    or the :class:`ResultsFS` of a store's prefix (the caller opens and closes it); ``policy`` from
    the run file, else the one recorded in the shard summaries; ``rows``: the sink's publisher of
    the shards' rows when they are not the output already (:func:`merge_target`: a Delta table's
    day is committed here, when whole)."""
    fs = open_results(location) if isinstance(location, str | os.PathLike) else location
    n, parts = find_shards(fs, shards)
    missing = [i for i in range(n) if i not in parts]
    statuses = {i: str(p.get("status")) for i, p in parts.items()}
    status = combine_statuses([*statuses.values(), *(["incomplete"] if missing else [])])
    applied = policy or _stored_policy(parts)
    stats = RunStats()
    for p in parts.values():
        stats.merge(RunStats.from_dict(p))
    verdict = decide(applied, stats, status=status)
    notes = [f"shards without a summary: {', '.join(f'{i}/{n}' for i in missing)}"] if missing else []
    notes += [f"shard {i}/{n} status {s}" for i, s in sorted(statuses.items()) if combine_statuses([s]) != "ok"]
    verdict.messages[:0] = notes
    summary = verdict.record(_merged_summary(parts, stats, n))
    if write:
        fs.remove(SUCCESS)
        if rows is not None and verdict.whole and not missing:
            summary.update(rows.commit(parts, summary))
        fs.write_bytes(SUMMARY, orjson.dumps(summary, option=orjson.OPT_INDENT_2, default=str))
        if verdict.whole:
            if (discard := getattr(fs, "discard_staging", None)) is not None:
                discard()  # first: `_SUCCESS` never stands beside a staging area
            fs.write_bytes(SUCCESS, b"")
    return MergeReport(verdict.exit_code, summary, verdict.messages, verdict.whole)


def merge_target(config: Any) -> tuple[str, Any]:
    """Where the shard summaries of a run file's sink are, and the sink's publisher of the shards'
    rows (None when the shards' parts are the output already): a Delta table's
    ``_summaries/ds=D/`` and its day's commit; a directory's own folder; an ``s3://`` prefix."""
    rows = registry.shard_merge(config.sink, config.s3)
    if rows is not None:
        return str(rows.location), rows
    return str(results_location(config)), None


def _stored_policy(parts: Mapping[int, Mapping[str, Any]]) -> Policy:
    stored = [(i, g) for i, p in sorted(parts.items()) if (g := Policy.from_summary(p)) is not None]
    if not stored:
        return Policy(origin="none (the shard summaries store no gates; pass --run-file to apply the run file's)")
    first_i, first = stored[0]
    for i, g in stored[1:]:
        if not g.same_as(first):
            raise ConfigError(
                f"assay merge: shards {first_i} and {i} stored different gates; pass --run-file to choose"
            )
    return first


def _merged_summary(parts: Mapping[int, Mapping[str, Any]], stats: RunStats, n: int) -> dict[str, Any]:
    ordered = [parts[i] for i in sorted(parts)]
    data = stats.to_dict()
    started = [p["started_at"] for p in ordered if p.get("started_at")]
    finished = [p["finished_at"] for p in ordered if p.get("finished_at")]
    walls = [float(p["wall_time_s"]) for p in ordered if isinstance(p.get("wall_time_s"), int | float)]
    run_ids = sorted({str(p.get("run_id")) for p in ordered if p.get("run_id")})
    judges = merge_judge_stats([p.get("judges") or {} for p in ordered], side_by_side=True)
    totals = judge_totals(judges)
    merge_split_totals(totals, ordered)  # batch judges: the batch / real-time split of each shard
    return {
        "run_id": ",".join(run_ids),
        "merged_at": dt.datetime.now(dt.UTC).isoformat(),
        "started_at": min(started) if started else None,
        "finished_at": max(finished) if finished else None,
        "wall_time_s": max(walls) if walls else None,
        "records_per_s": round(stats.counts["read"] / max(walls), 1) if walls and max(walls) > 0 else None,
        "counts": data["counts"],
        "evaluators": data["evaluators"],
        "dead_letter_reasons": data["dead_letter_reasons"],
        "judges": judges,
        "totals": totals,
        "shards": {
            "count": n,
            "present": sorted(parts),
            "run_ids": [parts[i].get("run_id") for i in sorted(parts)],
            "status": {str(i): parts[i].get("status") for i in sorted(parts)},
        },
        "outputs": ordered[0].get("outputs") if ordered else None,
        **_merged_sampling(ordered, stats),
    }


def _merged_sampling(ordered: list[Mapping[str, Any]], stats: RunStats) -> dict[str, Any]:
    """The shards' ``sampling`` block (one spec for all), ``sampled`` counted over the whole."""
    spec = next((p["sampling"] for p in ordered if isinstance(p.get("sampling"), dict)), None)
    if spec is None:
        return {}
    counts = {k: v.count for k, v in stats.keys.items()}
    return {"sampling": {key: {**entry, "sampled": counts.get(key, 0)} for key, entry in spec.items()}}
