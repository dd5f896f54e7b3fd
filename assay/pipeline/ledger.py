"""The score table is the ledger: what a published output already holds, and what a run over it
still has to score.

A result is *current* when its ``identity`` (:mod:`assay.evaluators.identity`: evaluator, params
with the declared ``version``, prompt text, judge model) equals the one the run file gives now. A
run over a published output (``assay run`` again, ``assay backfill``) keeps every current result of
a trace still in the input exactly as it is, and scores only the (trace, result key) *pairs* that
are missing (a new trace, a new evaluator) or stale (an identity that differs); results of traces
no longer in the input are dropped. ``--fresh`` scores everything again.

Two readings of one published output, both without the judge cache:

* :func:`published_pairs`: the columns ``trace_id``, ``key``, ``identity`` as one Arrow table,
  read column by column from Parquet and Delta (only those columns), or streamed from JSON lines;
  :func:`plan_pairs` semi- and anti-joins it with the input's trace ids in Arrow (what a
  backfill's preview counts; no Python set of every pair);
* :func:`load_ledger`: the current results of one output by trace (a run's writer keeps them and
  writes them back unchanged in its new rows, :class:`Ledger`).
"""

from __future__ import annotations

import io
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

import orjson

from assay.config import RunConfig
from assay.connectors import registry
from assay.connectors.layout import RESULTS_PREFIX, SUMMARIES, SUMMARY
from assay.exceptions import AssayError, ConnectorError
from assay.pipeline.merge import open_results
from assay.pipeline.targets import results_location
from assay.records import Result
from assay.stages.evaluate import EvaluateStage

if TYPE_CHECKING:
    import pyarrow as pa

    from assay.evaluators.base import BaseEvaluator
    from assay.sampling import Sampler
    from assay.traces.model import Trace

__all__ = [
    "Ledger",
    "LedgerEvaluate",
    "PairCounts",
    "current_ids",
    "evaluator_of",
    "load_ledger",
    "plan_pairs",
    "published_pairs",
    "published_rows",
    "published_summary",
]

_JSON_SUFFIXES = (".jsonl", ".jsonl.gz", ".jsonl.zst", ".json", ".json.gz", ".json.zst", ".ndjson")


def evaluator_of(result_key: str, keys: Iterable[str]) -> str:
    """The evaluator key a result key belongs to (a dynamic ``key:sub`` to ``key``)."""
    return result_key if result_key in keys else result_key.split(":", 1)[0]


# ---------------------------------------------------------------------------------------------
# reading a published output


def _decompress(name: str, data: bytes) -> bytes:
    if name.endswith(".gz"):
        import gzip

        return gzip.decompress(data)
    if name.endswith(".zst"):
        import zstandard

        with zstandard.ZstdDecompressor().stream_reader(io.BytesIO(data)) as r:
            return r.read()
    return data


def _is_part(name: str) -> bool:
    return name.startswith(f"{RESULTS_PREFIX}-") and (name.endswith(".parquet") or name.endswith(_JSON_SUFFIXES))


def _parts(config: RunConfig) -> tuple[Any, list[str]]:
    """The results store of a file or S3 sink and the names of its row files (a directory's or a
    prefix's ``part-*``, or the one file of a file sink)."""
    fs = open_results(results_location(config), config.s3)
    path = str(getattr(config.sink, "path", "") or "")
    if path.endswith("/") or "://" in path:
        return fs, [n for n in fs.list() if _is_part(n)]
    name = Path(path).name  # one file: out.jsonl.gz, out.parquet
    return fs, [name] if name in fs.list() else []


def _close(fs: Any) -> None:
    close = getattr(fs, "close", None)
    if close is not None:
        close()


def _delta_dataset(config: RunConfig) -> Any:
    from deltalake import DeltaTable
    from deltalake.exceptions import TableNotFoundError

    from assay.connectors.builtin import s3_options
    from assay.connectors.delta import storage_options, table_url

    sink: Any = config.sink
    options = storage_options(sink, s3_options(config.s3))
    try:
        table = DeltaTable(table_url(sink.path), storage_options=options or None)
    except TableNotFoundError:
        return None
    return table.to_pyarrow_dataset()


def _arrow_batches(config: RunConfig) -> Iterator[Any] | None:
    """Record batches of the output's rows in the Parquet schema (Delta: the day's partition at
    the table's current version; Parquet parts), or None for JSON lines (read without pyarrow)."""
    if config.sink.type == "delta":
        import pyarrow.compute as pc

        dataset = _delta_dataset(config)
        if dataset is None:
            return iter(())
        day = getattr(config.sink, "ds", None)
        day_batches: list[Any] = dataset.to_batches(filter=pc.field("ds") == day) if day else dataset.to_batches()
        return iter(day_batches)
    fs, names = _parts(config)
    if not names or not all(n.endswith(".parquet") for n in names):
        _close(fs)
        return None

    def batches() -> Iterator[Any]:
        import pyarrow.parquet as pq

        try:
            for n in names:
                yield from pq.ParquetFile(io.BytesIO(fs.read_bytes(n))).iter_batches(batch_size=65_536)
        finally:
            _close(fs)

    return batches()


def _json_lines(config: RunConfig) -> Iterator[bytes]:
    fs, names = _parts(config)
    try:
        for n in names:
            for line in _decompress(n, fs.read_bytes(n)).splitlines():
                if line.strip():
                    yield line
    finally:
        _close(fs)


def published_rows(config: RunConfig) -> Iterator[dict[str, Any]]:
    """The rows of the run's published output, in the engine's JSON row shape."""
    batches = _arrow_batches(config)
    if batches is None:
        for line in _json_lines(config):
            yield orjson.loads(line)
        return
    from assay.connectors.parquet_sink import rows_of_batches

    first = next(batches, None)
    if first is None:
        return
    long = "key" in first.schema.names and "score" in first.schema.names
    yield from rows_of_batches(_chain(first, batches), long)


def _chain(first: Any, rest: Iterator[Any]) -> Iterator[Any]:
    yield first
    yield from rest


def published_summary(config: RunConfig) -> dict[str, Any] | None:
    """The published output's ``_SUMMARY.json`` (None when it cannot be read)."""
    location: Any = results_location(config)
    name = SUMMARY
    if config.sink.type == "delta":
        from assay.connectors.delta import table_url

        location = f"{table_url(str(getattr(config.sink, 'path', '')))}/{SUMMARIES}/ds={getattr(config.sink, 'ds', '')}"
    else:
        beside = registry.summary_path(config.sink)
        if beside is not None:
            location, name = beside.parent, beside.name
    try:
        fs = open_results(location, config.s3)
        try:
            data = orjson.loads(fs.read_bytes(name))
        finally:
            _close(fs)
    except (AssayError, OSError, ValueError, KeyError):
        return None
    except Exception:  # an object store's own error (a missing key): no summary to compare with
        return None
    return data if isinstance(data, dict) else None


_TOP = frozenset({"trace_id", "run_id", "ds", "position", "platform", "key"})


def published_pairs(config: RunConfig) -> pa.Table:
    """``(trace_id, key, identity)`` of every result of the published output, as one Arrow table:
    only those columns are read from Parquet and Delta; JSON lines are streamed a line at a time
    into column chunks. A key a row names in ``identity`` without a result (not in an evaluator's
    sample) counts as a pair: it was decided."""
    import pyarrow as pa

    batches = _arrow_batches(config)
    chunks: list[pa.Table] = []
    if batches is not None:
        for batch in batches:
            names = batch.schema.names
            if "key" in names and "identity" in names:  # long: already pairs
                chunks.append(pa.table({n: batch.column(n) for n in ("trace_id", "key", "identity")}))
                continue
            ids = batch.column("trace_id")
            for name in names:
                kind = batch.schema.field(name).type
                if name in _TOP or not pa.types.is_struct(kind) or kind.get_field_index("identity") < 0:
                    continue  # a top column (``platform`` is a struct too), not a result
                col = batch.column(name)
                ident = col.field("identity")
                valid = col.is_valid()
                part = pa.table({"trace_id": ids, "key": pa.repeat(name, len(ids)), "identity": ident})
                chunks.append(part.filter(valid))
    else:
        chunks = list(_json_pair_chunks(_json_lines(config)))
    schema = pa.schema([("trace_id", pa.string()), ("key", pa.string()), ("identity", pa.string())])
    if not chunks:
        return schema.empty_table()
    return pa.concat_tables([c.cast(schema) for c in chunks])


def _json_pair_chunks(lines: Iterable[bytes], chunk: int = 200_000) -> Iterator[pa.Table]:
    import pyarrow as pa

    ids: list[str] = []
    keys: list[str] = []
    idents: list[str | None] = []
    for line in lines:
        row = orjson.loads(line)
        tid = row.get("trace_id")
        identity = row.get("identity") or {}
        names = set(identity) | {evaluator_of(k, identity) for k in row.get("results") or {}}
        for key in names:
            ids.append(tid)
            keys.append(key)
            idents.append(identity.get(key))
        if len(ids) >= chunk:
            yield pa.table({"trace_id": ids, "key": keys, "identity": idents})
            ids, keys, idents = [], [], []
    if ids:
        yield pa.table({"trace_id": ids, "key": keys, "identity": idents})


@dataclass
class PairCounts:
    """What a run over a published output does with its (trace, key) pairs, per key."""

    traces: int = 0
    """Traces in the input."""
    kept: dict[str, int] = field(default_factory=dict)
    score: dict[str, int] = field(default_factory=dict)
    """Pairs to score: missing (a new trace, a new key) or stale (another identity)."""
    stale: dict[str, int] = field(default_factory=dict)
    """Of ``score``: pairs the output holds with another identity."""
    dropped_traces: int = 0
    dropped: int = 0
    """Pairs of traces no longer in the input (their rows go)."""
    removed: int = 0
    """Pairs of keys no evaluator of the run file writes any more (they go from the rows)."""

    def to_dict(self) -> dict[str, Any]:
        return {
            "traces": self.traces,
            "kept": sum(self.kept.values()),
            "to_score": sum(self.score.values()),
            "stale": sum(self.stale.values()),
            "dropped": self.dropped,
            "dropped_traces": self.dropped_traces,
            "removed": self.removed,
            "per_key": {
                k: {"kept": self.kept.get(k, 0), "to_score": self.score.get(k, 0), "stale": self.stale.get(k, 0)}
                for k in self.score
            },
        }

    @property
    def nothing_to_do(self) -> bool:
        return not any(self.score.values()) and not self.dropped and not self.removed


def plan_pairs(pairs: pa.Table, input_ids: pa.Array | pa.ChunkedArray, expected: Mapping[str, str]) -> PairCounts:
    """Count, without a Python object per pair, what a run over an output holding ``pairs`` does
    for an input of ``input_ids`` and a run file whose evaluators give ``expected`` (key →
    identity): a semi- and anti-join of the pairs with the input's ids in Arrow (``is_in`` over a
    hash set of the ids), then one vectorized comparison per key of the identities."""
    import pyarrow as pa
    import pyarrow.compute as pc

    ids = pc.unique(pa.chunked_array([input_ids]) if isinstance(input_ids, pa.Array) else input_ids)
    counts = PairCounts(traces=len(ids))
    tid, key, ident = pairs.column("trace_id"), pairs.column("key"), pairs.column("identity")
    present = pc.is_in(tid, value_set=ids.combine_chunks() if isinstance(ids, pa.ChunkedArray) else ids)
    gone = pc.invert(present)
    counts.dropped = int(pc.sum(gone).as_py() or 0)
    counts.dropped_traces = len(pc.unique(tid.filter(gone))) if counts.dropped else 0
    known = pc.is_in(key, value_set=pa.array(list(expected), pa.string()))
    counts.removed = int(pc.sum(pc.and_(present, pc.invert(known))).as_py() or 0)
    for k, identity in expected.items():
        mine = pc.and_(present, pc.equal(key, k))
        current = pc.fill_null(pc.equal(ident, identity), False)
        counts.kept[k] = int(pc.sum(pc.and_(mine, current)).as_py() or 0)
        counts.stale[k] = int(pc.sum(pc.and_(mine, pc.invert(current))).as_py() or 0)
        counts.score[k] = counts.traces - counts.kept[k]
    return counts


def current_ids(pairs: pa.Table, expected: Mapping[str, str], keys: Iterable[str]) -> dict[str, set[str]]:
    """Per key of ``keys``: the trace ids whose result is current (one output's: a day's worth),
    for an estimate that renders the requests left to send."""
    import pyarrow.compute as pc

    out: dict[str, set[str]] = {}
    for key in keys:
        mask = pc.and_(pc.equal(pairs.column("key"), key), pc.equal(pairs.column("identity"), expected[key]))
        out[key] = set(pairs.filter(pc.fill_null(mask, False)).column("trace_id").to_pylist())
    return out


# ---------------------------------------------------------------------------------------------
# the ledger a writer keeps


@dataclass
class _Kept:
    keys: frozenset[str]
    """Evaluator keys whose results are current."""
    results: dict[str, Result]
    """Their results (every result key of those evaluators), as the output holds them."""
    existing: int
    """Pairs the output holds for the trace (current or not)."""


class Ledger:
    """The current results of one published output, by trace (one day's worth: a writer keeps it
    in memory), and the counts of what a run over it did (``pairs``; cumulative over the attempts
    of a run through the writer's checkpoint)."""

    def __init__(self, expected: Mapping[str, str], thresholds: Mapping[str, float]) -> None:
        self.expected = dict(expected)
        self.thresholds = dict(thresholds)
        self.traces: dict[str, _Kept] = {}
        self.total_pairs = 0
        self.counts: dict[str, int] = {"kept": 0, "scored": 0, "existing": 0, "new_traces": 0, "changed": 0}

    def add_row(self, row: Mapping[str, Any]) -> None:
        """One published row: its current results are kept."""
        tid = row.get("trace_id")
        if not isinstance(tid, str):
            return
        identity = row.get("identity") or {}
        results = row.get("results") or {}
        names = set(identity) | {evaluator_of(k, identity) for k in results}
        self.total_pairs += len(names)
        keys = frozenset(k for k in names if k in self.expected and identity.get(k) == self.expected[k])
        kept: dict[str, Result] = {}
        for rkey, res in results.items():
            ev = evaluator_of(rkey, self.expected)
            if ev in keys and isinstance(res, dict):
                kept[rkey] = _result(rkey, res, self.thresholds.get(ev))
        self.traces[tid] = _Kept(keys, kept, len(names))

    def kept_keys(self, trace_id: str | None) -> frozenset[str]:
        found = self.traces.get(trace_id) if trace_id is not None else None
        return found.keys if found is not None else frozenset()

    def merge(self, trace_id: str | None, scored: dict[str, Result], order: Sequence[str] = ()) -> dict[str, Result]:
        """The row's results: the kept ones with what this run scored, evaluator by evaluator in
        ``order`` (the order a full run writes them); counted."""
        c = self.counts
        found = self.traces.get(trace_id) if trace_id is not None else None
        if found is None:
            c["new_traces"] += 1
            c["scored"] += len(self.expected)
            c["changed"] += 1
            return scored
        c["kept"] += len(found.keys)
        c["scored"] += len(self.expected) - len(found.keys)
        c["existing"] += found.existing
        if scored or found.existing != len(found.keys):
            c["changed"] += 1
        if not found.results:
            return scored
        by_key: dict[str, list[tuple[str, Result]]] = {}
        for source in (found.results, scored):
            for rkey, res in source.items():
                by_key.setdefault(evaluator_of(rkey, self.expected), []).append((rkey, res))
        merged: dict[str, Result] = {}
        for key in [*order, *(k for k in by_key if k not in order)]:
            merged.update(by_key.get(key, ()))
        return merged

    def pairs(self, prior: Mapping[str, int] | None = None) -> dict[str, int]:
        """``kept``, ``scored``, ``dropped`` (pairs of traces no longer read) and ``changed``
        (rows whose results differ from the output's), over this attempt and ``prior``."""
        c = dict(self.counts)
        for k, v in (prior or {}).items():
            if k in c:
                c[k] += int(v)
        dropped = max(0, self.total_pairs - c["existing"])
        return {"kept": c["kept"], "scored": c["scored"], "dropped": dropped, "changed": c["changed"], **_raw(c)}


def _raw(c: Mapping[str, int]) -> dict[str, int]:
    return {"existing": c["existing"], "new_traces": c["new_traces"]}


def _result(key: str, d: Mapping[str, Any], threshold: float | None) -> Result:
    """A published result as the engine's Result: a JSON row's holds every field (it encodes back
    to the same bytes); a Parquet cell's (read as the report reads it) the columns it had."""
    own = d.get("threshold", threshold)  # a JSON row's own (None included), else the evaluator's
    return Result(
        key=str(d.get("key") or key),
        score=d.get("score"),
        value=d.get("value"),
        comment=d.get("comment"),
        metadata=dict(d.get("metadata") or {}),
        error=d.get("error"),
        threshold=own if isinstance(own, (int, float)) or own is None else threshold,
    )


def expected_identities(evaluators: Sequence[BaseEvaluator[Any]]) -> dict[str, str]:
    """Key → the identity each evaluator gives now (inside the run's judge pool)."""
    from assay.evaluators.identity import evaluator_identity

    return {ev.key: evaluator_identity(ev) for ev in evaluators}


async def load_ledger(config: RunConfig, evaluators: Sequence[BaseEvaluator[Any]]) -> Ledger:
    """The ledger of the run's published output (read in a worker thread)."""
    import anyio.to_thread

    ledger = Ledger(expected_identities(evaluators), {ev.key: ev.threshold for ev in evaluators})

    def read() -> None:
        try:
            for row in published_rows(config):
                ledger.add_row(row)
        except AssayError:
            raise
        except (OSError, ValueError) as exc:
            where = registry.sink_identity(config.sink)
            raise ConnectorError(f"cannot read the published output {where}: {exc}") from exc

    await anyio.to_thread.run_sync(read)
    return ledger


class LedgerEvaluate(EvaluateStage):
    """The evaluate stage of a run over a published output: an evaluator whose result for a trace
    is current is not run for it (a ``None`` weight, as a trace outside its sample)."""

    def __init__(
        self, evaluators: Sequence[BaseEvaluator[Any]], ledger: Ledger, samplers: Mapping[str, Sampler] | None = None
    ) -> None:
        super().__init__(evaluators, samplers)
        self.ledger = ledger

    @property
    def weighs(self) -> bool:
        return True

    def sample_weights(self, trace: Trace) -> dict[str, float | None]:
        weights = super().sample_weights(trace)
        for key in self.ledger.kept_keys(trace.id):
            weights[key] = None
        return weights
