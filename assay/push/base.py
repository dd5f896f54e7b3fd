"""What a push target is: the items it sends, their deterministic ids, and the wire-format class
every target subclasses.

An item is one result of one row: (trace id, result key, the result's ``identity``). Its id is a
name-based UUID under one assay namespace, so a retry, a rerun or two pushes at once name the same
score, and the platform's own upsert key (LangSmith's feedback id, Langfuse's score id with a
stable day, Phoenix's annotation ``identifier``) keeps it once:

>>> a = push_id("trace-1", "correctness", "llm_judge/1a2b3c4d5e/9f8e7d6c5b/gpt-4o")
>>> a == push_id("trace-1", "correctness", "llm_judge/1a2b3c4d5e/9f8e7d6c5b/gpt-4o"), a.version
(True, 5)

A target is a class with its own wire format (:meth:`PushTarget.request`, :meth:`PushTarget.outcomes`)
and defaults (``rpm``, batch size); the engine (:mod:`assay.push.engine`) owns pacing, retries and
the ledger, so a target never loops or sleeps.
"""

from __future__ import annotations

import datetime as dt
import os
import uuid
from abc import ABC, abstractmethod
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, ClassVar, Literal

from pydantic import BaseModel, ConfigDict, Field

from assay.exceptions import PushAuthError

__all__ = [
    "ASSAY_NAMESPACE",
    "ItemOutcome",
    "PushItem",
    "PushParams",
    "PushTarget",
    "Request",
    "SplitBatch",
    "items_of_row",
    "push_id",
]

#: The namespace of every pushed item's id (fixed forever: changing it would duplicate every score).
ASSAY_NAMESPACE = uuid.UUID("6f1c8a52-3b7e-5d0a-9c4e-a55a7e57b0a1")


def push_id(trace_id: str, key: str, identity: str) -> uuid.UUID:
    """The id of one pushed result: uuid5 of (trace id, key, identity) under :data:`ASSAY_NAMESPACE`."""
    return uuid.uuid5(ASSAY_NAMESPACE, f"{trace_id}\x1f{key}\x1f{identity}")


class PushParams(BaseModel):
    """The run-file keys every target has (``type`` and ``name`` are read by the registry)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    type: str
    name: str | None = None
    """The target's name in ``_SUMMARY.json`` (``push.<name>``), the ledger and ``--to`` (default: its type)."""
    rpm: float | None = Field(default=None, gt=0)
    """Requests per minute (default: the platform's published limit)."""
    batch_size: int | None = Field(default=None, gt=0)
    """Items per request (default: the platform's; LangSmith sends one per request)."""
    max_concurrency: int | None = Field(default=None, gt=0)
    """Requests in flight (default: follows the rate and the observed latency)."""
    burst_s: float = Field(default=1.0, gt=0, le=60)
    """The window the platform counts requests in, as far as the pacer may catch up: sends in any
    ``burst_s`` seconds stay within ``rpm × burst_s / 60`` (one second by default, the strictest
    reading of a per-minute limit; up to 60 for a limit counted by the minute)."""
    retries: int = Field(default=6, ge=0)
    """Attempts after the first for 429, 5xx and connection errors before the target counts as unreachable."""
    timeout_s: float = Field(default=30.0, gt=0)
    trace_id_field: str | None = None
    """A dotted path in the result row holding the platform's trace id (default: the row's
    ``platform.trace_id``, else its ``trace_id``)."""
    root_id_field: str | None = None
    """A dotted path in the result row holding the root run / span id (default: ``platform.root_id``)."""


@dataclass(frozen=True, slots=True)
class PushItem:
    """One result to push."""

    id: uuid.UUID
    trace_id: str
    """The platform's trace id."""
    root_id: str | None
    """The platform's root run id (LangSmith) or root span id (Phoenix, OpenTelemetry), when known."""
    key: str
    identity: str
    score: float | None
    value: Any
    comment: str | None
    error: str | None
    timestamp: dt.datetime
    """Stable across reruns: the run's ``ds`` at midnight UTC (the day Langfuse's upsert matches)."""
    platform: Mapping[str, Any] = field(default_factory=dict)
    """What the row says about the platform trace (``session_id`` of a LangSmith project, …)."""

    @property
    def annotator(self) -> Literal["LLM", "CODE"]:
        """LLM when a judge model produced the result (the identity's last part), else CODE."""
        return "CODE" if self.identity.rsplit("/", 1)[-1] in ("-", "") else "LLM"


def _dotted(row: Mapping[str, Any], path: str) -> Any:
    cur: Any = row
    for part in path.split("."):
        if not isinstance(cur, Mapping):
            return None
        cur = cur.get(part)
    return cur


def items_of_row(row: Mapping[str, Any], params: PushParams, when: dt.datetime) -> list[PushItem]:
    """The items of one published result row (results without an identity are skipped: an output
    written before identities existed cannot be pushed idempotently)."""
    platform = row.get("platform") if isinstance(row.get("platform"), Mapping) else {}
    assert isinstance(platform, Mapping)
    tid = _dotted(row, params.trace_id_field) if params.trace_id_field else platform.get("trace_id")
    if tid is None and not params.trace_id_field:
        tid = row.get("trace_id")
    root = _dotted(row, params.root_id_field) if params.root_id_field else platform.get("root_id")
    identities = row.get("identity") if isinstance(row.get("identity"), Mapping) else {}
    assert isinstance(identities, Mapping)
    results = row.get("results")
    out: list[PushItem] = []
    if not isinstance(results, Mapping):
        return out
    own_tid = str(row.get("trace_id"))
    for key, res in results.items():
        if not isinstance(res, Mapping):
            continue
        identity = identities.get(key) or res.get("identity")
        if not isinstance(identity, str):
            continue
        score = res.get("score")
        out.append(
            PushItem(
                id=push_id(own_tid, str(key), identity),
                trace_id="" if tid is None else str(tid),
                root_id=None if root is None else str(root),
                key=str(key),
                identity=identity,
                score=float(score) if isinstance(score, int | float) and not isinstance(score, bool) else None,
                value=res.get("value"),
                comment=res.get("comment") if isinstance(res.get("comment"), str) else None,
                error=str(res["error"]) if res.get("error") else None,
                timestamp=when,
                platform=platform,
            )
        )
    return out


class SplitBatch(Exception):
    """An answer does not say which items of a batch failed, or the batch was too large: the
    engine sends each half again (a target raises it only for batches of two or more)."""


@dataclass(frozen=True, slots=True)
class Request:
    """One HTTP request a target wants sent (the engine sends it, paced and retried)."""

    method: str
    url: str
    headers: Mapping[str, str]
    body: bytes


@dataclass(frozen=True, slots=True)
class ItemOutcome:
    """What became of one item: ``delivered``, ``already_there`` (the platform said so) or
    ``rejected`` (a push dead letter with the platform's message)."""

    item: PushItem
    status: Literal["delivered", "already_there", "rejected"]
    message: str | None = None


#: The params that say where a target sends (its ledger key); rpm, batch size, retries do not.
DESTINATION_KEYS = ("api_url", "host", "endpoint", "project", "session_id")


class PushTarget(ABC):
    """A platform's wire format and defaults. Subclasses set :attr:`params_model`, the defaults and
    the three methods; construction does no I/O.

    ``outcomes`` is called for every answer that is neither 401/403 (auth: the push stops), 429
    nor 5xx (retried by the engine): a 2xx, a 207 multi-status, a 404 or 409 the target reads."""

    params_model: ClassVar[type[PushParams]] = PushParams
    default_rpm: ClassVar[float | None] = None
    default_batch_size: ClassVar[int] = 100
    #: the environment variables holding the target's keys (named in the error when unset)
    key_env: ClassVar[tuple[str, ...]] = ()

    def __init__(self, params: PushParams, env: Mapping[str, str] | None = None) -> None:
        self.params = params
        self.env = os.environ if env is None else env

    @property
    def name(self) -> str:
        return self.params.name or self.params.type

    @property
    def rpm(self) -> float | None:
        return self.params.rpm or self.default_rpm

    @property
    def batch_size(self) -> int:
        return self.params.batch_size or self.default_batch_size

    def key(self, var: str, *, required: bool = True) -> str | None:
        """A key from the environment (never from the run file, never logged)."""
        value = self.env.get(var)
        if not value and required:
            raise PushAuthError(f"push {self.name}: {var} is not set")
        return value or None

    def check_keys(self) -> None:
        """Fail before sending anything when a required key is missing."""
        for var in self.key_env:
            self.key(var)

    def missing(self, item: PushItem) -> str | None:
        """Why ``item`` cannot be sent to this target (counted ``not_sent``), or None."""
        return None if item.trace_id else "no trace id"

    @abstractmethod
    def request(self, items: Sequence[PushItem]) -> Request:
        """The request that sends ``items``."""

    @abstractmethod
    def outcomes(self, items: Sequence[PushItem], status: int, body: bytes) -> list[ItemOutcome]:
        """Read an answer: one outcome per item."""

    def describe(self) -> str:
        """Where the target sends (no keys)."""
        return self.name

    @property
    def ledger_key(self) -> str:
        """What the push ledger files this target's outcomes under: its name and where it sends
        (pushing to another endpoint or project sends everything there)."""
        fields = self.params.model_dump()
        where = [str(fields[k]) for k in DESTINATION_KEYS if fields.get(k) is not None]
        return "|".join([self.name, *where])


def json_message(body: bytes, limit: int = 300) -> str:
    """A platform's error text, shortened."""
    text = body.decode("utf-8", "replace").strip()
    return text if len(text) <= limit else text[:limit] + "…"


def stable_day(*candidates: str | None) -> dt.datetime:
    """The stable timestamp of an output's items: the first of ``candidates`` (the run's ``ds``,
    else the published summary's ``started_at``) that is a date, at midnight UTC."""
    for text in candidates:
        if text:
            try:
                day = dt.date.fromisoformat(text[:10])
            except ValueError:
                continue
            return dt.datetime(day.year, day.month, day.day, tzinfo=dt.UTC)
    return dt.datetime(1970, 1, 1, tzinfo=dt.UTC)


def value_of(item: PushItem) -> Any:
    """The raw value JSON can carry."""
    v = item.value
    return v if v is None or isinstance(v, bool | int | float | str | list | dict) else str(v)


def as_dict(obj: Any) -> dict[str, Any]:
    return obj if isinstance(obj, dict) else {}
