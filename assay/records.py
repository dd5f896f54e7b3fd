"""The data that flows through a run: envelopes in, result rows and failures out.

These are plain slotted dataclasses, not pydantic models: they are created once per record on
the hot path, and validation happens where data enters (normalizers, config), not here.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any

import orjson


@dataclass(slots=True)
class Position:
    """Where a record came from: a file and line, a topic/partition/offset, or an S3 key and line."""

    source: str
    line: int | None = None
    partition: int | None = None
    offset: int | None = None

    def to_dict(self) -> dict[str, Any]:
        if self.partition is not None:
            return {"topic": self.source, "partition": self.partition, "offset": self.offset}
        return {"file": self.source, "line": self.line}

    def __str__(self) -> str:
        if self.partition is not None:
            return f"{self.source}[{self.partition}]@{self.offset}"
        return f"{self.source}:{self.line}" if self.line is not None else self.source


@dataclass(slots=True)
class Envelope:
    """Raw payload bytes of one record with its position (and an optional key).

    ``record``: the record already decoded, by a source whose input is not JSON text: a dict, or an
    object with ``as_dict()`` (and optionally ``trace()``, a fast path; Parquet rows). The payload
    is then empty and :meth:`raw` encodes the record for a dead letter."""

    payload: bytes
    position: Position
    key: bytes | None = None
    record: Any = None

    def raw(self) -> bytes:
        """The payload, or the decoded record as JSON when the source gave no bytes."""
        if self.payload or self.record is None:
            return self.payload
        record = self.record.as_dict() if hasattr(self.record, "as_dict") else self.record
        return orjson.dumps(record, default=str, option=orjson.OPT_NON_STR_KEYS)


_RESULT_FIELDS = ("key", "score", "value", "comment", "metadata")


@dataclass(slots=True)
class Result(Mapping[str, Any]):
    """One evaluator outcome.

    ``score`` is a float in [0, 1] (1.0/0.0 for pass/fail) or None when the evaluator could not
    score; ``value`` keeps the raw outcome (bool, label, count); ``error`` is set when scoring
    failed (a judge that exhausted its retries, an evaluator exception): such a result is never a
    score. ``threshold`` is the evaluator's pass mark (set by the evaluator; None: 0.5).

    A Result is also a read-only mapping of its :meth:`to_dict` keys, so code written for
    openevals' dict results (``result["score"]``) works unchanged.

    >>> r = Result("exact_match", 1.0, True)
    >>> r.passed, r["score"], dict(r)["key"]
    (True, 1.0, 'exact_match')
    >>> Result("f1", 0.6, threshold=0.8).passed
    False
    """

    key: str
    score: float | None = None
    value: Any = None
    comment: str | None = None
    metadata: dict[str, Any] = field(default_factory=dict)
    error: str | None = None
    threshold: float | None = field(default=None, compare=False, repr=False)

    @property
    def passed(self) -> bool | None:
        """True/False for a scored result (score >= the evaluator's threshold, 0.5 by default),
        None when not scored."""
        if self.score is None:
            return None
        return self.score >= (0.5 if self.threshold is None else self.threshold)

    def _keys(self) -> tuple[str, ...]:
        return (*_RESULT_FIELDS, "error") if self.error is not None else _RESULT_FIELDS

    def __getitem__(self, name: str) -> Any:
        if name in self._keys():
            return getattr(self, name)
        raise KeyError(name)

    def __iter__(self) -> Iterator[str]:
        return iter(self._keys())

    def __len__(self) -> int:
        return len(self._keys())

    def to_dict(self) -> dict[str, Any]:
        d: dict[str, Any] = {
            "key": self.key,
            "score": self.score,
            "value": self.value,
            "comment": self.comment,
            "metadata": self.metadata,
        }
        if self.error is not None:
            d["error"] = self.error
        return d

    @classmethod
    def from_error(cls, key: str, error: BaseException | str, **metadata: Any) -> Result:
        msg = error if isinstance(error, str) else f"{type(error).__name__}: {error}"
        return cls(key=key, score=None, value=None, comment=f"error: {msg}", metadata=metadata, error=msg)


@dataclass(slots=True)
class TraceResult:
    """One output row per trace."""

    trace_id: str
    run_id: str
    position: Position
    results: dict[str, Result]
    warnings: list[str] | None = None

    def to_dict(self) -> dict[str, Any]:
        d: dict[str, Any] = {
            "trace_id": self.trace_id,
            "run_id": self.run_id,
            "position": self.position.to_dict(),
            "results": {k: r.to_dict() for k, r in self.results.items()},
        }
        if self.warnings:
            d["warnings"] = self.warnings
        return d


@dataclass(slots=True)
class Failure:
    """A record that could not be parsed, normalized or evaluated: it goes to the dead-letter sink.

    ``severity`` is ``"error"`` for a record that was not scored and ``"warning"`` for a record
    that was scored but had a defect worth reporting (e.g. tool arguments that are not JSON).
    """

    payload: bytes
    position: Position
    stage: str
    error_type: str
    message: str
    severity: str = "error"

    def to_dict(self) -> dict[str, Any]:
        raw = self.payload.decode("utf-8", errors="replace")
        d: dict[str, Any] = {
            "raw": raw,
            **self.position.to_dict(),
            "stage": self.stage,
            "error_type": self.error_type,
            "error": self.message,
            "severity": self.severity,
        }
        return d


def _row_default(obj: Any) -> Any:
    if isinstance(obj, set | frozenset | tuple):
        return list(obj)
    if isinstance(obj, bytes):
        return obj.decode("utf-8", "replace")
    return str(obj)


def encode_row(row: Mapping[str, Any]) -> bytes:
    """A result row as the engine builds it (``trace_id``, ``run_id``, ``position``, ``results``:
    key → :class:`Result`, ``identity``, ``warnings``) as one JSON document: what every JSON sink
    writes (sets and tuples as arrays, bytes as text, anything else unknown as its ``str``).

    >>> encode_row({"trace_id": "t1", "results": {"m": Result("m", 1.0, True)}, "tags": {"b"}})[:40]
    b'{"trace_id":"t1","results":{"m":{"key":"'
    """
    return orjson.dumps(row, default=_row_default)
